"""The Gantt chart of `refsgd report --timeline-plot` reads on its own: each panel keys its
listing lines (the spans show only "L1", "C4"), names its link once, and the loop thread's time
in no span is drawn and, on a rank with threads, labelled with what the thread does there."""

import importlib.util

import numpy as np
import pytest

from refsgd import timeline as T

pytestmark = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib")


def _pipe_like(n=3, gap=0.011):
    """Two threads on one rank, Pipe-SGD's shape: per iteration L3 (idle), L7 (compute), then
    ``gap`` seconds in no span (the loop thread waits for the GIL); C4 on the second thread."""
    rows, t = [], 0.0
    for it in range(n):
        a = t
        rows += [(t, t + 0.004, "idle", "L3 wait until g^c_sum[t-K] is ready", 0),
                 (t + 0.004, t + 0.010, "compute", "L7 forward, L8 backward: g_local[t]", 0),
                 (t + 0.004, t + 0.004 + 0.0005, "compute", "L7 forward 0 dense", 0),
                 (t + 0.001, t + 0.015, "comm", "C4 AllReduce g^c_sum[t]", 1)]
        t += 0.010 + gap
        rows.append((a, t, "iteration", f"iteration {it}", 0))
    labels = sorted({r[3] for r in rows})
    kinds = [r[2] for r in rows]
    return dict(config=dict(algo="pipe-sgd"), kinds=list(T.KINDS), kind_names=kinds,
                kind=np.array([T.KINDS.index(k) for k in kinds]), labels=labels,
                label=np.array([labels.index(r[3]) for r in rows]), label_names=[r[3] for r in rows],
                start=np.array([r[0] for r in rows]), end=np.array([r[1] for r in rows]),
                rank=np.zeros(len(rows), np.int64), thread=np.array([r[4] for r in rows]),
                iteration=np.array([int(r[3].split()[-1]) if r[2] == "iteration" else 0 for r in rows]),
                bytes=np.zeros(len(rows), np.int64), threads=[["main", "pipe-sgd-comm-0"]], window=[0, n],
                clock=[{}], link="emulated link: latency 2000 us, 0.05 Gbit/s (Ring-AllReduce model)", truncated=False)


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_each_panel_keys_its_listing_lines_with_their_labels():
    d = _pipe_like()
    key = T.listing_key(d)
    # in the listing's order, the loop's lines first; a line's label the pass's, not a layer's
    assert list(key) == ["L3", "L7", "C4"]
    assert key["L7"] == "L7 forward, L8 backward: g_local[t]" and key["C4"] == "C4 AllReduce g^c_sum[t]"
    fig = T.gantt([d], ["pipe-sgd, 1 ranks: iterations 0..2"])
    title = fig.axes[0].get_title(loc="left")
    assert "listing lines: L3 wait until g^c_sum[t-K] is ready" in title, title
    assert "L7 forward, L8 backward: g_local[t]" in title and "C4 AllReduce g^c_sum[t]" in title, title
    assert {"L3", "L7", "C4"} <= set(_texts(fig))          # the spans still show the short form


def test_the_loop_threads_time_in_no_span_is_found_and_labelled():
    d = _pipe_like(n=3, gap=0.011)
    gaps = T.untimed(d, 0)
    assert len(gaps) == 3 and np.allclose([e - a for a, e in gaps], 0.011), gaps
    fig = T.gantt([d], ["pipe-sgd"])
    assert _texts(fig).count("waiting for the GIL") == 3, _texts(fig)
    legend = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert any("in no span" in t and "GIL" in t for t in legend), legend
    # one thread: the same time is drawn, but it is the run's bookkeeping, not a wait for the GIL
    one = _pipe_like(n=3, gap=0.011)
    keep = one["thread"] == 0
    for k in ("start", "end", "kind", "label", "rank", "thread", "iteration", "bytes"):
        one[k] = one[k][keep]
    one["kind_names"] = [k for k, ok in zip(one["kind_names"], keep) if ok]
    one["label_names"] = [k for k, ok in zip(one["label_names"], keep) if ok]
    one["threads"] = [["main"]]
    assert "waiting for the GIL" not in _texts(T.gantt([one], ["one thread"]))


def test_the_title_names_an_emulated_link_once():
    from types import SimpleNamespace
    from refsgd.report.command import _timeline_title
    d = _pipe_like()
    title = _timeline_title(SimpleNamespace(algo="pipe-sgd", world=2, path="p.h5"), d)
    assert "link emulated link" not in title and title.lower().count("emulated") == 1, title
    assert title.splitlines()[1].startswith("emulated link: latency 2000 us")
    d["link"] = "none"
    assert "\n" not in _timeline_title(SimpleNamespace(algo="pipe-sgd", world=2, path="p.h5"), d)


def test_time_between_iterations_in_no_span_is_grey_as_the_key_promises():
    """The key says grey for the loop thread's time in no span; a gap between two iterations
    (the loop's bookkeeping between them) is such time, and is drawn grey, not left white (the
    old chart coloured only the gaps within an iteration)."""
    from matplotlib.colors import to_rgb
    d = _pipe_like(n=3, gap=0.0)                  # iteration 0 ends at 10 ms, no gap within it
    d["start"] = np.where(d["start"] >= 0.010, d["start"] + 0.005, d["start"])    # 5 ms between 0 and 1
    d["end"] = np.where(d["start"] >= 0.015, d["end"] + 0.005, d["end"])
    assert T.untimed(d, 0) == [(0.010, 0.015)], T.untimed(d, 0)
    fig = T.gantt([d], ["pipe-sgd"])
    grey = [path.get_extents().bounds for c in fig.axes[0].collections
            if len(c.get_facecolor()) and np.allclose(c.get_facecolor()[0][:3], to_rgb(T.COLOURS["untimed"]))
            for path in c.get_paths()]
    assert any(np.allclose((x, w), (10.0, 5.0), atol=1e-6) for x, y, w, h in grey), grey
