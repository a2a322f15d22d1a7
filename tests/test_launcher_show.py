"""`python -m refsgd.mpilib --show` (what run.sh prints before training): its version line is the
launcher's version, and a reader that closes the pipe early (`| head -1`) gets no traceback."""

import os
import re
import subprocess
import sys

import pytest
from tests.helpers.launch import ROOT, scaled

from refsgd import mpilib


@pytest.mark.parametrize("banner, line", [
    ("HYDRA build details:\n    Version:                                 5.0.2\n    Release Date:   Fri Sep 25",
     "HYDRA 5.0.2"),
    ("mpiexec (OpenRTE) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/", "mpiexec (OpenRTE) 4.1.4"),
    ("mpiexec (Open MPI) 5.0.3", "mpiexec (Open MPI) 5.0.3"),
    ("Intel(R) MPI Library for Linux* OS, Version 2021.6 Build 20220227", "Intel(R) MPI Library for Linux* OS, "
                                                                          "Version 2021.6 Build 20220227"),
    ("", ""),
])
def test_the_version_line_names_the_version(banner, line):
    assert mpilib.version_line(banner) == line


def test_show_prints_the_launchers_version():
    r = subprocess.run([sys.executable, "-m", "refsgd.mpilib", "--show"], capture_output=True, text=True,
                       timeout=scaled(120), cwd=ROOT)
    assert r.returncode == 0, r.stderr
    version = dict(line.split(": ", 1) for line in r.stdout.splitlines()[1:])["version"]
    assert re.search(r"\d", version) and "build details" not in version, version


def test_show_into_a_closed_pipe_stops_quietly():
    """The reader is gone before --show writes (as `| head -1` can be): rc 0 and nothing on stderr,
    not a BrokenPipeError traceback (run.sh printed one, 1 run in 6)."""
    read, write = os.pipe()
    os.close(read)
    p = subprocess.Popen([sys.executable, "-m", "refsgd.mpilib", "--show"], stdout=write, stderr=subprocess.PIPE,
                         text=True, cwd=ROOT)
    os.close(write)
    _, err = p.communicate(timeout=scaled(120))
    assert p.returncode == 0 and err == "", err
