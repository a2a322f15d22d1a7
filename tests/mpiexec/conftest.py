"""Every test in this folder launches mpiexec (marker mpi_launch)."""

from pathlib import Path

from tests.helpers.launch import mark_launching


def pytest_collection_modifyitems(config, items):
    mark_launching(Path(__file__).parent, items)
