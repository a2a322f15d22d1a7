"""A timeline in the metrics file: gathered from every rank, written under ``/timeline``, read
back, and the text line on its clock alignment."""

import json

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.files import open_h5

from .recording import KINDS, LINK


# ---------------------------------------------------------------------- file
def gather(comm, tl):
    """Collective: every rank's spans on rank 0 (None elsewhere, and when ``tl`` is None)."""
    every = comm.gather(None if tl is None else tl.local(), root=0)
    if comm.Get_rank() != 0 or tl is None:
        return None
    return dict(ranks=every, window=[tl.start, tl.count])


def write(f, gathered):
    """Write the gathered spans into the open metrics file ``f`` (group /timeline)."""
    labels, index = [], {}
    cols = {k: [] for k in ("start", "end", "rank", "thread", "kind", "label", "iteration", "bytes")}
    for r, d in enumerate(gathered["ranks"]):
        for lab in d["label"]:
            if lab not in index:
                index[lab] = len(labels)
                labels.append(lab)
        cols["label"].append(np.array([index[lab] for lab in d["label"]], dtype=np.int64))
        cols["rank"].append(np.full(len(d["start"]), r, dtype=np.int64))
        for k in ("start", "end", "thread", "kind", "iteration", "bytes"):
            cols[k].append(d[k])
    g = f.create_group("timeline")
    for k, v in cols.items():
        g.create_dataset(k, data=np.concatenate(v) if v else np.zeros(0))
    g.attrs["kinds"] = json.dumps(list(KINDS))
    g.attrs["labels"] = json.dumps(labels)
    g.attrs["threads"] = json.dumps([d["names"] for d in gathered["ranks"]])
    g.attrs["window"] = json.dumps(gathered["window"])
    g.attrs["clock"] = json.dumps([d["clock"] for d in gathered["ranks"]])
    g.attrs["truncated"] = any(d["truncated"] for d in gathered["ranks"])


def read(path):
    """The timeline of a metrics file: dict of arrays and attributes; RefsgdError if it has none."""
    with open_h5(path, "a metrics file from refsgd train --out") as f:
        if "timeline" not in f:
            raise RefsgdError(f"{path}: no timeline in this metrics file (record one with refsgd train --timeline "
                              "--out RUN.h5)")
        g = f["timeline"]
        try:
            d = {k: np.asarray(g[k][...]) for k in ("start", "end", "rank", "thread", "kind", "label",
                                                    "iteration", "bytes")}
            attrs = {k: _json_attr(g, k) for k in ("kinds", "labels", "threads", "window", "clock")}
        except (KeyError, TypeError, ValueError, OSError) as exc:
            raise RefsgdError(f"{path}: malformed /timeline ({exc})") from None
        d.update(attrs)
        d["truncated"] = bool(g.attrs.get("truncated", False))
        d["config"] = json.loads(f.attrs.get("config", "{}"))
        d["link"] = str(f.attrs.get("link", "none"))
    problem = _damage(d)
    if problem:
        raise RefsgdError(f"{path}: malformed /timeline: {problem}")
    d["kind_names"] = [d["kinds"][k] for k in d["kind"]]
    d["label_names"] = [d["labels"][k] for k in d["label"]]
    return d


def _json_attr(g, name):
    """The attribute `name` of /timeline, which refsgd writes as JSON text; ValueError naming it if
    it is missing or is anything else (an array, a number, text that does not parse)."""
    if name not in g.attrs:
        raise ValueError(f"its attribute {name} is missing")
    raw = g.attrs[name]
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if not isinstance(raw, str):
        raise ValueError(f"its attribute {name} is not JSON text but {type(raw).__name__} "
                         f"{np.asarray(raw).dtype}")
    try:
        return json.loads(raw)
    except ValueError:
        raise ValueError(f"its attribute {name} is not JSON text: {raw[:40]!r}") from None


def _damage(d):
    """What makes a /timeline as read unusable (its indices out of range, times not finite, a
    window that is no window), or None: checked before any of it is exported or drawn."""
    cols = ("start", "end", "rank", "thread", "kind", "label", "iteration", "bytes")
    if any(d[k].ndim != 1 for k in cols) or len({len(d[k]) for k in cols}) != 1:
        return "its columns differ in length or are not one-dimensional"
    for k in cols[2:]:
        if len(d[k]) and not np.issubdtype(d[k].dtype, np.integer):
            return f"its column {k} holds {d[k].dtype} values, not integers"
    for k in ("start", "end"):
        if len(d[k]) and not (np.issubdtype(d[k].dtype, np.number) and np.isfinite(d[k]).all()):
            return f"its column {k} holds values that are not finite times"
    for k in ("kinds", "labels"):
        if not (isinstance(d[k], list) and all(isinstance(x, str) for x in d[k])):
            return f"its attribute {k} is not a list of names"
    threads = d["threads"]
    if not (isinstance(threads, list) and all(isinstance(r, list) and all(isinstance(x, str) for x in r)
                                              for r in threads)):
        return "its attribute threads is not a list of each rank's thread names"
    w = d["window"]
    if not (isinstance(w, list) and len(w) == 2 and all(type(x) is int for x in w) and w[0] >= 0 and w[1] >= 1):
        return f"its window {w!r} is not [first iteration >= 0, count >= 1]"
    if not (isinstance(d["clock"], list) and all(
            isinstance(c, dict) and all(_finite(c.get(k, 0.0)) for k in ("offset_s", "error_s", "drift_s"))
            for c in d["clock"])):
        return "its attribute clock is not a list of each rank's alignment (finite seconds)"
    if (d["end"] < d["start"]).any():
        return "a span ends before it starts"
    for k, n in (("kind", len(d["kinds"])), ("label", len(d["labels"])), ("rank", len(threads))):
        bad = (d[k] < 0) | (d[k] >= n)
        if bad.any():
            return f"a span's {k} index {int(d[k][bad][0])} is outside 0..{n - 1}"
    own = np.array([len(r) for r in threads], dtype=np.int64)[d["rank"]] if len(threads) else d["rank"]
    bad = (d["thread"] < LINK) | (d["thread"] >= own)
    if bad.any():
        return (f"a span's thread index {int(d['thread'][bad][0])} is outside the threads of its rank "
                f"({LINK} .. {int(own[bad][0]) - 1})")
    return None


def _finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and bool(np.isfinite(x))


def clock_text(d, path):
    """One line: what the file's timeline holds and how well its clocks are aligned."""
    first, count = d["window"]
    errors = [c.get("error_s", 0.0) for c in d["clock"]]
    drifts = [abs(c.get("drift_s", 0.0)) for c in d["clock"]]
    how = d["clock"][-1].get("method", "?") if d["clock"] else "?"
    return (f"timeline of {path}: iterations {first}..{first + count - 1}, {len(d['start'])} spans on "
            f"{len(d['threads'])} rank(s); clocks aligned to rank 0 ({how}): error at most "
            f"{1e6 * max(errors, default=0):.1f} us, drift over the run at most {1e6 * max(drifts, default=0):.1f} us"
            + ("; TRUNCATED (too many spans)" if d["truncated"] else ""))
