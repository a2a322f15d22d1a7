"""refsgd report --timeline / --timeline-plot: the Trace Event export nests in every viewer's
arithmetic, and a damaged /timeline is refused with one message and nothing written. The run
and `refsgd report` run in this process (plain pytest's singleton COMM_WORLD: tests.helpers.world;
refsgd.cli.main: tests.helpers.in_process), not a process per report."""

import json
import shutil

import h5py
import numpy as np
import pytest

from tests.helpers import world
from tests.helpers.in_process import refsgd
from refsgd import timeline as T
from tests.helpers.trace_nesting import nesting_faults


def _one_track(starts, ends, kinds):
    """A read()-like timeline of one rank and thread with the spans given (seconds)."""
    n = len(starts)
    labels = [f"L{i % 7 + 1} span {i}" for i in range(n)]
    kind = np.array([T.KINDS.index(k) for k in kinds], dtype=np.int64)
    return dict(start=np.array(starts, dtype=np.float64), end=np.array(ends, dtype=np.float64),
                rank=np.zeros(n, np.int64), thread=np.zeros(n, np.int64), kind=kind, label=np.arange(n),
                iteration=np.full(n, 3, np.int64), bytes=np.zeros(n, np.int64), kinds=list(T.KINDS),
                labels=labels, threads=[["main"]], window=[3, 1], clock=[{}], truncated=False,
                config=dict(algo="laga-sgd"), link="none", kind_names=list(kinds), label_names=labels)


@pytest.mark.in_process
def test_spans_side_by_side_and_within_one_another_nest_in_every_viewers_arithmetic():
    """The laga-sgd case of the issue: layers and polls end to end within a pass, late in the
    run (3.5 s: microseconds with 7 digits before the point), their ends on one clock; rounding
    ts and dur apart made ts + dur overshoot the next span's ts."""
    rng = np.random.default_rng(5)
    t = 3.526415526 + np.cumsum(rng.uniform(0.5e-6, 60e-6, 400))       # end to end
    starts, ends, kinds = [t[0]], [t[-1]], ["compute"]                   # the pass holds them
    starts += list(t[:-1])
    ends += list(t[1:])
    kinds += ["compute" if i % 2 else "mpi" for i in range(len(t) - 1)]
    doc = T.chrome_trace(_one_track(starts, ends, kinds))
    text = json.dumps(doc)
    assert nesting_faults(text) == []
    # within the grid's half tick of the recorded times, in microseconds
    x = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(x) == len(starts)
    got = sorted((e["ts"], e["ts"] + e["dur"]) for e in x)
    want = sorted(zip(np.array(starts) * 1e6, np.array(ends) * 1e6))
    assert np.allclose(got, want, rtol=0, atol=T.chrome.TICK_US / 2 + 1e-9)


@pytest.mark.in_process
def test_the_nesting_check_finds_a_span_that_overshoots():
    """The check itself can fail: a sibling that ends a tick after the next one starts."""
    doc = {"traceEvents": [dict(ph="X", name="a", pid=0, tid=0, ts=10.0, dur=5.0),
                           dict(ph="X", name="b", pid=0, tid=0, ts=14.875, dur=1.0),
                           dict(ph="X", name="c", pid=0, tid=1, ts=172773.687, dur=3.855),
                           dict(ph="X", name="d", pid=0, tid=1, ts=172777.542, dur=1.0)]}
    faults = nesting_faults(json.dumps(doc))
    assert {(way, tid) for way, _, tid, _, _ in faults} == {("decimal", 0), ("double", 0), ("integer ns", 0),
                                                            ("double", 1)}


# ---------------------------------------------------------------------- a damaged /timeline
@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    out = tmp_path_factory.mktemp("tl") / "run.h5"
    world.train("--iterations", "6", "--eval-every", "100it", "--no-progress", "--timeline", "2:2", "--out", str(out),
                log=None)   # one rank: plain pytest's singleton
    return out


def _set(name, value):
    def damage(g):
        data = g[name][...]
        del g[name]
        g.create_dataset(name, data=value(data))
    return damage


def _attr(name, value):
    def damage(g):
        g.attrs[name] = value
    return damage


DAMAGES = {
    "label index out of range": _set("label", lambda v: np.where(np.arange(len(v)) == 0, 10_000, v)),
    "NaN span times": _set("start", lambda v: np.full_like(v, np.nan)),
    "thread index out of range": _set("thread", lambda v: np.full_like(v, 7)),
    "rank index out of range": _set("rank", lambda v: np.full_like(v, 3)),
    "kind index negative": _set("kind", lambda v: np.full_like(v, -1)),
    "window [5, -3]": _attr("window", "[5, -3]"),
    "end before start": _set("end", lambda v: v - 1.0),
    "float thread column": _set("thread", lambda v: v.astype(np.float64) + 0.5),
    "NaN clock error": _attr("clock", '[{"offset_s": 0.0, "error_s": NaN, "drift_s": 0.0, "method": "x"}]'),
    "window an integer array, not JSON text": _attr("window", np.array([5, 3])),
    "threads text that does not parse": _attr("threads", "[['main'"),
}


@pytest.mark.world(1)
@pytest.mark.parametrize("what", sorted(DAMAGES))
@pytest.mark.parametrize("output", ["--timeline", "--timeline-plot"])
def test_a_damaged_timeline_is_refused_with_one_line_and_nothing_written(tmp_path, capfd, recorded, what, output):
    bad = tmp_path / "bad.h5"
    shutil.copy(recorded, bad)
    with h5py.File(bad, "a") as f:
        DAMAGES[what](f["timeline"])
    out = tmp_path / ("t.json" if output == "--timeline" else "t.png")
    r = refsgd(capfd, "report", str(bad), output, str(out))
    assert r.returncode == 2, (what, r.returncode, r.stdout[-800:], r.stderr[-2000:])
    # one line of refsgd's (matplotlib may say once that it builds its font cache)
    lines = [line for line in r.stderr.strip().splitlines() if not line.startswith("Matplotlib is building")]
    assert len(lines) == 1 and lines[0].startswith("refsgd: error: ") and "malformed /timeline" in lines[0], lines
    if "JSON" in what or "parse" in what:  # the line names the attribute, in refsgd's words, not json's
        attribute = what.split()[0]
        assert f"attribute {attribute} is not JSON text" in lines[0] and "must be str" not in lines[0], lines
    assert not out.exists()


@pytest.mark.world(1)
def test_the_undamaged_file_exports_plain_json(tmp_path, capfd, recorded):
    out = tmp_path / "t.json"
    r = refsgd(capfd, "report", str(recorded), "--timeline", str(out))
    assert r.returncode == 0, r.stderr
    json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the trace"))
    assert nesting_faults(out.read_text()) == []
