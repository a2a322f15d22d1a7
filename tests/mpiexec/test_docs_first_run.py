"""The documentation's first-run page (docs/start/first-run.md) and the README's first job work as
written: their fenced ``bash`` commands run, in order, in an empty folder, at 2 ranks, and do what
the pages say: DC-S3GD, which computes the next gradient while its all-reduce travels, is idle
less per iteration than SSGD, which waits for it (read from the metrics files, not the picture).

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
    busy = overlap_unless_busy(tmp_path)
    if busy:
        pytest.skip(f"the machine was busy ({busy}): DC-S3GD's idle time was not below SSGD's; the timing "
                    "cannot be judged under that load")


def overlap_unless_busy(folder):
    """None when first.h5 and dc.h5 in ``folder`` show the overlap; when they do not, the load the
    runs recorded if the machine was busier than its cores (a timing is not judged there), else
    the assertion's failure."""
    try:
        assert_overlap_shows(folder / "first.h5", folder / "dc.h5", margin=1.0)
        return None
    except AssertionError:
        load = max(max(load_of(folder / f)) for f in ("first.h5", "dc.h5"))
        if load <= (os.cpu_count() or 1):
            raise
        return f"load average {load:.1f} on {os.cpu_count()} cores"


def idle_ms(path):
    """The mean idle time per iteration of a metrics file, over its ranks and iterations (the
    height of its idle bar in ``refsgd report --plot``)."""
    return float(np.nanmean(load(str(path)).rec["idle"])) * 1e3


def assert_overlap_shows(ssgd, dc, margin=0.8):
    """What the first job teaches: the same settings, DC-S3GD's idle below SSGD's (by a margin:
    on an idle machine it is about half)."""
    a, b = load(str(ssgd)), load(str(dc))
    same = {k: a.config[k] for k in ("model", "batch", "lr", "momentum", "link", "epochs")}
    assert same == {k: b.config[k] for k in same}, (a.config, b.config)
    assert (a.algo, b.algo) == ("ssgd", "dcs3gd")
    assert idle_ms(dc) < margin * idle_ms(ssgd), (idle_ms(ssgd), idle_ms(dc))


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
    """The README's first job, as the docs' build runs it for its picture (refsgd_pictures). A
    timing: on a machine busier than its cores (other jobs' ranks take the cores, and every wait
    then holds their time slices) it is tried 3 times, and skipped, saying the load, if the load
    hid the overlap each time; on a machine with its cores free, it must hold at once."""
    cmds = _pictures().readme_first_job()
    assert len(cmds) == 3 and cmds[-1].endswith("--plot cmp.png"), cmds
    for attempt in range(3):
        for f in ("first.h5", "dc.h5", "cmp.png"):
            (tmp_path / f).unlink(missing_ok=True)
        _run_shown(cmds, tmp_path)
        assert (tmp_path / "cmp.png").stat().st_size > 10_000
        busy = overlap_unless_busy(tmp_path)
        if not busy:
            return
    pytest.skip(f"the machine was busy ({busy}) in 3 tries: DC-S3GD's idle time was not below SSGD's; the "
                "timing cannot be judged under that load")


def load_of(path):
    """The load averages a metrics file recorded before and after its run."""
    attrs = load(str(path)).attrs
    return [float(v) for k in ("load_average_before", "load_average_after")
            for v in json.loads(attrs.get(k, "[0]"))[:1]]   # the 1-minute average


def test_the_old_first_job_fails_the_check(tmp_path):
    """The null: the README's first job of before (issue 46: SSGD without momentum against DC-S3GD
    with 0.9, the MLP whose gradient takes 0.1 ms, no emulated link) is refused."""
    _run_shown(["mpiexec -n 2 refsgd train --epochs 2 --out first.h5",
                "mpiexec -n 2 refsgd train --algo dcs3gd --epochs 2 --out dc.h5"], tmp_path)
    with pytest.raises(AssertionError):
        assert_overlap_shows(tmp_path / "first.h5", tmp_path / "dc.h5")
