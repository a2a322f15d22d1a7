"""The launch environment of this process, read without MPI and before anything is imported (the
signal handlers of :mod:`refsgd.failure` read it): how many processes a launcher started and this
one's rank among them (:data:`LAUNCHED_SIZE`, :data:`LAUNCHED_RANK`: the one reading of these
variables, never ``SLURM_NTASKS``, an allocation's size), whether this process says a line that
every process would say alike (:func:`speaks`), the refusal of a variable that means nothing
(:func:`environment_error`, checked by :mod:`refsgd.entry` before anything else) and of a command
that runs in one process under a launcher of several (:func:`one_process`)."""

import os

from refsgd.errors import RefsgdError

#: (variable, what it counts) that say how many processes a launcher started: hydra's and Cray's
#: PMI, Open MPI's mpirun, and a Slurm job step (SLURM_NTASKS, set in a batch script, is the
#: allocation's size, not a launch's; PMIx passes its size through its server, not the environment)
LAUNCHED_SIZE = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS")
#: the variables that give this process's rank in that launch
LAUNCHED_RANK = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")
#: a rank variable and the size variable of the same launcher
_SAME_LAUNCHER = (("PMI_RANK", "PMI_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                  ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS"))
#: the longest REFSGD_MPI_START_TIMEOUT (a day; SIGALRM's counter overflows far above)
MAX_START_TIMEOUT = 86400


def launched(names, env=None):
    """(variable, value) of the first of ``names`` set to a whole number in ``env`` (default
    os.environ), or (None, None). Never raises: a signal handler reads it (:func:`environment_error`
    refuses a bad value at the command's start)."""
    env = os.environ if env is None else env
    for name in names:
        v = env.get(name, "").strip()
        if v.isdigit():
            return name, int(v)
    return None, None


def launcher_rank(env=None):
    """This process's rank as the MPI launcher says (MPICH/Hydra, Open MPI, PMIx, Slurm), without
    initialising MPI; None when not launched by one."""
    return launched(LAUNCHED_RANK, env)[1]


def launcher_size(env=None):
    """How many processes the launcher of this one started (:data:`LAUNCHED_SIZE`: the one reading
    of these variables), or None when not launched by one."""
    return launched(LAUNCHED_SIZE, env)[1]


def speaks(env=None):
    """Whether this process says a line that every process of its launch would say alike: rank 0
    does; another rank only where there may be no rank 0 to say it (the launch's size unknown or
    1, or its rank not below that size: a process alone, whose rank variable was set by hand or
    left from another job)."""
    rank, size = launcher_rank(env), launcher_size(env)
    return rank in (None, 0) or not (size is not None and 1 < size and rank < size)


def environment_error(env=None):
    """The one line refusing a variable of the launch environment that refsgd reads and that means
    nothing (a launcher's size or rank that is not a whole number, a rank not below its size,
    NUMBA_NUM_THREADS that Numba cannot start with, a REFSGD_MPI_START_TIMEOUT that is not a
    positive number of seconds), naming the variable and its value; "" when all are fine."""
    env = os.environ if env is None else env
    for name in LAUNCHED_SIZE + ("SLURM_NTASKS", "NUMBA_NUM_THREADS") + LAUNCHED_RANK:
        v = env.get(name)
        if v is None:
            continue
        least = 0 if name in LAUNCHED_RANK else 1
        if not v.strip().isdigit() or int(v) < least:
            what = "a rank (0 or more)" if least == 0 else "a whole number above 0"
            why = (" (Numba starts that many threads: a job script's cores / ranks that came out 0 sets this)"
                   if name == "NUMBA_NUM_THREADS" else " (set by the launcher, or left from another job)")
            return f"{name}={v!r}: not {what}{why}"
    for rank_name, size_name in _SAME_LAUNCHER:
        rank, size = env.get(rank_name), env.get(size_name)
        if rank is not None and size is not None and int(rank) >= int(size):
            return (f"{rank_name}={rank.strip()} is not below {size_name}={size.strip()}: the launcher's rank and "
                    "size disagree (a variable left from another job or set by hand?)")
    v = env.get("REFSGD_MPI_START_TIMEOUT")
    if v is not None:
        try:
            seconds = float(v)
        except ValueError:
            seconds = float("nan")
        if not 0 < seconds <= MAX_START_TIMEOUT:  # nan fails too
            return (f"REFSGD_MPI_START_TIMEOUT={v!r}: not a number of seconds above 0 and at most "
                    f"{MAX_START_TIMEOUT} (the time a rank has to MPI_Init; default 300)")
    return ""


def one_process(command):
    """RefsgdError under a launcher of several processes: ``command`` runs in one process (and
    launches its own mpiexec where it needs ranks); under mpiexec each rank would run it whole,
    writing the same files."""
    size = launcher_size()
    if (size or 1) > 1:
        name = launched(LAUNCHED_SIZE)[0]
        raise RefsgdError(f"{command} runs in one process, not once per rank ({name}={size}: started by a launcher "
                          "of several processes): run it without mpiexec or srun")
