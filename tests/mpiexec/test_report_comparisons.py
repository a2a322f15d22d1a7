"""`refsgd report` comparing runs: what differs between the runs and nothing
else, on metrics files made by `refsgd train` in the world sessions of 2 and 4 ranks
(tests.helpers.world: once per module and world, in-process); the figures inspected as matplotlib
objects, the text as the command line prints it (refsgd.cli.main on rank 0: tests.helpers.in_process)."""

import importlib.util

import h5py
import numpy as np
import pytest
from tests.helpers import world
from tests.helpers.in_process import refsgd

HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
SHORT = ["--no-progress", "--seed", "1"]
#: the runs of the module's fixture are made once per worker that runs one of its tests: under
#: pytest-xdist (./run.sh test) one worker runs them all (tests/helpers/suite.py)
pytestmark = pytest.mark.xdist_group("report-comparisons")


def _made(tmp_path_factory, *runs):
    """Collective: each run (NAME, ARGS) of `refsgd train` on every rank of the world, its metrics
    file in a folder every rank shares; {NAME: the file, NAME:stdout: what rank 0 printed}."""
    d = world.shared_path(tmp_path_factory.mktemp("cmp"))
    made = {}
    for name, args in runs:
        out = str(d / f"{name}.h5")
        epochs = [] if "--epochs" in args else ["--epochs", "2"]
        lines = []
        world.train(*SHORT, *epochs, *args, "--out", out, log=lines.append)
        made[name] = out
        made[name + ":stdout"] = "\n".join(lines)
    return made


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(The world of 2 ranks) ssgd and dcs3gd (lr 0.1) over one emulated link, a spiking ssgd (lr
    1.5), and dcasgd and ps-sync with one worker."""
    return _made(tmp_path_factory,
                 ("ssgd", ["--link", "50,10"]),
                 ("dcs3gd", ["--algo", "dcs3gd", "--lr", "0.1", "--link", "50,10"]),
                 ("spike", ["--lr", "1.5", "--seed", "0", "--epochs", "3"]),  # 13 at iterations 3-4
                 ("dcasgd", ["--algo", "dcasgd"]),
                 ("ps-sync", ["--algo", "ps-sync"]))


@pytest.fixture(scope="module")
def daso(tmp_path_factory):
    """(The world of 4 ranks) DASO in 2 virtual nodes."""
    return _made(tmp_path_factory, ("daso", ["--algo", "daso", "--ranks-per-node", "2", "--epochs", "3"]))


def _rank0():
    """Whether this rank checks: rank 0 reads the files; every rank's report says how it went
    (tests.helpers.world.agree)."""
    return world.comm().Get_rank() == 0


def _figure(paths):
    from refsgd import report
    return report.figure([report.load(p, i + 1) for i, p in enumerate(paths)])


def _lines(fig):
    return {ln.get_gid(): ln for ax in fig.axes for ln in ax.get_lines() if ln.get_gid()}


def _legend_texts(fig):
    return [t.get_text() for leg in fig.legends for t in leg.get_texts()]


@pytest.mark.world(2)
@pytest.mark.skipif(not HAVE_MATPLOTLIB, reason="needs matplotlib")
def test_a_method_keeps_its_colour_whatever_the_order_of_the_files(runs):
    if not _rank0():
        return
    from matplotlib.colors import to_hex
    a = _lines(_figure([runs["ssgd"], runs["dcs3gd"]]))
    b = _lines(_figure([runs["dcs3gd"], runs["ssgd"]]))
    assert to_hex(a["train-smooth:1"].get_color()) == to_hex(b["train-smooth:2"].get_color())  # ssgd
    assert to_hex(a["train-smooth:2"].get_color()) == to_hex(b["train-smooth:1"].get_color())  # dcs3gd
    assert to_hex(a["train-smooth:1"].get_color()) != to_hex(a["train-smooth:2"].get_color())
    # a second run of the same method: a shade of its colour, not the same
    c = _lines(_figure([runs["ssgd"], runs["spike"]]))
    assert to_hex(c["train-smooth:1"].get_color()) != to_hex(c["train-smooth:2"].get_color())


@pytest.mark.world(2)
def test_the_table_names_the_settings_that_differ_and_the_link_once(runs, capfd):
    if not _rank0():
        return
    r = refsgd(capfd, "report", runs["ssgd"], runs["dcs3gd"])
    assert r.returncode == 0, r.stderr
    table = r.stdout[r.stdout.index("comparison of 2 runs"):].splitlines()
    assert "settings that differ" in table[1]
    assert "lr 0.05, momentum 0" in table[2] and "lr 0.1, momentum 0.9" in table[3], table
    assert "link" not in table[2] and "link" not in table[3]  # the same link: not a difference
    emulated = [line for line in table if "EMULATED" in line]
    assert len(emulated) == 1 and emulated[0].startswith("  every run: emulated link: latency 50 us"), table
    r = refsgd(capfd, "report", runs["ssgd"], runs["spike"])
    table = r.stdout[r.stdout.index("comparison of 2 runs"):].splitlines()
    assert "lr 0.05, link 50,10" in table[2] and "lr 1.5, link none" in table[3], table


@pytest.mark.world(2)
@pytest.mark.skipif(not HAVE_MATPLOTLIB, reason="needs matplotlib")
def test_the_legend_names_the_differences_and_the_title_the_link_once(runs):
    if not _rank0():
        return
    fig = _figure([runs["ssgd"], runs["dcs3gd"]])
    labels = _legend_texts(fig)
    assert "[1] ssgd: lr 0.05, momentum 0" in labels and "[2] dcs3gd: lr 0.1, momentum 0.9" in labels, labels
    title = fig._suptitle.get_text()
    assert title.count("EMULATED") == 1 and title.count("latency 50 us") == 1, title
    ticks = [t.get_text() for t in fig.axes[2].get_xticklabels()]
    assert ticks == ["[1]\nssgd", "[2]\ndcs3gd"]


@pytest.mark.world(2)
@pytest.mark.skipif(not HAVE_MATPLOTLIB, reason="needs matplotlib")
def test_every_learning_rate_shows_even_where_two_coincide(runs):
    if not _rank0():
        return
    fig = _figure([runs["ssgd"], runs["dcasgd"], runs["ps-sync"], runs["dcs3gd"]])
    lines = _lines(fig)
    lr = {k: lines[f"lr:{k}"] for k in (1, 2, 3, 4)}
    assert set(lr[1].get_ydata()) == set(lr[2].get_ydata()) == {0.05}  # 0.05 for 2 epochs (in epochs: the
    assert fig.axes[0].get_xlabel().startswith("epoch") or fig.axes[3].get_xlabel().startswith("epoch")  # x)
    # the three coinciding curves in dashes of their colours, each offset so that each shows
    dashes = [lr[k]._dash_pattern for k in (1, 2, 3)]
    assert len({d[0] for d in dashes}) == 3 and all(d[1] is not None for d in dashes), dashes
    assert lr[4].get_linestyle() == "-"  # dcs3gd's 0.1 alone


@pytest.mark.world(2)
@pytest.mark.skipif(not HAVE_MATPLOTLIB, reason="needs matplotlib")
def test_early_spikes_do_not_stretch_the_loss_axis(runs):
    if not _rank0():
        return
    with h5py.File(runs["spike"]) as f:
        highest = np.nanmax(f["iterations/loss"][...].mean(axis=0))
    fig = _figure([runs["ssgd"], runs["spike"]])
    ax_loss = fig.axes[0]
    bottom, top = ax_loss.get_ylim()
    assert highest > 8 and top < highest / 2, (highest, top)  # before: the axis reached the spike
    smooth = _lines(fig)["train-smooth:1"].get_ydata()
    assert smooth.max() < top  # the other run's curve entirely inside
    notes = [t.get_text() for t in ax_loss.texts if t.get_gid() == "loss-clipped"]
    assert notes == [f"axis cut at {top:.3g}: early losses reach {highest:.3g}"], notes
    # a run without spikes is not cut
    fig = _figure([runs["ssgd"], runs["dcs3gd"]])
    assert not [t for t in fig.axes[0].texts if t.get_gid() == "loss-clipped"]


@pytest.mark.world(4)
def test_daso_phases_are_printed_and_its_virtual_nodes_named(daso, capfd):
    if not _rank0():
        return
    runs = daso
    out = runs["daso:stdout"]
    assert "daso: 2 virtual nodes of 2 ranks" in out, out
    r = refsgd(capfd, "report", runs["daso"])
    assert r.returncode == 0, r.stderr
    assert "daso on 4 rank(s), 2 virtual nodes of 2 ranks (1 machine(s))" in r.stdout, r.stdout
    assert ("regime changes: iter 0 (epoch 0.00) warm-up; iter 11 (epoch 1.00) cycling: B 4, W 1; "
            "iter 22 (epoch 2.00) cool-down") in r.stdout, r.stdout


@pytest.mark.world(4)
@pytest.mark.skipif(not HAVE_MATPLOTLIB, reason="needs matplotlib")
def test_daso_phases_are_marked_in_the_figure(daso):
    if not _rank0():
        return
    runs = daso
    fig = _figure([runs["daso"]])
    gids = [ln.get_gid() for ax in fig.axes for ln in ax.get_lines() if (ln.get_gid() or "").startswith("event:")]
    assert sorted(set(gids)) == ["event:1:0", "event:1:11", "event:1:22"]
    texts = sorted(t.get_text().strip() for t in fig.axes[1].texts if (t.get_gid() or "").startswith("event-label"))
    assert texts == ["cool-down", "cycling: B 4, W 1", "warm-up"]


@pytest.mark.world(2)
def test_one_worker_makes_dcasgd_and_ps_sync_plain_sgd_and_says_so(runs, capfd):
    if not _rank0():
        return
    assert "one worker: no gradient is stale, the delay compensation is zero and dcasgd is plain SGD" \
        in runs["dcasgd:stdout"]
    assert "one worker: the server applies its one gradient, ps-sync is plain SGD" in runs["ps-sync:stdout"]
    r = refsgd(capfd, "report", runs["dcasgd"], runs["ps-sync"])
    assert r.returncode == 0, r.stderr
    assert "run 1: one worker: no gradient is stale" in r.stdout and "run 2: one worker: the server" in r.stdout
    with h5py.File(runs["dcasgd"]) as a, h5py.File(runs["ps-sync"]) as b:  # indeed the same trajectory
        np.testing.assert_array_equal(a["model"][...], b["model"][...])


@pytest.mark.in_process
def test_bench_scale_plot_ticks_do_not_overlap(tmp_path):
    pytest.importorskip("matplotlib")

    from refsgd.bench import scale
    link, local_link, ranks = scale.prepare("digits_mlp", "float32", "50,10", "5,100", 0.002, 4, "8,16,32,64")
    assert ranks == [8, 16, 32, 64]
    inputs = scale.measure_inputs("digits_mlp", 16, link, local_link, 4, 4, 0.002)
    fig = scale.plot(inputs, ranks, scale.predict(inputs, ranks), str(tmp_path / "s.png"))
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            boxes = [t.get_window_extent(renderer) for t in axis.get_ticklabels(which="both")
                     if t.get_visible() and t.get_text()]
            for i, a in enumerate(boxes):
                for b in boxes[i + 1:]:
                    assert not a.overlaps(b), (axis, a, b)
        assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "16", "32", "64"]
    assert (tmp_path / "s.png").stat().st_size > 10000
