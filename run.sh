#!/usr/bin/env bash
# refsgd's entry point for a fresh machine with only Python 3.10+:
#   ./run.sh [ARGS]     create .venv if missing, install refsgd into it, and train:
#                       mpiexec -n NP refsgd train ARGS (NP: $REFSGD_NP, else the number of cores,
#                       at least 2 and at most 4) (default: SSGD on the embedded
#                       digits), e.g. ./run.sh --algo dcs3gd --epochs 5; the mpiexec is the one of
#                       mpi4py's MPI library ($MPIEXEC first), with its flags (refsgd/mpilib.py)
#   ./run.sh test       run the whole test suite: plain pytest (-q -rs: the reason of every skip; the
#                       tests that launch processes, their time limits stretched by the machine's
#                       load) in parallel pytest-xdist workers, 1.5 per usable core, then the
#                       in-process MPI tests in one `mpiexec -n N pytest --with-mpi` session per
#                       world size N = 2, 3, 4 (tests/helpers/suite.py); the closing line of each
#                       part again at the end. ./run.sh test --quick leaves out the tests marked
#                       slow and runs the world of 2 ranks only; ./run.sh test PATHS/ARGS hands the
#                       paths and pytest options to every part, but -n/--dist (pytest-xdist's) to
#                       the plain part only: ./run.sh test -n 0 runs it in one process
#   ./run.sh setup      only create/update .venv
#   ./run.sh docs       build the documentation site into docs/_build/html (Sphinx, -W: a warning or
#                       a broken link fails; installs the `docs` extra of setup.cfg);
#                       ./run.sh docs --timelines [NAME ...] first remakes the methods' timeline
#                       pictures (docs/timelines/NAME.png, 2 MPI ranks each)
#   ./run.sh --help | --list   refsgd train's help or its methods, printed once (no mpiexec)
#   ./run.sh torch      also install PyTorch 2.13.0 from PyPI, the optional oracle of tests and bench;
#                       on Linux PyPI's wheel is the CUDA build (large): for the CPU build install it
#                       first, .venv/bin/pip install torch==2.13.0 --index-url
#                       https://download.pytorch.org/whl/cpu (or from a local wheel), as docs/start/install.md says
# Environment: REFSGD_VENV (default .venv); REFSGD_SYSTEM_MPI=1 builds mpi4py against the
# system MPI (mpicc on PATH: Cray MPICH, Open MPI, ...) instead of the `mpich` wheel.
set -euo pipefail
cd "$(dirname "$0")"
VENV=${REFSGD_VENV:-.venv}
PY="$VENV/bin/python"

setup() {
  if [ ! -x "$PY" ]; then
    echo "run.sh: creating $VENV" >&2
    python3 -m venv "$VENV"
  fi
  local stamp="$VENV/.refsgd-installed"
  if [ ! -f "$stamp" ] || [ setup.cfg -nt "$stamp" ] || [ run.sh -nt "$stamp" ]; then
    echo "run.sh: installing refsgd and its dependencies into $VENV" >&2
    "$PY" -m pip install -q --upgrade pip
    if [ "${REFSGD_SYSTEM_MPI:-0}" = "1" ]; then
      if ! command -v "${MPICC:-mpicc}" >/dev/null; then
        echo "run.sh: REFSGD_SYSTEM_MPI=1 needs the system MPI's mpicc on PATH (or \$MPICC)," \
             "e.g. apt-get install openmpi-bin libopenmpi-dev, or module load cray-mpich" >&2
        exit 2
      fi
      "$PY" -m pip install -q --no-binary mpi4py "mpi4py>=4"
    else
      "$PY" -m pip install -q mpich "mpi4py>=4"
    fi
    # setuptools ends every editable install of a project whose packages map to other folders
    # (setup.cfg's package_dir: refsgd.docs = docs, ...) with an 8-line box warning of folders named
    # like the package; the meta path finder it installs for them is what keeps `import refsgd.docs`
    # working, and this checkout has no such folder: that one warning is silenced, nothing else.
    PYTHONWARNINGS="ignore:Editable installation:UserWarning" "$PY" -m pip install -q -e ".[test]"
    touch "$stamp"
  fi
}

# One BLAS / Numba / OpenMP thread per MPI rank unless the caller says otherwise.
one_thread_per_rank() {
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
  export MKL_NUM_THREADS=${MKL_NUM_THREADS:-1} NUMBA_NUM_THREADS=${NUMBA_NUM_THREADS:-1}
}

case "${1:-main}" in
  setup)
    setup ;;
  torch)
    setup
    if ! "$PY" -m pip show -q torch >/dev/null 2>&1; then
      echo "run.sh: installing torch 2.13.0 from PyPI (on Linux the CUDA build; for the CPU build see" \
           "docs/start/install.md: install it first from https://download.pytorch.org/whl/cpu)" >&2
    fi
    "$PY" -m pip install -q torch==2.13.0 ;;
  docs)
    setup
    shift
    if [ ! -f "$VENV/.refsgd-docs" ] || [ setup.cfg -nt "$VENV/.refsgd-docs" ]; then
      echo "run.sh: installing the documentation tools (setup.cfg's docs extra) into $VENV" >&2
      PYTHONWARNINGS="ignore:Editable installation:UserWarning" "$PY" -m pip install -q -e ".[docs]"  # as in setup()
      touch "$VENV/.refsgd-docs"
    fi
    if [ "${1:-}" = --timelines ]; then
      shift
      one_thread_per_rank
      "$PY" docs/_ext/refsgd_docs.py timelines "$@"
    fi
    exec "$PY" -m sphinx -W --keep-going -q -b html docs docs/_build/html ;;
  test)
    setup
    shift
    one_thread_per_rank
    # plain pytest in pytest-xdist workers, then one pytest-mpi session per world size
    # (tests/helpers/suite.py); -rs: every skipped test's reason
    exec "$PY" -m tests.helpers.suite "$@" ;;
  main|-*)
    setup
    [ "${1:-}" = main ] && shift
    for a in "$@"; do  # help and the list once, not once per rank
      case "$a" in -h|--help|--list) exec "$VENV/bin/refsgd" train "$@" ;; esac
    done
    # refsgd gives each rank its share of the cores for BLAS and Numba (--blas-threads overrides).
    # refsgd.mpilib launches with the mpiexec of mpi4py's MPI library ($MPIEXEC first) and its
    # flags, and hands Ctrl-C and SIGTERM to the ranks under any MPI library.
    # A rank per core, at least 2 (a distributed method needs two workers) and at most 4 (the
    # embedded digits' examples), unless REFSGD_NP says otherwise: 4 ranks on 2 cores would time
    # the ranks' wait for a core, not the method.
    cores=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
    np=${REFSGD_NP:-$(( cores < 2 ? 2 : (cores > 4 ? 4 : cores) ))}
    echo "run.sh: mpiexec -n $np refsgd train $* (launcher: $("$PY" -m refsgd.mpilib --show | head -1))" >&2
    exec "$PY" -m refsgd.mpilib -n "$np" "$VENV/bin/refsgd" train "$@" ;;
  *)
    echo "usage: ./run.sh [ARGS of refsgd train] | test [ARGS of pytest] | setup | docs | torch (see the comments" \
         "at the top of run.sh)" >&2
    exit 2 ;;
esac
