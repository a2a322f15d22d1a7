"""The tests that launch mpiexec, other than the methods' own."""
