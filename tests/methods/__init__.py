"""One file per method family: its MPI runs against its serial rendering, its closed forms, its input checks."""
