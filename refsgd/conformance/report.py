"""The suite's results as a table: text for the terminal, JSON, and Markdown with a summary line
an implementer can put in their README."""

import collections
import json
import urllib.parse

from refsgd.conformance.suite import FAIL, PASS
from refsgd.version import __version__

COLUMNS = ("configuration", "method", "workers", "dtype", "codec", "result")


def _rows(outcomes):
    for o in outcomes:
        c = o.configuration
        result = o.status if o.status != FAIL else f"FAIL {o.message}"
        yield (c.name, c.method, str(c.workers), c.dtype, c.codec, result)


def summary(outcomes, backend, seconds=None):
    """One line: how many declared configurations pass."""
    n = collections.Counter(o.status for o in outcomes)
    others = "".join(f"; {k} {status}" for status, k in n.items() if status not in (PASS, FAIL))
    took = f" in {seconds:.1f} s" if seconds is not None else ""
    return (f"{backend}: {n[PASS]} of {n[PASS] + n[FAIL]} declared configurations pass"
            + (f", {n[FAIL]} fail" if n[FAIL] else "") + f"{others} ({len(outcomes)} in all){took} "
            f"(refsgd {__version__})")


def text(outcomes):
    """The table as aligned columns."""
    rows = [COLUMNS] + list(_rows(outcomes))
    widths = [max(len(r[k]) for r in rows) for k in range(len(COLUMNS) - 1)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)) + "  " + r[-1] for r in rows)


def markdown(outcomes, backend, seconds=None):
    """A badge, the summary line and the table in Markdown."""
    passed = sum(o.status == PASS for o in outcomes)
    declared = sum(o.status in (PASS, FAIL) for o in outcomes)
    colour = "brightgreen" if passed == declared else "red"
    badge = urllib.parse.quote(f"refsgd conformance-{passed}/{declared}-{colour}")
    cells = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    cells += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in _rows(outcomes)]
    return "\n".join([f"![refsgd conformance](https://img.shields.io/badge/{badge})", "",
                      summary(outcomes, backend, seconds), ""] + cells) + "\n"


def as_json(outcomes, backend, seconds=None):
    """The results as a JSON document (one entry per configuration, the first difference located)."""
    return json.dumps(dict(refsgd_version=__version__, backend=backend, summary=summary(outcomes, backend, seconds),
                           seconds=seconds,
                           configurations=[dict(name=o.configuration.name, method=o.configuration.method,
                                                workers=o.configuration.workers, dtype=o.configuration.dtype,
                                                codec=o.configuration.codec, status=o.status, message=o.message,
                                                first_difference=o.where, seconds=round(o.seconds, 3))
                                           for o in outcomes]), indent=1) + "\n"
