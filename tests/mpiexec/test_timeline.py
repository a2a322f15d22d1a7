"""refsgd train --timeline and refsgd report --timeline / --timeline-plot: every method's run of 2
ranks, its spans checked against its iterations, its listing and the Trace Event Format. The runs
are in-process, in the world session of 2 ranks (tests.helpers.world; one rank: plain pytest's
singleton), and `refsgd report` in rank 0's process (tests.helpers.in_process): the subject is
what they record and export, not a process (it was two launches per test)."""

import json
import re
import sys

import numpy as np
import pytest

from tests.helpers import world
from tests.helpers.in_process import refsgd

from refsgd import registry
from refsgd import timeline as T
from tests.helpers.trace_nesting import nesting_faults

EPS = 1e-9

#: each method's options for a short run of 2 ranks whose window holds its communication (the
#: registry's Method.example)
METHODS = {m.name: list(m.example) for m in registry.METHODS.values()}

#: labels of the run's own bookkeeping (not a line of the method's listing)
#: a method's waits that its paper does not have: labelled without a listing number (its docstring's
#: "Labels" reading)
UNNUMBERED = {algo: ("wait for D_1..D_G", "wait for a gradient", "S_bar: MPI_Allreduce(staleness)")
              for algo in ("pp-asgd", "asgd")}
FRAMEWORK = ("iteration ", "loss check", "evaluation", "checkpoint", "modelled transfer", "complete the requests")


def _train(tmp_path, algo, *extra, window="3:4", iterations=10):
    """Collective: `refsgd train --timeline WINDOW --out` of ``algo`` on every rank of the world
    (``tmp_path``: the folder every rank shares, world.shared_path); the file and, on rank 0, its
    timeline (None on the other ranks)."""
    out = tmp_path / f"{algo}-{iterations}.h5"
    world.train("--algo", algo, *METHODS[algo], *extra, "--iterations", str(iterations), "--eval-every",
                "5it", "--no-progress", "--timeline", window, "--out", str(out), log=None)
    return out, T.read(str(out)) if world.comm().Get_rank() == 0 else None


def _rank0():
    """Whether this rank checks: rank 0 reads the files; every rank's report says how it went
    (tests.helpers.world.agree)."""
    return world.comm().Get_rank() == 0


def _listing(algo):
    from refsgd.algorithms import train_of
    return sys.modules[train_of(algo).__module__].__doc__


def _nest(starts, ends):
    """Whether the spans of one track nest: any two are disjoint or one holds the other."""
    order = np.lexsort((-ends, starts))
    stack = []
    for i in order:
        while stack and ends[stack[-1]] <= starts[i] + EPS:
            stack.pop()
        if stack and ends[i] > ends[stack[-1]] + EPS:
            return False
        stack.append(i)
    return True


@pytest.mark.world(2)
@pytest.mark.parametrize("algo", sorted(METHODS))
def test_the_spans_of_every_method_follow_its_iterations_and_listing(tmp_path, capfd, algo):
    tmp_path = world.shared_path(tmp_path)
    out, d = _train(tmp_path, algo)
    if not _rank0():
        return
    kinds, labels = np.array(d["kind_names"]), d["label_names"]
    assert d["window"] == [3, 4]
    # the window's iterations on every rank's loop thread, none outside it
    for r in range(2):
        its = sorted(int(i) for i in d["iteration"][(d["rank"] == r) & (kinds == "iteration")])
        assert its == [3, 4, 5, 6], (r, its)
    main = d["thread"] == 0
    for r in range(2):
        for th in set(d["thread"][d["rank"] == r]) - {T.FLIGHT, T.LINK}:
            sel = (d["rank"] == r) & (d["thread"] == th)
            assert _nest(d["start"][sel], d["end"][sel]), f"rank {r} thread {th}: spans overlap without nesting"
        # the loop thread's spans of iteration t lie within iteration t (those of the evaluation
        # and the checkpoint after it within these)
        between = np.zeros(len(kinds), bool)
        for j in np.flatnonzero((d["rank"] == r) & np.isin(kinds, ["evaluate", "checkpoint"])):
            between |= (d["rank"] == r) & (d["start"] >= d["start"][j] - EPS) & (d["end"] <= d["end"][j] + EPS)
        assert np.isin(kinds[between & main], ["evaluate", "checkpoint", "idle", "flight", "update"]).all()
        for i in np.flatnonzero((d["rank"] == r) & main & (kinds == "iteration")):
            t = d["iteration"][i]
            inner = (d["rank"] == r) & main & (d["iteration"] == t) & ~between & (kinds != "iteration")
            assert inner.any()
            assert (d["start"][inner] >= d["start"][i] - EPS).all() and (d["end"][inner] <= d["end"][i] + EPS).all()
    # every label is a line of the method's listing (or the run's bookkeeping)
    doc = _listing(algo)
    lines = set()
    for lab, kind in zip(labels, kinds):
        if lab.startswith(FRAMEWORK):
            continue
        line = T.line_of(lab)
        if line is None and lab in UNNUMBERED.get(algo, ()):
            continue
        assert line is not None, f"{algo}: span {kind} {lab!r} names no listing line"
        assert re.search(rf"(^|\s\s){line}\s", doc, re.M), f"{algo}: {line} ({lab!r}) is not in its listing"
        lines.add(line)
    # idle lies within communication in flight, on each rank
    for r in range(2):
        fl = (d["rank"] == r) & (kinds == "flight")
        for i in np.flatnonzero((d["rank"] == r) & (kinds == "idle")):
            inside = fl & (d["start"] <= d["start"][i] + EPS) & (d["end"] >= d["end"][i] - EPS)
            assert inside.any(), f"{algo} rank {r}: idle {labels[i]!r} is not within a span in flight"
    # what each method has: compute, communication with its bytes, its update
    assert "compute" in kinds and "flight" in kinds and "update" in kinds
    assert (d["bytes"][kinds == "flight"] > 0).any()
    if algo in ("pipe-sgd", "pp-asgd", "asgd", "ssgd-nag"):   # spans of the method's own threads
        assert max(len(names) for names in d["threads"]) > 1
        assert (d["thread"] > 0).any()
    if algo == "pipe-sgd":
        comm_thread = [lab for lab, k in zip(labels, kinds) if k == "comm"]
        assert comm_thread and all(lab.startswith("C4") for lab in comm_thread)
    if "--compress" in METHODS[algo]:
        assert "codec" in kinds
    # the Trace Event export
    js = tmp_path / f"{algo}.json"
    r = refsgd(capfd, "report", str(out), "--timeline", str(js))
    assert r.returncode == 0, r.stderr
    _check_trace_events(json.loads(js.read_text()), d)
    assert nesting_faults(js.read_text()) == [], f"{algo}: spans of a track overlap without nesting"


def _check_trace_events(doc, d):
    """The JSON Object Format of the Trace Event Format: traceEvents, complete events ("X") with
    name, ph, ts, dur (microseconds), pid, tid, metadata events naming processes and threads."""
    events = doc["traceEvents"]
    assert doc["displayTimeUnit"] in ("ms", "ns")
    x = [e for e in events if e["ph"] == "X"]
    assert len(x) == len(d["start"])
    for e in x:
        assert {"name", "ph", "ts", "dur", "pid", "tid", "cat", "args"} <= set(e)
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)) and e["dur"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and isinstance(e["name"], str)
        assert "iteration" in e["args"]
    meta = [e for e in events if e["ph"] == "M"]
    assert {e["pid"] for e in meta if e["name"] == "process_name"} == {0, 1}
    named = {(e["pid"], e["tid"]) for e in meta if e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in x} <= named
    # microseconds: the first iteration's duration against the file's seconds
    i = next(i for i, k in enumerate(d["kind_names"]) if k == "iteration")
    e = next(e for e in x if e["cat"] == "iteration" and e["name"] == d["label_names"][i] and e["pid"] == d["rank"][i])
    # (both ends on the export's grid of 1/8 us)
    assert e["dur"] == pytest.approx((d["end"][i] - d["start"][i]) * 1e6, abs=T.chrome.TICK_US)
    assert e["ts"] == pytest.approx(d["start"][i] * 1e6, abs=T.chrome.TICK_US / 2)


@pytest.mark.world(2)
def test_with_a_link_the_modelled_transfer_is_a_span_and_clocks_are_aligned(tmp_path):
    out, d = _train(world.shared_path(tmp_path), "ssgd", "--link", "200,0.1", window="2:3", iterations=6)
    if not _rank0():
        return
    kinds = np.array(d["kind_names"])
    link = kinds == "link"
    assert link.any() and (d["thread"][link] == T.LINK).all()
    # the modelled Ring-AllReduce of the gradient (refsgd.comm.link)
    from refsgd.comm.link import Link
    n = d["bytes"][kinds == "idle"].max()
    assert n > 0
    model = Link.parse("200,0.1").time(n, 2)
    durations = d["end"][link] - d["start"][link]
    assert np.isclose(durations, model, rtol=0.05).any(), (durations, model)
    for c in d["clock"]:
        assert c["error_s"] < 1e-3 and abs(c["drift_s"]) < 1e-3 and "method" in c
    assert d["link"] != "none"


@pytest.mark.world(2)
def test_timeline_plot_of_three_runs_and_its_refusals(tmp_path, capfd):
    tmp_path = world.shared_path(tmp_path)
    outs = [_train(tmp_path, algo, window="2:3", iterations=6)[0] for algo in ("ssgd", "laga-sgd", "pipe-sgd")]
    plain = tmp_path / "plain.h5"      # (of 2 ranks: it was of one, a file without a timeline either way)
    world.train("--iterations", "3", "--no-progress", "--out", str(plain), log=None)
    if not _rank0():
        return
    png = tmp_path / "t.png"
    r = refsgd(capfd, "report", *map(str, outs), "--timeline-plot", str(png))
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "clocks aligned to rank 0" in r.stdout
    # one file only for the JSON export; a file without a timeline says so
    r = refsgd(capfd, "report", *map(str, outs[:2]), "--timeline", str(tmp_path / "x.json"))
    assert r.returncode == 2 and "one metrics file" in r.stderr
    r = refsgd(capfd, "report", str(plain), "--timeline", str(tmp_path / "y.json"))
    assert r.returncode == 2 and "no timeline" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.in_process
def test_timeline_spec_and_its_errors(tmp_path, capfd):
    assert T.parse_spec(None) == (None, 5) and T.parse_spec("it100:5") == (100, 5)
    assert T.parse_spec("100:5") == (100, 5) and T.parse_spec("7") == (7, 5) and T.parse_spec(":2") == (None, 2)
    assert T.window(None, 100) == (3, 5) and T.window("98:5", 100) == (95, 5) and T.window(None, 2) == (0, 2)
    # after a --resume at 40: counted from the run's start, within the iterations this process runs
    assert T.window(None, 100, 40) == (43, 5) and T.window("10:5", 100, 40) == (40, 5)
    assert T.window("18:5", 50, 40) == (40, 5) and T.window("48:5", 50, 45) == (45, 5)
    for bad in ("x", "1:0", "-1:2", "1:2:3"):
        with pytest.raises(Exception, match="--timeline"):
            T.parse_spec(bad)
    r = refsgd(capfd, "train", "--iterations", "3", "--timeline", "x:1", "--out", str(tmp_path / "a.h5"))
    assert r.returncode == 2 and "START:COUNT" in r.stderr
    r = refsgd(capfd, "train", "--iterations", "3", "--timeline")
    assert r.returncode == 2 and "--timeline needs --out" in r.stderr


@pytest.mark.world(2)
def test_the_span_count_is_bounded_by_the_window_not_the_run(tmp_path):
    tmp_path = world.shared_path(tmp_path)
    _, short = _train(tmp_path, "dcs3gd", window="3:3", iterations=8)
    _, long = _train(tmp_path, "dcs3gd", window="3:3", iterations=40)
    if not _rank0():
        return
    assert abs(len(long["start"]) - len(short["start"])) <= 0.1 * len(short["start"])


@pytest.mark.world(2)
def test_recording_changes_nothing_of_the_trajectory(tmp_path):
    """The same seed with and without --timeline: the same final model, bit for bit."""
    import h5py
    tmp_path = world.shared_path(tmp_path)
    out, _ = _train(tmp_path, "laga-sgd", iterations=8)
    plain = tmp_path / "plain.h5"
    world.train("--algo", "laga-sgd", *METHODS["laga-sgd"], "--iterations", "8", "--eval-every", "5it",
                "--no-progress", "--out", str(plain), log=None)
    if not _rank0():
        return
    with h5py.File(out, "r") as a, h5py.File(plain, "r") as b:
        assert np.array_equal(a["model"][...], b["model"][...])
        assert np.array_equal(a["iterations/loss"][...], b["iterations/loss"][...])


@pytest.mark.world(1)
def test_without_timeline_the_file_has_none_and_older_files_read(tmp_path, capfd):
    import h5py
    out = tmp_path / "r.h5"
    world.train("--iterations", "3", "--no-progress", "--out", str(out), log=None)
    with h5py.File(out, "r") as f:
        assert f.attrs["format_version"] == 4 and "timeline" not in f
        f.close()
    with h5py.File(out, "a") as f:      # as version 3 wrote it
        f.attrs["format_version"] = 3
    r = refsgd(capfd, "report", str(out))
    assert r.returncode == 0 and "metrics format version 3" in r.stdout


@pytest.mark.world(2)
def test_a_resumed_run_records_its_window_after_the_resume(tmp_path):
    tmp_path = world.shared_path(tmp_path)
    ck, out = tmp_path / "ck", tmp_path / "r.h5"
    world.train("--iterations", "10", "--checkpoint", str(ck), "--checkpoint-every", "5", "--no-progress", log=None)
    world.train("--iterations", "20", "--resume", str(ck), "--checkpoint", str(ck), "--checkpoint-every", "5",
                "--timeline", "--out", str(out), "--no-progress", log=None)
    if not _rank0():
        return
    d = T.read(str(out))
    assert d["window"] == [13, 5]
    its = d["iteration"][np.array(d["kind_names"]) == "iteration"]
    assert sorted(set(its.tolist())) == [13, 14, 15, 16, 17]
    assert "checkpoint" in d["kind_names"]          # after iteration 14


def _synthetic(algo, c, u, x, n=4, dependency=2):
    """A one-rank timeline of n iterations with compute c, update u and the link's transfer x."""
    rows = []
    for t in range(n):
        s = t * (c + u + x)
        rows += [(s, s + c + u + x, "iteration", t), (s, s + c, "compute", t), (s + c, s + c + u, "update", t),
                 (s, s + x, "link", t)]
    return dict(config=dict(algo=algo, dependency=dependency), kinds=list(T.KINDS), kind_names=[r[2] for r in rows],
                start=np.array([r[0] for r in rows]), end=np.array([r[1] for r in rows]),
                rank=np.zeros(len(rows), int), thread=np.array([T.LINK if r[2] == "link" else 0 for r in rows]),
                iteration=np.array([r[3] for r in rows]))


@pytest.mark.parametrize("algo", ["ssgd", "laga-sgd", "dcs3gd", "pipe-sgd"])
@pytest.mark.parametrize("c, u, x", [(3.0, 0.5, 1.0), (1.0, 0.5, 6.0)])
def test_the_models_schedule_repeats_at_the_models_iteration_time(algo, c, u, x):
    """The timing model's schedule drawn under a run: its steady iteration is the model's
    (refsgd.bench.models): SSGD t_C + T_AR + t_up (Rigazzi eq. 13), LAGA and DC-S3GD
    max(t_C, T_AR) + t_up (LAGA eq. 6, Rigazzi eq. 14), Pipe-SGD max(t_up + t_C, T_AR) (its eq. 4:
    K = 2 sums in flight, one all-reduce at a time on the communication thread)."""
    rows = T.model_schedule(_synthetic(algo, c, u, x), 12)
    assert [name for name, _ in rows] == ["model: computation", "model: communication"]
    starts = [a for a, _, kind in rows[0][1] if kind == "compute"]
    period = {"ssgd": c + x + u, "laga-sgd": max(c, x) + u, "dcs3gd": max(c, x) + u, "pipe-sgd": max(u + c, x)}
    assert np.allclose(np.diff(starts)[-4:], period[algo]), np.diff(starts)
    # no schedule without the link's model, nor for a method the table leaves out
    d = _synthetic(algo, c, u, x)
    d["kind_names"] = ["iteration" if k == "link" else k for k in d["kind_names"]]
    assert T.model_schedule(d, 4) == []
    assert T.model_schedule(_synthetic("daso", c, u, x), 4) == []
