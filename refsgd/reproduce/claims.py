"""The list of claims, one module per paper (:mod:`dcs3gd`, :mod:`laga`, :mod:`ppasgd`,
:mod:`daso`, :mod:`pipesgd`; LAGA's and Pipe-SGD's real-link claims in :mod:`laga_cluster` and
:mod:`pipesgd_cluster`), in the order ``refsgd reproduce --list`` and ``all`` take them."""

from refsgd.reproduce import daso, dcs3gd, laga, laga_cluster, pipesgd, pipesgd_cluster, ppasgd
from refsgd.reproduce.runner import default_seeds
from refsgd.reproduce.measure import check_matplotlib, first_reach  # noqa: F401 -- the tests and __init__ use them
from refsgd.reproduce.measure import _bundled  # noqa: F401

CLAIMS = (dcs3gd.CLAIMS + laga.CLAIMS + laga_cluster.CLAIMS + ppasgd.CLAIMS + daso.CLAIMS + pipesgd.CLAIMS
          + pipesgd_cluster.CLAIMS)
BY_NAME = {c.name: c for c in CLAIMS}
#: what ``all`` runs: every claim but those that need more of the machine than a user has
#: (:attr:`measure.Claim.requires`: root for scripts/cluster), run by name only
IN_ALL = [c for c in CLAIMS if not c.requires]


def budget(quick, seeds=None):
    """Seconds that ``reproduce all`` should take on 2 idle cores: the budgets per seed of the
    claims it runs (:attr:`measure.Claim.budget`) times the seeds (None: each claim's default)."""
    return sum(c.budget[0 if quick else 1] * (seeds or default_seeds(c, quick)) for c in IN_ALL)
