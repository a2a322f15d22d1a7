"""Every test in this folder launches mpiexec: marker ``mpi_launch`` (CI runs them again under a
second MPI library)."""

from pathlib import Path

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in item.path.parents:
            item.add_marker("mpi_launch")
