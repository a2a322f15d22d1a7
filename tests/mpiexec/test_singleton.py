"""A launcher that cannot start the MPI library (srun without the PMI it speaks, one MPI's
mpiexec starting another's ranks) leaves every process alone in a world of one: refsgd refuses
that launch in every process, with one line naming the cause and the fix, before any training (the message itself, from the launchers' variables, without a launch:
tests/test_singleton_error.py)."""

import os
import subprocess
import sys

from tests.helpers.launch import ONE_THREAD, ROOT

TRAIN = [sys.executable, "-m", "refsgd", "train", "--algo", "ssgd", "--iterations", "3", "--no-progress"]
CAUSE = "but MPI made each one a world of 1"


def _start(env):
    return subprocess.Popen(TRAIN, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, **ONE_THREAD, **env})


def test_four_tasks_of_a_step_each_alone_stop_with_one_line():
    """What srun -n 4 without --mpi=pmi2 does to the mpich wheel's ranks, as its variables: four
    processes, each a world of one. Every one exits 2 before training; task 0 alone says why."""
    procs = [_start({"SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "4", "SLURM_PROCID": str(i)}) for i in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [2] * 4, outs
    assert all("iter" not in out and "Traceback" not in err for out, err in outs), outs
    err0 = outs[0][1].strip().splitlines()
    assert len(err0) == 1 and err0[0].startswith("refsgd: error: the launcher started several processes "
                                                 "(SLURM_STEP_NUM_TASKS=4)") and CAUSE in err0[0], outs[0]
    assert all(err == "" for _, err in outs[1:]), outs


# the real launch (`srun` without --mpi=pmi2 on a Slurm whose MpiDefault is none) is in
# tests/test_slurm.py; Open MPI's mpiexec starting the mpich wheel's ranks is no such case: MPICH
# finds PMIx in the environment and stops ("unsupported PMI version PMIx")
