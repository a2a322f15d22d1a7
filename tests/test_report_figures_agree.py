"""The report's figures say one thing each (issue 46, item 6), read in-process from synthetic
records (no MPI): the wall time says what it holds, the compile apart; the loss legend names the
window the moving mean really spans, never "(1 iterations)" nor "about an epoch" for a tenth of
a short run; a mean printed outside its own quartiles gets a line saying why."""

import numpy as np

from refsgd.report.metrics_file import summary
from refsgd.report.runs import Run, smoothing_text
from refsgd.report.text import comparison_text


def _rec(n, world=2, wall_ms=5.0):
    rec = {k: np.full((world, n), 1e-3) for k in ("compute", "idle", "comm", "update")}
    rec["wall"] = np.full((world, n), wall_ms * 1e-3)
    rec["compile"] = np.zeros((world, n))
    return rec


def _run(iterations, epoch_at=None, index=1, rec=None):
    evals = [] if epoch_at is None else [dict(iteration=epoch_at, epoch=1.0, train_loss=1.0, test_loss=1.0,
                                              test_acc=0.5, seconds=0.0)]
    return Run(index, f"r{index}.h5", evals, rec or _rec(iterations), {}, {"algo": "ssgd"})


def test_the_wall_time_says_what_it_holds_and_the_compile_apart():
    rec = _rec(10)
    rec["compile"][0, 0] = 0.5
    rec["evaluate"] = np.zeros((2, 10))
    rec["evaluate"][0, -1] = 0.02
    text = summary([], rec, 0.6, None)
    line = next(x for x in text.splitlines() if x.startswith("  of which"))
    # 10 iterations of 5 ms, an evaluation of 20 ms: 0.53 s besides, the compile's
    assert line.startswith("  of which (rank 0) iterations 0.05 s, evaluations 0.02 s, and 0.53 s besides: "
                           "Numba compiling its kernels in the loop"), line
    # a warm run: no compile to name
    assert "Numba" not in summary([], _rec(10), 0.06, None)


def test_the_loss_windows_words_are_true():
    # an epoch of 23 iterations in a run of 460: the epoch
    assert smoothing_text([_run(460, epoch_at=23)]) == "moving mean over about an epoch (23 iterations)"
    # the same epoch in a run of 46 (2 epochs): a tenth of the run, and it says so
    text = smoothing_text([_run(46, epoch_at=23)])
    assert text == "moving mean over a tenth of the run (4 iterations; the run is shorter than 10 epochs)", text
    # a window of one iteration is no moving mean: never "(1 iterations)"
    text = smoothing_text([_run(12, epoch_at=6)])
    assert "1 iterations" not in text and text.startswith("no moving mean"), text


def test_the_old_legend_is_what_the_check_refuses():
    """The null: the legend of before for the 2-epoch run said 'about an epoch (4 iterations)'."""
    old = "moving mean over about an epoch (4 iterations; at most a tenth of the run)"
    assert smoothing_text([_run(46, epoch_at=23)]) != old


def test_a_mean_outside_its_quartiles_says_why():
    rec = _rec(40)
    rec["compute"][:, :3] = 0.2    # three iterations of 200 ms among 1 ms ones: the mean is past q3
    rec["wall"][:, :3] = 0.21
    text = comparison_text([_run(40, epoch_at=20, rec=rec), _run(40, epoch_at=20, index=2)])
    line = next(x for x in text.splitlines() if "a mean outside its quartiles" in x)
    assert "(run 1's compute, run 1's other)" in line and "run 2" not in line, line   # other: wall - compute - ...
    # the null: no long iterations, no such line
    assert "outside its quartiles" not in comparison_text([_run(40, epoch_at=20), _run(40, epoch_at=20, index=2)])
