"""Non-finite values: the one-pass checks and the error raised when the loss or a rank's state
becomes NaN or infinite. Below both :mod:`refsgd.run` (the loss check at an iteration boundary)
and :mod:`refsgd.checkpoint` (a checkpoint refuses a non-finite state), which raise it."""

import numba as nb

from refsgd.errors import AgreedError


@nb.njit(cache=True, nogil=True)
def _all_finite(v):
    """Whether every element is finite, in one pass without a temporary: x * 0 is 0 for a finite
    x and NaN for an infinite or NaN one (an integer count, so that the loop vectorises)."""
    bad = 0
    for j in range(v.size):
        bad += v[j] * 0 != 0
    return bad == 0


@nb.njit(cache=True, nogil=True)
def _no_nan(v):
    """Whether no element is NaN (infinities allowed), in one pass without a temporary."""
    bad = 0
    for j in range(v.size):
        bad += v[j] != v[j]
    return bad == 0


class NonFiniteLoss(AgreedError):
    """The loss or the state became NaN or infinite (raised on every rank at the same iteration)."""
