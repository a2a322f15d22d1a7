"""The ``refsgd`` command line, one module per command (as pip's ``_internal/commands``).

* :mod:`refsgd.cli.app`: the parser of every command, ``main`` and the handling of every error;
* :mod:`refsgd.cli.cmdoptions`: the argparse options, derived from the table of refsgd.options;
* ``train``, ``golden``, ``verify``, ``report``, ``models``, ``data``, ``bench``, ``reproduce``:
  each command's parser (``add``) and body (``run``);
* :mod:`refsgd.cli.words`: whether a command line starts MPI, read from its words alone.

This package's own module imports nothing: :mod:`refsgd.entry` reads the words before NumPy,
Numba or mpi4py load (they take a second or more, and a signal must be handled from the first
instruction); ``main`` and ``build_parser`` import the parser on their first call.
"""


def main(argv=None):
    """``refsgd ARGV``: the exit code."""
    from refsgd.cli.app import main as _main  # noqa: PLC0415 start-up: the parser loads NumPy (see the module docstring)
    return _main(argv)


def build_parser():
    """The parser of ``refsgd`` and every command."""
    from refsgd.cli.app import build_parser as _build_parser  # noqa: PLC0415 start-up: as main
    return _build_parser()
