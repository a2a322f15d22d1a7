"""One way to mark a method's arithmetic (issue 44): ``run.clock.update(label)`` times the enclosed work
as the iteration's *update* and draws it on --timeline; ``run.clock.span`` refuses the kind "update"
(it drew an update without timing it). So the update column counts the same work in every
method: SSGD-NAG's, PS-Sync's and PP-ASGD's sums of their D_L (or g_sum) alike. Before, PS-Sync's
S2 sum and PP-ASGD's L3 sum were drawn as updates (``run.span("update", ...)``, as it was) but left out of
the column, while SSGD-NAG's same sum (L10) was counted."""

import subprocess
import sys

import h5py
import numpy as np
import pytest

from refsgd import timeline as T
from tests.helpers.launch import cli, mpi_env, scaled

#: method -> (options of a short run whose iterations sum several gradients, ranks, the sum's label)
SUMS = {
    "ssgd-nag": (["--tau", "3"], 2, "L10 D_L <- D_1 + ... + D_G"),
    "ps-sync": ([], 4, "S2 g_sum <- g_1 + ... + g_{N-1}"),
    "pp-asgd": (["--threads", "3", "--staleness", "1"], 2, "L3 D_L <- D_1 + ... + D_G"),
}


@pytest.mark.parametrize("algo", SUMS)
def test_the_update_column_counts_the_sum_of_the_gradients(tmp_path, algo):
    """Rank 0's update spans of the window (its loop's thread) against its update column over the
    same iterations: the column holds every update span (ratio about 1; the spans' own overhead
    aside), the sum of the gradients among them. Before: PS-Sync's and PP-ASGD's column left the
    sum out (ratio about 0.5 here, the sum being a pass like the update's)."""
    options, n, label = SUMS[algo]
    out = tmp_path / f"{algo}.h5"
    r = cli("train", "--algo", algo, *options, "--model", "digits_mlp", "--iterations", "30", "--no-progress",
            "--timeline", "5:20", "--out", str(out), n=n, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
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


def test_run_span_refuses_an_update():
    """The API itself (in a process of its own: the Run's module starts MPI): a span of kind
    "update" is refused, naming the way to mark an update; another kind is drawn as before."""
    r = subprocess.run([sys.executable, "-c", "from refsgd.run.timing import Clock\n"
                        "class Off:\n    class timeline:\n        active = False\n"
                        "print(Clock.span(Off, 'comm', 'x'))\n"
                        "Clock.span(Off, 'update', 'L3 D_L <- D_1 + ... + D_G')"],
                       capture_output=True, text=True, timeout=scaled(120), env=mpi_env())
    assert r.returncode == 1 and "nullcontext" in r.stdout, r.stdout + r.stderr
    assert ("ValueError: run.clock.span('update', ...) draws an update without timing it: "
            "use run.clock.update(label)") in r.stderr
