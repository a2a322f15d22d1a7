"""The reference pages of the docs (docs/_ext/refsgd_docs.py writes them): the implementer's pages
(docs/implementers.md cut at its sections), the command-line reference from refsgd's argparse
parser, and the golden files' table from their own HDF5 attributes."""

import argparse
import os
import re

import refsgd_docs_io as docs_io
from refsgd.cli.app import build_parser
from refsgd.failure import EXIT_CODES
from refsgd_docs_io import table, write
from refsgd_markdown import relink
from refsgd_method_pages import golden_files, golden_rows

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



def implementer_pages(splits):
    imp = splits["implementers.md"]
    taken = set()
    for _page, _title, titles in IMPLEMENTERS:
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
            first = ["golden-trajectories"] + (["conformance"] if (docs_io.DOCS / "conformance.md").exists() else [])
            body += [relink(intro.strip(), "implementers.md", splits), "",
                     "```{toctree}", ":maxdepth: 1", ""] + first + [p for p, _, _ in plan if p != "index"] + ["```", ""]
        for s in secs:
            body += [relink(imp.take(s, f"implementers/{page}", as_title=len(secs) == 1), "implementers.md", splits), ""]
        pages.append((page, "\n".join(body)))
    for page, text in pages:
        write(docs_io.OUT / "implementers" / f"{page}.md", text)


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
    out += ["## Exit codes", "",
            "Every command ends with one of these (`refsgd.failure.EXIT_CODES`; `refsgd --help` lists them too). "
            "A launched job (`python -m refsgd.mpilib`, `mpiexec`) ends with its ranks' code.", "",
            table(["code", "meaning"], [(f"`{c}`", what) for c, what in EXIT_CODES]), ""]
    write(docs_io.OUT / "reference" / "cli.md", "\n".join(out))


def golden_page():
    files = golden_files()
    out = ["# Golden files", "",
           "The golden trajectories checked in under `tests/golden/`, generated from each file's own "
           "HDF5 attributes (`method`, `world_size`, `steps`, `dtype`, `model`, `config`, the arrays under "
           "`/state`). The schema: [the trace schema](/implementers/schema.md); replaying one: "
           "[the workflow](/implementers/index.md).", "", golden_rows(files)]
    write(docs_io.OUT / "reference" / "golden-files.md", "\n".join(out))

