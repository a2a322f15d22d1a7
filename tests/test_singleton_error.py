"""refsgd's refusal of a launch that left every process alone in a world of one (tests/mpiexec/
test_singleton.py launches it): the line, from the launchers' variables, no process started."""

from refsgd import mpilib


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
