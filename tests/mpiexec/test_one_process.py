"""The commands that run in one process refuse mpiexec (issue 45, item 4): `compile` and
`conformance` ran once per rank, writing the same files, and `data download` under `mpiexec -n 2`
exited 2 silently when rank 1 lost the race for its lock. One line (rank 0's), exit code 2, nothing
written."""

import os

import pytest
from tests.helpers.launch import cli


@pytest.mark.parametrize("args", [["compile", "--dtype", "float32"], ["data", "download", "mnist", "--cache-dir", "c"],
                                  ["conformance", "export", "exported", "--algo", "ssgd"]])
def test_a_one_process_command_under_mpiexec_says_one_line(args, tmp_path):
    r = cli(*args, n=2, timeout=120, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "runs in one process, not once per rank" in lines[0], r.stderr
    assert os.listdir(tmp_path) == []
