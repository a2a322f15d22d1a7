"""refsgd.mpilib: text from the MPI library cleaned before it is stored, and the launcher of the
MPI library mpi4py uses, with its flags (run the way the tests and `refsgd bench` use it)."""

import os
import platform
import stat
import subprocess
import sys

import pytest
from tests.helpers.launch import ROOT, mpi_env, scaled

from refsgd import mpilib, mpiranks


def test_library_text_is_cleaned():
    # Open MPI 4.1's Get_library_version() ends in a NUL, which HDF5's strings refuse
    assert mpilib.text("Open MPI v4.1.4, package: Debian OpenMPI\x00") == "Open MPI v4.1.4, package: Debian OpenMPI"
    assert mpilib.text(b"MPICH Version: 5.0\nRelease date: x\x00\x00") == "MPICH Version: 5.0\nRelease date: x"
    assert mpilib.text("a\x00b\x07c\t d") == "a b c\t d"


@pytest.mark.parametrize("banner, kind", [
    ("mpiexec (OpenRTE) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/", "openmpi"),
    ("mpiexec (Open MPI) 5.0.3", "openmpi"),
    ("HYDRA build details:\n    Version:   5.0.2", "hydra"),
    ("Intel(R) MPI Library for Linux* OS, Version 2021.6", "hydra"),
    ("srun 23.02", "unknown"),
])
def test_kind_of_a_launcher(banner, kind):
    assert mpilib.kind_of(banner) == kind


def _show(env):
    r = subprocess.run([sys.executable, "-m", "refsgd.mpilib", "--show"], capture_output=True, text=True,
                       timeout=scaled(120), env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines()[1:])
    return r.stdout.splitlines()[0], lines


def test_the_launcher_belongs_to_mpi4pys_library_even_behind_another_on_path(tmp_path):
    """An mpiexec of the other library first on PATH is passed over; $MPIEXEC is taken as given."""
    want = mpilib.library_kind()
    assert want in ("openmpi", "hydra")
    other = "HYDRA build details:" if want == "openmpi" else "mpiexec (OpenRTE) 4.1.4"
    fake = tmp_path / "mpiexec"
    fake.write_text(f"#!/bin/sh\necho '{other}'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {k: v for k, v in os.environ.items() if k != "MPIEXEC"}
    argv, info = _show({**env, "PATH": f"{tmp_path}{os.pathsep}{env['PATH']}"})
    assert info["kind"] == want and not argv.startswith(str(fake))
    if want == "openmpi":
        assert "--oversubscribe" in argv.split()
        if os.geteuid() == 0:
            assert "OMPI_ALLOW_RUN_AS_ROOT=1" in info["variables"]
    argv, info = _show({**env, "MPIEXEC": str(fake)})
    assert argv.split()[0] == str(fake) and info["kind"] == ("hydra" if want == "openmpi" else "openmpi")


def test_more_ranks_than_cores_and_the_exit_code_of_a_rank():
    """Open MPI refuses more ranks than cores without --oversubscribe; the launcher adds it."""
    n = len(os.sched_getaffinity(0)) + 2
    code = "import os, sys; sys.exit(3 if os.environ.get('PMI_RANK', os.environ.get('OMPI_COMM_WORLD_RANK')) == '1' else 0)"
    r = subprocess.run(mpilib.wrapped(n, sys.executable, "-c", code), capture_output=True, text=True, timeout=scaled(120),
                       env=mpi_env())
    assert r.returncode == 3, r.stderr


BANNER = """
===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   PID 1001 RUNNING AT node7
=   EXIT CODE: 9
=   CLEANING UP REMAINING PROCESSES
=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES
===================================================================================
YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)
"""


def test_the_line_after_hydras_banner_names_the_rank_that_ended_first():
    """The banner's pid is the rank's when it ended first (or none was seen first); when another
    rank ended first (the banner's was a lower rank that hydra's cleanup killed), that one is named,
    without a signal; no banner of a signal, no line."""
    ranks = {1000: 0, 1001: 1, 1002: 2}
    tail = "; mpiexec then ended every rank of the job"
    assert mpiranks.killed_rank_line(BANNER, ranks, 1001) == \
        "refsgd: rank 1 on node7 (pid 1001) was ended by signal 9 (SIGKILL)" + tail
    assert mpiranks.killed_rank_line(BANNER, ranks) == mpiranks.killed_rank_line(BANNER, ranks, 1001)
    assert mpiranks.killed_rank_line(BANNER, {}, None) == \
        "refsgd: a rank on node7 (pid 1001) was ended by signal 9 (SIGKILL)" + tail
    assert mpiranks.killed_rank_line(BANNER, ranks, 1002) == ("refsgd: rank 2 on node7 (pid 1002) ended first, without a "
                                                            "word of refsgd's (a signal: kill -9, the OOM killer, a "
                                                            "crash)" + tail)
    exited = BANNER.replace("EXIT CODE: 9", "EXIT CODE: 3").split("YOUR APPLICATION")[0]
    assert mpiranks.killed_rank_line(exited, ranks, 1001) == ""


def test_the_line_after_open_mpis_silence_reads_the_signal_from_mpiruns_exit_code():
    """Open MPI's mpirun --quiet says nothing of a rank a signal ended and exits 128 + N: the line
    names the rank seen to end first and N; refsgd's own stops (130, 143, 138) and plain exit
    codes give no line."""
    ranks = {1000: 0, 1001: 1}
    tail = "; mpirun then ended every rank of the job"
    assert mpiranks.signalled_rank_line(137, ranks, 1001) == (
        f"refsgd: rank 1 on {platform.node()} (pid 1001) ended first, by signal 9 (SIGKILL) as mpirun's exit code "
        f"says{tail} (exit code 137)")
    assert mpiranks.signalled_rank_line(139, ranks, None) == \
        f"refsgd: a rank was ended by signal 11 (SIGSEGV){tail} (exit code 139)"
    for code in (0, 1, 2, 130, 138, 143, 255):
        assert mpiranks.signalled_rank_line(code, ranks, 1001) == "", code
