"""The checklist of docs/contributing.md ("adding a method"), for the docs' generator
(docs/_ext/refsgd_docs.py): one row per file a new method needs, generated from the registry's
table of what the generic checks require (``refsgd.registry.REQUIREMENTS``), so that the guide
says what the tests require and cannot drift from it."""

import importlib

import refsgd_docs_io as docs_io
from refsgd_docs_io import SphinxError, table

#: the lines around the generated checklist of docs/contributing.md
MARK = "<!-- checklist: generated from refsgd.registry.REQUIREMENTS (python docs/_ext/refsgd_docs.py checklist) -->"
END = "<!-- end of the checklist -->"


def checklist():
    """The table of the files a new method needs, each with what goes there and the check that
    fails without it (the registry's order)."""
    try:
        requirements = importlib.import_module("refsgd.registry").REQUIREMENTS
    except (ModuleNotFoundError, AttributeError) as e:
        raise SphinxError(f"the checklist of docs/contributing.md is generated from refsgd.registry: {e}") from e
    rows = []
    for r in requirements:
        where = r.check if "::" in r.check else f"tests/methods/test_registry_checks.py::{r.check}"
        rows.append((f"`{r.file}`", r.what, f"`{where}`"))
    files = list(dict.fromkeys(r.file for r in requirements))
    return (table(("file", "what goes there", "the check that fails without it"), rows)
            + f"\n\nThat is {len(files)} files (a file named twice above is one file that two checks read), "
            "each golden file counted once.")


def with_checklist(text, name="docs/contributing.md"):
    """``text`` with what lies between its marks replaced by the generated checklist; a text
    without the marks, with either twice, or with the end before the start is refused."""
    lines = text.splitlines()
    at = [i for i, line in enumerate(lines) if line == MARK]
    end = [i for i, line in enumerate(lines) if line == END]
    if len(at) != 1 or len(end) != 1 or end[0] < at[0]:
        raise SphinxError(f"{name}: the checklist goes between the lines '{MARK}' and '{END}', each once, "
                          "in that order")
    return "\n".join(lines[:at[0] + 1] + [""] + checklist().splitlines() + [""] + lines[end[0]:]) + "\n"


def sync_checklist():
    """Rewrite docs/contributing.md's checklist from the registry; True when it changed."""
    return docs_io.rewrite(docs_io.DOCS / "contributing.md", with_checklist)
