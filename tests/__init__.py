"""refsgd's tests: methods/ (one file per method family), mpi/ (what launches mpiexec), and
the rest here (no MPI); helpers/ is what they share."""
