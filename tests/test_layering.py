"""The layers of refsgd point down (docs/architecture.md): import-linter's contracts in setup.cfg
hold on the package, and they fail on an upward import, at module level or inside a function."""

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers.launch import scaled

pytest.importorskip("importlinter")  # the [test] extra installs it

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "setup.cfg"
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def lint(cwd, config, pythonpath=None):
    env = dict(os.environ)
    if pythonpath is not None:  # the copy first, ahead of the installed refsgd
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath)] + [p for p in [env.get("PYTHONPATH")] if p])
    return subprocess.run([sys.executable, "-c", LINT, "--no-cache", "--no-logo", str(config)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=scaled(300))


def test_the_layers_contract_holds():
    r = lint(ROOT, CONFIG)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "refsgd's layers point down KEPT" in r.stdout
    assert "the serial renderings stand apart from the MPI side KEPT" in r.stdout
    assert "Contracts: 4 kept, 0 broken." in r.stdout


def copy_tree(tmp_path):
    """A copy of the package and of setup.cfg's other packages (their modules) in ``tmp_path``."""
    shutil.copytree(ROOT / "refsgd", tmp_path / "refsgd", ignore=shutil.ignore_patterns("__pycache__"))
    for folder in ("docs", "data", "models"):   # the packages of setup.cfg's package_dir: their modules
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=lambda d, names: [
            n for n in names if not n.endswith(".py") and not os.path.isdir(os.path.join(d, n))])
    shutil.copy(CONFIG, tmp_path / "setup.cfg")


def test_an_upward_import_inside_a_function_breaks_the_contract(tmp_path):
    """A copy of the package where the layers' base module imports the command line inside a
    function: lint-imports on that copy reports the broken contract and names the import."""
    copy_tree(tmp_path)
    base = tmp_path / "refsgd" / "nn" / "layers" / "base.py"
    base.write_text(base.read_text() + "\n\ndef _upward():\n    import refsgd.cli\n    return refsgd.cli\n")
    r = lint(tmp_path, tmp_path / "setup.cfg", pythonpath=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "refsgd's layers point down BROKEN" in r.stdout
    assert "refsgd.nn is not allowed to import refsgd.cli" in r.stdout
    assert "refsgd.nn.layers.base -> refsgd.cli" in r.stdout
    # and the unchanged copy keeps it: the failure is the added import, not the copy
    base.write_text(base.read_text().split("\n\ndef _upward():")[0] + "\n")
    r = lint(tmp_path, tmp_path / "setup.cfg", pythonpath=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_serial_rendering_that_imports_the_mpi_side_breaks_the_contract(tmp_path):
    """The serial renderings stand apart (issue 44): a copy where the serial rendering of DASO takes
    its phases from the MPI loop's module again, as it did before, breaks the contract, naming the
    import; one that reaches mpi4py through a module of its own breaks it too."""
    copy_tree(tmp_path)
    daso = tmp_path / "refsgd" / "serial" / "daso.py"
    kept = daso.read_text()
    daso.write_text(kept.replace("from refsgd.optim.phases import", "from refsgd.algorithms.daso import"))
    r = lint(tmp_path, tmp_path / "setup.cfg", pythonpath=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "the serial renderings stand apart from the MPI side BROKEN" in r.stdout
    assert "refsgd.serial is not allowed to import refsgd.algorithms" in r.stdout
    assert "refsgd.serial.daso -> refsgd.algorithms.daso" in r.stdout
    assert "refsgd's layers point down KEPT" in r.stdout      # serial sits above algorithms in the layers
    daso.write_text(kept + "\n\ndef _world():\n    from refsgd import comm\n    return comm.linkcomm\n")
    (tmp_path / "refsgd" / "comm" / "__init__.py").write_text("from refsgd.comm import linkcomm  # noqa: F401\n")
    r = lint(tmp_path, tmp_path / "setup.cfg", pythonpath=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "refsgd.serial is not allowed to import mpi4py" in r.stdout


def uncovered(root, config):
    """The modules and subpackages of ``root``/refsgd and the packages of setup.cfg's package_dir
    (refsgd.docs, refsgd.data, refsgd.models: folders of their own) that no import-linter contract
    of ``config`` names."""
    cfg = configparser.ConfigParser()
    cfg.read(config)
    named = set()
    for section in cfg.sections():
        if section.startswith("importlinter:contract:"):
            for key in ("layers", "source_modules"):
                named.update(n.strip() for line in cfg[section].get(key, "").split("\n") for n in line.split("|"))
    pkg = Path(root) / "refsgd"
    inside = {p.stem for p in pkg.glob("*.py") if p.stem != "__init__"}
    inside |= {p.name for p in pkg.iterdir() if (p / "__init__.py").exists()}
    outside = {line.split("=")[1].strip() for line in cfg["options"]["package_dir"].strip().split("\n")}
    return sorted(inside - named) + sorted(f"{d} (package_dir)" for d in outside - named)


def test_every_subpackage_is_in_a_contract(tmp_path):
    """A new module or subpackage of refsgd, or a new folder package_dir installs into it, must be
    placed in the layers: one the contracts do not name fails here, by name."""
    assert uncovered(ROOT, CONFIG) == []
    (tmp_path / "refsgd" / "newpkg").mkdir(parents=True)
    (tmp_path / "refsgd" / "newpkg" / "__init__.py").write_text("")
    (tmp_path / "refsgd" / "newmod.py").write_text("")
    config = tmp_path / "setup.cfg"
    config.write_text(CONFIG.read_text().replace("    refsgd.docs = docs\n", "    refsgd.docs = docs\n    refsgd.extra = extra\n"))
    assert uncovered(tmp_path, config) == ["newmod", "newpkg", "extra (package_dir)"]


#: the longest a module of refsgd may be (issue 44: small modules whose names say what they are)
MAX_MODULE_LINES = 500


def long_modules(root):
    """(path relative to ``root``, lines) of every Python module under ``root`` longer than
    MAX_MODULE_LINES."""
    found = []
    for path in sorted(Path(root).rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            found.append((str(path.relative_to(root)), lines))
    return found


def test_every_module_is_at_most_500_lines(tmp_path):
    assert long_modules(ROOT / "refsgd") == []
    # the null: one line more is found, with its count
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "big.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (tmp_path / "pkg" / "small.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    assert long_modules(tmp_path) == [(os.path.join("pkg", "big.py"), MAX_MODULE_LINES + 1)]
