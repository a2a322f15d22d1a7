"""What ``refsgd reproduce`` writes: a claim's markdown and figure (its JSON is the result
dictionary itself), and the index of every claim in a folder, one line per claim."""

import glob
import json
import os
import textwrap

from refsgd.errors import RefsgdError
from refsgd.report import save_figure
from refsgd.reproduce import claims as _claims
from refsgd.reproduce.measure import fmt

INDEX_TITLE = "# The papers' claims, reproduced"


def _value(v):
    return fmt(v) if isinstance(v, float) else str(v)


def variants(hp, records):
    """(rows, common): rows [(variant, ranks, the options it has beyond the shared set)] of a
    claim's runs, once each (the runs of every seed differ only in --seed); common, the options
    not in ``hp`` that every run but a calibration has with the same value (a link, --eval-every,
    set at run time)."""
    measured = [run.get("options", {}) for run in records if not run.get("variant", "").startswith("calibration")]
    common = {k: v for k, v in (measured[0] if measured else {}).items()
              if k not in hp and all(str(o.get(k)) == str(v) for o in measured)}
    out, seen = [], set()
    for run in records:
        own = {k: v for k, v in run.get("options", {}).items()
               if (k not in hp or str(hp[k]) != str(v)) and not (k in common and str(common[k]) == str(v))}
        row = (run.get("variant", run["command"]), run["ranks"],
               " ".join(f"{k}={v}" for k, v in own.items()) or "(the shared set only)")
        if row not in seen:
            seen.add(row)
            out.append(row)
    return out, common


def _split_tables(series):
    """A panel whose values are dictionaries (a time split) as a markdown table."""
    lines = []
    for panel, by_label in series.items():
        first = next(iter(by_label.values()))
        if not isinstance(first, dict):
            continue
        cols = list(first)
        lines += ["", f"{panel} (seed 1):", "", "| variant | " + " | ".join(cols) + " |",
                  "|---|" + "---:|" * len(cols)]
        lines += [f"| {label} | " + " | ".join(_value(parts[c]) for c in cols) + " |"
                  for label, parts in by_label.items()]
    return lines


def markdown(r):
    checks = {c["number"]: c for c in r["checks"]}
    lines = [f"# {r['name']}: {r['paper']}, {r['where']}", "",
             f"**Claim.** {r['claim']}", "", f"**The paper.** {r['paper_number']}", "",
             f"**Verdict: {r['verdict']}.** {r['why']}", ""]
    lines += [f"> {w}" for w in r["warnings"]] + ([""] if r["warnings"] else [])
    lines += [f"Run: `refsgd reproduce {r['name']}` with {r['ranks']} ranks, {r['seeds']} seed(s), data "
              f"{r['data']}" + (f", --link {r['link']}" if r["link"] else "") + (", --quick" if r["quick"] else ""),
              "", "Hyperparameters shared by every variant:", ""]
    lines += [f"- {k}: {v}" for k, v in r["hyperparameters"].items()]
    if r["same_for_all"]:
        lines += ["- set at run time, the same for every variant: "
                  + " ".join(f"{k}={v}" for k, v in r["same_for_all"].items())]
    lines += ["", f"How the paper chose them: {r['tuning']}.", "", "Each run's options beyond the shared set:", "",
              "| run | ranks | its own options |", "|---|---:|---|"]
    lines += [f"| {v} | {p} | {o} |" for v, p, o in r["variants"]]
    lines += ["", "| number | the paper | refsgd (mean) | min | max | check |", "|---|---|---:|---:|---:|---|"]
    for k, v in r["numbers"].items():
        c = checks.get(k)
        check = f"{c['status']} ({c['op']} {c['holds_at']:g})" if c else ""
        lines.append(f"| {k} | {r['paper_values'].get(k, '')} | {fmt(v['mean'])} | {fmt(v['min'])} | "
                     f"{fmt(v['max'])} | {check} |")
    lines += _split_tables(r["series"][0])
    if r.get("discussion"):
        lines += ["", f"**Why the numbers are what they are.** {r['discussion']}"]
    if r["at_scale"]:
        lines += ["", f"**At small scale.** A laptop cannot show this claim fully: {r['at_scale']}."]
    if r["scale_prediction"]:
        lines += ["", "`refsgd bench scale`'s prediction at the paper's scale (t_C of this model measured here) "
                      "beside the paper's number:", "", "| at the paper's scale | predicted | the paper |",
                  "|---|---:|---|"]
        lines += [f"| {what} | {_value(v)} | {paper} |" for what, v, paper in r["scale_prediction"]]
    lines += ["", f"Time: {r['seconds']:.0f} s for {r['seeds']} seed(s); the claim's budget is "
                  f"{r['budget_s']} s per seed on 2 idle cores.", "",
              "Runs (load averages 1/5/15 min before -> after):", ""]
    for run in r["runs"]:
        lines.append(f"- `{run['command']}` ({run['seconds']:.1f} s, load {run['load_before']} -> "
                     f"{run['load_after']}{', shared with an earlier run' if run.get('shared') else ''})")
    m = r["machine"]
    lines += ["", f"Machine: {m.get('machine')}; {m.get('OS')}; Python {m.get('Python')}; refsgd {m.get('refsgd')}; "
                  f"numpy/numba/mpi4py {m.get('numpy / numba / mpi4py')}; launcher {m.get('launcher')}. "
                  f"{r['date']}, {r['seconds']:.0f} s.", ""]
    return "\n".join(lines)


def figure(r, path):
    """Draw the claim's series as the paper draws them and write ``path``."""
    try:
        from matplotlib.figure import Figure  # noqa: PLC0415 matplotlib: the runs and the tables do without it
    except ImportError:
        raise RefsgdError("refsgd reproduce draws its figures with matplotlib: pip install matplotlib") from None

    claim = _claims.BY_NAME[r["name"]]
    panels = list(r["series"][0])
    fig = Figure(figsize=(max(7.5, 5.5 * len(panels)), 4.6))
    axes = fig.subplots(1, len(panels), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        labels = list(r["series"][0][panel])
        first = r["series"][0][panel][labels[0]]
        split = isinstance(first, dict)
        bars = split or claim.figure == "bars" or not isinstance(first[0], list)
        for i, label in enumerate(labels):
            color = f"C{i % 10}"
            if split:  # Figure 4's third column: the measured split stacked, the model beside it
                bottom = 0.0
                for j, part in enumerate(("compute", "codec", "update", "communication")):
                    v = sum(s[panel][label][part] for s in r["series"]) / len(r["series"])
                    ax.bar(i - 0.2, v, 0.4, bottom=bottom, color=f"C{j}", label=part if i == 0 else None)
                    bottom += v
                ax.bar(i + 0.2, r["series"][0][panel][label]["model"], 0.4,
                       color="grey", alpha=0.5, hatch="//", label="model (eq. 2 / eq. 4)" if i == 0 else None)
                continue
            if bars:
                vals = [s[panel][label] for s in r["series"]]
                meas = sum(v[0] for v in vals) / len(vals)
                ax.bar(i - 0.2, meas, 0.4, color=color, label="measured (mean over seeds)" if i == 0 else None)
                ax.bar(i + 0.2, vals[0][1], 0.4, color=color, alpha=0.35, hatch="//", label="model" if i == 0 else None)
                continue
            for k, s in enumerate(r["series"]):
                x, y = s[panel][label]
                ax.plot(x, y, color=color, alpha=1.0 if k == 0 else 0.35,
                        marker="o" if claim.figure == "lines" else None, label=label if k == 0 else None)
        if bars:
            ax.set_xticks(range(len(labels)), labels, rotation=30 if len(labels) > 3 else 0, fontsize="small")
        if claim.figure == "logx" and not bars:
            ax.set_xscale("log")
        ax.set_title(panel, fontsize="small")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small")
    title = f"{r['name']}: {r['paper']}, {r['where']} -- {r['verdict']}" + (" (QUICK smoke run)" if r["quick"] else "")
    fig.suptitle("\n".join(textwrap.wrap(title, 30 * max(3, len(panels)))), fontsize="small")
    fig.tight_layout()
    save_figure(fig, path)


def index_path(out_dir):
    """The index of a folder of results: ``D.md`` beside ``D`` (``--out-dir docs/results`` writes
    docs/results.md, whose links go into docs/results/); ``D/index.md`` where D is the current
    folder or the root (nothing beside it is the user's to write)."""
    d = os.path.normpath(os.path.abspath(out_dir))
    if d == os.getcwd() or os.path.dirname(d) == d:
        return os.path.join(d, "index.md")
    return d + ".md"


def check_index(out_dir, force):
    """An index that exists and that reproduce did not write is replaced only with --force."""
    path = index_path(out_dir)
    if os.path.exists(path) and not force:
        with open(path, encoding="utf-8", errors="replace") as f:
            if f.readline().rstrip("\n") != INDEX_TITLE:
                raise RefsgdError(f"--out-dir: {path} exists and is not an index that refsgd reproduce wrote; "
                                  "move it or give --force to replace it")


def index_line(r, folder):
    """A claim's row; ``folder`` is where its page is, relative to the index."""
    checks = {c["number"]: c for c in r["checks"]}
    ours = "; ".join(f"{k} {fmt(r['numbers'][k]['mean'])} [{fmt(r['numbers'][k]['min'])}, "
                     f"{fmt(r['numbers'][k]['max'])}]" for k in checks if k in r["numbers"])
    runs = f"{r['seeds']}" + (" quick" if r["quick"] else "")
    return f"| [{r['name']}]({_link(folder, r['name'])}) | {r['paper_number']} | {ours} | {r['verdict']} | {runs} |"


def _link(folder, name):
    return f"{name}.md" if folder == "." else f"{folder}/{name}.md"


def index_text(out_dir):
    """The index of the claims whose JSON is in ``out_dir``: a row per claim of --list, in its
    order ("not run yet" where the folder has none)."""
    found = {}
    for path in glob.glob(os.path.join(out_dir, "*.json")):
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(r, dict) and r.get("name") in _claims.BY_NAME:
            found[r["name"]] = r
    folder = os.path.relpath(os.path.abspath(out_dir), os.path.dirname(index_path(out_dir)))
    shown = os.path.normpath(out_dir)
    results = list(found.values())
    head = [INDEX_TITLE, "",
            f"Written by `refsgd reproduce all --out-dir {shown}` (or NAME for one claim; each run rewrites this "
            f"index from {os.path.join(folder, '*.json')}). Ours: each checked number, mean [min, max] over the "
            "seeds; the claim's "
            "page gives every number, the shared hyperparameters, the runs and the machine.", ""]
    busy = [c.name for c in _claims.CLAIMS if c.name in found
            and any(w.startswith("the machine is busy") for w in found[c.name]["warnings"])]
    notes = sorted({w for r in results for w in r["warnings"] if not w.startswith("the machine is busy")})
    if busy:
        notes.append(f"the machine was busy (load average at least its cores) before {', '.join(busy)}: their "
                     "timing numbers measure that load as much as the methods")
    head += [f"> {w}" for w in notes] + ([""] if notes else [])
    if not results:
        head += [f"No claim has been run into {shown} yet: every row below is the paper's number alone.", ""]
    head += ["| claim | the paper | refsgd | verdict | seeds |", "|---|---|---|---|---|"]
    rows = [index_line(found[c.name], folder) if c.name in found else
            f"| [{c.name}]({_link(folder, c.name)}) | {c.paper_number} | not run yet | - | 0 |" for c in _claims.CLAIMS]
    return "\n".join(head + rows) + "\n"
