"""The serial renderings stand apart from the MPI side (issue 44): ``refsgd golden`` and every
method's serial rendering run without loading ``mpi4py.MPI`` or any module of refsgd.algorithms
and refsgd.run, so that a bug in the MPI loops cannot sit on both sides of the MPI = serial check.
setup.cfg's import-linter contract "the serial renderings stand apart" forbids the import
statically (tests/test_layering.py); these tests check what a process really loads."""

import json
import os
import subprocess
import sys

from refsgd import registry
from tests.helpers.launch import ONE_THREAD, scaled

#: what a serial rendering must not load: MPI, and the MPI side's code
MPI_SIDE = ("mpi4py.MPI", "refsgd.algorithms", "refsgd.run")

#: run in a fresh interpreter: every method's rendering, found through the registry and then
#: called through `refsgd golden` on the method's first golden configuration (2 steps), and after
#: each the modules of MPI_SIDE loaded so far
RENDER_ALL = """
import json, os, sys
from refsgd import registry
from refsgd.cli import main
from refsgd.serial import rendering
side, out, loaded = json.loads(sys.argv[1]), sys.argv[2], {}
def mpi_side():
    return sorted(m for m in sys.modules if any(m == s or m.startswith(s + ".") for s in side))
for name, m in registry.METHODS.items():
    rendering(name)
    found = mpi_side()
    code = main(["golden", *m.goldens[0].argv(name), "--steps", "2", "--out", os.path.join(out, name + ".h5")])
    loaded[name] = [code, found, mpi_side()]
print(json.dumps(loaded))
"""


#: ``python -m refsgd ARGS`` that writes, as the interpreter exits, the names of the modules it loaded
#: into the file given first: ``python -c AT_EXIT FILE ARGS``
AT_EXIT = """
import atexit, json, runpy, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv[0] = "refsgd"
runpy.run_module("refsgd", run_name="__main__", alter_sys=True)
"""


def mpi_side_loaded(names):
    """The modules among ``names`` (those a process imported) that belong to MPI_SIDE."""
    return sorted(n for n in names if any(n == s or n.startswith(s + ".") for s in MPI_SIDE))


def test_refsgd_golden_loads_no_mpi(tmp_path):
    """The command itself, in its own process (``python -m refsgd golden``, run as __main__ by
    runpy), for DASO: the modules loaded when the interpreter exits include none of MPI_SIDE.
    (Before issue 44: mpi4py.MPI and refsgd.algorithms.daso, the MPI code's Phases.)"""
    m = registry.METHODS["daso"]
    r = subprocess.run([sys.executable, "-c", AT_EXIT, str(tmp_path / "modules.json"), "golden",
                        *m.goldens[0].argv("daso"), "--steps", "2", "--out", str(tmp_path / "daso.h5")],
                       capture_output=True, text=True, timeout=scaled(120), env=_env())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "golden trace of daso" in r.stdout
    imported = json.loads((tmp_path / "modules.json").read_text())
    assert "refsgd.serial.daso" in imported and "numpy" in imported     # the list is the process's
    assert mpi_side_loaded(imported) == []


def test_every_rendering_loads_no_mpi(tmp_path):
    """Every method of the registry: finding its rendering and running it through `refsgd golden`
    loads no module of MPI_SIDE (one process for all, checked after each method in the registry's
    order, so the method that first loads one is named)."""
    r = subprocess.run([sys.executable, "-c", RENDER_ALL, json.dumps(MPI_SIDE), str(tmp_path)],
                       capture_output=True, text=True, timeout=scaled(600), env=_env())
    assert r.returncode == 0, r.stdout + r.stderr
    loaded = json.loads(r.stdout.strip().splitlines()[-1])
    assert list(loaded) == list(registry.METHODS)
    assert {name: v for name, v in loaded.items() if v != [0, [], []]} == {}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(name + ".h5" for name in registry.METHODS)


def test_the_check_sees_a_loaded_mpi_module():
    """The check's null: a process that loads mpi4py.MPI (or the MPI loops) is found out."""
    r = subprocess.run([sys.executable, "-c", "import sys, json, refsgd.algorithms.daso; "
                        "print(json.dumps(sorted(sys.modules)))"],
                       capture_output=True, text=True, timeout=scaled(120), env=_env())
    assert r.returncode == 0, r.stderr
    assert {"mpi4py.MPI", "refsgd.algorithms.daso"} <= set(mpi_side_loaded(json.loads(r.stdout)))


def _env():
    return {**os.environ, **ONE_THREAD}    # one BLAS/Numba thread: the machine is shared
