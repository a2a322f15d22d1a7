"""The pages of refsgd's documentation site that are generated, not written: Sphinx runs this
extension before it reads the sources (``builder-inited``), and it writes

* ``methods/``: the methods table and one page per method family, from the method registry
  (``refsgd.registry.METHODS``): first the paper's listing beside the code, each listing line
  against the code lines that cite its label (refsgd_sidebyside.py), and each ``train`` once with
  its line numbers; then the family's section of docs/algorithms.md (its listing, its readings),
  its timeline pictures (``docs/timelines/NAME.png``, drawn by the build from the commands the
  page shows: refsgd_pictures.py), its golden files and the reproduced claims that ran it;
* ``implementers/``: docs/implementers.md cut into pages at its sections (one source: the file
  stays where refsgd's code and ``refsgd train --help`` point);
* ``reference/cli.md``: every command and option, from refsgd's argparse parser
  (``refsgd.cli.app.build_parser``);
* ``reference/golden-files.md``: the golden files of tests/golden, from each file's own HDF5
  attributes.

These paths are in .gitignore; nothing in them is edited by hand. A generated page is rewritten
only when its text changes, so that Sphinx's incremental build stays incremental. Links between
sections of a file that is cut into pages (``[x](#slug)``, ``[x](algorithms.md#slug)``) are
rewritten to the page that now holds the section; so are the relative links of the pages written
in docs/ (``../algorithms.md#laga``: they work on a forge too), at read time.

Every file is written atomically (refsgd.files), and every failure is one line
(``refsgd_docs: error: ...``) and exit code 2.

``python docs/_ext/refsgd_docs.py timelines [NAME ...]`` (``./run.sh docs --timelines``) redraws
the pictures, current or not (refsgd_pictures.py; the build itself redraws the stale ones).
"""

import argparse
import ast
import dataclasses
import importlib
import json
import os
import re
import shlex
import sys
import textwrap
from pathlib import Path

import h5py

from refsgd.cli.app import build_parser
from refsgd.errors import RefsgdError
from refsgd.files import write_text
from refsgd.reproduce.claims import CLAIMS

sys.path.insert(0, str(Path(__file__).resolve().parent))   # refsgd_pictures beside this file
import refsgd_pictures  # noqa: E402
import refsgd_sidebyside  # noqa: E402

DOCS = Path(__file__).resolve().parent.parent
ROOT = DOCS.parent
GOLDEN = ROOT / "tests" / "golden"
TIMELINES = DOCS / "timelines"
#: where the generated pages go: docs/ (a test points it elsewhere)
OUT = DOCS
#: where ``refsgd reproduce --out-dir docs/results`` writes each claim's NAME.md, NAME.json and
#: NAME.png (a test points it elsewhere)
RESULTS = DOCS / "results"

#: whole files of docs/ shown as a page of a door (their links rewritten): file -> page
WHOLE = {"conformance.md": "implementers/conformance", "contributing.md": "contributing/adding-a-method",
         "architecture.md": "contributing/architecture"}

#: the pages of the implementer's door: (page, title, the sections of docs/implementers.md it
#: holds); every other section (one per method's exact step) goes to implementers/steps
IMPLEMENTERS = [
    ("index", "For implementers: verify your own implementation", ["Workflow"]),
    ("schema", "The trace schema", ["The trace schema"]),
    ("dataset", "The dataset and dataset_sha256", ["The dataset and dataset_sha256"]),
    ("network", "The network and the loss", ["The network and the loss"]),
    ("sampler", "Initial weights, batches and the learning rate",
     ["Initial weights and batches", "Learning-rate schedules"]),
    ("fp-order", "Floating-point order", ["Floating-point order"]),
    ("optimizer", "The local optimizer U", ["The local optimizer U"]),
    ("codecs", "Compressed all-reduce", ["Compressed all-reduce"]),
    ("steps", "Each method's exact step", None),
    ("metrics", "Metrics files, and how this guide was checked", ["Metrics files", "How this guide was checked"]),
]


# ---------------------------------------------------------------------------------------------
# Markdown sections


def slug(title):
    """MyST's anchor of a heading (myst_parser's default slugify)."""
    return re.sub(r"[^\w\u4e00-\u9fff\- ]", "", title.strip().lower()).replace(" ", "-")


@dataclasses.dataclass
class Section:
    level: int
    title: str
    start: int     # line index of the heading
    end: int       # line index after its last line (the next heading of its level or above)


def sections(lines):
    """The headings of a Markdown file (outside fenced code) as Sections."""
    heads, fence = [], None
    for i, line in enumerate(lines):
        m = re.match(r"^(`{3,}|~{3,})", line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif line.startswith(fence):
                fence = None
            continue
        m = re.match(r"^(#{1,6}) +(.*?) *#*$", line) if fence is None else None
        if m:
            heads.append(Section(len(m.group(1)), m.group(2), i, len(lines)))
    for k, s in enumerate(heads):
        s.end = next((t.start for t in heads[k + 1:] if t.level <= s.level), len(lines))
    return heads


class Split:
    """A Markdown file of docs/ cut into generated pages: where each of its sections went, so that
    links to a section find its page. docs/algorithms.md is read with its listings taken from the
    methods' docstrings (:func:`with_listings`)."""

    def __init__(self, name):
        self.name = name
        text = read(DOCS / name)
        self.lines = (with_listings(text) if name == "algorithms.md" else text).splitlines()
        self.sections = sections(self.lines)
        self.pages = {}    # slug of a section (or of a heading inside it) -> docname of its page
        self.titles = set()   # slugs of the sections whose page's title stands for their heading

    def top(self, level=2):
        return [s for s in self.sections if s.level == level]

    def find(self, title, level=2):
        for s in self.top(level):
            if s.title == title:
                return s
        raise SphinxError(f"docs/{self.name} has no section '## {title}' (the docs' generator expects one)")

    def take(self, section, docname, as_title=False):
        """The text of ``section`` for the page ``docname``: its heading dropped when the page's
        title stands for it, its other headings raised so that the section's is level 2."""
        for s in self.sections:
            if section.start <= s.start < section.end:
                self.pages[slug(s.title)] = docname
        heads = {s.start: s.level for s in self.sections}
        if as_title:
            self.titles.add(slug(section.title))
        first = section.start + (1 if as_title else 0)
        shift = section.level - 2
        out = []
        for i in range(first, section.end):
            line = self.lines[i]
            if i in heads and shift:
                line = "#" * max(2, heads[i] - shift) + line[heads[i]:]
            out.append(line)
        return "\n".join(out).strip("\n")


class SphinxError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# the listings: each has one source, the module docstring of its method's file


#: a numbered line of a listing: L1, C1 (Pipe-SGD's communication thread), S1 / W1 (server, worker)
LABEL = re.compile(r"^ *[A-Z]\d+ ")
#: the line above a listing of docs/algorithms.md that names its source
MARK = re.compile(r"^<!-- listing: (refsgd/algorithms/\w+\.py) #(\d+)\b.*-->$")


def listing_blocks(lines):
    """(start, end) of every listing of ``lines``: a literal block (indented by 4 or more, after a
    blank line) that has a numbered line."""
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("    ") and lines[i].strip() and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or (
                    not lines[j].strip() and j + 1 < len(lines) and lines[j + 1].startswith("    "))):
                j += 1
            if any(LABEL.match(line) for line in lines[i:j]):
                out.append((i, j))
            i = j
        else:
            i += 1
    return out


def docstring_listings(path):
    """The listings of the module docstring of ``path`` (relative to the repository), dedented,
    in their order: what ``help(refsgd.algorithms.NAME)`` shows."""
    source = read(ROOT / path, "a listing's source (named by a mark of docs/algorithms.md)")
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as e:
        raise SphinxError(f"{path}, line {e.lineno}: does not parse ({e.msg}): its docstring's listings "
                          "cannot be read") from None
    doc = ast.get_docstring(tree) or ""
    lines = doc.splitlines()
    return [textwrap.dedent("\n".join(lines[a:b])) for a, b in listing_blocks(lines)]


def listing_sources(methods=None):
    """The files of the methods' ``train`` (refsgd.registry.METHODS), each once, in the registry's order."""
    files = [m.train.split(":")[0].replace(".", "/") + ".py" for m in (methods or registry()).values()]
    return list(dict.fromkeys(files))


def with_listings(text, name="docs/algorithms.md"):
    """``text`` (docs/algorithms.md) with every listing replaced by the one its mark names
    (``<!-- listing: refsgd/algorithms/FILE.py #N ... -->``, the line above it: the N-th listing of
    that file's docstring). A listing without a mark is a second copy written by hand: refused, as
    is a mark above no listing, one that names no listing, and a docstring listing of a method that
    no mark names (or two do)."""
    lines = text.splitlines()
    out, last, named = [], 0, {}
    marks = {i for i, line in enumerate(lines) if line.startswith("<!-- listing:")}
    for a, b in listing_blocks(lines):
        k = a - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        m = MARK.match(lines[k]) if k >= 0 else None
        if m is None:
            raise SphinxError(f"{name}, line {a + 1}: a listing written here by hand; each listing's source is "
                              "its method's module docstring: put it there and mark its place here with "
                              "'<!-- listing: refsgd/algorithms/FILE.py #N (from the docstring) -->'")
        marks.discard(k)
        path, n = m.group(1), int(m.group(2))
        listings = docstring_listings(path)
        if not 1 <= n <= len(listings):
            raise SphinxError(f"{name}, line {k + 1}: the docstring of {path} has {len(listings)} listings, not #{n}")
        named.setdefault((path, n), []).append(k + 1)
        out += lines[last:a] + textwrap.indent(listings[n - 1], "    ").splitlines()
        last = b
    out += lines[last:]
    if marks:
        raise SphinxError(f"{name}, line {min(marks) + 1}: a listing mark must be the line above a listing "
                          "(an indented block with numbered lines L1, ...), in the form "
                          "'<!-- listing: refsgd/algorithms/FILE.py #N ... -->'")
    for path in listing_sources():
        for n in range(1, len(docstring_listings(path)) + 1):
            where = named.get((path, n), [])
            if len(where) != 1:
                raise SphinxError(f"{name}: listing #{n} of {path}'s docstring is marked "
                                  + (f"on lines {where}: once is enough" if where else "nowhere: mark its place"))
    return "\n".join(out) + "\n"


def sync_listings():
    """Rewrite docs/algorithms.md's listings from the docstrings (the file is installed with refsgd
    as refsgd.docs, so it holds them too); True when it changed."""
    path = DOCS / "algorithms.md"
    text = read(path)
    new = with_listings(text)
    if new != text:
        _write_text(path, new)
    return new != text


# ---------------------------------------------------------------------------------------------
# links


#: True during the first pass of generate(), which only learns where every section goes
COLLECTING = False

LINK = re.compile(r"(\]\()([^)\s]+)(\))")
#: the split files of the last generate() (file -> Split): where a source page's link goes
SPLITS = {}


def relink(text, here, splits):
    """Rewrite the links of ``text``, taken from the file ``here`` (relative to docs/), so that they
    work from any page: ``#slug`` and ``FILE#slug`` of a split file go to the page that holds the
    section; other relative paths become absolute (``/path``, MyST's root of the docs)."""
    base = Path(here).parent

    def one(m):
        target = m.group(2)
        if re.match(r"^[a-z]+:", target) or target.startswith("/"):
            return m.group(0)
        path, _, anchor = target.partition("#")
        path = os.path.normpath(base / path).replace(os.sep, "/") if path else here
        split = splits.get(path)
        if split is not None:
            page = split.pages.get(anchor) if anchor else split.pages.get("")
            if page is None:
                if COLLECTING:
                    return m.group(0)
                raise SphinxError(f"docs/{here}: link '{target}': no generated page holds "
                                  f"docs/{path}{'#' + anchor if anchor else ''}")
            if anchor in split.titles:   # the page's title: the page itself
                anchor = ""
            return f"{m.group(1)}/{page}.md{'#' + anchor if anchor else ''}{m.group(3)}"
        if path.startswith(".."):
            return m.group(0)
        return f"{m.group(1)}/{path}{'#' + anchor if anchor else ''}{m.group(3)}"

    return LINK.sub(one, text)


#: the first line of every generated page
GENERATED = "<!-- generated by docs/_ext/refsgd_docs.py"


def write(path, text):
    """Write a generated page, only when its text changed."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SphinxError(f"could not write {path} (the folder: {e.strerror or e})") from None
    note = GENERATED + ": edit its sources, not this page -->\n"
    if text.startswith("---\n"):   # front matter stays first
        end = text.index("\n---\n", 4) + 5
        text = text[:end] + note + text[end:]
    else:
        text = note + text
    text = text.rstrip() + "\n"
    if not path.exists() or read(path) != text:
        _write_text(path, text)


def read(path, what=None):
    """The UTF-8 text of ``path``, or one SphinxError that names the file and why."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SphinxError(f"{path}: no such file" + (f" ({what})" if what else "")) from None
    except UnicodeDecodeError as e:
        raise SphinxError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason})") from None
    except OSError as e:
        raise SphinxError(f"{path}: cannot read it ({e.strerror or e})") from None


def _write_text(path, text):
    """Write a file of the build atomically (refsgd's helper: a temporary name, then a rename): a
    full disk or a read-only folder leaves the previous file and says one line."""
    try:
        write_text(str(path), text)
    except RefsgdError as e:
        raise SphinxError(str(e)) from None


def _cell(text):
    """A table cell: one line, its pipes escaped, and outside code its asterisks (``eta*gamma``
    is a product, not emphasis)."""
    parts = text.replace("\n", " ").split("`")
    return "`".join(p.replace("|", "\\|") if i % 2 else p.replace("|", "\\|").replace("*", "\\*")
                    for i, p in enumerate(parts))


def table(header, rows):
    esc = [[_cell(str(c)) for c in row] for row in rows]
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(r) + " |" for r in esc])


# ---------------------------------------------------------------------------------------------
# the methods


def registry():
    """refsgd.registry.METHODS: every method of ``--algo`` (the one source of the methods' pages)."""
    try:
        return importlib.import_module("refsgd.registry").METHODS
    except ModuleNotFoundError as e:
        raise SphinxError(f"the methods' pages are generated from refsgd.registry: {e}") from e


def families(methods):
    """The methods grouped by their section of docs/algorithms.md, in the registry's order."""
    out = {}
    for m in methods.values():
        out.setdefault(m.section, []).append(m)
    return out


def golden_files():
    """Every golden file of tests/golden with its own attributes."""
    out = []
    for f in sorted(GOLDEN.glob("*.h5")):
        with h5py.File(f, "r") as h:
            a = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in h.attrs.items()}
            states = sorted(h["state"].keys()) if "state" in h else []
        cfg = json.loads(a.get("config", "{}"))
        out.append(dict(file=f.name, method=a.get("method"), workers=int(a.get("world_size", 0)),
                        steps=int(a.get("steps", 0)), dtype=a.get("dtype"), model=a.get("model"),
                        dataset=a.get("dataset"), config=cfg, states=states, version=a.get("format_version")))
    return out


def _golden_rows(files):
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
        f = RESULTS / f"{c.name}.json"
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
    write(OUT / "methods" / "index.md", "\n".join(index))

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
        for tb in refsgd_sidebyside.family_tables(alg.lines, sec.start, sec.end, MARK, docstring_listings, ROOT,
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
            png = TIMELINES / f"{m.name}.png"
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
        text.append(_golden_rows(mine) if mine else "None yet.")
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
        write(OUT / (doc + ".md"), "\n".join(text))


# ---------------------------------------------------------------------------------------------
# the implementer's pages


def implementer_pages(splits):
    imp = splits["implementers.md"]
    taken = set()
    for page, _title, titles in IMPLEMENTERS:
        for t in titles or ():
            taken.add(t)
    rest = [s for s in imp.top() if s.title not in taken]
    plan = []
    for page, title, titles in IMPLEMENTERS:
        secs = [imp.find(t) for t in titles] if titles is not None else rest
        plan.append((page, title, secs))
        for s in secs:
            imp.take(s, f"implementers/{page}", as_title=len(secs) == 1)
    imp.pages[""] = "implementers/index"
    pages = []
    for page, title, secs in plan:
        body = [f"# {title}", ""]
        if page == "index":
            intro = "\n".join(imp.lines[1:imp.top()[0].start])
            intro = re.sub(r"\nContents:.*", "", intro, flags=re.S)   # the toctree below says it
            first = ["golden-trajectories"] + (["conformance"] if (DOCS / "conformance.md").exists() else [])
            body += [relink(intro.strip(), "implementers.md", splits), "",
                     "```{toctree}", ":maxdepth: 1", ""] + first + [p for p, _, _ in plan if p != "index"] + ["```", ""]
        for s in secs:
            body += [relink(imp.take(s, f"implementers/{page}", as_title=len(secs) == 1), "implementers.md", splits), ""]
        pages.append((page, "\n".join(body)))
    for page, text in pages:
        write(OUT / "implementers" / f"{page}.md", text)


# ---------------------------------------------------------------------------------------------
# the command-line reference


def _expand(parser, action):
    fmt = parser._get_formatter()
    return fmt._expand_help(action) if action.help else ""


def _command_page(parser, name, depth, out):
    out += ["#" * depth + f" `{name}`", ""]
    if parser.description:
        out += [parser.description, ""]
    out += ["```text", parser.format_usage().strip(), "```", ""]
    subs = []
    epilog = ["```text", parser.epilog.strip(), "```", ""] if parser.epilog else []
    for group in parser._action_groups:
        rows = []
        for a in group._group_actions:
            if a.help == argparse.SUPPRESS:
                continue
            if isinstance(a, argparse._SubParsersAction):
                subs.append(a)
                continue
            inv = parser._get_formatter()._format_action_invocation(a)
            rows.append([f"`{inv}`", _expand(parser, a)])
        if rows:
            out += [f"**{group.title}**" + (f": {group.description}" if group.description else ""), "",
                    table(["option", "what it does"], rows), ""]
    out += epilog
    for a in subs:
        helps = {c.dest: c.help for c in a._choices_actions}
        for sub_name, sub in a.choices.items():
            if helps.get(sub_name):
                sub.description = sub.description or helps[sub_name]
            _command_page(sub, f"{name} {sub_name}", min(depth + 1, 3), out)


def cli_page():
    os.environ["COLUMNS"] = "78"   # argparse wraps the usage at the terminal's width: the page's is fixed
    parser = build_parser()
    out = ["# Command-line reference", "",
           "Every command of `refsgd` and every option, generated from refsgd's argparse parsers "
           "(`refsgd.cli.app.build_parser`): what `refsgd COMMAND --help` prints.", ""]
    _command_page(parser, "refsgd", 2, out)
    write(OUT / "reference" / "cli.md", "\n".join(out))


def golden_page():
    files = golden_files()
    out = ["# Golden files", "",
           "The golden trajectories checked in under `tests/golden/`, generated from each file's own "
           "HDF5 attributes (`method`, `world_size`, `steps`, `dtype`, `model`, `config`, the arrays under "
           "`/state`). The schema: [the trace schema](/implementers/schema.md); replaying one: "
           "[the workflow](/implementers/index.md).", "", _golden_rows(files)]
    write(OUT / "reference" / "golden-files.md", "\n".join(out))


# ---------------------------------------------------------------------------------------------
# Sphinx


def generate(app=None):
    splits = {"algorithms.md": Split("algorithms.md"), "implementers.md": Split("implementers.md")}
    for name, page in WHOLE.items():   # a link to a whole file goes to its page
        if (DOCS / name).exists():
            splits[name] = Split(name)
            splits[name].pages = {slug(s.title): page for s in splits[name].sections} | {"": page}
    # where every section goes first (links from one file to the other need both maps), then the pages
    global COLLECTING
    COLLECTING = True
    try:
        method_pages(splits)
        implementer_pages(splits)
    finally:
        COLLECTING = False
    method_pages(splits)
    implementer_pages(splits)
    SPLITS.clear()
    SPLITS.update(splits)
    for name, page in WHOLE.items():
        if (DOCS / name).exists():
            write(OUT / (page + ".md"), relink(read(DOCS / name), name, splits))
    cli_page()
    golden_page()


def _on_init(app):
    try:
        if sync_listings():
            print("refsgd_docs: docs/algorithms.md's listings rewritten from the methods' docstrings: commit it")
        refsgd_pictures.draw(registry())   # the pictures whose commands changed since they were drawn
        generate(app)
    except (SphinxError, refsgd_pictures.PictureError) as e:
        # one line and a non-zero exit, as refsgd's own errors (Sphinx would add its traceback's file)
        print(f"refsgd_docs: error: {e}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


def _relink_source(app, docname, source):
    """The links of a page written in docs/ are relative to its file, so that they work on a forge
    and in an editor too (``../algorithms.md#laga``, ``first-run.md``); at read time they go to the
    page of the site that holds the target (algorithms.md's sections are the methods' pages)."""
    if SPLITS and GENERATED not in source[0][:300]:   # a generated page is linked already
        source[0] = relink(source[0], docname + ".md", SPLITS)


def _results_toctree(app, docname, source):
    """The index of the reproduced claims (docs/results/index.md; docs/results.md beside the folder
    is its copy, not shown) is written by ``refsgd reproduce``: its pages are put under it here, at
    read time, not in the file."""
    if docname == "results/index" and list((DOCS / "results").glob("[!i]*.md")):
        source[0] += "\n\n```{toctree}\n:hidden:\n:glob:\n\n*\n```\n"


def setup(app):
    app.connect("builder-inited", _on_init)
    app.connect("source-read", _relink_source)
    app.connect("source-read", _results_toctree)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    if sys.argv[1:2] == ["timelines"]:   # ./run.sh docs --timelines [NAME ...]: redraw them, current or not
        refsgd_pictures.main(sys.argv[2:] or ["--all"])
    elif sys.argv[1:] == ["listings"]:
        try:
            print("docs/algorithms.md", "rewritten" if sync_listings() else "already holds the docstrings' listings")
        except SphinxError as e:
            sys.exit(f"refsgd_docs: error: {e}")
    else:
        sys.exit("usage: python docs/_ext/refsgd_docs.py timelines [NAME ...] | listings")
