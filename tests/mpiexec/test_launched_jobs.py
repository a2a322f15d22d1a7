"""What refsgd launches is bounded and does not outlive it (issue 33, item 15): `reproduce` refuses
a count of ranks or seeds past its bounds before anything runs, and a job that reproduce or
`bench all` launches (refsgd.bench.suite.launch) dies with the process that launched it, also
when that process is killed with SIGKILL, or stopped by a signal while the job runs."""

import os
import signal
import subprocess
import sys
import time

import pytest
from tests.helpers.launch import ROOT, scaled

from refsgd.busy import usable_cores
from refsgd.errors import RefsgdError
from refsgd.reproduce.runner import MAX_RANKS_PER_CORE, MAX_SEEDS, Setup


@pytest.mark.parametrize("args, says", [
    (["--ranks", "100000"], f"--ranks 100000: reproduce runs at most {MAX_RANKS_PER_CORE * usable_cores()} ranks"),
    (["--ranks", str(MAX_RANKS_PER_CORE * usable_cores() + 1)], "ranks here"),
    (["--seeds", "1000000"], f"--seeds 1000000: give 1 .. {MAX_SEEDS}"),
    (["--seeds", str(MAX_SEEDS + 1)], f"give 1 .. {MAX_SEEDS}"),
])
def test_reproduce_refuses_counts_past_its_bounds_before_running(tmp_path, args, says):
    """`--ranks 100000` started mpiexec -n 100000 with only a warning (about 2,400 processes). Run
    so that nothing can start even where the bound is missing: $MPIEXEC is a program that only
    fails, and the claim's --data does not exist (checked after the counts)."""
    fake = tmp_path / "mpiexec"
    fake.write_text("#!/bin/sh\necho 'fake mpiexec: must not be started' >&2\nexit 1\n")
    fake.chmod(0o755)
    r = subprocess.run([sys.executable, "-m", "refsgd", "reproduce", "laga-table1", *args, "--data",
                        str(tmp_path / "none.h5"), "--out-dir", str(tmp_path / "res")], capture_output=True, text=True,
                       timeout=scaled(120), cwd=ROOT, env={**os.environ, "MPIEXEC": str(fake)})
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("refsgd: error: "), r.stderr
    assert says in lines[0] and "running" not in r.stdout + r.stderr
    assert not (tmp_path / "res").exists()


def test_the_bounds_hold_for_the_python_api_too():
    with pytest.raises(RefsgdError, match="--ranks 100000"):
        Setup(ranks=100000)
    with pytest.raises(RefsgdError, match=f"--seeds 0: give 1 .. {MAX_SEEDS}"):
        Setup(seeds=0)
    assert Setup(ranks=MAX_RANKS_PER_CORE * usable_cores(), seeds=MAX_SEEDS).ranks == MAX_RANKS_PER_CORE * usable_cores()


SLEEPER = "import os, time; open(os.path.join(os.environ['MARK'], str(os.getpid())), 'w').close(); time.sleep(600)"
# a parent that launches 2 ranks through suite.launch, each writing its pid into $MARK and sleeping
PARENT = """
import os, signal, sys
from refsgd import mpilib
from refsgd.bench import suite
if sys.argv[1] == "stopped":  # as refsgd's handlers do: a signal becomes an exception that unwinds
    def stop(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
sleeper = sys.argv[2]
launcher_command = mpilib.command
mpilib.command = lambda n, *program: launcher_command(n, sys.executable, "-c", sleeper)
try:
    suite.launch(2, ["ignored"], timeout=600)
except KeyboardInterrupt:
    sys.exit(130)
"""


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the ranks are found through Linux's /proc")
@pytest.mark.parametrize("how", ["killed", "stopped", "run.sh's launcher killed"])
def test_a_launched_job_dies_with_its_parent(tmp_path, how):
    """kill -9 of the launching process (PR_SET_PDEATHSIG ends mpiexec, which ends its ranks), or a
    SIGTERM that it handles (the exception hands SIGTERM to the ranks): no rank left within
    seconds. Before, the ranks of a killed `reproduce` (or of run.sh's `python -m refsgd.mpilib`)
    ran on."""
    mark = tmp_path / "ranks"
    mark.mkdir()
    cmd = [sys.executable, "-c", PARENT, how, SLEEPER] if how != "run.sh's launcher killed" else \
        [sys.executable, "-m", "refsgd.mpilib", "-n", "2", sys.executable, "-c", SLEEPER]
    p = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "MARK": str(mark)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = []
    try:
        deadline = time.monotonic() + scaled(60)
        while len(pids) < 2 and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.2)
            pids = [int(name) for name in os.listdir(mark)]
        assert len(pids) == 2, (p.poll(), p.stderr.read() if p.poll() is not None else "")
        assert all(_alive(pid) for pid in pids)
        p.send_signal(signal.SIGTERM if how == "stopped" else signal.SIGKILL)
        p.wait(timeout=scaled(30))
        deadline = time.monotonic() + scaled(15)
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [pid for pid in pids if _alive(pid)]
        assert not left, f"ranks {left} outlived their launcher ({how})"
        assert p.returncode == (130 if how == "stopped" else -signal.SIGKILL), p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
