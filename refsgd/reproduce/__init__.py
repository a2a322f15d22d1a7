"""``refsgd reproduce``: the papers' claims, run at small scale, with the paper's number beside
refsgd's and a verdict computed from the numbers.

``refsgd reproduce --list`` lists the claims (:mod:`refsgd.reproduce.claims`); ``refsgd reproduce
NAME`` (or ``all``) runs each claim's variants with one shared set of hyperparameters, once per
seed, as ``mpiexec -n P refsgd train ... --out F.h5`` (:mod:`refsgd.reproduce.runner`), and writes

* ``D/NAME.md``: the claim, the paper's number, the hyperparameters, every number (mean and
  min-max over the seeds, the paper's value beside it where it has one), the verdict and why
  (:mod:`refsgd.reproduce.verdict`), and, where a laptop cannot show the claim, why and
  ``refsgd bench scale``'s prediction at the paper's scale;
* ``D/NAME.json``: the same numbers (each seed's too), the commands, the versions, the machine,
  the load before and after each run;
* ``D/NAME.png``: the figure, drawn as the paper draws it (matplotlib).

and ``D.md`` beside the folder, the index of every claim whose JSON the folder holds: one line
per claim (the paper's number, ours, the verdict; :mod:`refsgd.reproduce.outputs`), so that
``--out-dir docs/results`` keeps docs/results.md up to date. Each claim has a budget (seconds per
seed on 2 idle cores, :attr:`measure.Claim.budget`) that ``--list`` shows and each output
compares with the time it took.
"""

import datetime
import difflib
import json
import os
import tempfile
import time

from refsgd import failure
from refsgd.bench import suite
from refsgd.errors import RefsgdError
from refsgd.files import check_folder, check_output, write_text
from refsgd.reproduce import claims as _claims
from refsgd.reproduce import outputs
from refsgd.reproduce.measure import fmt  # noqa: F401 -- what the markdown prints (the tests use it)
from refsgd.reproduce.runner import Runs, Setup, cores, load_average  # noqa: F401 -- Setup: the command line's
from refsgd.reproduce.verdict import spread, verdict

CLAIMS = _claims.CLAIMS


def list_text():
    lines = []
    for c in CLAIMS:
        lines += [f"{c.name}", f"    {c.paper}, {c.where}", f"    claim: {c.sentence}", f"    paper: {c.paper_number}"]
        lines.append(f"    hyperparameters: {c.tuning}")
        lines.append(f"    budget: {c.budget[1]} s per seed on 2 idle cores ({c.budget[0]} s with --quick)")
        if c.at_scale:
            lines.append("    (needs the paper's scale to show fully: the output says what holds at small scale)")
    lines.append(f"all: about {_claims.budget(False, 3) / 60:.0f} min at 3 seeds on 2 idle cores "
                 f"({_claims.budget(True, 1) / 60:.1f} min with --quick)")
    return "\n".join(lines)


def names(name):
    """The claims that ``name`` ("all" or a claim's name) runs; RefsgdError with the closest name."""
    if name == "all":
        return list(CLAIMS)
    if name in _claims.BY_NAME:
        return [_claims.BY_NAME[name]]
    close = difflib.get_close_matches(name, list(_claims.BY_NAME), 1)
    raise RefsgdError(f"no claim {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                      + "; `refsgd reproduce --list` lists them")


def warnings_for(setup, records=()):
    """What makes this run's numbers mean less than they say: more processes than cores (the
    setup's ranks, or a run's own, e.g. a parameter server's extra process), load, --quick."""
    out = []
    if setup.ranks > cores():
        out.append(f"{setup.ranks} ranks on {cores()} cores: the ranks share cores, so the timing claims "
                   "(iteration times, idle, speed-ups) are meaningless in this run; the accuracy claims hold")
    # the load when the command started (its own runs raise the load average for a minute after)
    load = setup.load_at_start if setup.load_at_start is not None else load_average()
    if load and load[0] >= cores():
        out.append(f"the machine is busy (1-minute load average {load[0]:g} on {cores()} cores) before this "
                   "reproduce starts: the timing claims measure that load as much as the methods")
    # (with more ranks than cores the first warning already covers every run)
    over = sorted({(r["variant"], r["ranks"]) for r in records if r["ranks"] > cores() >= setup.ranks})
    if over:
        out.append("more processes than cores in " + ", ".join(f"{v} ({p} processes)" for v, p in over)
                   + f" on {cores()} cores: its times include time-slicing (a server's busy-waiting MPI "
                   "takes a core), so its timing numbers are not the method's")
    if setup.quick:
        out.append("--quick: fewer epochs and iterations, one seed: a smoke test, not a result")
    return out


def run_claim(claim, setup, runs):
    """Run ``claim`` for every seed; the result dictionary the outputs are written from."""
    runs.start_claim()
    hp = claim.hyper(setup)
    per_seed, series = [], []
    t0 = time.perf_counter()
    for seed in range(setup.seeds):
        numbers, curves = claim.measure(runs, setup, hp, seed)
        per_seed.append(numbers)
        series.append(curves)
    numbers = spread(per_seed)
    means = {k: v["mean"] for k, v in numbers.items()}
    word, why, statuses = verdict(claim.checks, means)
    scale = None
    if claim.scale is not None:
        try:
            scale = [list(row) for row in claim.scale(setup, hp, means)]
        except RefsgdError as e:
            scale = [["not available", str(e), ""]]
    rows, common = outputs.variants(hp, runs.records)
    return {"name": claim.name, "paper": claim.paper, "where": claim.where, "claim": claim.sentence,
            "paper_number": claim.paper_number, "verdict": word, "why": why,
            "checks": [{"number": c.key, "what": c.what, "op": c.op, "holds_at": c.full, "partly_at": c.partial,
                        "status": s} for c, s in zip(claim.checks, statuses)],
            "hyperparameters": hp, "tuning": claim.tuning, "variants": rows, "same_for_all": common,
            "discussion": claim.discussion(hp, means) if claim.discussion else None,
            "budget_s": claim.budget[0 if setup.quick else 1],
            "ranks": setup.ranks, "seeds": setup.seeds, "quick": setup.quick,
            "data": setup.data or "embedded digits", "link": setup.link,
            "warnings": warnings_for(setup, runs.records), "at_scale": claim.at_scale, "scale_prediction": scale,
            "numbers": numbers, "paper_values": claim.paper_values, "series": series,
            "runs": runs.records, "seconds": round(time.perf_counter() - t0, 2),
            "machine": dict(suite.machine()), "load_at_end": load_average(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def reproduce(name, setup, out_dir, force=False, log=None):
    """Run the claims ``name`` names and write their outputs in ``out_dir``; returns the results."""
    if (failure.launcher_size() or 1) > 1:
        raise RefsgdError("reproduce launches its own mpiexec: run it without mpiexec")
    chosen = names(name)
    check_folder(out_dir, "--out-dir")
    if os.path.isdir(out_dir):  # a new folder holds nothing to replace
        for c in chosen:
            for ext in ("md", "json", "png"):
                check_output(os.path.join(out_dir, f"{c.name}.{ext}"), "--out-dir", force)
    outputs.check_index(out_dir, force)
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
            write_text(base + ".json", json.dumps(r, indent=1, default=float) + "\n", "the result")
            write_text(base + ".md", outputs.markdown(r), "the result")
            outputs.figure(r, base + ".png")
            say(f"{c.name}: {r['verdict']} ({r['seconds']:.0f} s; budget {r['budget_s'] * setup.seeds} s on 2 idle "
                f"cores): {base}.md")
            results.append(r)
            # after every claim, so that an interrupted `all` leaves an index of what it finished
            write_text(outputs.index_path(out_dir), outputs.index_text(out_dir), "the result")
    say(f"index: {outputs.index_path(out_dir)}")
    return results
