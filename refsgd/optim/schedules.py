"""The learning-rate schedules (:class:`Constant`, :class:`WarmupStep`,
:class:`WarmupLinearDecay`, :class:`WarmupConstant`, :class:`ReduceOnPlateau`), the
:func:`make_schedule` factory and the :data:`SCHEDULES` table for a command line's help."""

import inspect
import math
import numbers

import numpy as np

from refsgd.errors import RefsgdError, did_you_mean

from .checks import _integer, _iteration, _real


# --------------------------------------------------------------------------------------------
# learning-rate schedules
# --------------------------------------------------------------------------------------------

def _warmup(t, start, peak, warmup_iters):
    """Linear warm-up value at iteration t < warmup_iters: reaches peak at t = warmup_iters-1."""
    return start + (peak - start) * (t + 1) / warmup_iters


class Schedule:
    """Base class: ``lr(t)`` gives the learning rate of iteration ``t`` (0-based)."""

    name = "schedule"

    def lr(self, t):
        raise NotImplementedError

    def __call__(self, t):
        return self.lr(t)

    def describe(self):
        raise NotImplementedError

    def _repr_args(self):
        raise NotImplementedError

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._repr_args())
        return f"{type(self).__name__}({args})"


class Constant(Schedule):
    """The same learning rate at every iteration.

    ``lr(t) = lr``
    """

    name = "constant"

    def __init__(self, lr):
        self.value = _real("lr", lr, 0.0)

    def lr(self, t):
        _iteration(t)
        return self.value

    def describe(self):
        return f"constant {self.value:g}"

    def _repr_args(self):
        return [("lr", self.value)]


class WarmupStep(Schedule):
    """Linear warm-up, then step decay at fixed iterations (LAGA, DASO).

    With W = warmup_iters and milestones m_1 < m_2 < ... (in iterations)::

        lr(t) = start + (peak - start) * (t + 1) / W        for t < W
        lr(t) = peak * gamma ** #{i : m_i <= t}             for t >= W

    so the warm-up reaches ``peak`` at its last iteration t = W - 1, and each milestone m
    multiplies the rate by ``gamma`` from iteration m on. W = 0 means no warm-up. Milestones
    must be strictly increasing and not inside the warm-up (m_1 >= W).
    """

    name = "warmup-step"

    def __init__(self, peak, warmup_iters, milestones, gamma=0.1, start=0.0):
        self.peak = _real("peak", peak, 0.0)
        self.warmup_iters = _integer("warmup_iters", warmup_iters, lo=0)
        self.gamma = _real("gamma", gamma, 0.0, 1.0, lo_open=True)
        self.start = _real("start", start, 0.0)
        if isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__"):
            raise RefsgdError(f"milestones must be a list of iterations, got {milestones!r}")
        ms = tuple(_integer("each milestone", m, lo=0) for m in milestones)
        for a, b in zip(ms, ms[1:]):
            if b <= a:
                raise RefsgdError(f"milestones must be strictly increasing, got {list(ms)}")
        if ms and ms[0] < self.warmup_iters:
            raise RefsgdError(
                f"milestones must not fall inside the warm-up (< warmup_iters="
                f"{self.warmup_iters}), got {list(ms)}; milestones are counted in iterations")
        self.milestones = ms

    def lr(self, t):
        t = _iteration(t)
        if t < self.warmup_iters:
            return _warmup(t, self.start, self.peak, self.warmup_iters)
        k = sum(1 for m in self.milestones if m <= t)
        return self.peak * self.gamma ** k

    def describe(self):
        head = (f"linear warm-up {self.start:g} -> {self.peak:g} over {self.warmup_iters} "
                f"iterations, then " if self.warmup_iters else f"{self.peak:g}, ")
        if not self.milestones:
            return head + "constant"
        at = ", ".join(str(m) for m in self.milestones)
        return head + f"x{self.gamma:g} at iterations {at}"

    def _repr_args(self):
        return [("peak", self.peak), ("warmup_iters", self.warmup_iters),
                ("milestones", self.milestones), ("gamma", self.gamma), ("start", self.start)]


class WarmupLinearDecay(Schedule):
    """Linear warm-up, then linear decrease to zero (DC-S3GD, section IV-A).

    With W = warmup_iters, T = total_iters, S = warmup_stop (S = W when not given)::

        lr(t) = start + (peak - start) * (t + 1) / W        for t < S   (the warm-up)
        p     = start + (peak - start) * S / W              (the value reached, = peak if S = W)
        lr(t) = p * (T - t) / (T - S)                       for S <= t <= T
        lr(t) = 0                                           for t >= T

    ``warmup_stop`` ends the warm-up early, at iteration S (1 <= S <= W), on the plateau value
    p reached so far; the decrease then starts from p at iteration S. The warm-up keeps the
    slope (peak - start)/W it would have had. W = 0 means no warm-up (p = peak, decrease
    from t = 0). Requires T > W.
    """

    name = "warmup-linear"

    def __init__(self, peak, warmup_iters, total_iters, start=0.0, warmup_stop=None):
        self.peak = _real("peak", peak, 0.0)
        self.warmup_iters = _integer("warmup_iters", warmup_iters, lo=0)
        self.total_iters = _integer("total_iters", total_iters, lo=1)
        self.start = _real("start", start, 0.0)
        if self.total_iters <= self.warmup_iters:
            raise RefsgdError(f"total_iters must be > warmup_iters, got total_iters="
                              f"{self.total_iters}, warmup_iters={self.warmup_iters}")
        if warmup_stop is None:
            self.warmup_stop = None
        else:
            if self.warmup_iters == 0:
                raise RefsgdError("warmup_stop needs a warm-up (warmup_iters > 0)")
            s = _integer("warmup_stop", warmup_stop, lo=1)
            if s > self.warmup_iters:
                raise RefsgdError(f"warmup_stop must be in [1, warmup_iters={self.warmup_iters}]"
                                  f", got {s}")
            self.warmup_stop = s

    @property
    def _stop(self):
        return self.warmup_iters if self.warmup_stop is None else self.warmup_stop

    @property
    def plateau(self):
        """The value the warm-up reaches, from which the decrease starts."""
        if self.warmup_iters == 0:
            return self.peak
        return _warmup(self._stop - 1, self.start, self.peak, self.warmup_iters)

    def lr(self, t):
        t = _iteration(t)
        s, total = self._stop, self.total_iters
        if t < s:
            return _warmup(t, self.start, self.peak, self.warmup_iters)
        if t >= total:
            return 0.0
        return self.plateau * (total - t) / (total - s)

    def describe(self):
        p = self.plateau
        if self.warmup_iters == 0:
            head = f"{p:g}"
        elif self.warmup_stop is None:
            head = f"linear warm-up {self.start:g} -> {p:g} over {self.warmup_iters} iterations"
        else:
            head = (f"linear warm-up {self.start:g} -> {self.peak:g} over "
                    f"{self.warmup_iters} iterations, stopped at iteration "
                    f"{self.warmup_stop} on {p:g}")
        return head + f", then linear decrease to 0 at iteration {self.total_iters}"

    def _repr_args(self):
        return [("peak", self.peak), ("warmup_iters", self.warmup_iters),
                ("total_iters", self.total_iters), ("start", self.start),
                ("warmup_stop", self.warmup_stop)]


class WarmupConstant(Schedule):
    """Linear warm-up, then constant (PP-ASGD).

    With W = warmup_iters::

        lr(t) = start + (peak - start) * (t + 1) / W        for t < W
        lr(t) = peak                                        for t >= W
    """

    name = "warmup-constant"

    def __init__(self, peak, warmup_iters, start=0.0):
        self.peak = _real("peak", peak, 0.0)
        self.warmup_iters = _integer("warmup_iters", warmup_iters, lo=0)
        self.start = _real("start", start, 0.0)

    def lr(self, t):
        t = _iteration(t)
        if t < self.warmup_iters:
            return _warmup(t, self.start, self.peak, self.warmup_iters)
        return self.peak

    def describe(self):
        if self.warmup_iters == 0:
            return f"constant {self.peak:g}"
        return (f"linear warm-up {self.start:g} -> {self.peak:g} over {self.warmup_iters} "
                f"iterations, then constant")

    def _repr_args(self):
        return [("peak", self.peak), ("warmup_iters", self.warmup_iters),
                ("start", self.start)]

#: the "best so far" before the first observation of the plateau rule: the largest float64,
#: finite so that a checkpoint holds no infinity; every finite x improves on it, as on +inf (an
#: infinite or NaN x does not, as before: the rule behaves as with +inf for every x)
NO_BEST = float(np.finfo(np.float64).max)


def plateaued(state, x, threshold, patience):
    """One observation x of the plateau rule (ReduceOnPlateau's, DASO's): ``state[0:2] = [best,
    bad_count]`` (float64, updated in place; best starts at :data:`NO_BEST`). True at the
    ``patience``-th observation in a row without a relative improvement of ``threshold`` over
    the best; the count then restarts. A NaN counts as no improvement."""
    if x < state[0] * (1.0 - threshold):
        state[0] = x
        state[1] = 0.0
        return False
    state[1] += 1.0
    if state[1] < patience:
        return False
    state[1] = 0.0
    return True


class ReduceOnPlateau(Schedule):
    """Divide the learning rate when a monitored metric (e.g. validation loss) stalls.

    State: the float64 array ``state = [best, bad_count, lr]``, initially ``[NO_BEST, 0, lr]``,
    updated in place by :meth:`observe` (save and restore it with a checkpoint). For each
    observed metric x (lower is better; x should be positive, like a loss)::

        if x < best * (1 - threshold):            (an improvement)
            best = x;  bad_count = 0
        else:
            bad_count = bad_count + 1
            if bad_count >= patience:
                lr = max(lr * factor, min_lr);  bad_count = 0

    ``lr(t)`` returns the current lr whatever t. Unlike PyTorch's ``ReduceLROnPlateau``
    (which reduces after ``patience + 1`` bad epochs), the reduction happens at the
    ``patience``-th bad observation in a row; there is no cooldown. A NaN metric counts as
    no improvement.
    """

    name = "plateau"

    def __init__(self, lr, factor=0.1, patience=2, threshold=0.05, min_lr=0.0):
        lr = _real("lr", lr, 0.0)
        self.factor = _real("factor", factor, 0.0, 1.0, lo_open=True, hi_open=True)
        self.patience = _integer("patience", patience, lo=1)
        self.threshold = _real("threshold", threshold, 0.0, 1.0, hi_open=True)
        self.min_lr = _real("min_lr", min_lr, 0.0)
        if lr < self.min_lr:
            raise RefsgdError(f"lr must be >= min_lr={self.min_lr:g}, got {lr:g}")
        self.initial_lr = lr
        self.state = np.array([NO_BEST, 0.0, lr], dtype=np.float64)

    @property
    def best(self):
        """The best metric so far (inf before the first observation)."""
        return math.inf if self.state[0] == NO_BEST else float(self.state[0])

    @property
    def bad_count(self):
        return int(self.state[1])

    def observe(self, metric):
        """Record one metric value; return True if the learning rate was reduced."""
        if isinstance(metric, (bool, np.bool_)) or not isinstance(metric, numbers.Real):
            raise RefsgdError(f"metric must be a number, got {metric!r}")
        st = self.state
        if not plateaued(st, float(metric), self.threshold, self.patience):
            return False
        old = st[2]
        st[2] = max(old * self.factor, self.min_lr)
        return bool(st[2] < old)

    def lr(self, t):
        _iteration(t)
        return float(self.state[2])

    def describe(self):
        return (f"{self.initial_lr:g}, x{self.factor:g} after {self.patience} observations "
                f"without a {self.threshold:g} relative improvement (min {self.min_lr:g})")

    def _repr_args(self):
        return [("lr", self.initial_lr), ("factor", self.factor), ("patience", self.patience),
                ("threshold", self.threshold), ("min_lr", self.min_lr)]

_CLASSES = {
    "constant": Constant,
    "warmup-step": WarmupStep,
    "warmup-linear": WarmupLinearDecay,
    "warmup-constant": WarmupConstant,
    "plateau": ReduceOnPlateau,
}

#: name -> one-line description, for a command line's help.
SCHEDULES = {
    "constant": "the same lr at every iteration (lr)",
    "warmup-step": "linear warm-up to peak, then x gamma at each milestone "
                   "(peak, warmup_iters, milestones, gamma, start)",
    "warmup-linear": "linear warm-up to peak, then linear decrease to 0 at total_iters "
                     "(peak, warmup_iters, total_iters, start, warmup_stop)",
    "warmup-constant": "linear warm-up to peak, then constant (peak, warmup_iters, start)",
    "plateau": "x factor after patience evaluations without improvement "
               "(lr, factor, patience, threshold, min_lr)",
}

# Epoch-based keyword -> iteration-based keyword, converted by make_schedule.
_EPOCH_KEYS = {
    "warmup_epochs": "warmup_iters",
    "total_epochs": "total_iters",
    "warmup_stop_epochs": "warmup_stop",
    "milestone_epochs": "milestones",
}


def _epochs_to_iters(key, value, iters_per_epoch):
    def one(e):
        e = _real(key, e, 0.0)
        return int(round(e * iters_per_epoch))
    if key == "milestone_epochs":
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise RefsgdError(f"milestone_epochs must be a list of epochs, got {value!r}")
        return [one(e) for e in value]
    return one(value)


def make_schedule(name, iters_per_epoch=None, **kwargs):
    """Build a schedule by name (a key of :data:`SCHEDULES`) from keyword arguments.

    The keywords are those of the schedule's class. Lengths may also be given in epochs,
    when ``iters_per_epoch`` is given: ``warmup_epochs``, ``total_epochs``,
    ``warmup_stop_epochs`` and ``milestone_epochs`` (possibly fractional) are converted to
    ``warmup_iters``, ``total_iters``, ``warmup_stop`` and ``milestones`` by
    ``round(epochs * iters_per_epoch)``. Raises RefsgdError for an unknown name, an unknown
    or missing keyword, or a bad value.
    """
    if name not in _CLASSES:
        raise RefsgdError(f"unknown learning-rate schedule {name!r}; "
                          f"choose one of {', '.join(_CLASSES)}")
    kwargs = dict(kwargs)
    epoch_keys = [k for k in kwargs if k in _EPOCH_KEYS]
    if epoch_keys:
        if iters_per_epoch is None:
            raise RefsgdError(f"schedule {name!r}: {', '.join(epoch_keys)} given in epochs "
                              "needs iters_per_epoch")
        ipe = _integer("iters_per_epoch", iters_per_epoch, lo=1)
        for k in epoch_keys:
            target = _EPOCH_KEYS[k]
            if target in kwargs:
                raise RefsgdError(f"schedule {name!r}: give {k} or {target}, not both")
            kwargs[target] = _epochs_to_iters(k, kwargs.pop(k), ipe)
    elif iters_per_epoch is not None:
        _integer("iters_per_epoch", iters_per_epoch, lo=1)

    cls = _CLASSES[name]
    params = list(inspect.signature(cls).parameters.values())
    accepted = [p.name for p in params]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        # the forms in epochs too, as --help shows them (make_schedule's callers give iters_per_epoch)
        in_epochs = {v: k for k, v in _EPOCH_KEYS.items()} if iters_per_epoch is not None else {}
        takes = [f"{a} (or {in_epochs[a]})" if a in in_epochs else a for a in accepted]
        hint = did_you_mean(unknown[0], accepted + [in_epochs[a] for a in accepted if a in in_epochs])
        raise RefsgdError(f"schedule {name!r}: unknown argument(s) {', '.join(unknown)}{hint}; "
                          f"it takes {', '.join(takes)}")
    missing = [p.name for p in params if p.default is p.empty and p.name not in kwargs]
    if missing:
        raise RefsgdError(f"schedule {name!r}: missing argument(s) {', '.join(missing)}")
    return cls(**kwargs)


def parse_schedule(text, lr, iters_per_epoch):
    """``NAME[:key=value,...]`` -> a schedule object; ``lr`` fills ``lr`` or ``peak``."""
    name, _, rest = text.partition(":")
    kwargs = {}
    for item in filter(None, rest.split(",")):
        key, eq, val = item.partition("=")
        if not eq:
            raise RefsgdError(f"--schedule {text}: expected key=value, got {item!r}")
        key, val = key.strip(), _value(val.strip())
        if key in kwargs:
            raise RefsgdError(f"--schedule {text}: {key} is given twice")
        if key in ("milestones", "milestone_epochs") and not isinstance(val, list):
            val = [val]
        kwargs[key] = val
    if name in ("constant", "plateau"):
        kwargs.setdefault("lr", lr)
    else:
        kwargs.setdefault("peak", lr)
    return make_schedule(name, iters_per_epoch=iters_per_epoch, **kwargs)


def _value(text):
    if "/" in text:
        return [_value(t) for t in text.split("/")]
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text
