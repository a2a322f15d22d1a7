"""Every number a user reads is right: verify's values and indices, the report of a
trace, the evaluation lines, bench's small print. The command line's own code in this process
(tests.helpers.in_process; `refsgd train` and `bench overlap` on the world's ranks:
tests.helpers.world), but bench scale --check, which launches runs of its own."""

import importlib.util
import json
import os
import re
import shutil

import h5py
import numpy as np
import pytest
from tests.helpers import world
from tests.helpers.in_process import refsgd
from tests.helpers.launch import ROOT, cli

GOLDEN = os.path.join(ROOT, "tests", "golden")


def _copy(tmp_path, name="a.h5"):
    dst = tmp_path / name
    shutil.copy(os.path.join(GOLDEN, "ssgd-n4.h5"), dst)
    return dst


@pytest.mark.in_process
def test_verify_prints_plain_numbers(tmp_path, capfd):
    bad = _copy(tmp_path)
    with h5py.File(bad, "r+") as f:
        f["state/x"][2, 1, 10] += 1e-3
    r = refsgd(capfd, "verify", str(bad), os.path.join(GOLDEN, "ssgd-n4.h5"))
    assert r.returncode == 1
    line = [x for x in r.stdout.splitlines() if x.startswith("MISMATCH at step 2, worker 1, x[10]")][0]
    assert "np.float" not in r.stdout and re.search(r"A = -?\d\.\d+(e-?\d+)?, B = -?\d\.\d+", line), line


@pytest.mark.in_process
def test_verify_names_the_indices_of_a_batch_mismatch(tmp_path, capfd):
    bad = _copy(tmp_path)
    with h5py.File(bad, "r+") as f:
        b = f["batches"][...]
        want = int(b[3, 2, 0, 4])
        b[3, 2, 0, 4] += 1
        b[3, 2, 0, 6] += 1
        f["batches"][...] = b
    r = refsgd(capfd, "verify", str(bad), os.path.join(GOLDEN, "ssgd-n4.h5"))
    assert r.returncode == 1
    assert ("MISMATCH at step 3, worker 2: different batch indices: 2 of " in r.stdout
            and f"at (micro-batch, position) (0, 4), (0, 6); the first: A = {want + 1}, B = {want}" in r.stdout), r.stdout
    assert "  micro-batch 0: A [" in r.stdout and "  micro-batch 0: B [" in r.stdout


@pytest.mark.in_process
def test_verify_reports_a_float32_array_in_a_float64_trace_as_a_dtype_error(tmp_path, capfd):
    bad = _copy(tmp_path)
    with h5py.File(bad, "r+") as f:
        assert f.attrs["dtype"] == "float64"
        x = f["state/x"][...]
        del f["state/x"]
        f["state"].create_dataset("x", data=x.astype(np.float32))
    r = refsgd(capfd, "verify", str(bad), os.path.join(GOLDEN, "ssgd-n4.h5"), "--rtol", "1e-3")
    assert r.returncode == 1
    assert f"MISMATCH in dtype: in A ({bad}), a float64 trace, /state/x is float32" in r.stdout, r.stdout


@pytest.mark.in_process
def test_report_of_a_trace_points_to_verify(capfd):
    r = refsgd(capfd, "report", os.path.join(GOLDEN, "ssgd-n4.h5"))
    assert r.returncode == 2 and "is a trace" in r.stderr and "refsgd verify" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1


@pytest.mark.world(1)
def test_the_evaluation_lines_label_their_time():
    lines = []
    world.train("--iterations", "12", "--eval-every", "6it", "--no-progress", log=lines.append)
    evals = [x for x in lines if x.startswith("iter ") and "test acc" in x]
    assert len(evals) == 2 and all(re.search(r"\(elapsed \d+\.\d s\)$", x) for x in evals), lines


@pytest.mark.in_process
def test_run_sh_says_what_torch_it_installs():
    text = open(os.path.join(ROOT, "run.sh")).read()
    install = open(os.path.join(ROOT, "docs", "start", "install.md")).read()   # the README's set-up, in full
    assert "(CPU)" not in text and "CUDA build" in text and "download.pytorch.org/whl/cpu" in text
    assert "CUDA build" in install and "download.pytorch.org/whl/cpu" in install


def test_bench_scale_check_says_how_many_iterations_it_times():
    from refsgd.busy import usable_cores
    r = cli("bench", "scale", "--check", "--iterations", "20", "--model", "digits_tiny", "--batch", "8",
            "--t-c", "0.001", "--ranks", "8", timeout=600)
    assert r.returncode == 0, r.stderr
    measured = [p for p in (2, 4) if p <= usable_cores()]   # a rank per core: 2 here, both on 4 cores
    assert r.stdout.count("each method's mean over 15 of its 20 iterations: the first 4 warm up, the last "
                          "evaluates") == len(measured), r.stdout
    for p in {2, 4} - set(measured):
        assert f"  {p} ranks: not measured: they would oversubscribe the {usable_cores()} usable core(s)" in r.stdout
    assert "ms per iteration, 15 of 20 iterations timed:" in r.stdout and "load average (1 min)" in r.stdout
    # the command as it runs (DASO's local link at 4 ranks, 2 nodes of 2)
    assert "--json" not in r.stdout and ("--local-link 5,100" in r.stdout) == (4 in measured), r.stdout
    # the median iteration and its quartiles, and the ratio's
    row = [line.split() for line in r.stdout.splitlines() if line.startswith("  ssgd ")][-1]
    lo, hi = (float(v) for v in row[3].split("-"))
    assert lo <= float(row[2]) <= hi, row


def test_bench_scale_check_runs_no_world_larger_than_the_cores():
    """A world of more ranks than usable cores times the ranks' turns on the cores, not the method:
    --check leaves it out and says so, launching nothing for it (its rows: none)."""
    from refsgd.bench import scale
    lines = []
    assert scale.check(None, worlds=(4, 8), cores=2, log=lines.append) == []
    assert lines == [f"  {p} ranks: not measured: they would oversubscribe the 2 usable core(s) here (a timing "
                     "needs a core per rank)" for p in (4, 8)], lines
    # where 4 ranks have their cores, DASO runs as 2 nodes of 2 with the local link (at 2: 2 of 1)
    from refsgd.comm.link import Link
    inputs = scale.Inputs("mnist_mlp", 64, 4, 1, "float32", 1e-3, False, 0.0, {}, Link(50, 10), Link(5, 100), 4, 4)
    for p, G, local in ((2, 1, None), (4, 2, "5,100")):
        g, argv = scale.check_run(inputs, p, 20, 4)
        assert g == G and argv[argv.index("--ranks-per-node") + 1] == str(G), argv
        assert (argv[argv.index("--local-link") + 1] if "--local-link" in argv else None) == local, argv


# ---------------------------------------------------------------------------- busy machines
@pytest.mark.in_process
def test_the_busy_note_says_when_the_load_exceeds_the_free_cores():
    from refsgd import busy
    crowded = busy.note([5.0, 4.0, 3.0], ranks=1, threads=2, cores=2)
    assert "load average 5.00 (1 min) on 2 core(s)" in crowded and "--blas-threads 1" in crowded, crowded
    assert busy.note([0.3, 0.2, 0.1], ranks=1, threads=2, cores=2) is None       # an idle machine
    assert busy.note([2.5, 2.0, 2.0], ranks=1, threads=1, cores=4) is None       # 3 cores free for a load of 2.5
    assert "--blas-threads" not in busy.note([4.0, 4.0, 4.0], ranks=1, threads=1, cores=4)  # one thread already
    assert busy.note(None, ranks=4, threads=4, cores=2) is None                   # no load average on this OS


@pytest.mark.world(2)
def test_the_metrics_file_records_the_load_and_train_says_when_the_machine_is_busy(tmp_path, capfd):
    out = world.shared_path(tmp_path) / "m.h5"
    lines = []
    world.train("--iterations", "10", "--no-progress", "--out", str(out), log=lines.append)
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    stdout = "\n".join(lines)
    with h5py.File(out) as f:
        before, after = (json.loads(f.attrs[f"load_average_{k}"]) for k in ("before", "after"))
    assert len(before) == 3 and len(after) == 3 and all(v >= 0 for v in before + after)
    rep = refsgd(capfd, "report", str(out))
    assert f"load average before (1, 5, 15 min): {before}" in rep.stdout, rep.stdout
    if before[0] >= (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()) + 1:
        assert "note: the machine is busy: load average" in stdout, stdout  # (this machine is busy now)


@pytest.mark.in_process
def test_interleaved_times_alternate_the_functions():
    from refsgd.bench.models import interleaved_times, spread
    calls = []
    a, b = interleaved_times([lambda: calls.append("A"), lambda: calls.append("B")], repeat=3, warmup=1)
    assert calls == ["A", "B"] * 4 and len(a) == len(b) == 3
    s = spread([1.0, 2.0, 3.0, 4.0, 10.0])
    assert (s["median"], s["min"], s["max"], s["n"]) == (3.0, 1.0, 10.0, 5) and s["p25"] == 2.0 and s["p75"] == 4.0


@pytest.mark.in_process
def test_bench_step_gives_medians_with_their_spread_and_the_load(capfd):
    r = refsgd(capfd, "bench", "step", "--model", "digits_mlp", "--batch", "16", "--repeat", "5")
    assert r.returncode == 0, r.stderr
    assert "median of 5 repeats" in r.stdout and re.search(r"quartiles \d+\.\d\d-\d+\.\d\d ms", r.stdout), r.stdout
    assert re.search(r"load average \(1 min\) \d+\.\d\d before, \d+\.\d\d after", r.stdout), r.stdout
    if importlib.util.find_spec("torch") is not None:  # side by side: the median of the pairs' ratios
        assert "PyTorch and refsgd in turn" in r.stdout
        assert re.search(r"ratio refsgd / pytorch = \d+\.\d\d, the median of 5 side-by-side pairs \(quartiles "
                         r"\d+\.\d\d-\d+\.\d\d, range \d+\.\d\d-\d+\.\d\d\)", r.stdout), r.stdout


@pytest.mark.world(2)
def test_bench_overlap_records_the_load_and_the_spread_of_its_iterations(tmp_path, capfd):
    out = world.shared_path(tmp_path) / "o.json"
    r = refsgd(capfd, "bench", "overlap", "--model", "digits_tiny", "--batch", "16", "--iterations", "12", "--skip",
               "2", "--algo", "ssgd", "--json", str(out))
    world.all_ranks(r.returncode == 0, r.stderr)
    if world.comm().Get_rank() != 0:
        return  # rank 0 prints the table and writes the JSON
    res = json.loads(out.read_text())
    assert len(res["load_before"]) == 3 and len(res["load_after"]) == 3
    row = res["runs"][0]["rows"][0]
    assert 0 < row["wall_p25"] <= row["wall_median"] <= row["wall_p75"], row
    assert "median" in r.stdout and "quartiles" in r.stdout and "load average (1 min)" in r.stdout
