"""A claim's verdict, computed from its numbers.

A claim has checks; each check compares one measured number (its mean over the seeds) with a
threshold that says the claim holds, and optionally a weaker one that says it partly holds:

* every check holds: **reproduced**;
* none holds or partly holds: **not reproduced**;
* anything in between: **partly reproduced**.

The sentence that says why names every check with its number and thresholds, so that a reader
can redo the verdict by hand.
"""

import dataclasses
import math
import operator

OPS = {">=": operator.ge, "<=": operator.le}
HOLDS, PARTLY, FAILS, MISSING = "holds", "partly", "fails", "missing"
REPRODUCED, PARTLY_REPRODUCED, NOT_REPRODUCED = "reproduced", "partly reproduced", "not reproduced"


@dataclasses.dataclass(frozen=True)
class Check:
    """``number op full`` holds; else ``number op partial`` (when given) partly holds."""

    key: str  # the number it tests (a key of the claim's numbers)
    op: str  # ">=" or "<="
    full: float
    partial: float = None
    what: str = ""  # what the number is, in words

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"check {self.key}: op must be one of {', '.join(OPS)}")
        if self.partial is not None and OPS[self.op](self.partial, self.full) and self.partial != self.full:
            raise ValueError(f"check {self.key}: the partial threshold must be weaker than the full one")

    def status(self, value):
        if value is None or not math.isfinite(value):
            return MISSING
        if OPS[self.op](value, self.full):
            return HOLDS
        if self.partial is not None and OPS[self.op](value, self.partial):
            return PARTLY
        return FAILS

    def sentence(self, value):
        shown = "n/a" if value is None or not math.isfinite(value) else f"{value:.4g}"
        weaker = f", partly {self.op} {self.partial:g}" if self.partial is not None else ""
        return f"{self.what or self.key} = {shown} ({self.status(value)}: needs {self.op} {self.full:g}{weaker})"


def verdict(checks, values):
    """(verdict, why, statuses) for ``checks`` against ``values`` ({key: mean over seeds})."""
    if not checks:
        raise ValueError("a claim needs at least one check")
    statuses = [c.status(values.get(c.key)) for c in checks]
    if all(s == HOLDS for s in statuses):
        word = REPRODUCED
    elif all(s in (FAILS, MISSING) for s in statuses):
        word = NOT_REPRODUCED
    else:
        word = PARTLY_REPRODUCED
    why = "; ".join(c.sentence(values.get(c.key)) for c in checks)
    return word, why, statuses


def spread(per_seed):
    """{key: {"mean", "min", "max", "seeds": [...]}} of a list of {key: number} (one per seed);
    non-finite values are left out of mean/min/max and kept (as None) in "seeds"."""
    keys = list(dict.fromkeys(k for d in per_seed for k in d))
    out = {}
    for k in keys:
        vals = [d.get(k) for d in per_seed]
        fin = [float(v) for v in vals if v is not None and math.isfinite(float(v))]
        out[k] = {"mean": sum(fin) / len(fin) if fin else None, "min": min(fin) if fin else None,
                  "max": max(fin) if fin else None,
                  "seeds": [float(v) if v is not None and math.isfinite(float(v)) else None for v in vals]}
    return out
