"""Each method's loop in lines against its listing (the table of docs/architecture.md, "Loops
against listings"), counted with Python's ``ast`` over each method's ``train``:

* loop: the ``for t in run.iterations():`` blocks of ``train`` and the bodies of the functions
  it runs in threads (``threading.Thread(target=NAME)``, ``run.beside(NAME, ...)``), in code lines (no blank or comment-only line) and in all
  lines;
* train and its helpers: the code lines of ``train`` and of the module's functions it calls,
  transitively (the thread functions included), its Numba kernels left out;
* listing lines cited: the distinct listing line numbers (``L5``, Pipe-SGD's ``C4``, the servers'
  ``S2`` and workers' ``W1``, PP-ASGD's gradient threads' ``G7`` and process's ``P2``) in those lines' comments and strings.

``python -m tests.helpers.loop_lines`` prints the table."""

import ast
import io
import os
import re
import tokenize

from refsgd.registry import METHODS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CITE = re.compile(r"\b([LCSWGP][0-9]{1,2})\b")


def _code_lines(source, lo, hi):
    """Lines lo..hi (1-based) that hold code: not blank, not only a comment."""
    return sum(1 for line in source.splitlines()[lo - 1:hi] if line.strip() and not line.strip().startswith("#"))


def _cited(source, lo, hi):
    """The listing lines named in the comments and strings of lines lo..hi."""
    found = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if lo <= tok.start[0] <= hi and tok.type in (tokenize.COMMENT, tokenize.STRING, tokenize.FSTRING_MIDDLE
                                                     if hasattr(tokenize, "FSTRING_MIDDLE") else tokenize.STRING):
            found.update(CITE.findall(tok.string))
    return found


def _is_iterations(node):
    return (isinstance(node, ast.For) and isinstance(node.iter, ast.Call)
            and isinstance(node.iter.func, ast.Attribute) and node.iter.func.attr == "iterations")


def measure(dotted):
    """(loop code lines, loop lines, train and helpers' code lines, listing lines cited) of the
    ``train`` at ``module:function``."""
    modname, name = dotted.split(":")
    with open(os.path.join(ROOT, *modname.split(".")) + ".py") as f:
        source = f.read()
    tree = ast.parse(source)
    # the module's functions, its Numba kernels (decorated) left out: arithmetic, no plumbing
    top = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and not n.decorator_list}
    # train and the module's functions it calls, transitively
    todo, seen = [top[name]], []
    while todo:
        fn = todo.pop()
        if fn in seen:
            continue
        seen.append(fn)
        todo += [top[c.func.id] for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                 and c.func.id in top]
    nested = {n.name: n for fn in seen for n in ast.walk(fn) if isinstance(n, ast.FunctionDef)}
    # the functions it runs in threads: threading.Thread(target=NAME), run.beside(NAME, ...)
    calls = [c for fn in seen for c in ast.walk(fn) if isinstance(c, ast.Call)]
    started = [k.value for c in calls for k in c.keywords if k.arg == "target"]
    started += [c.args[0] for c in calls if isinstance(c.func, ast.Attribute) and c.func.attr == "beside"]
    threads = [nested.get(v.id) or top.get(v.id) for v in started if isinstance(v, ast.Name)]
    loops = [n for fn in seen for n in ast.walk(fn) if _is_iterations(n)]
    blocks = loops + [t for t in threads if t is not None]
    code = sum(_code_lines(source, b.lineno, b.end_lineno) for b in blocks)
    lines = sum(b.end_lineno - b.lineno + 1 for b in blocks)
    helpers = sum(_code_lines(source, fn.lineno, fn.end_lineno) for fn in seen)
    cited = set().union(*(_cited(source, fn.lineno, fn.end_lineno) for fn in seen))
    return code, lines, helpers, len(cited)


def table():
    """{method: (loop code lines, loop lines, train and helpers, listing lines cited)}."""
    return {m.name: measure(m.train) for m in METHODS.values()}


def markdown():
    rows = ["| method | loop: code lines (all lines) | train and its helpers: code lines | listing lines cited "
            "| loop code / listing |", "|---|---|---|---|---|"]
    for name, (code, lines, helpers, cited) in table().items():
        rows.append(f"| {name} | {code} ({lines}) | {helpers} | {cited} | {code / cited:.1f} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown())
