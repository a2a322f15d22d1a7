"""SIGINT and SIGTERM at any moment of `mpiexec -n 2 refsgd train`: exit code 130 / 143, every rank
gone within seconds, one line; and an interrupted run keeps its --out and --trace files.

Deterministic moments come from tests/helpers/signal_inject.py (the process signals itself at a named
phase of its start-up, loop or end); the others from signals to the whole job at offsets after
the launch, as a Ctrl-C or scancel lands. Every run has a timeout, so a hang fails.
"""

import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from tests.helpers.launch import ROOT, cli, mpi_env, mpiexec, mpilib, scaled

from tests.helpers.signal_inject import PHASES

INJECT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers", "signal_inject.py")

OPENMPI = mpilib.library_kind() == "openmpi"

WORDS = {"SIGINT": (130, "refsgd: interrupted (SIGINT)"), "SIGTERM": (143, "refsgd: terminated (SIGTERM)")}


def refsgd_lines(stderr):
    return [ln for ln in stderr.splitlines() if ln.startswith("refsgd")]


def run(args, timeout=90, env=None):
    """mpiexec -n 2 ARGS in a session of its own, whose every process is killed if it hangs
    (a hung job fails the test and leaves nothing behind)."""
    p = subprocess.Popen(mpiexec(2) + [sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=mpi_env(**(env or {})),
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=scaled(timeout))
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise AssertionError(f"{' '.join(args)}: still running after {timeout} s (a hang)") from None
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def assert_stopped(r_code, stderr, name, elapsed, limit=30):
    code, word = WORDS[name]
    assert r_code == code, stderr
    lines = refsgd_lines(stderr)
    assert len(lines) == 1 and lines[0].startswith(word), stderr
    assert "Traceback" not in stderr and "BAD TERMINATION" not in stderr and "Abort(" not in stderr, stderr
    assert elapsed < scaled(limit), elapsed


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_signal_to_every_rank_at_each_phase(phase, name):
    t0 = time.monotonic()
    r = run([INJECT, phase, name, "train", "--iterations", "30", "--no-progress"])
    assert_stopped(r.returncode, r.stderr, name, time.monotonic() - t0)


@pytest.mark.parametrize("phase, spec", [("start", "SIGINT:1"), ("mpi-import", "SIGTERM:1"), ("mpi-import", "SIGINT:0"),
                                         ("data", "SIGTERM:1"), ("collective", "SIGINT:0")])
def test_a_signal_to_one_rank_during_start_up_ends_every_rank(phase, spec):
    t0 = time.monotonic()
    r = run([INJECT, phase, spec, "train", "--iterations", "300", "--no-progress"])
    assert_stopped(r.returncode, r.stderr, spec.split(":")[0], time.monotonic() - t0)


def test_a_rank_gone_before_mpi_init_does_not_leave_the_others_there_forever():
    """Rank 1 ends with exit code 1 before refsgd's first instruction (as an import failing on one
    node, or a Ctrl-C in the interpreter's start-up under python -m): MPICH's launcher does not
    notice, and rank 0 would wait in MPI_Init forever; REFSGD_MPI_START_TIMEOUT bounds the wait."""
    t0 = time.monotonic()
    r = run([INJECT, "interpreter", "EXIT:1", "train", "--iterations", "30", "--no-progress"], timeout=60,
            env={"REFSGD_MPI_START_TIMEOUT": "5"})
    assert r.returncode != 0 and time.monotonic() - t0 < scaled(40), r.stderr
    # and a run that starts within the limit is not touched by it
    r = run(["-m", "refsgd", "train", "--iterations", "300", "--no-progress"], env={"REFSGD_MPI_START_TIMEOUT": "5"})
    assert r.returncode == 0, r.stderr


# Known gap under Open MPI (open work): a signal that lands during start-up does not stop the ranks
# together there; the first rank exits and mpirun then ends the others itself, so the job ends with
# rc 1, or with no refsgd line, or with two. MPICH's hydra gives rc 130/143 and one line.
@pytest.mark.xfail(OPENMPI, strict=False,
                   reason="Open MPI: a signal during start-up does not yet end the job with one line and 130/143")
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_signals_to_the_whole_job_at_offsets_after_the_launch(name):
    """As a Ctrl-C or scancel lands: the signal to mpiexec and every rank, 0.3 to 2 s after the launch."""
    for offset in (0.3, 0.5, 0.7, 0.9, 1.2, 1.6, 2.0):
        t0 = time.monotonic()
        # the job's process group holds mpiexec and the ranks under hydra, as a terminal's or a
        # scheduler's signal finds them; Open MPI's mpirun keeps each rank in a process group of its
        # own, so there the job runs through refsgd.mpilib's wrapper, which hands the signal to every
        # rank (the wrapper's own Python start-up is then part of the launch)
        program = (sys.executable, "-m", "refsgd", "train", "--iterations", "1000000", "--no-progress")
        argv = mpilib.wrapped(2, *program) if OPENMPI else mpiexec(2) + list(program)
        p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=mpi_env(), start_new_session=True)
        time.sleep(offset)
        os.killpg(p.pid, getattr(signal, name))
        try:
            out, err = p.communicate(timeout=scaled(60))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            raise AssertionError(f"{name} {offset} s after the launch: still running after 60 s")
        assert_stopped(p.returncode, err, name, time.monotonic() - t0 - offset, limit=45)


# ---------------------------------------------------------------------- what an interrupted run writes
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_an_interrupted_run_writes_out_and_trace_for_the_iterations_done(tmp_path, name):
    out, trace = tmp_path / "run.h5", tmp_path / "trace.h5"
    r = run([INJECT, "loop", name, "train", "--iterations", "30", "--log-every", "5", "--dtype", "float64",
             "--no-progress", "--out", str(out), "--trace", str(trace)], timeout=120)
    code, word = WORDS[name]
    assert r.returncode == code, r.stderr
    lines = refsgd_lines(r.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"{word} after iteration 5;"), r.stderr  # signal at t = 3
    assert f"metrics of the 5 iterations done written to {out} (marked interrupted)" in lines[0]
    assert f"trace of the 5 iterations done written to {trace} (marked interrupted)" in lines[0]
    with h5py.File(out) as f:
        assert f.attrs["interrupted"] == name and f.attrs["iterations_planned"] == 30
        assert f["iterations/wall"].shape == (2, 5) and np.isfinite(f["iterations/loss"][...]).all()
        assert f["model"].shape[0] > 0 and f.attrs["wall_seconds"] > 0
    with h5py.File(trace) as f:
        assert f.attrs["interrupted"] == name and f["loss"].shape == (5, 2)
    rep = cli("report", str(out))
    assert rep.returncode == 0, rep.stderr
    assert f"INTERRUPTED by {name} after iteration 5 of 30" in rep.stdout
    # the 5 steps traced are those of an uninterrupted run
    full = tmp_path / "full.h5"
    assert cli("golden", "--workers", "2", "--steps", "30", "--dtype", "float64", "--out", str(full)).returncode == 0
    v = cli("verify", str(trace), str(full), "--prefix")
    assert v.returncode == 0 and "OK: 5 steps" in v.stdout, v.stdout + v.stderr
