"""A viewer-independent check of a Trace Event Format file (refsgd report --timeline): on one
pid/tid, complete events ("X") must nest, the format's rule for them: a span starts at or after
the start of the span that holds it and ends at or before its end, and spans side by side do not
overlap. Checked in each arithmetic a viewer adds ``ts + dur`` in: the exact decimal value of
the JSON text, IEEE doubles (speedscope and chrome://tracing in JavaScript), and Perfetto's
integer nanoseconds (``llround(ts * 1000)`` + ``llround(dur * 1000)``)."""

import json
import math
from fractions import Fraction


def _faults(spans):
    """The (outer, inner) pairs of spans [(start, end, name)] of one track that overlap without
    nesting; [] when they nest."""
    out, stack = [], []
    for s in sorted(spans, key=lambda x: (x[0], -x[1])):
        while stack and stack[-1][1] <= s[0]:
            stack.pop()
        if stack and s[1] > stack[-1][1]:
            out.append((stack[-1], s))
        stack.append(s)
    return out


def nesting_faults(text):
    """The nesting faults of a Trace Event JSON text: [(arithmetic, pid, tid, outer, inner)]."""
    exact = json.loads(text, parse_float=Fraction, parse_int=Fraction)
    doubles = json.loads(text)
    found = []
    tracks = {}
    for e, f in zip(exact["traceEvents"], doubles["traceEvents"]):
        if e.get("ph") == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append((e, f))
    for (pid, tid), events in tracks.items():
        ways = {
            "decimal": [(e["ts"], e["ts"] + e["dur"], e["name"]) for e, _ in events],
            "double": [(f["ts"], f["ts"] + f["dur"], f["name"]) for _, f in events],
            "integer ns": [(_llround(f["ts"] * 1000), _llround(f["ts"] * 1000) + _llround(f["dur"] * 1000),
                            f["name"]) for _, f in events],
        }
        for way, spans in ways.items():
            found += [(way, int(pid), int(tid), outer, inner) for outer, inner in _faults(spans)]
    return found


def _llround(x):
    """C's llround: to the nearest integer, halves away from zero."""
    return int(math.copysign(math.floor(abs(x) + 0.5), x))
