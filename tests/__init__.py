"""refsgd's tests: methods/ (one file per method family), mpiexec/ (the others that launch
mpiexec; not named mpi/: pytest-mpi skips every test with the keyword "mpi" without --with-mpi),
and here what needs no MPI; helpers/ is what they share."""
