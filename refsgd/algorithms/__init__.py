"""One file per paper (and per baseline family); each ``train(run)`` is its listing.

``ALGORITHMS`` maps the ``--algo`` name to (train function, paper and listing).
"""

from refsgd.algorithms.ssgd import ALGORITHMS as _SSGD

ALGORITHMS = dict(_SSGD)
