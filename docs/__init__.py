"""refsgd's own documents, installed with the package (``refsgd train --list`` prints where):

- ``algorithms.md``: each method's listing with the line numbers the code cites (``# L5``), its
  equations and every reading taken where a paper is ambiguous;
- ``implementers.md``: the trace schema and every method's exact step, with every constant, for
  reproducing the golden files in another implementation.
"""

from importlib.resources import files


def path(name):
    """The installed path of one of the documents, e.g. ``path("algorithms.md")``."""
    return str(files(__name__) / name)
