"""Failures end every rank, the ranks agree before they train, and nothing good is lost.

Every test runs the command line under mpiexec as a user does, with a timeout (a hang fails),
and asserts the exit code, the one message and the files left behind.
"""

import os
import platform
import re
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from tests.helpers.launch import ROOT, cli, mpi_env, mpiexec, mpilib, rank_of, scaled

from refsgd import mpiranks

INJECT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers", "fault_inject.py")
SHORT = ["--iterations", "12", "--no-progress"]


def errors(r):
    """The refsgd error lines of a run's stderr."""
    return [ln for ln in r.stderr.splitlines() if ln.startswith("refsgd")]


def one_message(r, text):
    lines = errors(r)
    assert len(lines) == 1 and text in lines[0], r.stderr
    assert "Traceback" not in r.stderr and "Abort(" not in r.stderr, r.stderr


def mpmd(*parts, timeout=120):
    """mpiexec -n 1 refsgd A : -n 1 refsgd B : ... (each part a list of arguments)."""
    cmd = mpilib.launcher().mpmd(*[(1, [sys.executable, "-m", "refsgd", *args]) for args in parts])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=scaled(timeout), cwd=ROOT, env=mpi_env())


# ---------------------------------------------------------------------- 1. one rank fails
@pytest.mark.parametrize("kind, code, text", [
    ("user", 2, "refsgd: error: injected: a file only rank 1 reads is damaged (rank 1)"),
    ("exit", 3, "refsgd: error: rank 1 exited on its own (code 3)"),
    # a surviving rank whose MPI call reports its peer's death: no traceback, as for no bug of refsgd's
    ("mpi-peer", 4, "refsgd: error: rank 1: an MPI call failed in refsgd/"),
])
def test_a_rank_failing_alone_ends_every_rank(kind, code, text):
    t0 = time.monotonic()
    r = subprocess.run(mpilib.wrapped(3, sys.executable, INJECT, "1", "4", kind, "train", "--iterations", "500",
                                      "--no-progress"), capture_output=True, text=True, timeout=scaled(120), cwd=ROOT,
                       env=mpi_env())
    assert r.returncode == code, r.stderr
    one_message(r, text)
    assert time.monotonic() - t0 < scaled(60)
    # MPICH removes its shared-memory segment in MPI_Finalize, which an abort skips: the launcher
    # python -m refsgd.mpilib removes it after the job (each one left held 2 MB of /dev/shm until a reboot)
    segments = re.search(r"^fault_inject: maps(.*)$", r.stdout, re.M).group(1).split()
    if mpilib.launcher().kind == "hydra":
        assert segments, r.stdout
    assert not [s for s in segments if os.path.exists(s)], segments


@pytest.mark.parametrize("kind, error", [("bug", "RuntimeError: injected bug"),  # the MPI error text is the library's
                                         ("mpi-bug", "mpi4py.MPI.Exception: ")])
def test_a_bug_on_one_rank_ends_every_rank_with_its_traceback(kind, error):
    r = subprocess.run(mpiexec(2) + [sys.executable, INJECT, "0", "3", kind, "train", "--iterations", "500",
                                     "--no-progress"], capture_output=True, text=True, timeout=scaled(120), cwd=ROOT,
                       env=mpi_env())
    assert r.returncode == 3  # an internal error (failure.EXIT_INTERNAL), not a failed check
    assert error in r.stderr and "internal error on rank 0" in r.stderr, r.stderr
    assert r.stderr.count("Traceback") == 1 and "Abort(" not in r.stderr


# ---------------------------------------------------------------------- 1, 9. signals
def _start(args, n=2):
    # the launcher of refsgd.mpilib hands a signal to the ranks under any MPI library (Open MPI's
    # mpirun keeps each rank in a process group of its own)
    return subprocess.Popen(mpilib.wrapped(n, sys.executable, "-m", "refsgd", *args), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=mpi_env(), start_new_session=True)


def _signal_ranks_when_training(p, sig):
    """Send sig to every rank (as srun and scancel do) once the run prints its first evaluation."""
    line = ""
    while "test acc" not in line:
        line = p.stdout.readline()
        assert line, p.stderr.read()
    os.killpg(p.pid, sig)  # the launcher, which hands it to every rank (as a terminal's Ctrl-C)
    out, err = p.communicate(timeout=scaled(90))
    return out, err


@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted (SIGINT)"),
                                             (signal.SIGTERM, 143, "terminated (SIGTERM)")])
def test_signal_to_every_rank_stops_them_together(sig, code, word):
    p = _start(["train", "--iterations", "1000000", "--no-progress"])
    out, err = _signal_ranks_when_training(p, sig)
    assert p.returncode == code, err
    lines = [ln for ln in err.splitlines() if ln.startswith("refsgd")]
    assert len(lines) == 1 and word in lines[0] and "nothing saved" in lines[0], err


def _ranks_below(pid):
    """pid -> rank of the ranks descended from process ``pid``."""
    found, todo = {}, [pid]
    while todo:
        for child in mpiranks._children(todo.pop()):
            todo.append(child)
            rank = rank_of(child)
            if rank is not None:
                found[child] = rank
    return found


def _kill_before_the_others_can_see_it(victim, others):
    """kill -9 of ``victim`` with the order injected: the other ranks stopped (SIGSTOP) first, so
    that the launcher, not a surviving rank's MPI call reading the dead rank's memory, sees the
    death first (that race made this test skip on loaded machines); they go on (SIGCONT) once the
    launcher has reaped the victim and had a second to end them."""
    for pid in others:
        os.kill(pid, signal.SIGSTOP)
    try:
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + scaled(30)
        while os.path.exists(f"/proc/{victim}") and time.monotonic() < deadline:
            time.sleep(0.05)   # a zombie until its parent, the launcher's proxy, reaps it
        time.sleep(1)
    finally:
        for pid in others:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def test_kill_9_of_one_rank_ends_the_job_and_refsgds_last_line_names_the_rank_and_the_signal():
    """kill -9 of one rank (as the OOM killer does): hydra ends the others and prints its banner
    and cleanup lines, which name only the pid; then, last, the launcher's (python -m
    refsgd.mpilib, what run.sh starts) own line names the rank, its host and pid, and the signal.
    Open MPI's mpirun --quiet prints nothing of it and exits 137: the launcher's line alone."""
    openmpi = mpilib.launcher().kind == "openmpi"
    p = _start(["train", "--iterations", "1000000", "--no-progress"], n=3)
    line = ""
    while "test acc" not in line:
        line = p.stdout.readline()
        assert line, p.stderr.read()
    ranks = _ranks_below(p.pid)
    assert sorted(ranks.values()) == [0, 1, 2], ranks
    victim = next(pid for pid, rank in ranks.items() if rank == 1)
    _kill_before_the_others_can_see_it(victim, [pid for pid in ranks if pid != victim])
    out, err = p.communicate(timeout=scaled(60))
    if openmpi:
        assert p.returncode == 137 and "Traceback" not in err, (p.returncode, err)
        assert err.strip().splitlines()[-1] == (
            f"refsgd: rank 1 on {platform.node()} (pid {victim}) ended first, by signal 9 (SIGKILL) as mpirun's "
            "exit code says; mpirun then ended every rank of the job (exit code 137)"), err
        return
    assert "Abort(" not in err, err  # the survivors were stopped: no MPI call of theirs saw the death first
    assert "Traceback" not in err, err  # a survivor that saw the death in an MPI call says one line
    assert p.returncode == 9, err   # hydra's exit code for a rank that signal 9 ended
    assert "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES" in out, out + err
    # (a surviving rank may see its peer's death in an MPI call first and abort, and hydra's banner
    # then names that rank, the lowest that its cleanup's SIGKILL ended: a race that a loaded
    # machine shows; the line names the rank that ended first, without the signal it cannot know)
    assert re.fullmatch(rf"refsgd: rank 1 on {re.escape(platform.node())} \(pid {victim}\) (was ended by signal 9 "
                        r"\(SIGKILL\)|ended first, without a word of refsgd's \(a signal: kill -9, the OOM killer, "
                        r"a crash\)); mpiexec then ended every rank of the job", err.strip().splitlines()[-1]), err


def test_sigterm_writes_a_checkpoint_that_resumes_the_same_trajectory(tmp_path):
    ck = tmp_path / "ck"
    common = ["train", "--dtype", "float64", "--momentum", "0.9", "--no-progress"]
    p = _start(common + ["--iterations", "1000000", "--checkpoint", str(ck), "--checkpoint-every", "100000"])
    out, err = _signal_ranks_when_training(p, signal.SIGTERM)
    assert p.returncode == 143, err
    assert "checkpoint written to" in err and f"--resume {ck}" in err
    name = (ck / "latest").read_text().strip()
    t = int(name.split("-")[1])
    assert t > 0 and sorted(os.listdir(ck)) == [name, "latest"]
    # the checkpoint continues exactly as a run that never stopped
    end = str(t + 20)
    r = cli(*common, "--iterations", end, "--resume", str(ck), "--out", str(tmp_path / "b.h5"), n=2)
    assert r.returncode == 0, r.stderr
    r = cli(*common, "--iterations", end, "--out", str(tmp_path / "a.h5"), n=2)
    assert r.returncode == 0, r.stderr
    with h5py.File(tmp_path / "a.h5") as a, h5py.File(tmp_path / "b.h5") as b:
        np.testing.assert_array_equal(a["model"][...], b["model"][...])


def test_the_last_iteration_is_checkpointed_and_old_ones_pruned(tmp_path):
    ck = tmp_path / "ck"
    r = cli("train", *SHORT, "--checkpoint", str(ck), "--checkpoint-every", "5", "--keep-checkpoints", "2", n=2)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(ck)) == ["ckpt-10", "ckpt-12", "latest"]
    assert (ck / "latest").read_text().strip() == "ckpt-12"
    # the finished run can be extended
    r = cli("train", "--iterations", "15", "--no-progress", "--resume", str(ck), "--checkpoint", str(ck),
            "--checkpoint-every", "5", n=2)
    assert r.returncode == 0 and "at iteration 12" in r.stdout, r.stderr
    assert (ck / "latest").read_text().strip() == "ckpt-15"


# ---------------------------------------------------------------------- 2. the ranks agree
@pytest.mark.parametrize("a, b, text", [
    (["--lr", "0.1"], ["--lr", "0.2"], "--lr is 0.1 on rank(s) 0, 0.2 on rank(s) 1"),
    (["--seed", "1"], [], "--seed is 1 on rank(s) 0, 0 on rank(s) 1"),
    (["--batch", "16"], [], "--batch is 16 on rank(s) 0, 32 on rank(s) 1"),
    (["--momentum", "0.9"], [], "--momentum is 0.9"),
    (["--algo", "dcs3gd"], [], "--algo is 'dcs3gd' on rank(s) 0, 'ssgd' on rank(s) 1"),
    (["--dtype", "float64"], [], "--dtype is 'float64'"),
    (["--tau", "2"], [], "--tau is 2"),
    (["--model", "digits_tiny"], [], "the model is digits_tiny (1,210 parameters"),
    (["--model", "digits_cnn"], [], "the model is digits_cnn"),
])
def test_ranks_launched_with_different_options_stop_before_training(a, b, text):
    r = mpmd(["train", *SHORT, *a], ["train", *SHORT, *b])
    assert r.returncode == 2, r.stderr
    one_message(r, text)
    assert "iter" not in r.stdout and "refsgd 0." not in r.stdout  # no header: nothing started


def test_checkpoint_on_one_rank_only_is_refused(tmp_path):
    r = mpmd(["train", *SHORT, "--checkpoint", str(tmp_path / "ck"), "--checkpoint-every", "2"], ["train", *SHORT])
    assert r.returncode == 2
    one_message(r, "--checkpoint is ")
    assert not (tmp_path / "ck").exists()


def test_data_may_differ_by_path_not_by_content(tmp_path):
    import shutil

    from refsgd.datasets import _embedded_path
    a, b, c = tmp_path / "a.h5", tmp_path / "b.h5", tmp_path / "c.h5"
    shutil.copy(_embedded_path(), a)
    shutil.copy(_embedded_path(), b)  # a node-local copy: same content, another path
    r = mpmd(["train", *SHORT, "--data", str(a)], ["train", *SHORT, "--data", str(b)])
    assert r.returncode == 0, r.stderr
    shutil.copy(_embedded_path(), c)
    with h5py.File(c, "r+") as f:  # the same shapes, one label changed
        y = f["train/labels"][...]
        y[0] = (y[0] + 1) % 10
        f["train/labels"][...] = y
    r = mpmd(["train", *SHORT, "--data", str(a)], ["train", *SHORT, "--data", str(c)])
    assert r.returncode == 2
    one_message(r, "the dataset is ")


def test_a_bad_flag_on_one_rank_is_reported_once_naming_it():
    r = mpmd(["train", *SHORT], ["train", *SHORT, "--lr", "abc"])
    assert r.returncode == 2
    assert errors(r) == ["refsgd train: error: argument --lr: expected a number, got 'abc' (on rank(s) 1)"], r.stderr


def test_argparse_errors_print_once_at_four_ranks():
    r = cli("train", "--lr", "abc", n=4)
    assert r.returncode == 2
    assert r.stderr.count("error: argument --lr") == 1 and r.stderr.count("usage:") == 1, r.stderr
    r = cli("trian", n=4)
    assert r.returncode == 2 and r.stderr.count("invalid choice") == 1, r.stderr


# ---------------------------------------------------------------------- 3. nothing non-finite saved
def test_divergence_leaves_no_nan_checkpoint_trace_or_metrics(tmp_path):
    ck, out, tr = tmp_path / "ck", tmp_path / "run.h5", tmp_path / "tr.h5"
    r = cli("train", "--lr", "1e6", "--iterations", "40", "--no-progress", "--log-every", "1000",
            "--checkpoint", str(ck), "--checkpoint-every", "1", "--out", str(out), "--trace", str(tr), n=2)
    assert r.returncode == 2
    one_message(r, "became non-finite at iteration")
    assert not out.exists() and not tr.exists()
    for name in os.listdir(ck) if ck.exists() else []:
        if name.startswith("ckpt-"):
            for f in os.listdir(ck / name):
                if f.endswith(".h5"):
                    with h5py.File(ck / name / f) as h:
                        assert all(np.all(np.isfinite(h["state"][k][...])) for k in h["state"])


def test_golden_refuses_a_diverged_trajectory(tmp_path):
    out = tmp_path / "g.h5"
    r = cli("golden", "--workers", "2", "--steps", "10", "--lr", "1e300", "--out", str(out))
    assert r.returncode == 2
    one_message(r, "became non-finite")
    assert not out.exists()


def test_verify_never_calls_nan_an_agreement(tmp_path):
    g = tmp_path / "g.h5"
    r = cli("golden", "--workers", "2", "--steps", "4", "--model", "digits_tiny", "--out", str(g))
    assert r.returncode == 0, r.stderr
    bad = tmp_path / "nan.h5"
    import shutil
    shutil.copy(g, bad)
    with h5py.File(bad, "r+") as f:
        name = next(iter(f["state"]))
        x = f["state"][name][...]
        x[2, 1, 0] = np.nan
        f["state"][name][...] = x
    r = cli("verify", str(bad), str(bad))
    assert r.returncode == 1 and "non-finite" in r.stdout, r.stdout


# ---------------------------------------------------------------------- 4, 5. outputs
def test_outputs_are_checked_before_the_first_iteration(tmp_path):
    for args, text in [
        (["--out", str(tmp_path)], "is a folder; give the name of a file"),
        (["--out", "/proc/refsgd-run.h5"], "cannot write in /proc"),
        (["--checkpoint", str(tmp_path / "f"), "--checkpoint-every", "2"], "is a file, not a folder"),
        (["--trace", str(tmp_path / "no" / "t.h5")], "does not exist"),
    ]:
        (tmp_path / "f").write_text("x")
        r = cli("train", *SHORT, *args, n=2)
        assert r.returncode == 2, r.stderr
        one_message(r, text)
        assert "refsgd 0." not in r.stdout  # refused before the header, before any work


def test_outputs_never_replace_inputs_or_good_files(tmp_path):
    import shutil

    from refsgd.datasets import _embedded_path
    data = tmp_path / "d.h5"
    shutil.copy(_embedded_path(), data)
    before = data.read_bytes()
    r = cli("train", *SHORT, "--data", str(data), "--out", str(data), n=2)
    assert r.returncode == 2 and data.read_bytes() == before
    one_message(r, "is also --data")
    t = tmp_path / "t.h5"
    r = cli("train", *SHORT, "--trace", str(t), "--out", str(t), n=2)
    assert r.returncode == 2 and not t.exists()
    one_message(r, "is also --out")
    out = tmp_path / "run.h5"
    assert cli("train", *SHORT, "--out", str(out), n=2).returncode == 0
    first = out.read_bytes()
    r = cli("train", *SHORT, "--out", str(out), n=2)
    assert r.returncode == 2 and out.read_bytes() == first
    one_message(r, "the file exists; choose another name, or give --force")
    assert cli("train", *SHORT, "--out", str(out), "--force", n=2).returncode == 0
    # a checkpoint folder belongs to one run
    ck = tmp_path / "ck"
    assert cli("train", *SHORT, "--checkpoint", str(ck), "--checkpoint-every", "6", n=2).returncode == 0
    r = cli("train", *SHORT, "--lr", "0.1", "--checkpoint", str(ck), "--checkpoint-every", "6", n=2)
    assert r.returncode == 2 and (ck / "latest").read_text().strip() == "ckpt-12"
    one_message(r, "holds the checkpoints of another run")
    r = cli("golden", "--workers", "2", "--steps", "2", "--data", str(data), "--out", str(data))
    assert r.returncode == 2 and data.read_bytes() == before


def _write_idx(folder, n_train, n_test):
    """Small MNIST-format IDX files (random images) in folder."""
    import struct
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        with open(os.path.join(folder, f"{prefix}-images-idx3-ubyte"), "wb") as f:
            f.write(struct.pack(">IIII", 0x803, n, 28, 28) + images.tobytes())
        with open(os.path.join(folder, f"{prefix}-labels-idx1-ubyte"), "wb") as f:
            f.write(struct.pack(">II", 0x801, n) + labels.tobytes())


@pytest.mark.parametrize("what", ["golden", "convert"])
def test_a_failed_write_keeps_the_previous_file(tmp_path, what):
    out = tmp_path / "out.h5"
    out.write_bytes(b"previous good file")
    if what == "golden":
        args = ["golden", "--workers", "2", "--steps", "20", "--out", str(out), "--force"]
    else:
        src = tmp_path.parent / f"{tmp_path.name}-idx"
        _write_idx(src, n_train=200, n_test=50)
        args = ["data", "convert", "mnist", str(src), str(out), "--force"]
    r = subprocess.run([sys.executable, INJECT, "0", "0", "enospc", *args], capture_output=True, text=True,
                       timeout=scaled(120), cwd=ROOT, env=mpi_env())
    assert r.returncode == 2, r.stderr
    one_message(r, "the previous file is unchanged")
    assert out.read_bytes() == b"previous good file"
    assert [p.name for p in tmp_path.iterdir()] == ["out.h5"]  # no temporary file left


def test_a_failed_checkpoint_write_stops_with_latest_intact(tmp_path):
    ck = tmp_path / "ck"
    # rank 1's third checkpoint write fails, as on a full disk
    r = subprocess.run(mpiexec(2) + [sys.executable, INJECT, "1", "2", "enospc", "train", "--iterations",
                        "30", "--no-progress", "--checkpoint", str(ck), "--checkpoint-every", "5"],
                       capture_output=True, text=True, timeout=scaled(120), cwd=ROOT, env=mpi_env())
    assert r.returncode == 2, r.stderr
    one_message(r, "could not write checkpoint")
    assert "No space left on device" in r.stderr and "latest still names ckpt-10" in r.stderr
    assert "(on rank" not in r.stderr and r.stderr.count("rank 1") == 1
    assert (ck / "latest").read_text().strip() == "ckpt-10" and (ck / "ckpt-10" / "meta.json").exists()
    assert not [p for p in os.listdir(ck) if p.startswith(".tmp")]


# ---------------------------------------------------------------------- 6. damaged checkpoints
@pytest.fixture(scope="module")
def checkpointed(tmp_path_factory):
    ck = tmp_path_factory.mktemp("ck") / "ck"
    r = cli("train", *SHORT, "--checkpoint", str(ck), "--checkpoint-every", "6", "--keep-checkpoints", "0", n=2)
    assert r.returncode == 0, r.stderr
    return ck


def _damage(ck, tmp_path, how):
    import shutil
    d = tmp_path / "damaged"
    shutil.copytree(ck, d)
    f = d / "ckpt-12" / "rank1.h5"
    if how == "truncated":
        f.write_bytes(f.read_bytes()[:500])
    elif how == "empty":
        f.write_bytes(b"")
    elif how == "not hdf5":
        f.write_text("hello")
    elif how == "stale":
        shutil.copy(d / "ckpt-6" / "rank1.h5", f)
    elif how == "swapped":
        shutil.copy(d / "ckpt-12" / "rank0.h5", f)
    elif how == "bit flip":
        with h5py.File(f, "r+") as h:
            x = h["state/x"][...]
            x.view(np.uint8)[7] ^= 1
            h["state/x"][...] = x
    elif how == "missing array":
        with h5py.File(f, "r+") as h:
            del h["state/x"]
    return d


@pytest.mark.parametrize("how, text", [
    ("truncated", "rank1.h5"), ("empty", "rank1.h5"), ("not hdf5", "not an HDF5 file"),
    ("stale", "belongs to iteration 6"), ("swapped", "(rank 0)"), ("bit flip", "does not match its SHA-256"),
    ("missing array", "does not match its SHA-256"),
])
def test_damaged_checkpoints_are_refused_before_training(checkpointed, tmp_path, how, text):
    d = _damage(checkpointed, tmp_path, how)
    r = cli("train", "--iterations", "20", "--no-progress", "--resume", str(d), n=2)
    assert r.returncode == 2, r.stderr
    one_message(r, text)
    assert "(on rank(s) 1)" in r.stderr and "refsgd 0." not in r.stdout


# ---------------------------------------------------------------------- 7. verify and report
def test_verify_and_report_on_malformed_or_partial_files(tmp_path):
    import shutil
    g = tmp_path / "g.h5"
    assert cli("golden", "--workers", "2", "--steps", "6", "--model", "digits_tiny", "--out", str(g)).returncode == 0
    short = tmp_path / "short.h5"
    assert cli("golden", "--workers", "2", "--steps", "3", "--model", "digits_tiny", "--out",
               str(short)).returncode == 0
    r = cli("verify", str(short), str(g))
    assert r.returncode == 1 and "steps 3..5 are missing from A" in r.stdout, r.stdout
    r = cli("verify", str(short), str(g), "--prefix")
    assert r.returncode == 0 and "OK: 3 steps" in r.stdout
    for edit, text in [
        (lambda f: f.attrs.__delitem__("config"), "missing config"),
        (lambda f: f.__delitem__("w0"), "missing /w0"),
        (lambda f: (f.__delitem__("loss"), f.create_dataset("loss", data=np.zeros((2, 2)))), "/loss is (2, 2)"),
        (lambda f: f.attrs.__setitem__("state_names", '["x", "nothing"]'), "nothing"),
    ]:
        bad = tmp_path / "bad.h5"
        shutil.copy(g, bad)
        with h5py.File(bad, "r+") as f:
            edit(f)
        r = cli("verify", str(bad), str(g))
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        one_message(r, text)
    r = cli("report", str(g))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr


# ---------------------------------------------------------------------- 8, 10. inputs and messages
def test_inputs_that_used_to_end_in_tracebacks(tmp_path):
    units = tmp_path / "units.toml"
    units.write_text('input = [64]\nclasses = 10\nlayers = [{ type = "dense", units = true }, '
                     '{ type = "dense", units = 10 }]\n')
    huge = tmp_path / "huge.toml"
    huge.write_text('input = [64]\nclasses = 10\nlayers = [{ type = "dense", units = 100000000000 }, '
                    '{ type = "dense", units = 10 }]\n')
    for args, text in [
        (["--seed", "-1"], "expected an integer >= 0, got '-1'"),
        (["--model", str(units)], "'units' must be a positive integer, got True"),
        (["--model", str(huge)], "of memory available"),
        (["--link", "0,1e-300"], "--link expects LATENCY_US,GBIT_S"),
        (["--algo", "dcasgd", "--dc-adaptive", "--dc-ms-decay", "2"], "--dc-ms-decay is the decay m of MeanSquare"),
        (["--schedule", "plateau:patience=2,patience=3"], "patience is given twice"),
    ]:
        r = cli("train", *SHORT, *args, n=2)
        assert r.returncode == 2, (args, r.stderr)
        one_message(r, text)


def _dataset_copy(tmp_path, edit):
    import shutil

    from refsgd.datasets import _embedded_path
    p = tmp_path / "d.h5"
    shutil.copy(_embedded_path(), p)
    with h5py.File(p, "r+") as f:
        edit(f)
    return p


def test_dataset_problems_are_named(tmp_path):
    def empty_test(f):
        for k in ("images", "labels"):
            x = f[f"test/{k}"][...][:0]
            del f[f"test/{k}"]
            f.create_dataset(f"test/{k}", data=x)

    def tiny_std(f):
        f.attrs["std"] = np.full_like(np.asarray(f.attrs["std"], dtype=np.float64), 1e-300)

    for edit, text in [(empty_test, "has no test samples"), (tiny_std, "gives non-finite values")]:
        r = cli("train", *SHORT, "--data", str(_dataset_copy(tmp_path, edit)), n=2)
        assert r.returncode == 2, r.stderr
        one_message(r, text)
        assert "lower the learning rate" not in r.stderr and "RuntimeWarning" not in r.stderr


def test_a_corrupt_compressed_chunk_is_named(tmp_path):
    p = tmp_path / "c.h5"
    from refsgd import datasets
    d = datasets.load(None)
    with h5py.File(datasets._embedded_path()) as src, h5py.File(p, "w") as f:
        for k, v in src.attrs.items():
            f.attrs[k] = v
        for split in ("train", "test"):
            f.create_dataset(f"{split}/images", data=src[f"{split}/images"][...], compression="gzip", chunks=True)
            f.create_dataset(f"{split}/labels", data=src[f"{split}/labels"][...])
        offset = f["train/images"].id.get_chunk_info(0).byte_offset
    raw = bytearray(p.read_bytes())
    raw[offset + 10: offset + 40] = b"\xff" * 30
    p.write_bytes(bytes(raw))
    r = cli("train", *SHORT, "--data", str(p), n=2)
    assert r.returncode == 2, r.stderr
    one_message(r, "the file is damaged")
    assert len(d.y_train)


def test_an_unknown_flag_on_one_rank_is_one_message_with_one_prefix():
    r = mpmd(["train", *SHORT], ["train", *SHORT, "--bogus"])
    assert r.returncode == 2, r.stderr
    one_message(r, "refsgd train: error: unrecognized arguments: --bogus; `refsgd train --help` lists the "
                   "options (on rank(s) 1)")
    assert r.stderr.count("error:") == 1, r.stderr
