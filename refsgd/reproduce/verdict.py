"""A claim's verdict, computed from every seed's numbers.

A claim has checks. A check is a **two-sided band**: the number it tests must lie within a
stated tolerance of a value given before the runs, the paper's (``source`` says which and where
the tolerance comes from) or a timing model's at the run's own regime (the number is then the
measurement over the model, and the band is around 1). Optionally a wider band says it partly
holds. A check is judged on **every seed**, never on the mean alone:

* every seed inside the band: **holds**;
* no seed inside the wider band (or the band, without one): **fails** (a seed whose number is
  missing, e.g. a run that diverged, is outside every band);
* anything in between: **partly**;
* **not testable here**: the check needs a regime this run does not have (its ``needs``
  condition on another number fails on every seed, e.g. PP-ASGD's staleness far from the
  paper's), or it is a timing check and a run of the claim had more processes than cores
  (time-slicing measures the machine, not the method).

A check is of one of three **kinds** (``kind``), kept apart in the verdict:

* **the paper's number** (:data:`PAPER`): the paper's headline, tested in the paper's regime or
  in one derived from the paper's own numbers through its own model (the page states the
  derivation); ``paper_value`` is the number, as the paper prints it;
* **model conformance** (:data:`MODEL`): the measurement against the paper's model at a stated
  regime (on the emulated link, which charges no CPU, this shows where the implementation puts
  its calls, not that the overlap happens). A paper's timing number measured on the emulated
  link is model conformance too (:func:`emulated`): the primary evidence for an overlap is
  scripts/cluster's real link, where the claim's ``-cluster`` twin tests the number;
* **baseline sanity** (:data:`SANITY`): a baseline against its model (SSGD on eq. 13): shown,
  never part of the verdict.

Every paper and model check states ``null``: the number when the method equals its baseline (no
overlap, no effect). A check whose band excludes its null has **power**; one whose band contains
it tests an equivalence (the paper's "keeps the accuracy"), which the null passes by construction,
so it can hold a verdict down but never carry one. The claim is

* **reproduced** when at least one powered paper check was tested and every tested check holds;
* **model conformance only** when no powered paper check was tested and every tested check holds
  (a distinct outcome: the paper's number was not tested);
* **not reproduced** when every tested powered check (the paper's where one was tested, else the
  model's) fails;
* **partly reproduced** in between;
* **not testable here** when no powered check is testable (or the claim says why it cannot run
  here at all: the data missing, the scale). A timing check is not testable when a run had more
  processes than cores or the machine was busy (load at or above its cores) when the runs began;
  a check whose number no seed measured (a result written before the check existed) is not
  testable either.

The sentence that says why names every check with each seed's number, both bounds and the
seeds that pass, so that a reader can redo the verdict by hand.
"""

import dataclasses
import math

HOLDS, PARTLY, FAILS, UNTESTABLE = "holds", "partly", "fails", "not testable here"
REPRODUCED, PARTLY_REPRODUCED, NOT_REPRODUCED = "reproduced", "partly reproduced", "not reproduced"
NOT_TESTABLE, MODEL_ONLY = "not testable here", "model conformance only"
OUTCOMES = (REPRODUCED, MODEL_ONLY, PARTLY_REPRODUCED, NOT_REPRODUCED, NOT_TESTABLE)
#: the kinds of check
PAPER, MODEL, SANITY = "the paper's number", "model conformance", "baseline sanity"
KINDS = (PAPER, MODEL, SANITY)


def _finite(v):
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


@dataclasses.dataclass(frozen=True)
class Check:
    """``lo <= number <= hi`` holds (per seed); ``partial`` = (lo, hi), wider, partly holds."""

    key: str  # the number it tests (a key of the claim's numbers)
    lo: float
    hi: float
    what: str  # what the number is, in words
    source: str  # where the band comes from: the paper's value (and where) or the model, and the tolerance
    partial: tuple = None
    timing: bool = False  # a timing check: never judged on oversubscribed runs
    needs: tuple = None  # (key, lo, hi): the regime a seed must have for the check to apply; else untestable
    needs_why: str = ""  # the regime in words (the paper's, and why the check needs it)
    #: the model value the number is measured against (a key of the numbers): where the regime makes
    #: it 0 or infinite, the ratio is unbounded whatever the method does, and the check is a defect
    model: str = None
    kind: str = MODEL  # PAPER, MODEL or SANITY (shown, never part of the verdict)
    #: the number when the method equals its baseline (no overlap, no effect): needed by PAPER and MODEL
    null: float = None
    paper_value: float = None  # PAPER: the paper's number, as it prints it (the band's centre)

    def __post_init__(self):
        if not (self.lo <= self.hi) or math.isinf(self.lo) or math.isinf(self.hi):
            raise ValueError(f"check {self.key}: a band needs two finite bounds, lo <= hi")
        if self.kind not in KINDS:
            raise ValueError(f"check {self.key}: kind must be one of {KINDS}")
        if self.kind != SANITY and not _finite(self.null):
            raise ValueError(f"check {self.key}: a {self.kind} check states its null (the number with no effect)")
        if self.kind == PAPER and not (_finite(self.paper_value) and self.lo <= self.paper_value <= self.hi):
            raise ValueError(f"check {self.key}: a paper check's band contains the paper's number")
        if self.partial is not None:
            plo, phi = self.partial
            if not (plo <= self.lo and self.hi <= phi):
                raise ValueError(f"check {self.key}: the partial band must contain the full one")

    def seed_status(self, value, regime=None):
        """One seed: HOLDS, PARTLY, FAILS, or UNTESTABLE (its regime is not the one the check needs)."""
        if self.needs is not None:
            _, nlo, nhi = self.needs
            if not (_finite(regime) and nlo <= regime <= nhi):
                return UNTESTABLE
        if not _finite(value):
            return FAILS
        if self.lo <= value <= self.hi:
            return HOLDS
        if self.partial is not None and self.partial[0] <= value <= self.partial[1]:
            return PARTLY
        return FAILS

    @property
    def powered(self):
        """Whether the band (the wider one too) excludes the null: the null cannot pass the check."""
        lo, hi = self.partial or (self.lo, self.hi)
        return self.kind != SANITY and not (lo <= self.null <= hi)

    def band(self):
        part = f", partly [{self.partial[0]:g}, {self.partial[1]:g}]" if self.partial else ""
        return f"[{self.lo:g}, {self.hi:g}]{part}"


def defects(checks, numbers):
    """The checks whose verdict the claim's own regime decides: a check against a model value that
    the regime makes 0 or infinite (e.g. eq. 6's idle for LAGA at T_comm <= tau T_comp)."""
    return [c.key for c in checks if c.model and c.model in numbers
            and not (_finite(numbers[c.model]) and numbers[c.model] > 0)]


def judge(check, per_seed, oversubscribed=False, busy=None):
    """(status, detail) of ``check`` on ``per_seed`` (a list of {key: number}, one per seed);
    ``busy``: why the machine was busy when the runs began (load at or above its cores), or None."""
    vals = [d.get(check.key) for d in per_seed]
    regimes = [d.get(check.needs[0]) for d in per_seed] if check.needs else [None] * len(per_seed)
    # a seed whose regime (e.g. a --link the user gave) makes the model value 0 tests nothing
    seeds = [UNTESTABLE if defects((check,), d) else check.seed_status(v, g)
             for v, g, d in zip(vals, regimes, per_seed)]
    shown = ", ".join("n/a" if not _finite(v) else f"{v:.4g}" for v in vals)
    detail = {"seeds": seeds, "values": [v if _finite(v) else None for v in vals],
              "passing": [i for i, s in enumerate(seeds) if s == HOLDS]}
    if check.timing and oversubscribed:
        detail["why"] = "a run had more processes than cores: its times measure time-slicing, not the method"
        return UNTESTABLE, detail
    if check.timing and busy is not None:
        detail["why"] = f"the machine was busy: {busy}"
        return UNTESTABLE, detail
    tested = [s for s in seeds if s != UNTESTABLE]
    if not per_seed:
        detail["why"] = "not run"
        return UNTESTABLE, detail
    if not any(check.key in d for d in per_seed):
        detail.update(seeds=[UNTESTABLE] * len(per_seed), passing=[],
                      why="not measured in this run (written before the check existed, or its regime not run)")
        return UNTESTABLE, detail
    if not tested and check.model and any(defects((check,), d) for d in per_seed):
        detail["why"] = f"the regime makes the model's value ({check.model}) 0: the ratio would be unbounded"
        return UNTESTABLE, detail
    if not tested:
        g = ", ".join("n/a" if not _finite(x) else f"{x:.4g}" for x in regimes)
        detail["why"] = f"needs {check.needs[0]} in [{check.needs[1]:g}, {check.needs[2]:g}] ({check.needs_why}); " \
                        f"measured {g}"
        return UNTESTABLE, detail
    if all(s == HOLDS for s in tested):
        status = HOLDS
    elif all(s == FAILS for s in tested):
        status = FAILS
    else:
        status = PARTLY
    detail["why"] = (f"{check.what} = {shown} per seed; band {check.band()} ({check.source}); "
                     f"seeds inside: {len(detail['passing'])} of {len(tested)}")
    return status, detail


def outcome(checks, statuses):
    """The claim's outcome from its checks' statuses (the module's docstring says how)."""
    counted = [(c, s) for c, s in zip(checks, statuses) if c.kind != SANITY and s != UNTESTABLE]
    paper = [s for c, s in counted if c.kind == PAPER and c.powered]
    model = [s for c, s in counted if c.kind == MODEL and c.powered]
    deciding = paper or model
    if not deciding:
        return NOT_TESTABLE
    if all(s == HOLDS for _, s in counted):
        return REPRODUCED if paper else MODEL_ONLY
    if all(s == FAILS for s in deciding):
        return NOT_REPRODUCED
    return PARTLY_REPRODUCED


def _kind(check):
    """The check's kind, and where its band holds the null, that it has no power of its own."""
    return check.kind + ("" if check.kind == SANITY or check.powered else
                         ", an equivalence: its band holds the null, so it cannot carry a verdict")


def rests_on(checks, statuses):
    """The powered paper checks that were tested, as "key (the paper's value)": what a verdict rests on."""
    return [f"{c.key} (the paper's {c.paper_value:g})" for c, s in zip(checks, statuses)
            if c.kind == PAPER and c.powered and s != UNTESTABLE]


def verdict(checks, per_seed, oversubscribed=False, untestable=None, busy=None):
    """(verdict, why, statuses, details) of ``checks`` on ``per_seed``; ``untestable`` (a reason)
    makes the whole claim not testable here; ``busy`` (the load, in words, where it was at or above
    the cores when the runs began) makes its timing checks not testable."""
    if not checks:
        raise ValueError("a claim needs at least one check")
    judged = [judge(c, per_seed, oversubscribed, busy) for c in checks]
    statuses = [s for s, _ in judged]
    details = [d for _, d in judged]
    if untestable:
        return NOT_TESTABLE, untestable, [UNTESTABLE] * len(checks), details
    word = outcome(checks, statuses)
    why = "; ".join(f"{c.key} [{_kind(c)}]: {s} ({d['why']})" for c, s, d in zip(checks, statuses, details))
    return word, why, statuses, details


def emulated(checks, twin):
    """``checks`` as judged on the emulated link: a paper's timing number there is model
    conformance (the link charges no CPU for a transfer, so every overlap runs in its best case),
    its source naming ``twin``, the real-link claim that tests the number itself. Accuracy checks
    and the others are unchanged."""
    return tuple(dataclasses.replace(c, kind=MODEL, source=f"{c.source}; on the emulated link (it charges no CPU): "
                                     f"model conformance, the paper's number itself is judged on the real link by "
                                     f"{twin}")
                 if c.kind == PAPER and c.timing else c for c in checks)


def near(key, value, tol, what, source, partial_tol=None, relative=False, **kw):
    """A band around ``value``: +-``tol`` (absolute) or, ``relative``, [value / (1 + tol), value x
    (1 + tol)]; ``partial_tol`` the wider one."""
    def bounds(t):
        return (value / (1 + t), value * (1 + t)) if relative else (value - t, value + t)
    if kw.get("kind") == PAPER:
        kw.setdefault("paper_value", value)
    return Check(key, *bounds(tol), what, source, partial=bounds(partial_tol) if partial_tol else None, **kw)


def spread(per_seed):
    """{key: {"mean", "min", "max", "seeds": [...]}} of a list of {key: number} (one per seed);
    non-finite values are left out of mean/min/max and kept (as None) in "seeds"."""
    keys = list(dict.fromkeys(k for d in per_seed for k in d))
    out = {}
    for k in keys:
        vals = [d.get(k) for d in per_seed]
        fin = [float(v) for v in vals if _finite(v)]
        out[k] = {"mean": sum(fin) / len(fin) if fin else None, "min": min(fin) if fin else None,
                  "max": max(fin) if fin else None,
                  "seeds": [float(v) if _finite(v) else None for v in vals]}
    return out
