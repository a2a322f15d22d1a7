"""A timeline in the metrics file: gathered from every rank, written under ``/timeline``, read
back, and the text line on its clock alignment."""

import json

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.files import open_h5

from .recording import KINDS


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
            attrs = {k: json.loads(g.attrs[k]) for k in ("kinds", "labels", "threads", "window", "clock")}
        except (KeyError, TypeError, ValueError, OSError) as exc:
            raise RefsgdError(f"{path}: malformed /timeline ({exc})") from None
        d.update(attrs)
        d["truncated"] = bool(g.attrs.get("truncated", False))
        d["config"] = json.loads(f.attrs.get("config", "{}"))
        d["link"] = str(f.attrs.get("link", "none"))
    lengths = {len(d[k]) for k in ("start", "end", "rank", "thread", "kind", "label", "iteration", "bytes")}
    if len(lengths) != 1:
        raise RefsgdError(f"{path}: malformed /timeline: its columns differ in length")
    d["kind_names"] = [d["kinds"][k] for k in d["kind"]]
    d["label_names"] = [d["labels"][k] for k in d["label"]]
    return d


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
