"""``./run.sh setup`` (docs/start/install.md) installs refsgd without setuptools' 8-line warning
box (issue 46), and the editable install it makes still imports ``refsgd.docs`` (setup.cfg maps it
to docs/). The install line of run.sh is run as written, its pip pointed at a throwaway venv
(``pip --python``) and without the dependencies, which the venv of the suite already has."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from tests.helpers.launch import ROOT

LINE = '"$PY" -m pip install -q -e ".[test]"'
#: pip builds refsgd in this checkout (its build/ and refsgd.egg-info): under pytest-xdist (./run.sh
#: test) the tests that do run on one worker, one at a time (tests/mpiexec/test_cli.py's install too)
pytestmark = pytest.mark.xdist_group("builds-the-checkout")


def _install_line():
    lines = [x.strip() for x in (Path(ROOT) / "run.sh").read_text().splitlines() if x.strip().endswith(LINE)]
    assert len(lines) == 1, lines
    return lines[0]


def _install(line, tmp_path):
    """Run run.sh's install ``line`` into a new venv; its output and the venv's python."""
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    line = line.replace('"$PY" -m pip install', f'"$PY" -m pip --python {py} install').replace(
        '-e ".[test]"', "--no-deps -e .")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    r = subprocess.run(["bash", "-c", line], cwd=ROOT, env=env | {"PY": sys.executable},
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout + r.stderr, py


def test_setup_installs_without_the_warning_box_and_refsgd_docs_imports(tmp_path):
    out, py = _install(_install_line(), tmp_path)
    assert "Editable installation" not in out and "*****" not in out, out
    # the dependencies from the suite's venv (not a .pth there: only the new venv's finder maps refsgd)
    env = dict(os.environ, PYTHONPATH=sysconfig.get_paths()["purelib"])
    r = subprocess.run([str(py), "-c", "import refsgd.docs; print(list(refsgd.docs.__path__)[0])"],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0 and Path(r.stdout.strip()) == Path(ROOT) / "docs", r.stdout + r.stderr


def test_the_install_without_the_filter_shows_the_box(tmp_path):
    """The null: the same line without its PYTHONWARNINGS filter prints setuptools' box."""
    line = _install_line()
    bare = line[line.index('"$PY"'):]
    assert bare != line
    out, _ = _install(bare, tmp_path)
    assert "Editable installation" in out and "*****" in out, out
