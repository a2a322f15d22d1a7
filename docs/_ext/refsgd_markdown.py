"""Markdown for the docs' generator (docs/_ext/refsgd_docs.py): a file's sections, a file cut
into generated pages (:class:`Split`), and the links rewritten to the page that holds their
target."""

import dataclasses
import os
import re
from pathlib import Path

import refsgd_docs_io as docs_io
from refsgd_docs_io import SphinxError, read
from refsgd_listings import with_listings



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
        text = read(docs_io.DOCS / name)
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
