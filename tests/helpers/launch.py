"""Launching refsgd as a user does: ``mpiexec`` of the MPI library mpi4py uses, one BLAS thread per
rank, a hang failing through a timeout (the in-process MPI tests: tests.helpers.world)."""

import os
import subprocess
import sys

from refsgd import busy, mpilib

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"}


#: the most a test's time limit is stretched on a loaded machine: a real hang still ends the test
MAX_STRETCH = 8


def scaled(seconds):
    """A test's time limit of ``seconds`` (what the test needs on idle cores, with a margin)
    stretched by the machine's load now: x (1-minute load average + 1) / usable cores, between 1
    and MAX_STRETCH. On a 2-core machine at load 7 every limit is 4x its idle value, so a slow
    run under load passes while a hang still fails (a fixed 300 s failed three DASO tests of an
    unchanged tree on a loaded machine). Under pytest-xdist (./run.sh test's plain part) the load
    counts at least the test's neighbours, the other workers (each a process busy with a test):
    the 1-minute average lags their start by a minute, and a limit taken at the start of the part
    would count none of them."""
    load = (busy.load_average() or [0.0])[0]
    load = max(load, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", 1)) - 1)
    return seconds * min(MAX_STRETCH, max(1.0, (load + 1) / busy.usable_cores()))


def mpiexec(n):
    """``mpiexec FLAGS -n n`` of the MPI library mpi4py uses (:mod:`refsgd.mpilib`: $MPIEXEC,
    the venv's, or the system's, with that library's flags)."""
    return mpilib.command(n)


def mpi_env(base=None, **extra):
    """The environment of a launched job: ``base`` (os.environ), one BLAS/Numba thread per rank,
    the launcher's variables (Open MPI as root) and ``extra``."""
    return mpilib.environ(base, **{**ONE_THREAD, **extra})


def make_config(**kw):
    """The resolved refsgd.options.Config of a run of ``kw["algo"]`` (default ssgd) with the options
    ``kw``, less the method options that do not apply to that method (a test shares one set of
    values among methods), as refsgd.train(**kw) would build it."""
    from refsgd import options
    algo = kw.setdefault("algo", "ssgd")
    kw = {k: v for k, v in kw.items() if k not in options.DEFAULTS or k in options.APPLIES[algo]}
    return options.resolve(options.from_keywords(kw))


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cli(*args, n=None, timeout=300, cwd=ROOT):
    """``refsgd ARGS`` as a user runs it (under ``mpiexec -n n`` when n is given), one BLAS
    thread per process; returns the CompletedProcess. A hang fails through the timeout
    (``timeout`` seconds on idle cores, :func:`scaled` by the load)."""
    cmd = [sys.executable, "-m", "refsgd", *args]
    if n is not None:
        cmd = mpiexec(n) + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=scaled(timeout), cwd=cwd, env=mpi_env())


def verify_mpi_against_serial(tmp_path, options, n, steps, rtol="1e-10"):
    """`refsgd train --trace` under mpiexec -n n, `refsgd golden` for n workers, and `refsgd
    verify` at rtol 1e-10 (or ``rtol``; "0" for bitwise) in float64, as a user runs them; returns
    verify's output."""
    r = cli("train", *options, "--dtype", "float64", "--iterations", str(steps), "--no-progress",
            "--trace", str(tmp_path / "mpi.h5"), n=n)
    assert r.returncode == 0, r.stderr
    r = cli("golden", *options, "--workers", str(n), "--steps", str(steps), "--out", str(tmp_path / "serial.h5"))
    assert r.returncode == 0, r.stderr
    r = cli("verify", str(tmp_path / "mpi.h5"), str(tmp_path / "serial.h5"), "--rtol", rtol,
            *(["--atol", "0"] if float(rtol) == 0 else []))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"OK: {steps} steps x {n} workers agree" in r.stdout
    return r.stdout


#: a model whose first dense layer is frozen (the tests of frozen layers)
FROZEN_SPEC = """
name = "digits_frozen"
input = [1, 8, 8]
classes = 10
layers = [
  { type = "flatten" },
  { type = "dense", units = 16, frozen = true },
  { type = "relu" },
  { type = "dense", units = 10 },
]
"""


def mark_launching(folder, items):
    """Marker ``mpi_launch`` on every test in ``folder`` (a folder whose tests launch mpiexec; its
    conftest.py calls this): CI runs them again under a second MPI library. The tests that run
    in-process in a world session (marker ``world``: tests.helpers.world) and those marked
    ``in_process`` launch nothing."""
    for item in items:
        if folder in item.path.parents and not any(item.get_closest_marker(m) for m in ("world", "in_process")):
            item.add_marker("mpi_launch")


def rank_of(pid):
    """The MPI rank that the launcher gave process ``pid`` (its PMI_RANK or OMPI_COMM_WORLD_RANK), or
    None for a process that is not a rank."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
    rank = env.get(b"PMI_RANK", env.get(b"OMPI_COMM_WORLD_RANK"))
    return None if rank is None else int(rank)
