"""Every number a user reads is right (issue 22): verify's values and indices, the report of a
trace, the evaluation lines, bench's small print. Run as a user runs them: the command line."""

import os
import re
import shutil

import h5py
import numpy as np
from conftest import ROOT, cli

GOLDEN = os.path.join(ROOT, "tests", "golden")


def _copy(tmp_path, name="a.h5"):
    dst = tmp_path / name
    shutil.copy(os.path.join(GOLDEN, "ssgd-n4.h5"), dst)
    return dst


def test_verify_prints_plain_numbers(tmp_path):
    bad = _copy(tmp_path)
    with h5py.File(bad, "r+") as f:
        f["state/x"][2, 1, 10] += 1e-3
    r = cli("verify", str(bad), os.path.join(GOLDEN, "ssgd-n4.h5"))
    assert r.returncode == 1
    line = [x for x in r.stdout.splitlines() if x.startswith("MISMATCH at step 2, worker 1, x[10]")][0]
    assert "np.float" not in r.stdout and re.search(r"A = -?\d\.\d+(e-?\d+)?, B = -?\d\.\d+", line), line


def test_verify_names_the_indices_of_a_batch_mismatch(tmp_path):
    bad = _copy(tmp_path)
    with h5py.File(bad, "r+") as f:
        b = f["batches"][...]
        want = int(b[3, 2, 0, 4])
        b[3, 2, 0, 4] += 1
        b[3, 2, 0, 6] += 1
        f["batches"][...] = b
    r = cli("verify", str(bad), os.path.join(GOLDEN, "ssgd-n4.h5"))
    assert r.returncode == 1
    assert ("MISMATCH at step 3, worker 2: different batch indices: 2 of " in r.stdout
            and f"at (micro-batch, position) (0, 4), (0, 6); the first: A = {want + 1}, B = {want}" in r.stdout), r.stdout
    assert "  micro-batch 0: A [" in r.stdout and "  micro-batch 0: B [" in r.stdout


def test_verify_reports_a_float32_array_in_a_float64_trace_as_a_dtype_error(tmp_path):
    bad = _copy(tmp_path)
    with h5py.File(bad, "r+") as f:
        assert f.attrs["dtype"] == "float64"
        x = f["state/x"][...]
        del f["state/x"]
        f["state"].create_dataset("x", data=x.astype(np.float32))
    r = cli("verify", str(bad), os.path.join(GOLDEN, "ssgd-n4.h5"), "--rtol", "1e-3")
    assert r.returncode == 1
    assert f"MISMATCH in dtype: in A ({bad}), a float64 trace, /state/x is float32" in r.stdout, r.stdout


def test_report_of_a_trace_points_to_verify():
    r = cli("report", os.path.join(GOLDEN, "ssgd-n4.h5"))
    assert r.returncode == 2 and "is a trace" in r.stderr and "refsgd verify" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1


def test_the_evaluation_lines_label_their_time():
    r = cli("train", "--iterations", "12", "--eval-every", "6it", "--no-progress")
    assert r.returncode == 0, r.stderr
    evals = [x for x in r.stdout.splitlines() if x.startswith("iter ") and "test acc" in x]
    assert len(evals) == 2 and all(re.search(r"\(elapsed \d+\.\d s\)$", x) for x in evals), r.stdout


def test_run_sh_says_what_torch_it_installs():
    text = open(os.path.join(ROOT, "run.sh")).read()
    readme = open(os.path.join(ROOT, "README.md")).read()
    assert "(CPU)" not in text and "CUDA build" in text and "download.pytorch.org/whl/cpu" in text
    assert "CUDA build" in readme and "download.pytorch.org/whl/cpu" in readme


def test_bench_scale_check_says_how_many_iterations_it_times():
    r = cli("bench", "scale", "--check", "--iterations", "20", "--model", "digits_tiny", "--batch", "8",
            "--t-c", "0.001", "--ranks", "8", timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("each method's mean over 15 of its 20 iterations: the first 4 warm up, the last "
                          "evaluates") == 2, r.stdout
    assert "ms per iteration, mean over 15 of 20 iterations:" in r.stdout
    assert "--json" not in r.stdout and "--local-link 5,100" in r.stdout  # the command as it runs
