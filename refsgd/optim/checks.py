"""The argument checks shared by the local optimizer and the schedules: a real number in an
interval, a non-negative integer, an iteration; each error names the argument."""

import math
import numbers
import operator

import numpy as np

from refsgd.errors import RefsgdError


# --------------------------------------------------------------------------------------------
# argument checks (shared by the optimizer and the schedules)
# --------------------------------------------------------------------------------------------

def _interval(lo, hi, lo_open, hi_open):
    if hi is None:
        return f"{'>' if lo_open else '>='} {lo:g}"
    return f"in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"


def _real(name, value, lo=0.0, hi=None, lo_open=False, hi_open=False):
    """Return ``value`` as a finite float in the given interval, or raise RefsgdError."""
    where = _interval(lo, hi, lo_open, hi_open)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise RefsgdError(f"{name} must be a number {where}, got {value!r}")
    x = float(value)
    if (not math.isfinite(x)
            or (x <= lo if lo_open else x < lo)
            or (hi is not None and (x >= hi if hi_open else x > hi))):
        raise RefsgdError(f"{name} must be {where}, got {value!r}")
    return x


def _integer(name, value, lo=0):
    """Return ``value`` as a Python int >= lo, or raise RefsgdError."""
    if isinstance(value, (bool, np.bool_)):
        raise RefsgdError(f"{name} must be an integer >= {lo}, got {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise RefsgdError(f"{name} must be an integer >= {lo}, got {value!r}") from None
    if n < lo:
        raise RefsgdError(f"{name} must be an integer >= {lo}, got {value!r}")
    return n


def _iteration(t):
    """Check a schedule's iteration index (0-based)."""
    if isinstance(t, (bool, np.bool_)):
        raise RefsgdError(f"iteration t must be an integer >= 0, got {t!r}")
    try:
        t = operator.index(t)
    except TypeError:
        raise RefsgdError(f"iteration t must be an integer >= 0, got {t!r}") from None
    if t < 0:
        raise RefsgdError(f"iteration t must be an integer >= 0, got {t}")
    return t
