"""The list of claims, one module per paper (:mod:`dcs3gd`, :mod:`laga`, :mod:`ppasgd`,
:mod:`daso`, :mod:`pipesgd`), in the order ``refsgd reproduce --list`` and ``all`` take them."""

from refsgd.reproduce import daso, dcs3gd, laga, pipesgd, ppasgd
from refsgd.reproduce.measure import check_matplotlib, first_reach  # noqa: F401 -- the tests and __init__ use them
from refsgd.reproduce.measure import _bundled  # noqa: F401

CLAIMS = dcs3gd.CLAIMS + laga.CLAIMS + ppasgd.CLAIMS + daso.CLAIMS + pipesgd.CLAIMS
BY_NAME = {c.name: c for c in CLAIMS}


def budget(quick, seeds):
    """Seconds that ``reproduce all`` should take on 2 idle cores: the claims' budgets per seed
    (:attr:`measure.Claim.budget`) times the seeds."""
    return seeds * sum(c.budget[0 if quick else 1] for c in CLAIMS)
