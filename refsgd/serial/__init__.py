"""Serial renderings: every method for N workers in one process, written from the equations.

Each method's rendering is ``f(net, data, cfg, schedule, N, T) -> trace fields`` (see
:mod:`refsgd.trace`), named by its registry entry (``refsgd.registry``, Method.serial);
``refsgd golden`` writes their output as golden files.
"""

from refsgd import registry


def rendering(name):
    """The serial rendering of method ``name``."""
    return registry.entry(registry.method(name).serial)
