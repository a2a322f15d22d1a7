"""`refsgd report`: the text, the figure (inspected as matplotlib objects), the CSV / JSON exports,
and the refusals, on small metrics files made by the real `refsgd train` (the run of 3 ranks
launched under mpiexec, once for the module; the run of one in this process). `refsgd report`
runs in this process (tests.helpers.in_process): its exit code and output are refsgd.cli.main's,
as under `python -m refsgd`, without a process per command."""

import csv
import importlib.util
import json
import os
import shutil
import warnings

import h5py
import numpy as np
import pytest

from tests.helpers import world
from tests.helpers.in_process import refsgd
from tests.helpers.launch import cli

HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
#: the runs of the module's fixture are made once per worker that runs one of its tests: under
#: pytest-xdist (./run.sh test) one worker runs them all (tests/helpers/suite.py)
pytestmark = pytest.mark.xdist_group("report")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """ssgd on one process (30 iterations) and dcasgd on 3 ranks (rank 0 the server, whose losses
    are NaN; 20 iterations)."""
    d = tmp_path_factory.mktemp("metrics")
    s, dc = str(d / "ssgd.h5"), str(d / "dcasgd.h5")
    world.train("--iterations", "30", "--out", s, "--no-progress", log=None)   # plain pytest's singleton
    r = cli("train", "--algo", "dcasgd", "--iterations", "20", "--out", dc, "--no-progress", n=3)
    assert r.returncode == 0, r.stderr
    return {"ssgd": s, "dcasgd": dc}


def h5_evals(path):
    with h5py.File(path, "r") as f:
        return {k: f["evals"][k][...] for k in f["evals"]}


def one_error_line(r, text):
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("refsgd: error:") == 1, r.stderr
    assert text in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def no_temporary_files(folder):
    assert not [n for n in os.listdir(folder) if n.endswith(".tmp")]


V2_ATTRS = ("format", "format_version", "model", "model_spec", "layout", "dataset", "dataset_sha256",
            "threads_per_rank")


def make_v1(src, dst):
    """A copy of ``src`` as metrics format version 1 wrote it (no /lr, none of the new attributes)."""
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        if "lr" in f:
            del f["lr"]
        for k in V2_ATTRS:
            if k in f.attrs:
                del f.attrs[k]
    return dst


def make_v2(src, dst, lr=None):
    """A copy of ``src`` with what metrics format version 2 adds, with values of our own."""
    make_v1(src, dst)
    with h5py.File(dst, "r+") as f:
        t = f["iterations/wall"].shape[1]
        f.create_dataset("lr", data=np.linspace(0.01, 0.05, t) if lr is None else lr)
        f.attrs.update({"format": "refsgd-metrics", "format_version": 2, "model": "digits_mlp",
                        "model_spec": "input = [64]\nclasses = 10", "layout": "flat", "dataset": "digits",
                        "dataset_sha256": "0123abcd" * 8, "threads_per_rank": 1})
    return dst


# ---------------------------------------------------------------------- helpers
def test_rank_nanmean_ignores_nan_ranks_without_warnings():
    from refsgd.report import moving_mean, rank_nanmean
    a = np.array([[np.nan, np.nan, np.nan], [1.0, 2.0, np.nan], [3.0, np.nan, np.nan]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = rank_nanmean(a)
    np.testing.assert_array_equal(m[:2], [2.0, 2.0])
    assert np.isnan(m[2])
    np.testing.assert_allclose(moving_mean([1, 2, 3, 4, 5], 3), [1.5, 2, 3, 4, 4.5])
    np.testing.assert_array_equal(moving_mean([1.0, 5.0], 1), [1.0, 5.0])
    assert len(moving_mean([], 5)) == 0


# ---------------------------------------------------------------------- text
def test_text_of_one_and_of_several_files(files, capfd):
    s, d = files["ssgd"], files["dcasgd"]
    r = refsgd(capfd, "report", s)
    assert r.returncode == 0, r.stderr
    assert f"{s}: ssgd on 1 rank(s)" in r.stdout and "metrics format version " in r.stdout
    assert "final: " in r.stdout and "comparison" not in r.stdout
    v1 = make_v1(s, os.path.join(os.path.dirname(s), "v1.h5"))
    r = refsgd(capfd, "report", v1)
    assert r.returncode == 0, r.stderr
    assert "metrics format version 1" in r.stdout and "dataset:" not in r.stdout and "learning rate:" not in r.stdout
    r = refsgd(capfd, "report", s, d)
    assert r.returncode == 0, r.stderr
    assert r.stdout.index(f"{s}: ssgd") < r.stdout.index(f"{d}: dcasgd on 3 rank(s)") < r.stdout.index("comparison")
    table = r.stdout[r.stdout.index("comparison of 2 runs"):].splitlines()
    assert table[1].split()[:3] == ["run", "method", "ranks"]
    for row, path, algo, ranks in ((table[2], s, "ssgd", "1"), (table[3], d, "dcasgd", "3")):
        acc = h5_evals(path)["test_acc"][-1]
        cells = row.split()
        assert cells[1:4] == [algo, ranks, f"{100 * acc:.2f}%"] and cells[-1] == path


def test_version_2_files_show_their_attributes_and_lr(files, tmp_path, capfd):
    v2 = make_v2(files["ssgd"], str(tmp_path / "v2.h5"))
    r = refsgd(capfd, "report", v2)
    assert r.returncode == 0, r.stderr
    for text in ("metrics format version 2", "layout: flat", "dataset: digits", "dataset sha256: " + "0123abcd" * 8,
                 "threads per rank: 1", "model spec: input = [64] classes = 10", "learning rate: 0.01 at iteration 1"):
        assert text in r.stdout, text
    bad = make_v2(files["ssgd"], str(tmp_path / "bad.h5"), lr=np.zeros(3))
    one_error_line(refsgd(capfd, "report", bad), "/lr must be numbers of shape (30,)")


# ---------------------------------------------------------------------- figure
def _lines(fig):
    return {ln.get_gid(): ln for ax in fig.axes for ln in ax.get_lines() if ln.get_gid()}


def _bars(ax, gid):
    return [p for p in ax.patches if p.get_gid() == gid]


def _draw(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _legends_outside_axes(fig):
    renderer = _draw(fig)
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert legends
    for leg in legends:
        box = leg.get_window_extent(renderer)
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent(renderer)), (leg, ax)


def test_dcasgd_figure_has_a_finite_train_loss_comm_bars_and_an_epoch_axis(files):
    pytest.importorskip("matplotlib")
    from refsgd import report
    run = report.load(files["dcasgd"])
    with h5py.File(files["dcasgd"], "r") as f:
        loss = f["iterations/loss"][...]
        comm = f["iterations/comm"][...]
    assert np.isnan(loss[0]).all()  # the server computes no gradient
    fig = report.figure([run])
    lines = _lines(fig)
    raw, smooth = lines["train-raw:1"], lines["train-smooth:1"]
    assert len(raw.get_ydata()) == 20 and np.isfinite(raw.get_ydata()).all()
    np.testing.assert_allclose(raw.get_ydata(), loss[1:].mean(axis=0))
    np.testing.assert_array_equal(raw.get_xdata(), np.arange(1, 21))
    assert np.isfinite(smooth.get_ydata()).all() and np.ptp(smooth.get_ydata()) < np.ptp(raw.get_ydata())
    ev = h5_evals(files["dcasgd"])
    np.testing.assert_array_equal(lines["test-loss:1"].get_ydata(), ev["test_loss"])
    ax_loss, ax_acc, ax_time = fig.axes[:3]
    # comm in flight: one hatched bar per rank, mean ms per iteration
    bars = _bars(ax_time, "time-comm")
    assert len(bars) == 3 and all(b.get_hatch() for b in bars)
    np.testing.assert_allclose([b.get_height() for b in bars], 1e3 * comm.sum(axis=1) / 20)
    assert len(_bars(ax_time, "time-compute")) == 3 and "communication in flight" in ax_time.get_title()
    # the epoch axis: iterations per epoch = iteration / epoch of an evaluation
    sec = [c for c in ax_loss.child_axes if c.get_xlabel() == "epoch"]
    assert len(sec) == 1
    ipe = ev["iteration"][-1] / ev["epoch"][-1]
    _draw(fig)
    np.testing.assert_allclose(sec[0].get_xlim(), np.array(ax_loss.get_xlim()) / ipe)
    _legends_outside_axes(fig)


def test_several_files_share_one_figure_one_curve_per_run(files, tmp_path, capfd):
    pytest.importorskip("matplotlib")
    from refsgd import report
    v1, v2 = make_v1(files["ssgd"], str(tmp_path / "v1.h5")), make_v2(files["ssgd"], str(tmp_path / "v2.h5"))
    runs = [report.load(p, i + 1) for i, p in enumerate([v1, files["dcasgd"], v2])]
    fig = report.figure(runs)
    lines = _lines(fig)
    for k in (1, 2, 3):
        for kind in ("train-raw", "train-smooth", "test-loss", "test-acc"):
            assert f"{kind}:{k}" in lines
    assert sorted(g for g in lines if g.startswith("lr:")) == ["lr:2", "lr:3"]  # the version-1 file has no /lr
    np.testing.assert_allclose(lines["lr:3"].get_ydata(), np.linspace(0.01, 0.05, 30))
    # ssgd (1 worker) and dcasgd (2 workers) differ in iterations per epoch: drawn against epochs
    ax_loss, ax_acc, ax_time = fig.axes[:3]
    assert ax_acc.get_xlabel().startswith("epoch")
    ev = h5_evals(files["dcasgd"])
    np.testing.assert_allclose(lines["test-acc:2"].get_xdata(), ev["epoch"])
    np.testing.assert_allclose(lines["test-acc:2"].get_ydata(), 100 * ev["test_acc"])
    # the time split: one group per run, the mean over its ranks
    assert len(_bars(ax_time, "time-comm")) == 3 and len(_bars(ax_time, "time-idle")) == 3
    with h5py.File(files["dcasgd"], "r") as f:
        idle = f["iterations/idle"][...]
    assert _bars(ax_time, "time-idle")[1].get_height() == pytest.approx(1e3 * idle.sum(axis=1).mean() / 20)
    labels = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    # the method and what differs between the runs; the file where two would read alike
    for label in ("[1] ssgd: ranks 1, iterations 30 (v1.h5)", "[2] dcasgd: ranks 3, iterations 20",
                  "[3] ssgd: ranks 1, iterations 30 (v2.h5)"):
        assert label in labels, labels
    _legends_outside_axes(fig)
    png = tmp_path / "cmp.png"
    r = refsgd(capfd, "report", v1, files["dcasgd"], v2, "--plot", str(png))
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"plot written to {png}" in r.stdout
    no_temporary_files(tmp_path)


# ---------------------------------------------------------------------- exports
def test_csv_and_json_hold_the_files_numbers(files, tmp_path, capfd):
    s, d = files["ssgd"], files["dcasgd"]
    c, j = tmp_path / "e.csv", tmp_path / "e.json"
    r = refsgd(capfd, "report", s, d, "--csv", str(c), "--json", str(j))
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(c.open()))
    assert list(rows[0]) == ["run", "file", "algo", "ranks", "iteration", "epoch", "train_loss", "test_loss",
                             "test_acc", "seconds"]
    for k, (path, algo, ranks) in enumerate(((s, "ssgd", 1), (d, "dcasgd", 3)), start=1):
        mine = [row for row in rows if row["run"] == str(k)]
        ev = h5_evals(path)
        assert len(mine) == len(ev["iteration"]) > 0
        for i, row in enumerate(mine):
            assert row["file"] == path and row["algo"] == algo and row["ranks"] == str(ranks)
            assert int(row["iteration"]) == ev["iteration"][i]
            for col in ("epoch", "train_loss", "test_loss", "test_acc", "seconds"):
                assert float(row[col]) == ev[col][i], col  # full precision

    def no_nan(text):
        raise AssertionError(f"{text} in the JSON")
    doc = json.loads(j.read_text(), parse_constant=no_nan)
    assert doc["format"] == "refsgd-report" and [x["run"] for x in doc["runs"]] == [1, 2]
    for run, path in zip(doc["runs"], (s, d)):
        ev = h5_evals(path)
        with h5py.File(path, "r") as f:
            rec = {k: f["iterations"][k][...] for k in f["iterations"]}
            config = json.loads(f.attrs["config"])
            wall = float(f.attrs["wall_seconds"])
            lr = f["lr"][...].tolist() if "lr" in f else None
        assert run["file"] == path and run["config"] == config and run["wall_seconds"] == wall
        assert run["ranks"] == rec["wall"].shape[0] and run["iterations"] == rec["wall"].shape[1]
        assert run["attrs"]["world_size"] == rec["wall"].shape[0] and "config" not in run["attrs"]
        for col in ("iteration", "epoch", "train_loss", "test_loss", "test_acc", "seconds"):
            assert [e[col] for e in run["evals"]] == ev[col].tolist()
        assert run["final"] == run["evals"][-1]
        tp = run["time_per_rank"]
        assert tp["compute"] == rec["compute"].sum(axis=1).tolist()
        assert tp["comm"] == rec["comm"].sum(axis=1).tolist()
        assert tp["update"] == rec["update"].sum(axis=1).tolist() and rec["update"].sum() > 0
        np.testing.assert_allclose(tp["other"], (rec["wall"] - rec["compute"] - rec["idle"] - rec["update"]).sum(axis=1))
        assert run["time_mean_ms_per_iteration"]["idle"] == pytest.approx(
            1e3 * rec["idle"].sum(axis=1).mean() / rec["wall"].shape[1])
        per = run["per_iteration"]
        assert per["lr"] == lr and per["iteration"] == list(range(1, rec["wall"].shape[1] + 1))
        finite = ~np.isnan(rec["loss"])
        np.testing.assert_allclose(per["train_loss"], np.where(finite, rec["loss"], 0).sum(0) / finite.sum(0))
    assert doc["runs"][1]["attrs"]["link"] == "none"
    no_temporary_files(tmp_path)


# ---------------------------------------------------------------------- refusals and errors
def test_outputs_are_not_overwritten_without_force(files, tmp_path, capfd):
    s, d = files["ssgd"], files["dcasgd"]
    c = tmp_path / "e.csv"
    c.write_text("keep me\n")
    one_error_line(refsgd(capfd, "report", s, "--csv", str(c)), f"--csv {c}: the file exists")
    assert c.read_text() == "keep me\n"
    r = refsgd(capfd, "report", s, "--csv", str(c), "--force")
    assert r.returncode == 0, r.stderr
    assert c.read_text().startswith("run,file,algo")
    # an output that is an input, or another output; a format matplotlib cannot write
    before = open(d, "rb").read()
    one_error_line(refsgd(capfd, "report", s, d, "--json", d, "--force"), "may not replace an input")
    assert open(d, "rb").read() == before
    one_error_line(refsgd(capfd, "report", s, "--csv", str(tmp_path / "x"), "--json", str(tmp_path / "x")),
                   "may not replace an input or another output")
    if HAVE_MATPLOTLIB:
        one_error_line(refsgd(capfd, "report", s, "--plot", str(tmp_path / "x.nothing"), "--csv", str(tmp_path / "y.csv")),
                       "cannot write .nothing files")
    assert not (tmp_path / "y.csv").exists() and not (tmp_path / "x").exists()
    no_temporary_files(tmp_path)


def test_a_missing_or_malformed_file_is_one_line_and_writes_nothing(files, tmp_path, capfd):
    one_error_line(refsgd(capfd, "report", str(tmp_path / "missing.h5")), "missing.h5: no such file")
    text = tmp_path / "text.h5"
    text.write_text("not hdf5\n")
    one_error_line(refsgd(capfd, "report", str(text)), "not an HDF5 file")
    bad = tmp_path / "bad.h5"
    shutil.copy(files["ssgd"], bad)
    with h5py.File(bad, "r+") as f:
        del f["iterations/loss"]
    out = tmp_path / "out.csv"
    one_error_line(refsgd(capfd, "report", files["ssgd"], str(bad), "--csv", str(out)), "missing /iterations/loss")
    assert not out.exists()
    r = refsgd(capfd, "report")
    assert r.returncode == 2 and "FILE" in r.stderr


def test_metrics_report_is_still_importable(files):
    from refsgd import metrics
    assert f"{files['ssgd']}: ssgd on 1 rank(s)" in metrics.report(files["ssgd"])
