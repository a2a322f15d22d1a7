"""The configurations of the suite and their options, as ``refsgd conformance --list`` prints
them and docs/conformance.md shows them (a test keeps the page equal to this)."""

from refsgd import options

COLUMNS = ("configuration", "method", "workers", "steps", "dtype", "codec", "options")

#: what every configuration gives and the table shows in its own columns
_SHOWN = {"dtype", "compress", "model", "seed"}


def _options(c):
    """The options a configuration gives, as ``refsgd train``'s flags (``--tau 2 --momentum 0.9``)."""
    words = []
    for k, v in c.options.items():
        if k in _SHOWN:
            continue
        flag = options.BY_NAME[k].flags.split(",")[0].split("/")[0]
        words.append(flag if v is True else f"{flag} {v}")
    return " ".join(words)


def rows(configurations):
    for c in configurations:
        yield (c.name, c.method, str(c.workers), str(c.steps), c.dtype, c.codec, _options(c))


def text(configurations):
    """The table as aligned columns, and a count."""
    table = [COLUMNS] + list(rows(configurations))
    widths = [max(len(r[k]) for r in table) for k in range(len(COLUMNS) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)) + "  " + r[-1] for r in table]
    return "\n".join(lines + [f"{len(table) - 1} configurations (model digits_tiny, the embedded digits)"])


def markdown(configurations):
    """The table in Markdown (docs/conformance.md)."""
    cells = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    cells += ["| " + " | ".join(f"`{x}`" if k in (0, 6) and x else x for k, x in enumerate(r)) + " |"
              for r in rows(configurations)]
    return "\n".join(cells) + "\n"
