"""The report's exports: CSV (one row per evaluation) and JSON (a run's attributes, evaluations
and per-iteration means), NaN and infinities written as null."""

import csv
import io
import json
import math

import numpy as np

from .runs import CSV_COLUMNS, EVAL_FIELDS, PARTS, _text, rank_nanmean


# ---------------------------------------------------------------------- exports
def _num(v):
    """A JSON-safe number: NaN and infinities become None."""
    v = float(v)
    return v if math.isfinite(v) else None


def _jsonable(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return v


def csv_text(runs):
    """The CSV export (see the module docstring)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in runs:
        for e in r.evals:
            w.writerow([r.index, r.path, r.algo, r.world, int(e["iteration"]),
                        *(repr(float(e.get(k, math.nan))) for k in EVAL_FIELDS[1:])])
    return buf.getvalue()


def run_json(r):
    """One run of the JSON export (see the module docstring)."""
    try:
        events = json.loads(_text(r.attrs.get("events", "[]")))
    except ValueError:
        events = None
    totals, ms = r.time_totals(), r.time_ms()
    def time(x):  # a part that a file of version 1-2 makes negative (PP-ASGD's other) is null
        return _num(x) if x >= 0 else None
    per_rank = {k: [time(x) for x in totals[k]] for k in PARTS}
    per_rank.update({f"{k}_ms_per_iteration": [time(x) for x in ms[k]] for k in PARTS})
    per_it = {"iteration": list(range(1, r.iterations + 1)),
              "train_loss": [_num(x) for x in rank_nanmean(r.rec["loss"])]}
    for k in ("wall", "compute", "idle", "comm"):
        per_it[f"{k}_ms"] = [_num(x) for x in 1e3 * r.rec[k].mean(axis=0)] if k in r.rec else None
    per_it["lr"] = None if r.lr is None else [_num(x) for x in r.lr]
    ipe = r.iterations_per_epoch
    return {
        "run": r.index, "file": r.path, "algo": r.algo, "ranks": r.world,
        "nodes": _jsonable(r.attrs.get("nodes")), "iterations": r.iterations,
        "iterations_per_epoch": _num(ipe) if ipe is not None else None,
        "metrics_format_version": _jsonable(r.format_version),
        "attrs": {k: _jsonable(v) for k, v in sorted(r.attrs.items()) if k not in ("config", "events")},
        "config": _jsonable(r.config), "events": _jsonable(events),
        "evals": [{k: (int(e[k]) if k == "iteration" else _num(e[k])) for k in EVAL_FIELDS if k in e}
                  for e in r.evals],
        "final": ({k: (int(r.evals[-1][k]) if k == "iteration" else _num(r.evals[-1][k]))
                   for k in EVAL_FIELDS if k in r.evals[-1]} if r.evals else None),
        "wall_seconds": _num(r.attrs.get("wall_seconds", math.nan)),
        "time_per_rank": per_rank,
        "time_mean_ms_per_iteration": {k: time(ms[k].mean()) if len(ms[k]) else None for k in PARTS},
        "per_iteration": per_it,
    }


def json_text(runs):
    """The JSON export (see the module docstring)."""
    doc = {"format": "refsgd-report", "format_version": 1, "runs": [run_json(r) for r in runs]}
    return _dumps(doc) + "\n"


def _dumps(v, pad=""):
    """JSON, indented, with each list of plain values on one line (per-iteration series stay
    one line each)."""
    inner = pad + " "
    if isinstance(v, dict) and v:
        items = [f"{inner}{json.dumps(str(k))}: {_dumps(x, inner)}" for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v):
        return "[\n" + ",\n".join(inner + _dumps(x, inner) for x in v) + "\n" + pad + "]"
    return json.dumps(v, allow_nan=False)
