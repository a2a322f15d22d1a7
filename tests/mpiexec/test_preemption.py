"""A batch system's signals, sent by the test as Slurm sends them (to every rank of the job step):
the pre-emption warning (SIGUSR1, `sbatch --signal=USR1@60`) and scancel's or the time limit's
SIGTERM each stop every rank at the next iteration boundary with a checkpoint, and `--resume
auto` (one job script for the first run and every requeue) continues it bitwise."""

import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from tests.helpers.launch import ROOT, cli, mpi_env, mpilib

from refsgd import mpiranks

COMMON = ["train", "--dtype", "float64", "--momentum", "0.9", "--no-progress", "--eval-every", "20it"]


def _descendants(pid):
    """Every process below ``pid`` (Linux /proc)."""
    kids, todo = [], [pid]
    while todo:
        for k in mpiranks._children(todo.pop()):
            kids.append(k)
            todo.append(k)
    return kids


def _ranks(pid):
    out = []
    for k in _descendants(pid):
        try:
            with open(f"/proc/{k}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if cmd[1:3] == [b"-m", b"refsgd"]:  # python -m refsgd train (not the launchers around it)
            out.append(k)
    return out


def _job(*args):
    """The script line of a job: `refsgd train ... --resume auto` under this MPI's launcher, 2 ranks."""
    return subprocess.Popen(mpilib.wrapped(2, sys.executable, "-m", "refsgd", *COMMON, *args), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=mpi_env(),
                            start_new_session=True)


def _signal_ranks_once_training(p, sig):
    """``sig`` to each rank, as Slurm signals the tasks of a step, after the first evaluation."""
    line = ""
    while "test acc" not in line:
        line = p.stdout.readline()
        assert line, p.stderr.read()
    ranks = _ranks(p.pid)
    assert len(ranks) == 2, ranks
    for pid in ranks:
        os.kill(pid, sig)
    return p.communicate(timeout=90)


@pytest.mark.parametrize("sig,code,word", [(signal.SIGUSR1, 138, "pre-empted (SIGUSR1)"),
                                           (signal.SIGTERM, 143, "terminated (SIGTERM)")], ids=["usr1", "term"])
def test_a_requeued_job_resumes_bitwise_from_the_signals_checkpoint(tmp_path, sig, code, word):
    ck = str(tmp_path / "ck")
    job = ["--iterations", "1000000", "--checkpoint", ck, "--checkpoint-every", "100000", "--resume", "auto"]
    t0 = time.monotonic()
    p = _job(*job)
    out, err = _signal_ranks_once_training(p, sig)
    assert p.returncode == code, out + err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"refsgd: {word} after iteration"), err
    assert f"checkpoint written to {ck}/ckpt-" in lines[0] and "Traceback" not in err
    t = int((tmp_path / "ck" / "latest").read_text().strip().split("-")[1])
    assert t > 0 and time.monotonic() - t0 < 120
    # the requeued job: the same script line (--resume auto), which now finds the checkpoint
    end = str(t + 15)
    r = cli(*COMMON, "--iterations", end, "--checkpoint", ck, "--checkpoint-every", "100000", "--resume", "auto",
            "--out", str(tmp_path / "b.h5"), n=2)
    assert r.returncode == 0, r.stderr
    assert f"at iteration {t}" in r.stdout, r.stdout
    r = cli(*COMMON, "--iterations", end, "--out", str(tmp_path / "a.h5"), n=2)
    assert r.returncode == 0, r.stderr
    with h5py.File(tmp_path / "a.h5") as a, h5py.File(tmp_path / "b.h5") as b:
        np.testing.assert_array_equal(a["model"][...], b["model"][...])
        np.testing.assert_array_equal(a["iterations/loss"][...], b["iterations/loss"][...])


def test_resume_auto_starts_a_fresh_run_and_needs_a_checkpoint_folder(tmp_path):
    ck = str(tmp_path / "ck")
    r = cli(*COMMON, "--iterations", "4", "--checkpoint", ck, "--checkpoint-every", "2", "--resume", "auto", n=2)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "ck" / "latest").read_text().strip() == "ckpt-4"
    r = cli(*COMMON, "--iterations", "4", "--resume", "auto", n=2)
    assert r.returncode == 2
    assert r.stderr.strip() == ("refsgd: error: --resume auto needs --checkpoint DIR: it resumes from DIR's latest "
                                "checkpoint when there is one and starts the run otherwise"), r.stderr
    # a 'latest' whose checkpoint is gone is an error, never a silent restart
    (tmp_path / "ck" / "latest").write_text("ckpt-99\n")
    r = cli(*COMMON, "--iterations", "4", "--checkpoint", ck, "--checkpoint-every", "2", "--resume", "auto", n=2)
    assert r.returncode == 2 and "'latest' names ckpt-99, which is missing or incomplete" in r.stderr, r.stderr


def test_the_warning_outside_the_loop_is_ignored(tmp_path):
    """SIGUSR1 outside a training loop ends nothing: a command without a loop is not ended by it
    (its default action would kill the process)."""
    r = subprocess.run([sys.executable, "-c", "import os, signal, sys; from refsgd import entry, failure; "
                        "failure.install(); os.kill(os.getpid(), signal.SIGUSR1); sys.exit(entry.main(['models']))"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0 and "digits_tiny" in r.stdout, r.stderr
