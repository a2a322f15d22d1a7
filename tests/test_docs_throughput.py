"""docs/start/summary.md: the last status line's rate and the summary's throughput divide the same
samples by the same clock, the iterations' wall times, the status line's lacking the rest of the
last iteration (after its print). Checked on a run of one rank (no wait for another rank's
compiling, which the summary alone leaves out): the summary's time, from the metrics file, is the
status line's plus less than the last iteration's recorded wall time."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from refsgd.report.runs import load


def _rate(pattern, out):
    m = re.findall(pattern, out, flags=re.M)
    assert m, out[-3000:]
    return float(m[-1].replace(",", ""))


def seconds_of(out, path):
    """(samples, the last status line's seconds, the summary's, the last iteration's) of a run's
    output and metrics file; the printed rates are rounded to a sample a second."""
    status = _rate(r"^iter .*\(100\.0%\).*?([\d,]+) samples/s", out)
    summary = _rate(r"^throughput ([\d,]+) samples/s", out)
    run = load(str(path))
    samples = float(np.sum(run.rec["gradients"])) * run.config["batch"]
    wall = np.asarray(run.rec["wall"])[0]
    assert abs(samples / wall.sum() - summary) <= 0.5, (samples / wall.sum(), summary)   # the summary's figure
    return samples, samples / status, samples / summary, float(wall[-1])


def assert_the_figures_agree(out, path):
    samples, status_s, summary_s, last_s = seconds_of(out, path)
    rounding = 0.5 * samples / min(samples / status_s, samples / summary_s) ** 2       # of 0.5 sample/s
    assert -rounding <= summary_s - status_s <= last_s + rounding, (status_s, summary_s, last_s)


def test_the_last_status_line_and_the_summary_agree_at_the_last_iteration(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    r = subprocess.run([str(Path(sys.executable).parent / "refsgd"), "train", "--epochs", "3", "--out", "t.h5"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert_the_figures_agree(r.stdout, tmp_path / "t.h5")
    # the null: a status line whose time lies outside that range by 1 % of the run is refused
    samples, _, summary_s, last_s = seconds_of(r.stdout, tmp_path / "t.h5")
    for wrong_s in (summary_s + 0.01 * summary_s, summary_s - last_s - 0.01 * summary_s):
        wrong = re.sub(r"(\(100\.0%\).*?)[\d,]+( samples/s)",
                       lambda m: f"{m.group(1)}{samples / wrong_s:,.0f}{m.group(2)}", r.stdout)
        try:
            assert_the_figures_agree(wrong, tmp_path / "t.h5")
        except AssertionError:
            continue
        raise AssertionError(f"a status line of {samples / wrong_s:,.0f} samples/s passed")
