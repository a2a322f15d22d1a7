"""A launcher that cannot start the MPI library (srun without the PMI it speaks, one MPI's
mpiexec starting another's ranks) leaves every process alone in a world of one: refsgd refuses
that launch in every process, with one line naming the cause and the fix, before any training."""

import os
import subprocess
import sys

import pytest
from tests.helpers.launch import ONE_THREAD, ROOT

from refsgd import mpilib

TRAIN = [sys.executable, "-m", "refsgd", "train", "--algo", "ssgd", "--iterations", "3", "--no-progress"]
CAUSE = "but MPI made each one a world of 1"


def test_the_launchers_variables_against_a_world_of_one():
    assert mpilib.singleton_error(1, env={}) == ""
    assert mpilib.singleton_error(1, env={"SLURM_STEP_NUM_TASKS": "1", "SLURM_PROCID": "0"}) == ""
    # a batch script's own SLURM_NTASKS is the allocation's: a one-process run inside it is fine
    assert mpilib.singleton_error(1, env={"SLURM_NTASKS": "4"}) == ""
    assert mpilib.singleton_error(4, env={"PMI_SIZE": "4", "PMI_RANK": "2"}) == ""
    line = mpilib.singleton_error(1, "MPICH Version: 4.3.0", env={"SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "0"})
    assert "(SLURM_STEP_NUM_TASKS=4)" in line and "MPICH Version: 4.3.0 was not started" in line
    assert "srun --mpi=pmi2" in line and "srun --mpi=pmix" in line
    # a rank above 0 alone tells too (PMIx gives no size in the environment)
    assert "(PMIX_RANK=3)" in mpilib.singleton_error(1, env={"PMIX_RANK": "3"})
    assert "(OMPI_COMM_WORLD_SIZE=2)" in mpilib.singleton_error(1, env={"OMPI_COMM_WORLD_SIZE": "2"})


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
