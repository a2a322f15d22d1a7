"""The line that a stopped run (Ctrl-C, SIGTERM) prints says how to continue it, and its advice
runs as given (issue 46, item 8): a run that wrote ``--out`` must be rerun with ``--force``, or the
rerun is refused because the file exists; the hint says so. The null: the hint's command without
``--force`` is refused."""

import re
import shlex
import signal

from tests.helpers.launch import cli
from tests.mpiexec.test_failure import _signal_ranks_when_training, _start


def test_the_hint_after_ctrl_c_says_force_when_the_run_wrote_out(tmp_path):
    ck, out = tmp_path / "ck", tmp_path / "run.h5"
    common = ["train", "--iterations", "1000000", "--checkpoint", str(ck), "--checkpoint-every", "100000",
              "--no-progress", "--out", str(out)]
    p = _start(common)
    _, err = _signal_ranks_when_training(p, signal.SIGINT)
    assert p.returncode == 130, err
    line = next(ln for ln in err.splitlines() if "checkpoint written to" in ln)
    m = re.search(r"continue with (--resume \S+(?: --force)?)", line)
    assert m and m.group(1) == f"--resume {ck} --force", line
    assert str(out) in line, line   # the file the rerun replaces is named
    assert out.exists()
    t = int((ck / "latest").read_text().split("-")[1])
    again = ["train", "--iterations", str(t + 5), "--checkpoint", str(ck), "--checkpoint-every", "100000",
             "--no-progress", "--out", str(out)]
    # the null: the rerun without --force is refused, on the file the run wrote
    r = cli(*again, "--resume", str(ck), n=2)
    assert r.returncode != 0 and "--out" in r.stderr, r.stderr[-2000:]
    # as the hint says, it continues
    r = cli(*again, *shlex.split(m.group(1)), n=2)
    assert r.returncode == 0, r.stderr[-2000:]
