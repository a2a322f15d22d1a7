"""`refsgd report` comparing runs says what else than the method tells them apart: a warning
line naming the settings that differ and decide the comparison (momentum, the run's length, the
ranks ...), the quartiles of each timing column beside its mean, and a figure whose legend says
what the README says and whose in-flight hatch is no run's colour. The runs of one rank and
`refsgd report` run in this process (plain pytest's singleton COMM_WORLD: tests.helpers.world;
tests.helpers.in_process), not a process each."""

import importlib.util

import h5py
import numpy as np
import pytest

from tests.helpers import world
from tests.helpers.in_process import refsgd

pytestmark = pytest.mark.world(1)

HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
#: the runs of the module's fixture are made once per worker that runs one of its tests: under
#: pytest-xdist (./run.sh test) one worker runs them all (tests/helpers/suite.py)
pytestmark = pytest.mark.xdist_group("report-spread")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """ssgd (momentum 0, its default) twice, laga-sgdm (momentum 0.9, its default), one rank each."""
    d = tmp_path_factory.mktemp("spread")
    made = {}
    for name, args in (("ssgd", []), ("ssgd-again", ["--seed", "0"]), ("laga-sgdm", ["--algo", "laga-sgdm"]),
                       ("ssgd-longer", ["--iterations", "60"])):
        out = str(d / f"{name}.h5")
        length = [] if "--iterations" in args else ["--iterations", "40"]
        world.train("--no-progress", *length, *args, "--out", out, log=None)
        made[name] = out
    return made


def _table(stdout):
    return stdout[stdout.index("comparison of "):].splitlines()


def test_runs_that_differ_in_momentum_are_compared_with_a_warning(runs, capfd):
    r = refsgd(capfd, "report", runs["ssgd"], runs["laga-sgdm"])
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stdout.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, r.stdout
    assert "momentum (run 1: 0, run 2: 0.9)" in warnings[0], warnings
    assert "tau" not in warnings[0] and "seed" not in warnings[0]   # the same
    # a longer run: its length is named too
    r = refsgd(capfd, "report", runs["ssgd"], runs["ssgd-longer"])
    warnings = [line for line in r.stdout.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "iterations (run 1: 40, run 2: 60)" in warnings[0], r.stdout


def test_runs_that_differ_in_no_deciding_setting_give_no_warning(runs, capfd):
    r = refsgd(capfd, "report", runs["ssgd"], runs["ssgd-again"])
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stdout, r.stdout


def test_every_timing_column_shows_its_quartiles(runs, capfd):
    r = refsgd(capfd, "report", runs["ssgd"], runs["laga-sgdm"])
    table = _table(r.stdout)
    assert "[its quartiles over the iterations, 25%-75%]" in table[0]
    for row, path in ((table[2], runs["ssgd"]), (table[3], runs["laga-sgdm"])):
        with h5py.File(path) as f:
            rec = {k: f["iterations"][k][...] for k in ("compute", "idle", "update", "wall", "comm")}
        other = rec["wall"] - rec["compute"] - rec["idle"] - rec["update"]
        cells = row.split()
        for part, values in (("compute", rec["compute"]), ("idle", rec["idle"]), ("update", rec["update"]),
                             ("other", other), ("comm", rec["comm"])):
            q1, q3 = np.percentile(1e3 * values.mean(axis=0), (25, 75))
            mean = 1e3 * values.sum(axis=1).mean() / values.shape[1]
            assert f"{mean:.2f}" in cells and f"[{q1:.2f}-{q3:.2f}]" in cells, (part, row, q1, q3)


@pytest.mark.skipif(not HAVE_MATPLOTLIB, reason="needs matplotlib")
def test_the_figures_legend_says_an_epoch_and_the_hatch_is_no_runs_colour(runs):
    from matplotlib.colors import to_rgb
    from refsgd import report
    from refsgd.report.figure import METHOD_COLORS, SHADES
    fig = report.figure([report.load(p, i + 1) for i, p in enumerate((runs["ssgd"], runs["laga-sgdm"]))])
    texts = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    # 40 iterations, fewer than 10 epochs: the window is a tenth of the run, and the legend says so (issue 46)
    assert any("moving mean over a tenth of the run (4 iterations" in t for t in texts), texts
    hatched = [p for ax in fig.axes for p in ax.patches if p.get_gid() == "time-comm"]
    assert hatched
    edge = np.array(to_rgb(hatched[0].get_edgecolor()))
    for algo, colour in METHOD_COLORS.items():      # every method's colour and its first shades
        base = np.array(to_rgb(colour))
        for f in SHADES[:3]:
            shade = base * (1 + f) if f < 0 else base + (1 - base) * f
            assert np.linalg.norm(edge - shade) > 0.35, (algo, f, edge, shade)
