"""The list of claims, one module per paper (:mod:`dcs3gd`, :mod:`laga`, :mod:`ppasgd`,
:mod:`daso`, :mod:`pipesgd`; LAGA's and Pipe-SGD's real-link claims in :mod:`laga_cluster` and
:mod:`pipesgd_cluster`), in the order ``refsgd reproduce --list`` and ``all`` take them."""

from refsgd.reproduce import cluster, daso, dcs3gd, laga, laga_cluster, pipesgd, pipesgd_cluster, ppasgd
from refsgd.reproduce.runner import default_seeds
from refsgd.reproduce.measure import check_matplotlib, first_reach  # noqa: F401 -- the tests and __init__ use them
from refsgd.reproduce.measure import _bundled  # noqa: F401

CLAIMS = (dcs3gd.CLAIMS + laga.CLAIMS + laga_cluster.CLAIMS + ppasgd.CLAIMS + daso.CLAIMS + pipesgd.CLAIMS
          + pipesgd_cluster.CLAIMS)
BY_NAME = {c.name: c for c in CLAIMS}
#: the real-link claims (:attr:`measure.Claim.requires`: root for scripts/cluster): the primary evidence
#: of the timing claims where the machine allows them
REAL_LINK = [c for c in CLAIMS if c.requires]
#: what ``all`` runs on any machine
IN_ALL = [c for c in CLAIMS if not c.requires]


def in_all():
    """What ``all`` runs here: :data:`IN_ALL`, and the real-link claims where scripts/cluster can
    run (root, Linux, its tools: :func:`cluster.missing`)."""
    return IN_ALL + (REAL_LINK if not cluster.missing() else [])


def budget(quick, seeds=None, real_link=False):
    """Seconds that ``reproduce all`` should take on 2 idle cores: the budgets per seed of the
    claims it runs (:attr:`measure.Claim.budget`) times the seeds (None: each claim's default);
    ``real_link``: with the real-link claims (where root is available)."""
    return sum(c.budget[0 if quick else 1] * (seeds or default_seeds(c, quick))
               for c in IN_ALL + (REAL_LINK if real_link else []))
