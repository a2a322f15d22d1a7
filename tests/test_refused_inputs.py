"""Bad input refused with one `refsgd: error:` line and exit 2 (a RefsgdError from Python), before
any work: an empty --timeline, a communicator that is not one, a trace whose format_version is
no version (issue 33, items 11, 13, 14). No mpiexec: the command line's refusals one process each,
the Python API's in this process (plain pytest's singleton COMM_WORLD)."""

import os
import re
import shutil

import h5py
import numpy as np
import pytest
from tests.helpers.launch import ROOT, cli

from refsgd import trace
from refsgd.errors import RefsgdError

GOLDEN = os.path.join(ROOT, "tests", "golden", "ssgd-n4.h5")


def _one_error_line(r, *words):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("refsgd: error: "), r.stderr
    for w in words:
        assert w in lines[0], lines[0]


@pytest.mark.parametrize("out", [False, True])
def test_an_empty_timeline_is_refused(tmp_path, out):
    """`--timeline ''` (an empty shell variable): refused, not a run without a timeline (rc 0 before)."""
    r = cli("train", "--iterations", "2", "--no-progress", "--timeline", "",
            *(["--out", str(tmp_path / "m.h5")] if out else []), timeout=120)
    _one_error_line(r, "--timeline ''", "START:COUNT")
    assert not (tmp_path / "m.h5").exists()


def _python_api(*keywords):
    """refsgd.train('ssgd', iterations=2, **KW) for each of ``keywords`` in this process, as a
    user's script calls it: a line each, "refused: MESSAGE" or "ran KW"."""
    import refsgd
    lines = []
    for kw in keywords:
        try:
            refsgd.train('ssgd', iterations=2, log=None, **kw)
            lines.append(f"ran {kw}")
        except refsgd.RefsgdError as e:
            lines.append(f"refused: {e}")
    return lines


@pytest.mark.world(1)
def test_the_python_api_refuses_an_empty_timeline_and_a_comm_that_is_not_one():
    from mpi4py import MPI
    lines = _python_api(dict(timeline=''), dict(comm='world'), dict(comm=3), dict(comm=MPI.COMM_NULL))
    assert len(lines) == 4 and all(line.startswith("refused: ") for line in lines), lines
    assert "--timeline ''" in lines[0]
    assert lines[1].startswith("refused: comm='world': expected an mpi4py intracommunicator"), lines[1]
    assert lines[2].startswith("refused: comm=3: ") and lines[3].startswith("refused: comm=MPI.COMM_NULL: ")


def _with_version(tmp_path, value):
    path = tmp_path / "a.h5"
    shutil.copy(GOLDEN, path)
    with h5py.File(path, "r+") as f:
        if value is None:
            del f.attrs["format_version"]
        else:
            f.attrs["format_version"] = value
    return str(path)


@pytest.mark.parametrize("value, says", [
    (0, "format_version 0: expected an integer 1 .. 3"),
    (-1, "format_version -1: expected an integer 1 .. 3"),
    (2.5, "format_version 2.5: expected an integer 1 .. 3"),
    ("3", "format_version '3': expected an integer 1 .. 3"),
    (np.array([3]), "format_version array([3])"),
    (None, "malformed trace, missing format_version"),
])
def test_verify_refuses_a_format_version_that_is_no_version(tmp_path, value, says):
    """Compared as if valid before (only 'three' was refused); A's or B's."""
    a = _with_version(tmp_path, value)
    for args in ((a, GOLDEN), (GOLDEN, a)):
        with pytest.raises(RefsgdError, match=re.escape(f"{a}: ") + ".*" + re.escape(says)):
            trace.verify(*args)


def test_verify_on_the_command_line_refuses_it_in_one_line(tmp_path):
    r = cli("verify", GOLDEN, _with_version(tmp_path, 2.5), timeout=120)
    _one_error_line(r, "format_version 2.5: expected an integer 1 .. 3")
    assert r.stdout == ""


def test_verify_still_reads_the_versions_it_knows(tmp_path):
    for v in (2, 3, np.int64(3)):
        ok, lines = trace.verify(_with_version(tmp_path, v), GOLDEN, rtol=0, atol=0)
        assert ok and "OK: 10 steps x 4 workers agree" in lines[-1], lines


@pytest.mark.parametrize("flag", ["--out", "--trace", "--checkpoint", "--data", "--model"])
def test_an_empty_path_is_refused(tmp_path, flag):
    """`--out ''` (an empty shell variable) named no file and the run went on without writing one
    (rc 0 before): every path option of train refuses ''."""
    r = cli("train", "--iterations", "2", "--no-progress", flag, "", timeout=120, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.splitlines()[-1] == (f"refsgd train: error: argument {flag}: an empty path: give a file or "
                                         "folder name, or leave the option out"), r.stderr
    assert "iter" not in r.stdout and not os.listdir(tmp_path)


@pytest.mark.world(1)
def test_the_python_api_refuses_an_empty_path():
    lines = _python_api(dict(out=''), dict(trace=' '), dict(checkpoint=''))
    assert len(lines) == 3, lines
    assert all(line.startswith("refused: ") and "an empty path" in line for line in lines), lines
