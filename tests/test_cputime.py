"""tests/helpers/cputime.py counts a test's CPU where it is spent: in the processes it starts as
well as in its own, and no other test's."""

import json
import os
import subprocess
import sys

from tests.helpers.cputime import summary
from tests.helpers.launch import ROOT, scaled

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4:\n    pass\n"
TESTS = f'''
import subprocess, sys
def test_in_a_child():
    subprocess.run([sys.executable, "-c", {BURN!r}], check=True)
def test_in_itself():
    exec({BURN!r})
def test_idle():
    pass
'''


def test_each_tests_cpu_is_its_own_and_its_childrens(tmp_path):
    (tmp_path / "test_burn.py").write_text(TESTS)
    folder = tmp_path / "cpu"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.helpers.cputime", "-p", "no:cacheprovider",
                        "--rootdir", str(tmp_path), str(tmp_path / "test_burn.py")], cwd=ROOT, capture_output=True,
                       text=True, timeout=scaled(120), env={**os.environ, "REFSGD_CPUTIME": str(folder)})
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {json.loads(line)["test"].split("::")[-1]: json.loads(line) for f in folder.iterdir() for line in open(f)}
    assert rows["test_in_a_child"]["children"] >= 0.35 and rows["test_in_a_child"]["own"] < 0.2, rows
    assert rows["test_in_itself"]["own"] >= 0.35 and rows["test_in_itself"]["children"] < 0.05, rows
    assert rows["test_idle"]["own"] + rows["test_idle"]["children"] < 0.05, rows
    text = summary(str(folder), 2)
    assert text.startswith("3 tests, ") and "test_burn.py::test_in_" in text.split("costliest tests:")[1], text
