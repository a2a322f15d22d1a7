"""A method page's first section: the paper's listing beside the method's code, line against
line. Each row is one numbered line of the listing (its label, ``L5``, ``C2``, ``S1``, whatever the
listing numbers its lines with) and, beside it, every line of the method's module that cites that
label, in a comment (``# L5: ...``) or in the name of a span (``run.collectives.wait(req, "L5 MPI_Wait")``),
with its line number; a comment that cites a label brings the statement below it along. The
labels are the listing's own, so a relabelled listing pairs with its relabelled code unchanged.

The output is an HTML table (MyST passes raw HTML through), its cells preformatted and wrapped,
never cut: what a lecturer projects."""

import ast
import html
import re
import tokenize
from pathlib import Path

#: the tokens whose text may cite a label (Python 3.12 splits an f-string into parts)
TEXT = {tokenize.COMMENT, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
#: the label that starts a listing's numbered line (refsgd_listings.LABEL's group)
LABEL = re.compile(r"^ *([A-Z]+\d+)\b")


def listing_rows(listing):
    """[(label or None, text)] of a listing: a numbered line with the unnumbered lines that continue it."""
    rows = []
    for line in listing.splitlines():
        m = LABEL.match(line)
        if m or not rows:
            rows.append([m.group(1) if m else None, line.rstrip()])
        else:
            rows[-1][1] += "\n" + line.rstrip()
    return [tuple(r) for r in rows]


def _functions(tree):
    """(first line, last line, name) of every function of a module, innermost last."""
    return sorted((n.lineno, n.end_lineno, n.name) for n in ast.walk(tree)
                  if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _comment_only(lines):
    """The 1-based numbers of the lines that hold only a comment."""
    return {i + 1 for i, line in enumerate(lines) if line.lstrip().startswith("#")}


def _statement_after(lines, i, comments):
    """The line numbers that a label comment on line ``i`` (1-based) introduces: the comments right
    below it and the statement after them, up to a blank line, another comment or a dedent."""
    out = [i]
    indent = len(lines[i - 1]) - len(lines[i - 1].lstrip())
    j = i + 1
    while j <= len(lines) and j in comments:   # the comment goes on
        out.append(j)
        j += 1
    while j <= len(lines) and lines[j - 1].strip() and j not in comments:
        if len(lines[j - 1]) - len(lines[j - 1].lstrip()) < indent:
            break
        out.append(j)
        j += 1
        if len(out) > 8:
            break
    return out


def code_lines_by_label(path, labels, exclude=()):
    """label -> the line numbers of ``path`` (a Python file) that cite it, with the statement under
    a citing comment; a label is cited by a comment or a string of the code (not the docstring),
    outside the functions named in ``exclude`` (another family's loop in the same file)."""
    text = Path(path).read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    docstrings = {n for node in ast.walk(tree) if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                                                    ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
                  for n in range(node.body[0].lineno, node.body[0].end_lineno + 1)}
    comments = _comment_only(lines)
    skip = {n for a, b, name in _functions(tree) if name in exclude for n in range(a, b + 1)}
    cites = {}     # line -> labels it cites
    with open(path, "rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type in TEXT and tok.start[0] not in docstrings and tok.start[0] not in skip:
                for lab in re.findall(r"\b([A-Z]+\d+)\b", tok.string):
                    if lab in labels:
                        cites.setdefault(tok.start[0], []).append(lab)
    out = {lab: [] for lab in labels}
    for line, labs in sorted(cites.items()):
        block = _statement_after(lines, line, comments) if line in comments else [line]
        for lab in dict.fromkeys(labs):
            out[lab] += [n for n in block if n not in out[lab]]
    return out, lines, _functions(tree)


def _function_of(functions, n):
    inside = [f for f in functions if f[0] <= n <= f[1]]
    return inside[-1][2] if inside else None


def _code_cell(numbers, lines, functions):
    """The code lines ``numbers`` with their line numbers, dedented together; a gap marked "...",
    each run of lines headed by its function when it changes."""
    numbers = sorted(numbers)
    indent = min((len(lines[n - 1]) - len(lines[n - 1].lstrip()) for n in numbers if lines[n - 1].strip()), default=0)
    out, last, func = [], None, None
    for n in numbers:
        f = _function_of(functions, n)
        if f != func:
            out.append(f"      # in {f}()" if f else "      # at module level")
            func = f
        elif last is not None and n != last + 1:
            out.append("      ...")
        code = re.sub(r"(\S) {3,}#", r"\1  #", lines[n - 1][indent:])   # a comment's alignment: no room on a page
        out.append(f"{n:4d}  {code}")
        last = n
    return "\n".join(out)


def family_tables(lines, start, end, mark, listings, root, exclude=lambda path: ()):
    """The tables of every listing marked in ``lines[start:end]`` (a family's section of
    docs/algorithms.md): ``mark`` the regex of a listing's mark (path, number), ``listings(path)``
    the listings of a file, ``exclude(path)`` the functions of that file not to read (the loops of
    other families). Each is titled by the paragraph line that introduces it ("Algorithm 3,
    LAGA-SGD (`--algo laga-sgd`):") or else the nearest heading above its mark."""
    out, title = [], None
    for i in range(start, end):
        h = re.match(r"^#{2,6} +(.*?) *#*$", lines[i])
        if h:
            title = h.group(1)
        m = mark.match(lines[i])
        if m:
            k = i - 1
            while k > start and not lines[k].strip():
                k -= 1
            if lines[k].rstrip().endswith(":") and not lines[k].startswith(("#", " ")):
                title = lines[k].rstrip().rstrip(":").replace("`", "")
            path, n = m.group(1), int(m.group(2))
            key = f"{Path(path).stem}-{n}"
            out.append(table(title or path, listings(path)[n - 1], path, root, key, exclude(path)))
    return out


def table(title, listing, path, root, key, exclude=()):
    """The HTML table of one listing beside the code of ``path`` (relative to ``root``); ``key``
    makes its rows' anchors unique on the page (``KEY-L5``)."""
    rows = listing_rows(listing)
    labels = [lab for lab, _ in rows if lab]
    cited, lines, functions = code_lines_by_label(Path(root) / path, set(labels), exclude)
    out = ['<table class="listing-code">',
           f"<thead><tr><th>{html.escape(title)}</th><th><code>{html.escape(path)}</code>: the lines that "
           "cite it</th></tr></thead>", "<tbody>"]
    for lab, text in rows:
        code = _code_cell(cited.get(lab, []), lines, functions) if lab else ""
        right = f"<pre>{html.escape(code)}</pre>" if code else ("<em>no line cites it</em>" if lab else "")
        anchor = f' id="{html.escape(f"{key}-{lab}".lower())}"' if lab else ""
        out.append(f"<tr{anchor}><td><pre>{html.escape(text)}</pre></td><td>{right}</td></tr>")
    out += ["</tbody>", "</table>"]
    return "\n".join(out)
