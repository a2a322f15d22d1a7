"""The documentation's first-run page (docs/start/first-run.md) and the README's first job work as
written: their fenced ``bash`` commands run, in order, in an empty folder, at 2 ranks, and do what
the pages say: DC-S3GD computes the next gradient while its all-reduce travels, SSGD waits for
the whole of it (read per iteration from the metrics files, not from the picture; judged by what a
loaded machine cannot move the wrong way: :func:`assert_overlap_shows`).

``.venv/bin/X`` on the page is this venv's X; ``.venv/bin/mpiexec -n 2`` is the launcher of the MPI
library mpi4py uses (refsgd.mpilib: the venv's mpiexec for the mpich wheel, the system's with its
flags otherwise), so that the page is checked under every MPI library CI runs."""

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from tests.helpers.launch import ROOT, mpi_env, mpiexec

from refsgd.comm.link import Link
from refsgd.report.runs import load

PAGE = Path(ROOT) / "docs" / "start" / "first-run.md"


def commands(text):
    """The lines of the page's ```bash blocks, comments dropped, continuation lines joined."""
    out = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.M | re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def test_the_page_runs_at_2_ranks(tmp_path):
    cmds = commands(PAGE.read_text())
    assert len(cmds) >= 4, cmds
    assert all(c.startswith(".venv/bin/") for c in cmds), cmds
    launches = [c for c in cmds if c.startswith(".venv/bin/mpiexec")]
    assert launches and all(c.startswith(".venv/bin/mpiexec -n 2 ") for c in launches), launches
    venv = Path(sys.executable).parent
    outputs = []
    for c in cmds:
        argv = shlex.split(c)
        if argv[0] == ".venv/bin/mpiexec":
            argv = mpiexec(2) + argv[3:]
        argv = [str(venv / a[len(".venv/bin/"):]) if a.startswith(".venv/bin/") else a for a in argv]
        r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                           env=mpi_env(dict(os.environ)))
        assert r.returncode == 0, f"{c}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        outputs.append((c, r.stdout))
    # what the page says each command shows
    listing = outputs[0][1]
    assert "dcs3gd" in listing and "laga-sgdm" in listing, listing
    for c, out in outputs:
        if "train --epochs" in c or "train --algo" in c:
            assert "test acc" in out, out[-2000:]
    for name, algo in (("first.h5", "ssgd"), ("dc.h5", "dcs3gd")):
        with h5py.File(tmp_path / name, "r") as f:
            assert f.attrs["world_size"] == 2
            assert json.loads(f.attrs["config"])["algo"] == algo
    report = outputs[-1][1]
    assert "ssgd" in report and "dcs3gd" in report, report[-2000:]
    assert (tmp_path / "cmp.png").stat().st_size > 10_000
    assert_overlap_shows(tmp_path / "first.h5", tmp_path / "dc.h5")


def link_ms(run):
    """The least time (ms) the run's emulated link holds one all-reduce of its message: the
    transfer of the Ring-AllReduce model (Link.time; the reduction it adds makes it longer), for
    the bytes a rank contributed in an iteration."""
    nbytes = float(np.max(run.rec["global_bytes"]))
    return Link.parse(run.config["link"]).time(nbytes, int(run.attrs["world_size"])) * 1e3


def per_iteration_ms(run, key):
    """A time of the run's metrics (``idle``, ``comm`` in flight), in ms, per rank and iteration,
    the first iteration left out (DC-S3GD's prologue L1-L3 sends nothing; a rank's Numba
    compiling is discounted from it)."""
    return np.asarray(run.rec[key])[:, 1:] * 1e3


def assert_overlap_shows(ssgd, dc):
    """What the first job teaches, with the same settings: SSGD waits for the whole all-reduce,
    the link's time or more, and computes nothing while it travels; DC-S3GD computes the next
    gradient while it travels, for half the link's time or more in most iterations.

    The figures compared are those a load does not move the wrong way. The link holds every
    all-reduce for its time and charges no CPU, so SSGD's wait is never shorter than that. The time
    an all-reduce is in flight while its rank is not waiting for it (``comm`` less ``idle``) is
    zero for a blocking all-reduce whatever the load, and for DC-S3GD it is L6's gradient, which
    other jobs' time slices only lengthen. Their means of ``idle`` alone are not compared: a rank
    descheduled makes the other wait for it in either method, so on a machine busier than its
    cores the mean waits can come in any order, the overlap still there."""
    a, b = load(str(ssgd)), load(str(dc))
    same = {k: a.config[k] for k in ("model", "batch", "lr", "momentum", "link", "epochs")}
    assert same == {k: b.config[k] for k in same}, (a.config, b.config)
    assert (a.algo, b.algo) == ("ssgd", "dcs3gd")
    link = link_ms(a)
    assert link > 0.4, link     # a link slower than a gradient's jitter
    waits = per_iteration_ms(a, "idle")
    assert np.mean(waits >= 0.95 * link) >= 0.95, \
        f"SSGD waited less than the link's {link:.2f} ms in {np.mean(waits < 0.95 * link):.0%} of its iterations"
    for run, name in ((a, "SSGD"), (b, "DC-S3GD")):
        hidden = np.median(per_iteration_ms(run, "comm") - per_iteration_ms(run, "idle"))
        if name == "SSGD":
            assert hidden <= 0.01, f"SSGD computed for {hidden:.2f} ms while its all-reduce travelled"
        else:
            assert hidden >= link / 2, (f"DC-S3GD computed for only {hidden:.2f} ms (median) while its "
                                        f"all-reduce travelled, less than half the link's {link:.2f} ms")


def _pictures():
    """docs/_ext/refsgd_pictures.py, which draws the docs' pictures by the pages' commands."""
    spec = importlib.util.spec_from_file_location("refsgd_pictures", Path(ROOT) / "docs" / "_ext" / "refsgd_pictures.py")
    pictures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pictures)
    return pictures


def _run_shown(commands, cwd):
    """Run commands as the pages show them (``mpiexec -n N refsgd ...``, ``refsgd ...``) with this
    venv and the launcher of mpi4py's MPI library, as the docs' build does for its pictures."""
    pictures = _pictures()
    for c in commands:
        argv = pictures._argv(c)
        if argv[1:3] == ["-m", "refsgd.mpilib"]:
            argv = mpiexec(int(argv[4])) + argv[5:]
        r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, env=mpi_env(dict(os.environ)))
        assert r.returncode == 0, f"{c}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"


def test_the_readmes_first_job_shows_the_overlap(tmp_path):
    """The README's first job, as the docs' build runs it for its picture (refsgd_pictures): the
    overlap shows on this machine under any load (assert_overlap_shows judges per iteration)."""
    cmds = _pictures().readme_first_job()
    assert len(cmds) == 3 and cmds[-1].endswith("--plot cmp.png"), cmds
    _run_shown(cmds, tmp_path)
    assert (tmp_path / "cmp.png").stat().st_size > 10_000
    assert_overlap_shows(tmp_path / "first.h5", tmp_path / "dc.h5")


def test_the_old_first_job_fails_the_check(tmp_path):
    """The null: the README's first job of before (issue 46: SSGD without momentum against DC-S3GD
    with 0.9, the MLP whose gradient takes 0.1 ms, no emulated link) is refused."""
    _run_shown(["mpiexec -n 2 refsgd train --epochs 2 --out first.h5",
                "mpiexec -n 2 refsgd train --algo dcs3gd --epochs 2 --out dc.h5"], tmp_path)
    with pytest.raises(AssertionError):
        assert_overlap_shows(tmp_path / "first.h5", tmp_path / "dc.h5")


def test_the_method_without_overlap_fails_the_check(tmp_path):
    """The null: DC-S3GD with the same settings but its all-reduce blocking (``--allreduce ring``:
    L5 completes before L6's gradient starts) computes nothing while its all-reduce travels, as
    SSGD does, and is refused."""
    cmds = _pictures().readme_first_job()[:2]
    ring = cmds[1].replace("--out dc.h5", "--allreduce ring --out dc.h5")
    assert ring != cmds[1], cmds
    _run_shown([cmds[0], ring], tmp_path)
    with pytest.raises(AssertionError, match="DC-S3GD computed for only"):
        assert_overlap_shows(tmp_path / "first.h5", tmp_path / "dc.h5")
