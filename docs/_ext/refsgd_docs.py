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

``python docs/_ext/refsgd_docs.py checklist`` rewrites docs/contributing.md's checklist from
``refsgd.registry.REQUIREMENTS`` (the build does too); ``python docs/_ext/refsgd_docs.py timelines [NAME ...]`` (``./run.sh docs --timelines``) redraws
the pictures, current or not (refsgd_pictures.py; the build itself redraws the stale ones).

This file is the extension's door (Sphinx's hooks, the command line); its parts beside it:
refsgd_docs_io.py (the folders, reading and atomic writing), refsgd_markdown.py (sections, split
files, links), refsgd_listings.py (the listings from the docstrings), refsgd_method_pages.py,
refsgd_reference_pages.py (the implementer's pages, the CLI and golden files' references),
refsgd_checklist.py (docs/contributing.md's checklist of a new method's files, from the registry).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))   # its parts beside this file
import refsgd_docs_io as docs_io  # noqa: E402
import refsgd_markdown  # noqa: E402
import refsgd_pictures  # noqa: E402
from refsgd_checklist import checklist, sync_checklist, with_checklist  # noqa: E402, F401
from refsgd_docs_io import GENERATED, SphinxError, read, write  # noqa: E402, F401
from refsgd_listings import (  # noqa: E402, F401
    LABEL, MARK, docstring_listings, listing_sources, registry, sync_listings, with_listings)
from refsgd_markdown import SPLITS, Split, relink, sections, slug  # noqa: E402, F401
from refsgd_method_pages import claims, family_slug, method_pages  # noqa: E402, F401
from refsgd_reference_pages import cli_page, golden_page, implementer_pages  # noqa: E402

#: whole files of docs/ shown as a page of a door (their links rewritten): file -> page
WHOLE = {"conformance.md": "implementers/conformance", "contributing.md": "contributing/adding-a-method",
         "architecture.md": "contributing/architecture"}


# ---------------------------------------------------------------------------------------------
# Sphinx


def generate(app=None):
    splits = {"algorithms.md": Split("algorithms.md"), "implementers.md": Split("implementers.md")}
    for name, page in WHOLE.items():   # a link to a whole file goes to its page
        if (docs_io.DOCS / name).exists():
            splits[name] = Split(name)
            splits[name].pages = {slug(s.title): page for s in splits[name].sections} | {"": page}
    # where every section goes first (links from one file to the other need both maps), then the pages
    refsgd_markdown.COLLECTING = True
    try:
        method_pages(splits)
        implementer_pages(splits)
    finally:
        refsgd_markdown.COLLECTING = False
    method_pages(splits)
    implementer_pages(splits)
    SPLITS.clear()
    SPLITS.update(splits)
    for name, page in WHOLE.items():
        if (docs_io.DOCS / name).exists():
            write(docs_io.OUT / (page + ".md"), relink(read(docs_io.DOCS / name), name, splits))
    cli_page()
    golden_page()


def _on_init(app):
    try:
        if sync_listings():
            print("refsgd_docs: docs/algorithms.md's listings rewritten from the methods' docstrings: commit it")
        if sync_checklist():
            print("refsgd_docs: docs/contributing.md's checklist rewritten from refsgd.registry.REQUIREMENTS: commit it")
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
    if docname == "results/index" and list((docs_io.DOCS / "results").glob("[!i]*.md")):
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
    elif sys.argv[1:] == ["checklist"]:
        try:
            print("docs/contributing.md", "rewritten" if sync_checklist() else "already holds the registry's checklist")
        except SphinxError as e:
            sys.exit(f"refsgd_docs: error: {e}")
    else:
        sys.exit("usage: python docs/_ext/refsgd_docs.py timelines [NAME ...] | listings | checklist")
