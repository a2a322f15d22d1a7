"""One way to mark a method's arithmetic (issue 44): ``run.clock.update(label)`` times the enclosed work
as the iteration's *update* and draws it on --timeline; ``run.clock.span`` refuses the kind "update"
(it drew an update without timing it). So the update column counts the same work in every
method: SSGD-NAG's, PS-Sync's and PP-ASGD's sums of their D_L (or g_sum) alike. Before, PS-Sync's
S2 sum and PP-ASGD's L3 sum were drawn as updates (``run.span("update", ...)``, as it was) but left out of
the column, while SSGD-NAG's same sum (L10) was counted. The runs are in-process, in the world
session of their size (tests.helpers.world)."""

import re

import h5py
import numpy as np
import pytest

from refsgd import timeline as T
from tests.helpers import world

#: method -> (options of a short run whose iterations sum several gradients, ranks, the sum's label)
SUMS = {
    "ssgd-nag": (["--tau", "3"], 2, "L10 D_L <- D_1 + ... + D_G"),
    "ps-sync": ([], 4, "S2 g_sum <- g_1 + ... + g_{N-1}"),
    "pp-asgd": (["--threads", "3", "--staleness", "1"], 2, "L3 D_L <- D_1 + ... + D_G"),
}


@pytest.mark.parametrize("algo", [pytest.param(algo, marks=pytest.mark.world(n)) for algo, (_, n, _) in SUMS.items()])
def test_the_update_column_counts_the_sum_of_the_gradients(tmp_path, algo):
    """Rank 0's update spans of the window (its loop's thread) against its update column over the
    same iterations: the column holds every update span (ratio about 1; the spans' own overhead
    aside), the sum of the gradients among them. Before: PS-Sync's and PP-ASGD's column left the
    sum out (ratio about 0.5 here, the sum being a pass like the update's)."""
    options, n, label = SUMS[algo]
    out = world.shared_path(tmp_path) / f"{algo}.h5"
    world.train("--algo", algo, *options, "--model", "digits_mlp", "--iterations", "30", "--no-progress",
                "--timeline", "5:20", "--out", str(out), log=None)
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    d = T.read(str(out))
    main = d["threads"].index("main") if "main" in d["threads"] else 0
    on = (d["rank"] == 0) & (d["thread"] == main)
    kinds = np.array(d["kind_names"])
    labels = np.array(d["label_names"])
    sums = on & (labels == label)
    assert sums.sum() == 20 and set(kinds[sums]) == {"update"}, (sums.sum(), set(kinds[sums]))
    updates = on & (kinds == "update")
    drawn = float(np.sum(d["end"][updates] - d["start"][updates]))
    with h5py.File(out) as f:
        column = f["iterations/update"][0][5:25]
    ratio = float(column.sum()) / drawn
    assert 0.9 < ratio < 1.5, (ratio, float(column.sum()), drawn)


@pytest.mark.world(1)
def test_run_span_refuses_an_update():
    """The API itself (in plain pytest, whose COMM_WORLD is MPI's singleton: the Run's module starts
    MPI): a span of kind "update" is refused, naming the way to mark an update; another kind is
    drawn as before."""
    from refsgd.run.timing import Clock  # noqa: PLC0415 the Run's module starts MPI: at the test, not at collection

    class Off:
        class timeline:
            active = False
    assert "nullcontext" in str(Clock.span(Off, 'comm', 'x'))
    with pytest.raises(ValueError, match=re.escape("run.clock.span('update', ...) draws an update without timing it: "
                                                   "use run.clock.update(label)")):
        Clock.span(Off, 'update', 'L3 D_L <- D_1 + ... + D_G')
