"""``refsgd reproduce``: the papers' claims, run at small scale, with the paper's number beside
refsgd's and a verdict computed from the numbers.

``refsgd reproduce --list`` lists the claims (:mod:`refsgd.reproduce.claims`); ``refsgd reproduce
NAME`` (or ``all``) runs each claim's variants with one shared set of hyperparameters, once per
seed, as ``mpiexec -n P refsgd train ... --out F.h5`` (:mod:`refsgd.reproduce.runner`), and writes

* ``D/NAME.md``: the claim, the paper quoted verbatim (where, about which network and data), the
  regime and where it comes from, what is ours, the hyperparameters, every number on every seed,
  the verdict and every check's two-sided band with the seeds inside it
  (:mod:`refsgd.reproduce.verdict`), and, where the claim needs the paper's scale, why and
  ``refsgd bench scale``'s prediction beside the paper's number;
* ``D/NAME.json``: the same numbers (each seed's too), the commands, the versions, the machine,
  the load before and after each run, the runs that diverged;
* ``D/NAME.png``: the figure, drawn as the paper draws it (matplotlib).

and ``D/index.md`` (and ``D.md`` beside the folder where that already is an index reproduce wrote,
so that ``--out-dir docs/results`` keeps docs/results.md up to date), one line per claim
(:mod:`refsgd.reproduce.outputs`). Each claim has a budget (seconds per seed on 2 idle cores at
one rank per core, :attr:`measure.Claim.budget`) that ``--list`` shows and each output compares
with the time it took.
"""

import datetime
import difflib
import json
import os
import re
import tempfile
import time

from refsgd import launchenv
from refsgd.bench import suite
from refsgd.errors import RefsgdError
from refsgd.files import check_folder, check_output
from refsgd.reproduce import claims as _claims
from refsgd.reproduce import outputs
from refsgd.reproduce.measure import fmt  # noqa: F401 -- what the markdown prints (the tests use it)
from refsgd.reproduce.runner import QUICK_ITERATIONS, Runs, Setup, cores, default_seeds, load_average  # noqa: F401 -- Setup: the command line's
from refsgd.reproduce.verdict import NOT_TESTABLE, spread, verdict

CLAIMS = _claims.CLAIMS


def list_text():
    lines = []
    for c in CLAIMS:
        lines += [f"{c.name}", f"    {c.paper}, {c.where}", f"    claim: {c.sentence}", f"    paper: {c.paper_number}"]
        lines.append(f"    regime: {c.regime}")
        lines.append(f"    hyperparameters: {c.tuning}")
        lines.append("    data: " + ("MNIST from `refsgd data download mnist` (or --data); without it: not testable here"
                                      if c.data else "any (default the embedded digits: a timing model)"))
        lines.append(f"    budget: {c.budget[1]} s per seed on 2 idle cores at one rank per core, "
                     f"{default_seeds(c, False)} seeds by default ({c.budget[0]} s with --quick)"
                     + (", in `all` where root is available" if c.requires else ""))
        if c.requires:
            lines.append(f"    needs: {c.requires}")
        elif c.untestable:
            lines.append("    not testable on one machine: the page says why and what it needs")
    real = ", ".join(c.name for c in _claims.REAL_LINK)
    lines.append(f"all: at most {_claims.budget(False) / 60:.0f} min at the default seeds on 2 idle cores at one rank per "
                 f"core ({_claims.budget(True, 1) / 60:.1f} min with --quick; the claims that need MNIST are "
                 f"not testable, and cost nothing, without it); every claim but {real} (the real link, root), which "
                 f"`all` runs too where root is available, at most {_claims.budget(False, real_link=True) / 60:.0f} "
                 "min then: on the real link the timing claims' paper numbers are tested, on the emulated one they "
                 "are model conformance")
    return "\n".join(lines)


def names(name):
    """The claims that ``name`` ("all" or a claim's name) runs; RefsgdError with the closest name."""
    if name == "all":
        return _claims.in_all()
    if name in _claims.BY_NAME:
        return [_claims.BY_NAME[name]]
    close = difflib.get_close_matches(name, list(_claims.BY_NAME), 1)
    raise RefsgdError(f"no claim {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                      + "; `refsgd reproduce --list` lists them")


def warnings_for(setup, records=(), timing=True):
    """What makes this run's numbers mean less than they say: more processes than cores (the
    setup's ranks, or a run's own, e.g. a parameter server's extra process), load (for a claim with
    timing checks: an accuracy claim does not measure time), --quick."""
    out = []
    if setup.ranks > cores():
        out.append(f"{setup.ranks} ranks on {cores()} cores: the ranks share cores, so the timing checks "
                   "(iteration times, idle, speed-ups) are not testable in this run; the accuracy checks hold")
    # the load when the command started (its own runs raise the load average for a minute after)
    load = setup.load_at_start if setup.load_at_start is not None else load_average()
    if timing and busy_load(load):
        out.append(f"the machine is busy (1-minute load average {load[0]:g} on {cores()} cores) before this "
                   "reproduce starts: its timing checks are not testable here (they would measure that load as "
                   "much as the methods)")
    # (with more ranks than cores the first warning already covers every run)
    over = sorted({(r["variant"], r["ranks"]) for r in records if r["ranks"] > cores() >= setup.ranks})
    if over:
        out.append("more processes than cores in " + ", ".join(f"{v} ({p} processes)" for v, p in over)
                   + f" on {cores()} cores: its times include time-slicing (a parameter server's busy-waiting "
                   "MPI takes a core; DASO's 2 nodes x 2 ranks), so the timing checks leave it out")
    if setup.quick:
        out.append(f"--quick: one seed, each run at most {QUICK_ITERATIONS} iterations: a smoke test, not a result")
    return out


def busy_load(load):
    """Why the machine was busy (a 1-minute load average at or above its cores), or None."""
    return f"load {load[0]:g} on {cores()} cores when the runs began" if load and load[0] >= cores() else None


def check_entries(checks, statuses, details):
    """Each check as the result dictionary (and the JSON) holds it."""
    return [{"number": c.key, "what": c.what, "lo": c.lo, "hi": c.hi, "partial": c.partial, "source": c.source,
             "timing": c.timing, "needs": c.needs, "kind": c.kind, "powered": c.powered, "null": c.null,
             "paper_value": c.paper_value, "status": st, **d} for c, st, d in zip(checks, statuses, details)]


def judged(claim, per_seed, quick, over, untestable, busy, records):
    """(word, why, checks) of ``claim`` on ``per_seed``: the verdict, its reasons and the checks'
    entries; the runs that diverged are named in the reasons."""
    # --quick runs a part of some sweeps (one ratio, one staleness, S = 27): the checks of the rest are left out
    checks = [c for c in claim.checks if not quick or any(c.key in d for d in per_seed)] or claim.checks
    word, why, statuses, details = verdict(checks, per_seed, oversubscribed=over, untestable=untestable, busy=busy)
    if word == NOT_TESTABLE and not untestable:
        why = ("no check with power against the null (the method equal to its baseline) could be tested here; "
               "each check's reason: " + why)
    diverged = [r for r in records if r.get("diverged")]
    if diverged:
        why += "; diverged (recorded, the other runs kept): " + "; ".join(
            f"{d['variant']} ({d['diverged']})" for d in diverged)
    return word, why, check_entries(checks, statuses, details)


def rejudge(r):
    """A result written by an earlier reproduce, judged again from its numbers by the claim's
    checks and this verdict code (no run): its verdict, reasons and checks replaced, the paper's
    quotes, number and the claim's derivation taken from the claim as it is now, the run's own
    regime kept."""
    claim = _claims.BY_NAME[r["name"]]
    seeds = max((len(v["seeds"]) for v in r["numbers"].values()), default=0)
    per_seed = [{k: v["seeds"][i] for k, v in r["numbers"].items() if i < len(v["seeds"])} for i in range(seeds)]
    if claim.from_series and len(r["series"]) == len(per_seed):  # numbers the curves alone give, where missing
        for numbers, series in zip(per_seed, r["series"]):
            for k, v in claim.from_series(series, r["hyperparameters"], numbers).items():
                numbers.setdefault(k, v)
    numbers = spread(per_seed)
    busy = next((re.search(r"load average ([0-9.]+) on (\d+) cores", w) for w in r["warnings"]
                 if w.startswith("the machine is busy")), None)
    busy = f"load {busy[1]} on {busy[2]} cores when the runs began" if busy else None
    word, why, checks = judged(claim, per_seed, r["quick"], r["oversubscribed"], r.get("untestable"), busy, r["runs"])
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return dict(r, verdict=word, why=why, checks=checks, numbers=numbers, claim=claim.sentence,
                paper_number=claim.paper_number,
                quotes=[list(q) for q in claim.quotes], paper_values=claim.paper_values,
                derivation=claim.derivation, untested=[list(u) for u in claim.untested], rejudged=date,
                warnings=[w.replace("the timing checks measure that load as much as the methods",
                                    "its timing checks are not testable here") for w in r["warnings"]])


def oversubscribed(setup, records):
    """Whether a run of the claim had more processes than cores (its timing checks are then not
    testable): the setup's ranks, or a run's own (a parameter server's extra process, DASO's 4)."""
    return setup.ranks > cores() or any(r["ranks"] > cores() for r in records if r.get("timed", True))


def run_claim(claim, setup, runs):
    """Run ``claim`` for every seed; the result dictionary the outputs are written from."""
    runs.start_claim()
    s = setup.for_claim(claim)
    runs.setup = s
    hp = claim.hyper(s)
    per_seed, series = [], []
    t0 = time.perf_counter()
    untestable = s.data_missing or (claim.untestable(s) if claim.untestable else None)
    if not untestable:
        for seed in range(s.seeds):
            numbers, curves = claim.measure(runs, s, hp, seed)
            per_seed.append(numbers)
            series.append(curves)
    numbers = spread(per_seed)
    means = {k: v["mean"] for k, v in numbers.items()}
    over = oversubscribed(s, runs.records)
    has_timing = any(c.timing for c in claim.checks) and bool(per_seed)
    busy = busy_load(s.load_at_start) if has_timing else None
    word, why, checks = judged(claim, per_seed, s.quick, over, untestable, busy, runs.records)
    diverged = [{"command": r["command"], "variant": r["variant"], "diverged": r["diverged"]}
                for r in runs.records if r.get("diverged")]
    scale = None
    if claim.scale is not None:
        try:
            scale = [list(row) for row in claim.scale(s, hp, means)]
        except RefsgdError as e:
            scale = [["not available", str(e), ""]]
    rows, common = outputs.variants(hp, runs.records)
    return {"name": claim.name, "paper": claim.paper, "where": claim.where, "claim": claim.sentence,
            "paper_number": claim.paper_number, "quotes": [list(q) for q in claim.quotes], "regime": claim.regime,
            "ours": claim.ours, "verdict": word, "why": why, "untestable": untestable, "diverged": diverged,
            "oversubscribed": over,
            "checks": checks, "derivation": claim.derivation, "untested": [list(u) for u in claim.untested],
            "hyperparameters": hp, "tuning": claim.tuning, "variants": rows, "same_for_all": common,
            "discussion": claim.discussion(hp, means) if claim.discussion and per_seed else None,
            "budget_s": claim.budget[0 if s.quick else 1],
            "ranks": s.ranks, "seeds": s.seeds, "quick": s.quick,
            "data": s.data or (f"{claim.data.upper()}, not here" if s.data_missing else "embedded digits"), "link": s.link,
            "warnings": warnings_for(s, runs.records, has_timing), "at_scale": claim.at_scale, "scale_prediction": scale,
            "numbers": numbers, "paper_values": claim.paper_values, "series": series,
            "runs": runs.records, "seconds": round(time.perf_counter() - t0, 2),
            "machine": dict(suite.machine()), "load_at_end": load_average(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def rejudge_folder(name, out_dir, force=False, log=None):
    """Judge again (:func:`rejudge`) the results of the claims ``name`` names in ``out_dir`` and
    rewrite their outputs and the index; a claim without a result there is left as it is."""
    say = log or (lambda line: None)
    found = [(c, os.path.join(out_dir, f"{c.name}.json")) for c in names(name)]
    found = [(c, p) for c, p in found if os.path.exists(p)]
    if not found:
        raise RefsgdError(f"--rejudge: no result of {name} in {out_dir} (NAME.json): run it first")
    for c, _ in found:
        for ext in ("md", "json", "png"):
            check_output(os.path.join(out_dir, f"{c.name}.{ext}"), "--out-dir", force)
    _claims.check_matplotlib()
    results = []
    for c, path in found:
        try:
            with open(path) as f:
                r = rejudge(json.load(f))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise RefsgdError(f"--rejudge: {path} is not a result that refsgd reproduce wrote ({e})") from None
        base = os.path.join(out_dir, c.name)
        outputs.write(base + ".json", json.dumps(r, indent=1, default=float) + "\n")
        outputs.write(base + ".md", outputs.markdown(r))
        outputs.figure(r, base + ".png")
        say(f"{c.name}: {r['verdict']} (re-judged): {base}.md")
        results.append(r)
    for path in outputs.index_paths(out_dir):
        outputs.write(path, outputs.index_text(out_dir, path))
    return results


def reproduce(name, setup, out_dir, force=False, log=None):
    """Run the claims ``name`` names and write their outputs in ``out_dir``; returns the results."""
    launchenv.one_process("reproduce (it launches its own mpiexec)")
    chosen = names(name)
    check_folder(out_dir, "--out-dir")
    if os.path.isdir(out_dir):  # a new folder holds nothing to replace
        for c in chosen:
            for ext in ("md", "json", "png"):
                check_output(os.path.join(out_dir, f"{c.name}.{ext}"), "--out-dir", force)
    outputs.check_index(out_dir, force)
    index = outputs.index_paths(out_dir)
    _claims.check_matplotlib()
    os.makedirs(out_dir, exist_ok=True)
    say = log or (lambda line: None)
    setup.load_at_start = load_average()
    for w in warnings_for(setup):
        say(f"warning: {w}")
    results = []
    with tempfile.TemporaryDirectory(prefix="refsgd-reproduce-") as work:
        setup.workdir, setup.log = work, say
        runs = Runs(setup)
        for c in chosen:
            say(f"{c.name}: {c.sentence}")
            r = run_claim(c, setup, runs)
            base = os.path.join(out_dir, c.name)
            outputs.write(base + ".json", json.dumps(r, indent=1, default=float) + "\n")
            outputs.write(base + ".md", outputs.markdown(r))
            outputs.figure(r, base + ".png")
            say(f"{c.name}: {r['verdict']} ({r['seconds']:.0f} s; budget {r['budget_s'] * r['seeds']} s on 2 idle "
                f"cores): {base}.md")
            results.append(r)
            # after every claim, so that an interrupted `all` leaves an index of what it finished
            for path in index:
                outputs.write(path, outputs.index_text(out_dir, path))
    say(f"index: {', '.join(index)}")
    return results
