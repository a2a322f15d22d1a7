"""The listings for the docs' generator (docs/_ext/refsgd_docs.py): each has one source, the
module docstring of its method's file; docs/algorithms.md holds them where its marks say."""

import ast
import importlib
import re
import textwrap

import refsgd_docs_io as docs_io
from refsgd_docs_io import SphinxError, read



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
    source = read(docs_io.ROOT / path, "a listing's source (named by a mark of docs/algorithms.md)")
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
    return docs_io.rewrite(docs_io.DOCS / "algorithms.md", with_listings)



def registry():
    """refsgd.registry.METHODS: every method of ``--algo`` (the one source of the methods' pages)."""
    try:
        return importlib.import_module("refsgd.registry").METHODS
    except ModuleNotFoundError as e:
        raise SphinxError(f"the methods' pages are generated from refsgd.registry: {e}") from e

