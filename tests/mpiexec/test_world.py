"""The world sessions' harness (tests.helpers.world, tests/helpers/suite.py): a failure on one
rank fails the test in rank 0's report, a rank stuck in a collective that a failed rank left
ends the world instead of hanging, a hang fails through the time limit; run on
tests/helpers/world_sample.py under mpiexec -n 2, as ./run.sh test starts a world session."""

import subprocess
import sys
import time

import pytest
from tests.helpers.launch import ROOT, mpi_env, mpiexec, scaled

SAMPLE = "tests/helpers/world_sample.py"


def session(case, *extra, meet=5, timeout=120):
    cmd = mpiexec(2) + [sys.executable, "-m", "pytest", "--with-mpi", "-q", "--color=no", "-p", "no:cacheprovider", "-p",
                        "tests.helpers.world", "--timeout-method", "thread", *extra, SAMPLE]
    start = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=scaled(timeout),
                       env=mpi_env(REFSGD_WORLD_SAMPLE=case, REFSGD_WORLD_MEET=str(meet)))
    return r, time.monotonic() - start


def test_a_passing_session_passes():
    r, _ = session("pass")
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout + r.stderr
    assert r.stdout.count("2 passed") == 1   # rank 1's report went to /dev/null: one report


def test_a_failure_on_rank_1_alone_fails_rank_0s_report():
    r, _ = session("one-rank-fails")
    assert r.returncode != 0
    assert "1 failed, 1 passed" in r.stdout, r.stdout + r.stderr
    assert "failed on rank(s) 1, not on rank 0" in r.stdout and "rank 1's own check" in r.stdout


def test_the_collective_assertion_fails_every_rank_and_names_the_rank():
    r, _ = session("all-ranks")
    assert r.returncode != 0 and "1 failed, 1 passed" in r.stdout, r.stdout + r.stderr
    assert "rank 1: rank 1 disagrees" in r.stdout and "rank 0: rank 0" not in r.stdout


def test_a_rank_stuck_in_a_collective_ends_the_world_not_a_hang():
    r, took = session("stuck", meet=5)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "rank 1 fails before the allreduce" in r.stderr                    # the failed rank's traceback
    assert "the other ranks did not end" in r.stderr and "ending the world" in r.stderr
    assert took < scaled(60)


@pytest.mark.parametrize("limit", [5])
def test_a_hang_of_every_rank_fails_through_the_time_limit(limit):
    r, took = session("hang", "--timeout", str(limit))
    assert r.returncode != 0, r.stdout + r.stderr
    assert "Timeout" in r.stderr + r.stdout
    assert took < scaled(60)


@pytest.mark.world(2)
@pytest.mark.parametrize("change", [["--seed", "6"], ["--lr", "0.2"]])
def test_mpi_equals_serial_fails_where_they_differ(tmp_path, change):
    """The null of tests.helpers.world.mpi_equals_serial: a serial rendering of other options
    (another seed, another learning rate) fails it on every rank, naming the difference."""
    from tests.helpers import world
    common = ["--algo", "ssgd", "--model", "digits_mlp", "--batch", "8", "--seed", "5", "--lr", "0.1"]
    world.mpi_equals_serial(tmp_path / "same", common, 3)   # the same options agree
    with pytest.raises(AssertionError) as e:
        world.mpi_equals_serial(tmp_path / "other", common, 3, serial_options=common + change)
    assert "MISMATCH" in str(e.value) and "agree" not in str(e.value), str(e.value)
