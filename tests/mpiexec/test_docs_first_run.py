"""The documentation's first-run page (docs/start/first-run.md) works as written: its fenced
``bash`` commands run, in order, in an empty folder, at 2 ranks, and do what the page says.

``.venv/bin/X`` on the page is this venv's X; ``.venv/bin/mpiexec -n 2`` is the launcher of the MPI
library mpi4py uses (refsgd.mpilib: the venv's mpiexec for the mpich wheel, the system's with its
flags otherwise), so that the page is checked under every MPI library CI runs."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import h5py

from tests.helpers.launch import ROOT, mpi_env, mpiexec

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
