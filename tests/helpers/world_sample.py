"""The world session's failure cases, run by tests/mpiexec/test_world.py under mpiexec -n 2
(not collected otherwise: its name is no test file's); $REFSGD_WORLD_SAMPLE says which."""

import os
import time

import pytest
from tests.helpers import world

CASE = os.environ.get("REFSGD_WORLD_SAMPLE")


@pytest.mark.world(2)
def test_sample():
    c = world.comm()
    rank = c.Get_rank()
    if CASE == "one-rank-fails":   # rank 1 fails after the last collective; rank 0 passes
        c.allreduce(1)
        assert rank != 1, "rank 1's own check"
    elif CASE == "stuck":          # rank 1 fails before a collective that rank 0 then waits in forever
        assert rank != 1, "rank 1 fails before the allreduce"
        c.allreduce(1)
    elif CASE == "all-ranks":      # the collective assertion: rank 0 passes it, rank 1 not
        world.all_ranks(rank == 0, f"rank {rank} disagrees")
    elif CASE == "hang":           # every rank hangs: the per-test time limit ends the world
        time.sleep(3600)


@pytest.mark.world(2)
def test_after():
    """The session goes on after a failure every rank agreed on."""
    assert world.comm().allreduce(1) == 2
