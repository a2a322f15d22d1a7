"""The methods' pages of the docs (docs/_ext/refsgd_docs.py writes them): the methods table and
one page per method family, from the method registry (refsgd.registry.METHODS): the listing beside
the code, each train() once, the family's section of docs/algorithms.md, its timelines, its golden
files and its claims."""

import json
import shlex

import h5py

import refsgd_docs_io as docs_io
import refsgd_pictures
import refsgd_sidebyside
from refsgd.reproduce.claims import CLAIMS
from refsgd_docs_io import SphinxError, read, table, write
from refsgd_listings import MARK, docstring_listings, registry
from refsgd_markdown import relink, slug

def families(methods):
    """The methods grouped by their section of docs/algorithms.md, in the registry's order."""
    out = {}
    for m in methods.values():
        out.setdefault(m.section, []).append(m)
    return out


def golden_files():
    """Every golden file of tests/golden with its own attributes."""
    out = []
    for f in sorted(docs_io.GOLDEN.glob("*.h5")):
        with h5py.File(f, "r") as h:
            a = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in h.attrs.items()}
            states = sorted(h["state"].keys()) if "state" in h else []
        cfg = json.loads(a.get("config", "{}"))
        out.append(dict(file=f.name, method=a.get("method"), workers=int(a.get("world_size", 0)),
                        steps=int(a.get("steps", 0)), dtype=a.get("dtype"), model=a.get("model"),
                        dataset=a.get("dataset"), config=cfg, states=states, version=a.get("format_version")))
    return out


def golden_rows(files):
    """The golden files as a table: the file and its method, N workers x T steps, the arrays of
    /state, and the configuration (model, dtype, and every option the file records)."""
    rows = []
    for g in files:
        cfg = {k: v for k, v in g["config"].items()
               if k not in ("algo", "model", "dtype", "data", "workers", "steps") and v not in (None, False)}
        shown = f"{g['model']}, {g['dtype']}; " + ", ".join(f"{k}={v}" for k, v in sorted(cfg.items()))
        rows.append([f"`{g['file']}`<br>{g['method']}", f"{g['workers']}\u00a0x\u00a0{g['steps']}",   # no break
                     " ".join(f"`{s}`" for s in g["states"]), shown])
    return table(["file, method", "N x T", "/state", "configuration"], rows)


def claims(methods):
    """The claims of ``refsgd reproduce`` (refsgd.reproduce.claims): name -> (page, claim, verdict,
    the methods it trains). A claim run into docs/results has its JSON there (its runs name their
    methods, its verdict, its figure); one not run yet is matched to the methods of the paper it
    cites (refsgd.registry's Method.paper)."""
    out = {}
    for c in CLAIMS:
        f = docs_io.RESULTS / f"{c.name}.json"
        try:
            d = json.loads(read(f)) if f.exists() else {}
        except ValueError as e:
            raise SphinxError(f"{f}: not JSON ({e}); rerun refsgd reproduce {c.name} --out-dir docs/results") from None
        algos = {r.get("algo") for r in d.get("runs", [])} - {None}
        if not algos:
            algos = {m.name for m in methods.values() if m.paper and c.paper.startswith(m.paper)}
        out[c.name] = dict(page=f"results/{c.name}" if f.with_suffix(".md").exists() else None,
                           claim=c.sentence, verdict=d.get("verdict", ""), why=d.get("why") or "",
                           quick=bool(d.get("quick")), paper=c.paper, where=c.where,
                           number=c.paper_number, png=f.with_suffix(".png"), algos=algos)
    return out


def family_slug(section):
    return slug(section.split(",")[0].split(" and ")[0])


def _wrapped(argv, width=88):
    """A command line for a page: its options kept whole, continued with backslashes past ``width``."""
    words, line, out = [], [], []
    for a in argv:   # an option and its value stay together
        if words and not a.startswith("-") and words[-1].startswith("-") and " " not in words[-1]:
            words[-1] += " " + a
        else:
            words.append(a)
    for w in words:
        if line and len(" ".join(line + [w])) > width - 2:
            out.append(" ".join(line) + " \\")
            line = ["   "]
        line.append(w)
    return "\n".join(out + [" ".join(line)])


def _trains(ms):
    """train (``module:function``) -> the methods that run it: each loop shown once."""
    out = {}
    for m in ms:
        out.setdefault(m.train, []).append(m)
    return out


def method_pages(splits):
    methods = registry()
    fams = families(methods)
    alg = splits["algorithms.md"]
    goldens = golden_files()
    cl = claims(methods)
    pages = {}
    for section in fams:
        pages[section] = f"methods/{family_slug(section)}"
        alg.take(alg.find(section), pages[section], as_title=True)
    alg.pages[""] = "methods/index"
    for s in alg.sections:
        alg.pages.setdefault(slug(s.title), "methods/index")

    rows = []
    for section, ms in fams.items():
        for m in ms:
            rows.append([f"`{m.name}`", m.summary, m.paper, f"[{section}](/{pages[section]}.md)", m.lr_meaning])
    intro = alg.lines[1:alg.top()[0].start]
    extra = [s for s in alg.top() if s.title not in fams]
    index = ["# Methods", "",
             "One page per family of methods: the paper's listing beside the code, each listing line against "
             "the code lines that cite its number, the loop whole, the readings refsgd takes where the paper "
             "leaves room, the timeline of a short run, the golden files and the reproduced claims. "
             "Generated from the method registry "
             "(`refsgd/registry.py`) and docs/algorithms.md.", "",
             "```{toctree}", ":maxdepth: 1", ""] + [pages[s] .split("/")[1] for s in fams] + ["```", "",
             table(["`--algo`", "method", "paper", "listing", "`--lr` multiplies"], rows), "",
             "## About the listings", "", relink("\n".join(intro).strip(), "algorithms.md", splits)]
    for s in extra:
        index += ["", alg.take(s, "methods/index")]
    write(docs_io.OUT / "methods" / "index.md", "\n".join(index))

    for section, ms in fams.items():
        doc = pages[section]
        names = {m.name for m in ms}
        text = ["---", "html_theme.sidebar_secondary.remove: true", "---",   # a wide page: no right column
                f"# {section}", "",
                table(["`--algo`", "method", "paper, listing", "`--lr` multiplies"],
                      [[f"`{m.name}`", m.summary, f"{m.paper}, {m.listing[1]}", m.lr_meaning] for m in ms]), "",
                "## The listing beside the code", "",
                "Each numbered line of the paper's listing (left) and the lines of the method's module that "
                "cite its number (right), in a comment (`# L5: ...`, with the statement under it) or in the "
                "name of a timeline span (`\"L5 MPI_Wait\"`). The whole loop follows.", ""]
        sec = alg.find(section)
        others = [m.train.split(":") for m in methods.values() if m.section != section]

        def exclude(path, others=others):   # another family's loop in the same file is not this listing's code
            return {f for mod, f in others if mod.replace(".", "/") + ".py" == path}
        for tb in refsgd_sidebyside.family_tables(alg.lines, sec.start, sec.end, MARK, docstring_listings, docs_io.ROOT,
                                                  exclude):
            text += [tb, ""]   # raw HTML ends at a blank line
        text += ["", "## The code", ""]
        for train, same in _trains(ms).items():
            module, func = train.split(":")
            path = module.replace(".", "/") + ".py"
            text += [" and ".join(f"`{m.name}`" for m in same) + f": `{func}` in `{path}`"
                     + (" (one loop; the method's options choose its variant)" if len(same) > 1 else ""), "",
                     "```{literalinclude} /../" + path, f":pyobject: {func}", ":language: python",
                     ":lineno-match:", "```", ""]
        text += ["## The listing and its readings", "",
                "Each listing is its method's module docstring, what "
                + " and ".join(f"`help({mod})`" for mod in dict.fromkeys(m.train.split(":")[0] for m in ms))
                + " prints; the code above cites its line numbers (`L1`, `L2`, ...) in its comments. "
                "The readings and equations are docs/algorithms.md's.", "",
                relink(alg.take(alg.find(section), doc, as_title=True), "algorithms.md", splits), "",
                "## Timelines", "",
                "A short run of each method on 2 ranks (`refsgd train --timeline`, drawn by "
                "`refsgd report --timeline-plot`): every rank's and thread's spans, named by the listing's lines, "
                "over the rows of the method's timing model where it has one. How to read them: "
                "[the timeline](/guide/timeline.md). The docs' build (`./run.sh docs`) draws each by the commands "
                "above it whenever they change (click a picture for its full size), here on a shared "
                "2-core machine under load, where every measured all-reduce takes longer than the emulated "
                "link's model (the real collective and the emulation's sleeps wait for a core): the shape "
                "is the method's, the lengths are that machine's."]
        for m in ms:
            png = docs_io.TIMELINES / f"{m.name}.png"
            if not png.exists():
                raise SphinxError(f"docs/timelines/{m.name}.png is missing: ./run.sh docs --timelines {m.name} makes it")
            train, plot = refsgd_pictures.timeline_commands(m)
            text += ["", f"### `{m.name}`", "", "```bash", _wrapped(shlex.split(train)), plot, "```", "",
                     "```{image} /timelines/" + f"{m.name}.png", f":alt: Timeline of {m.name}", ":width: 100%",
                     "```"]   # a scaled image links to its full size (html_scaled_image_link): zoomable
        text += ["", "## Golden files", "",
                 "From tests/golden, each row from the file's own attributes "
                 "([all golden files](/reference/golden-files.md); the schema: [the trace schema](/implementers/schema.md)).", ""]
        mine = [g for g in goldens if g["method"] in names]
        text.append(golden_rows(mine) if mine else "None yet.")
        text += ["", "## Reproduced claims", ""]
        mine = [(n, c) for n, c in cl.items() if c["algos"] & names]
        if not mine:
            text.append("No claim of `refsgd reproduce` is about these methods.")
        for n, c in mine:
            title = f"[{n}](/{c['page']}.md)" if c["page"] else n
            text += [f"### {title}: {c['paper']}, {c['where']}", "", f"**Claim.** {c['claim']}", "",
                     f"**The paper.** {c['number']}", ""]
            if c["verdict"]:
                text += [f"**Verdict: {c['verdict']}**" + (f" ({c['why']})" if c["why"] else "") + "."
                         + (" A `--quick` run: fewer iterations and seeds than the claim's own." if c["quick"] else "")
                         + (f" Every number, seed, run and the machine: [{n}](/{c['page']}.md)." if c["page"] else ""), ""]
            else:
                text += [f"**Verdict: not run yet.** `refsgd reproduce {n} --out-dir docs/results` runs it "
                         "and writes its page, its numbers and its figure here.", ""]
            if c["verdict"] and c["png"].exists():
                text += ["```{image} /results/" + c["png"].name, f":alt: {n}: the figure of refsgd reproduce",
                         ":width: 80%", "```", ""]
        write(docs_io.OUT / (doc + ".md"), "\n".join(text))

