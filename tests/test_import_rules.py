"""Imports at module level (ruff's PLC0415, configured in pyproject.toml): an import inside a
function carries ``# noqa: PLC0415 <reason>`` with one of the four reasons, and the light entry
points stay light (``import refsgd``, ``refsgd --help``); ruff's other rules (pyflakes,
whitespace, bugbear) and vulture (dead code at 80 % confidence) find nothing."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: why an import may sit inside a function (pyproject.toml's [tool.ruff] comment says more)
REASONS = ("mpi4py", "matplotlib", "torch", "start-up")
NOQA = re.compile(r"#\s*noqa:\s*PLC0415\b(.*)$")
HEAVY = ("mpi4py", "matplotlib", "torch")


def ruff(*args, cwd=ROOT):
    pytest.importorskip("ruff")  # the [test] extra installs it
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_no_import_inside_a_function_without_a_reason():
    r = ruff("check", "--no-cache", ".")
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_rule_catches_an_import_inside_a_function(tmp_path):
    """The same configuration on a module with an import inside a function: ruff fails and
    names the line (so the test above can fail)."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "m.py").write_text("def f():\n    import json\n    return json\n")
    r = ruff("check", "--no-cache", "--output-format", "concise", "m.py", cwd=tmp_path)
    assert r.returncode == 1 and "m.py:2:5: PLC0415" in r.stdout, r.stdout


def test_the_rules_catch_dead_code_and_closures_over_loop_variables(tmp_path):
    """The same configuration (pyflakes, whitespace, bugbear): an unused import (F401), trailing
    whitespace (W291) and a closure over a loop variable kept past its iteration (B023), each
    named; a B023 marked ``# noqa: B023 <why>`` passes."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "m.py").write_text("import os\n\nx = 1 \nfs = []\nfor i in range(3):\n"
                                   "    fs.append(lambda: i)\n")
    r = ruff("check", "--no-cache", "--output-format", "concise", "m.py", cwd=tmp_path)
    assert r.returncode == 1, r.stdout
    assert all(f"m.py:{where}" in r.stdout for where in ("1:8: F401", "3:6: W291", "6:23: B023")), r.stdout
    (tmp_path / "m.py").write_text("fs = []\nfor i in range(3):\n    fs.append(lambda: i)  # noqa: B023 why\n")
    assert ruff("check", "--no-cache", "m.py", cwd=tmp_path).returncode == 0


def vulture(*args, cwd=ROOT):
    pytest.importorskip("vulture")  # the [test] extra installs it
    return subprocess.run([sys.executable, "-m", "vulture", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_vulture_finds_no_dead_code():
    """pyproject.toml's [tool.vulture]: refsgd, docs/_ext, data and models at 80 % confidence."""
    r = vulture()
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr


def test_vulture_finds_an_unused_import_and_unreachable_code(tmp_path):
    """The same configuration on a module with dead code: vulture fails and names each line."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text().replace(
        'paths = ["refsgd", "docs/_ext", "data", "models"]', 'paths = ["m.py"]'))
    (tmp_path / "m.py").write_text("import json\n\n\ndef f():\n    return 1\n    print(2)\n\n\nf()\n")
    r = vulture(cwd=tmp_path)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "m.py:1: unused import 'json' (90% confidence)" in r.stdout, r.stdout
    assert "m.py:6: unreachable code after 'return' (100% confidence)" in r.stdout, r.stdout


def _noqa_lines():
    for path in sorted(ROOT.glob("refsgd/**/*.py")) + sorted(ROOT.glob("experiments/*.py")):
        for k, line in enumerate(path.read_text().splitlines(), 1):
            m = NOQA.search(line)
            if m:
                yield f"{path.relative_to(ROOT)}:{k}", m.group(1).strip()


def test_every_exemption_gives_one_of_the_reasons():
    lines = list(_noqa_lines())
    assert lines, "no exempt import found: the pattern no longer matches the code"
    bad = [f"{where}: {reason!r}" for where, reason in lines if not reason.startswith(REASONS)]
    assert not bad, f"an import inside a function must say why, one of {REASONS}:\n" + "\n".join(bad)


@pytest.mark.parametrize("code", [
    "import refsgd",
    "from refsgd.entry import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass",
    "from refsgd.entry import main\ntry:\n    main(['train', '--help'])\nexcept SystemExit:\n    pass",
], ids=["import refsgd", "refsgd --help", "refsgd train --help"])
def test_the_entry_points_load_neither_mpi4py_nor_matplotlib_nor_torch(code):
    probe = f"\nimport sys\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    r = subprocess.run([sys.executable, "-c", code + probe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines()[-1] == "[]", r.stderr
