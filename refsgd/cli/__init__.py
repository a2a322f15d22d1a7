"""The ``refsgd`` command line, one module per command (as pip's ``_internal/commands``).

* :mod:`refsgd.cli.app`: the parser of every command, ``main`` and the handling of every error;
* :mod:`refsgd.cli.cmdoptions`: the argparse options, derived from the table of refsgd.options;
* ``train``, ``golden``, ``verify``, ``report``, ``models``, ``data``, ``bench``, ``reproduce``:
  each command's parser (``add``) and body (``run``).

This package's own module holds only what :mod:`refsgd.entry` needs before NumPy, Numba or
mpi4py load (they take a second or more, and a signal must be handled from the first
instruction): :func:`is_mpi_command`, and ``main`` / ``build_parser``, which import the
parser on their first call.
"""


def is_mpi_command(argv):
    """Whether ``refsgd ARGV`` initialises MPI on every rank (train, bench overlap, bench codec); from the
    words alone, before the parser is imported."""
    words = [a for a in argv if not a.startswith("-")]
    if not words:
        return False
    if words[0] == "train":
        return "--list" not in argv and "-h" not in argv and "--help" not in argv
    return words[0] == "bench" and len(words) > 1 and words[1] in ("overlap", "codec")


def main(argv=None):
    """``refsgd ARGV``: the exit code."""
    from refsgd.cli.app import main as _main  # here: the parser loads NumPy (see the module docstring)
    return _main(argv)


def build_parser():
    """The parser of ``refsgd`` and every command."""
    from refsgd.cli.app import build_parser as _build_parser  # here: as main
    return _build_parser()
