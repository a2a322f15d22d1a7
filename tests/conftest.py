import os
import subprocess
import sys

# the shared gradient-check helpers live beside the tests
sys.path.insert(0, os.path.dirname(__file__))

from refsgd import mpilib  # noqa: E402

#: set in the processes that `launch_under_mpiexec` starts
UNDER_MPI = os.environ.get("REFSGD_UNDER_MPIEXEC") == "1"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"}


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


def pytest_collection_modifyitems(config, items):
    """Every test of a file that launches mpiexec is an MPI test (marker mpi_launch): CI runs
    them again under a second MPI library."""
    for item in items:
        if item.fspath.basename in MPI_FILES or item.fspath.dirpath().basename == "methods":
            item.add_marker("mpi_launch")


#: the test files that launch mpiexec (each of their tests is marked mpi_launch), besides every file
#: of tests/methods/
MPI_FILES = {"test_bench.py", "test_cli.py", "test_codecs_mpi.py", "test_daso_mpi.py", "test_dc_mpi.py",
             "test_failure_mpi.py", "test_golden.py", "test_allreduce_ring_mpi.py", "test_laga_mpi.py", "test_link.py",
             "test_pipesgd_mpi.py",
             "test_ppasgd_mpi.py", "test_run_mpi.py", "test_ssgd_mpi.py", "test_usability.py", "test_mpilib.py",
             "test_reliability_mpi.py", "test_report.py", "test_report_comparisons.py", "test_signals_mpi.py",
             "test_timeline.py", "test_what_users_read.py", "test_reproduce.py"}


def launch_under_mpiexec(test_file, n, timeout=300):
    """Run ``test_file``'s pytest-mpi tests under ``mpiexec -n n``; plain pytest calls this, so the
    MPI tests run without --with-mpi. A hang fails through the timeout."""
    env = mpi_env(REFSGD_UNDER_MPIEXEC="1")
    r = subprocess.run(mpiexec(n) + [sys.executable, "-m", "pytest", "--with-mpi", "-q", "-p",
                                     "no:cacheprovider", test_file], capture_output=True, text=True, timeout=timeout,
                       env=env)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert " passed" in r.stdout and " failed" not in r.stdout
    return r

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(*args, n=None, timeout=300, cwd=ROOT):
    """``refsgd ARGS`` as a user runs it (under ``mpiexec -n n`` when n is given), one BLAS
    thread per process; returns the CompletedProcess. A hang fails through the timeout."""
    cmd = [sys.executable, "-m", "refsgd", *args]
    if n is not None:
        cmd = mpiexec(n) + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=mpi_env())


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
