r"""The local optimizer U and the learning-rate schedules.

This module holds

* :class:`SGD`, the local update rule ``U`` that every distributed method applies to a
  (local, averaged, stale or corrected) gradient: stochastic gradient descent with optional
  momentum, Nesterov momentum and L2 weight decay, in one of two momentum conventions;
* the learning-rate schedules (:class:`Constant`, :class:`WarmupStep`,
  :class:`WarmupLinearDecay`, :class:`WarmupConstant`, :class:`ReduceOnPlateau`), the
  :func:`make_schedule` factory and the :data:`SCHEDULES` table for a command line's help.

Conventions: parameters ``w`` and gradients ``g`` are flat 1-D NumPy arrays of one floating
dtype (float32 or float64). Every update happens in place, on ``w`` and on the optimizer's
state arrays, which are plain arrays (exposed in ``SGD.state``) so that a checkpoint can save
them and later write them back. The learning rate is not part of the optimizer: it is passed
to every call, and a schedule supplies it.

Two momentum forms
------------------
With learning rate ``lr_t`` at step t, momentum ``mu``, weight decay ``wd`` and the decayed
gradient ``g'_t = g_t + wd * w_{t-1}``::

    form="pytorch" (buffer b, b_0 = 0)        form="mxnet" (velocity v, v_0 = 0)
    ----------------------------------        ----------------------------------
    b_t = mu * b_{t-1} + g'_t                 v_t = mu * v_{t-1} - lr_t * g'_t
    w_t = w_{t-1} - lr_t * b_t                w_t = w_{t-1} + v_t

The PyTorch form (``torch.optim.SGD`` with dampening 0) accumulates gradients and applies the
*current* learning rate to the whole buffer; the MXNet form (MXNet's ``sgd_mom_update``, and
the notation of Sato et al. used by DC-S3GD and PP-ASGD) accumulates moves, each already scaled
by the learning rate of the step that produced it.

Equivalence. Start both forms from the same ``w_0`` with zero state, feed them the same
gradients, and keep the learning rate constant, ``lr_t = eta`` for every t. Then, by induction,

    v_t = -eta * b_t        for every t >= 0,

(``v_t = mu*v_{t-1} - eta*g'_t = -eta*(mu*b_{t-1} + g'_t) = -eta*b_t``), so the moves
``-eta*b_t`` and ``v_t`` coincide and so do the weight trajectories (up to rounding, which
differs because the products are formed in a different order). The relationship breaks as
soon as the learning rate changes: if it goes from eta to eta' at step t, the PyTorch form
moves by ``-eta'*(mu*b_{t-1} + g'_t) = mu*(eta'/eta)*v_{t-1} - eta'*g'_t``, i.e. it rescales
the accumulated velocity by ``eta'/eta``, while the MXNet form keeps the old velocity
``mu*v_{t-1}`` and applies eta' only to the new gradient. With a warm-up or a decaying
schedule the two trajectories therefore differ (slightly, when the lr changes slowly; visibly
at a step decay). The relationship also gives the state conversion at a given lr:
``v = -lr*b``, ``b = -v/lr`` (lr > 0). Nesterov momentum is offered in the PyTorch form only.
Without momentum (mu = 0) the two forms are the same rule, ``w_t = w_{t-1} - lr_t * g'_t``.
"""

import inspect
import math
import numbers
import operator

import numba as nb
import numpy as np

from refsgd import RefsgdError, did_you_mean

__all__ = [
    "SGD",
    "Schedule",
    "Constant",
    "WarmupStep",
    "WarmupLinearDecay",
    "WarmupConstant",
    "ReduceOnPlateau",
    "make_schedule",
    "SCHEDULES",
]

FORMS = ("pytorch", "mxnet")
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


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


# --------------------------------------------------------------------------------------------
# the local optimizer
# --------------------------------------------------------------------------------------------

def decay_mask(net):
    """1 where weight decay applies and 0 in frozen layers, in the network's dtype; None when
    every parameter is trainable (the methods then decay the whole vector)."""
    return None if net.trainable.all() else net.trainable.astype(net.dtype)


class SGD:
    r"""Stochastic gradient descent with momentum and weight decay, updating ``w`` in place.

    ``SGD(num_params, dtype, momentum=0.0, nesterov=False, weight_decay=0.0,
    form="pytorch", decay_mask=None)``

    This is the local optimizer ``U`` of the distributed methods: it turns a gradient and a
    learning rate into a change of the flat parameter vector. It owns its state (momentum
    buffer or velocity) and two scratch vectors at most, all allocated once here, so a step
    allocates no memory of size ``num_params``.

    Algorithm, ``form="pytorch"`` (``torch.optim.SGD`` with dampening 0)::

        -----------------------------------------------------------------------------
        input : w_0 (params), lr_t (per call), mu (momentum), wd (weight decay),
                m (decay mask: 1 where decayed, 0 elsewhere; all ones by default),
                nesterov
        state : b_0 = 0                            (state["momentum_buffer"], if mu > 0)
        -----------------------------------------------------------------------------
        for t = 1, 2, ...
            g'_t = g_t + wd * m * w_{t-1}
            if mu > 0
                b_t = mu * b_{t-1} + g'_t          (the first step gives b_1 = g'_1)
                if nesterov:  d_t = g'_t + mu * b_t
                else:         d_t = b_t
            else
                d_t = g'_t
            w_t = w_{t-1} - lr_t * d_t
        -----------------------------------------------------------------------------

    Algorithm, ``form="mxnet"`` (MXNet's momentum SGD; Sato's notation in DC-S3GD, PP-ASGD)::

        -----------------------------------------------------------------------------
        input : w_0, lr_t, mu, wd, m               (nesterov is not available)
        state : v_0 = 0                            (state["v"], always present)
        -----------------------------------------------------------------------------
        for t = 1, 2, ...
            v_t = mu * v_{t-1} - lr_t * (g_t + wd * m * w_{t-1})      <- delta() stops here
            w_t = w_{t-1} + v_t                                        <- step() also does this
        -----------------------------------------------------------------------------

    See the module docstring for how the two forms relate (``v = -lr*b`` at constant lr).

    Args:
        num_params: length of the flat vectors ``w`` and ``g``.
        dtype: float32 or float64; ``w`` and ``g`` must have this dtype, and the state does.
        momentum: ``mu`` in [0, 1).
        nesterov: Nesterov momentum (PyTorch form only; needs ``momentum > 0``).
        weight_decay: L2 coefficient ``wd >= 0``, added to the gradient (coupled decay).
        form: ``"pytorch"`` or ``"mxnet"``.
        decay_mask: optional bool array of shape ``(num_params,)``: weight decay is applied
            only where it is True. Meant for frozen layers: their gradient is zero, and with
            the mask False there their weights (and momentum) stay exactly where they are.

    Attributes:
        state: dict name -> array of shape ``(num_params,)`` and dtype ``dtype``:
            ``{"momentum_buffer": b}`` (PyTorch form, momentum > 0), ``{"v": v}`` (MXNet
            form, with or without momentum), ``{}`` (PyTorch form without momentum). The
            arrays are updated in place and never replaced, so a reference to them stays
            valid; to restore a checkpoint, write into them (or use :meth:`load_state`).
    """

    def __init__(self, num_params, dtype, momentum=0.0, nesterov=False, weight_decay=0.0,
                 form="pytorch", decay_mask=None):
        self.num_params = _integer("num_params", num_params, lo=0)
        try:
            dt = np.dtype(dtype)
        except TypeError:
            raise RefsgdError(f"dtype must be float32 or float64, got {dtype!r}") from None
        if dt not in _DTYPES:
            raise RefsgdError(f"dtype must be float32 or float64, got {dt}")
        self.dtype = dt
        self.momentum = _real("momentum", momentum, 0.0, 1.0, hi_open=True)
        self.weight_decay = _real("weight_decay", weight_decay, 0.0)
        if form not in FORMS:
            raise RefsgdError(f"form must be one of {', '.join(FORMS)}, got {form!r}")
        self.form = form
        if not isinstance(nesterov, (bool, np.bool_)):
            raise RefsgdError(f"nesterov must be True or False, got {nesterov!r}")
        self.nesterov = bool(nesterov)
        if self.nesterov and form == "mxnet":
            raise RefsgdError("nesterov=True is only available with form='pytorch', "
                              "not with form='mxnet'")
        if self.nesterov and self.momentum == 0.0:
            raise RefsgdError("nesterov=True needs momentum > 0, got momentum=0")

        n = self.num_params
        self.decay_mask = None
        if decay_mask is not None:
            mask = np.asarray(decay_mask)
            if mask.dtype != np.bool_:
                raise RefsgdError(f"decay_mask must be a bool array, got dtype {mask.dtype}")
            if mask.shape != (n,):
                raise RefsgdError(
                    f"decay_mask must have shape ({n},) (num_params), got {mask.shape}")
            self.decay_mask = mask.copy()
            self.decay_mask.setflags(write=False)

        # The weight-decay factor multiplying w: a scalar, or wd * mask as a vector.
        if self.weight_decay == 0.0:
            self._wd = None
        elif self.decay_mask is None:
            self._wd = self.weight_decay
        else:
            self._wd = np.where(self.decay_mask, self.weight_decay, 0.0).astype(dt)

        # the fused step's view of the decay: a 0/1 mask (empty: every weight decayed)
        self._mask = np.zeros(0, dt) if self.decay_mask is None else self.decay_mask.astype(dt)
        self._none = np.zeros(0, dt)
        self.state = {}
        if form == "pytorch" and self.momentum > 0.0:
            self.state["momentum_buffer"] = np.zeros(n, dtype=dt)
        elif form == "mxnet":
            self.state["v"] = np.zeros(n, dtype=dt)

        # Scratch: _s holds g' (or lr*d); _s2 holds the Nesterov direction when _s holds g'.
        self._s = np.empty(n, dtype=dt)
        need_s2 = self.nesterov and self._wd is not None
        self._s2 = np.empty(n, dtype=dt) if need_s2 else None

    # ---------------------------------------------------------------------------- public API

    def step(self, w, g, lr, divide=1):
        """Apply one update to ``w`` in place (and to the state); return None.

        ``g`` is only read, never modified, so the caller may keep using it, e.g. to send it to
        other ranks. ``divide``: the gradient is ``g / divide`` (e.g. a sum over N ranks and
        divide = N), each element divided in ``g``'s dtype inside the same pass, so the result
        is bit for bit that of ``g /= divide`` followed by the step, without a pass of its own.
        One fused pass over the vectors (:func:`_fused_step`), with the same element-wise
        operations in the same order as the NumPy form (:meth:`_step_numpy`), so the two agree
        bit for bit.
        """
        lr = self._check(w, g, lr)
        t = self.dtype.type
        state = self.state.get("momentum_buffer", self.state.get("v", self._none))
        _fused_step(w, g, state, t(self.weight_decay), self._mask, t(lr), t(self.momentum),
                    self.form == "mxnet", self.nesterov, t(_divisor(divide)))
        return None

    def _step_numpy(self, w, g, lr, divide=1):
        """The update in NumPy passes (kept as the readable statement of :meth:`step` and its test)."""
        lr = self._check(w, g, lr)
        if _divisor(divide) != 1:
            g = g / divide
        if self.form == "mxnet":
            w += self._velocity(w, g, lr)
            return None

        s = self._s
        gp = self._decayed(w, g)            # g' (g itself when there is no decay)
        if self.momentum == 0.0:
            d = gp
        else:
            b = self.state["momentum_buffer"]
            b *= self.momentum
            b += gp
            if self.nesterov:
                d = self._s2 if gp is s else s
                np.multiply(b, self.momentum, out=d)
                d += gp
            else:
                d = b
        # w -= lr * d, with lr * d formed in a scratch vector (d itself if it is one).
        tmp = d if (d is s or d is self._s2) else s
        np.multiply(d, lr, out=tmp)
        w -= tmp
        return None

    def delta(self, w, g, lr):
        """MXNet form only: advance the velocity and return it, without moving ``w``.

        Computes ``v <- mu*v - lr*(g + wd*m*w)`` in place on ``state["v"]`` and returns that
        array: the move ``dw = U(g, eta, mu)`` of DC-S3GD, to be applied (``w += dw``) by the
        caller, possibly after adding other terms. ``w`` is only read (for the weight decay)
        and ``g`` is not modified. The returned array IS the optimizer's state, not a copy:
        do not write into it, and copy it if it must outlive the next call.
        """
        if self.form != "mxnet":
            raise RefsgdError("SGD.delta() is only defined for form='mxnet' "
                              f"(this optimizer has form={self.form!r}); use step()")
        lr = self._check(w, g, lr)
        return self._velocity(w, g, lr)

    def load_state(self, arrays):
        """Copy saved state arrays (a mapping like ``state``) into ``state``, in place."""
        if set(arrays) != set(self.state):
            raise RefsgdError(f"optimizer state has entries {sorted(self.state)}, "
                              f"got {sorted(arrays)}")
        for name, dst in self.state.items():
            src = np.asarray(arrays[name])
            if src.shape != dst.shape:
                raise RefsgdError(f"optimizer state {name!r} must have shape {dst.shape}, "
                                  f"got {src.shape}")
            np.copyto(dst, src, casting="same_kind")

    def __repr__(self):
        parts = [f"num_params={self.num_params}", f"dtype={self.dtype.name}",
                 f"momentum={self.momentum:g}"]
        if self.nesterov:
            parts.append("nesterov=True")
        parts.append(f"weight_decay={self.weight_decay:g}")
        parts.append(f"form={self.form!r}")
        if self.decay_mask is not None:
            parts.append(f"decay_mask=<{int(self.decay_mask.sum())}/{self.num_params} decayed>")
        return f"SGD({', '.join(parts)})"

    # ------------------------------------------------------------------------------ helpers

    def _check(self, w, g, lr):
        n, dt = self.num_params, self.dtype
        for name, a in (("w", w), ("g", g)):
            if not isinstance(a, np.ndarray) or a.shape != (n,) or a.dtype != dt:
                got = (f"shape {a.shape}, dtype {a.dtype}" if isinstance(a, np.ndarray)
                       else type(a).__name__)
                raise RefsgdError(f"{name} must be a 1-D {dt.name} array of length {n}, "
                                  f"got {got}")
        if not w.flags.writeable:
            raise RefsgdError("w must be writeable (it is updated in place)")
        return _real("learning rate", lr, 0.0)

    def _decayed(self, w, g):
        """Return g + wd*m*w, formed in the scratch ``_s`` (or g itself when wd == 0)."""
        if self._wd is None:
            return g
        s = self._s
        np.multiply(w, self._wd, out=s)
        s += g
        return s

    def _velocity(self, w, g, lr):
        """v <- mu*v - lr*(g + wd*m*w), in place; return v."""
        v = self.state["v"]
        s = self._s
        gp = self._decayed(w, g)
        np.multiply(gp, lr, out=s)          # safe when gp is s: elementwise, in place
        if self.momentum != 0.0:
            v *= self.momentum
            v -= s
        else:
            np.negative(s, out=v)
        return v


def momentum_predict(w, M, w_hat, D, lam, mu, h=None):
    """Sato et al.'s update in one pass, in place: ``M <- mu*M - lam*D``, ``w <- w + M``, and
    ``w^ <- w + h*M`` (h = mu: SSGD-NAG; h = sum_{s=1}^{S+1} mu^s: PP-ASGD's f_S) or ``w^ <- w``
    (h None: naive ASGD). Element-wise in NumPy's order, so bit for bit the NumPy passes."""
    t = w.dtype.type
    _momentum_predict(w, M, w_hat, D, t(lam), t(mu), t(0 if h is None else h), h is not None)


@nb.njit(cache=True, nogil=True)
def _momentum_predict(w, M, w_hat, D, lam, mu, h, predict):
    for j in range(w.size):
        M[j] = M[j] * mu - lam * D[j]
        w[j] = w[j] + M[j]
        w_hat[j] = w[j] + h * M[j] if predict else w[j]


def _divisor(divide):
    if isinstance(divide, (bool, np.bool_)) or not isinstance(divide, (int, np.integer)) or divide < 1:
        raise RefsgdError(f"divide must be a positive integer (a number of ranks), got {divide!r}")
    return int(divide)


def fused_step(w, g, state, lr, momentum=0.0, weight_decay=0.0, mask=None, nesterov=False, mxnet=False):
    """One pass of the local update on flat vectors, in place (see :class:`SGD`): ``state`` is the
    momentum buffer (PyTorch form), the velocity (``mxnet``) or None; ``mask`` (0/1 in w's dtype,
    or None) limits the weight decay. For methods whose listing owns its state (e.g. LAGA's m)."""
    t = w.dtype.type
    empty = np.zeros(0, w.dtype)
    _fused_step(w, g, empty if state is None else state, t(weight_decay), empty if mask is None else mask, t(lr),
                t(momentum), mxnet, nesterov, t(1))


@nb.njit(cache=True, nogil=True)
def _fused_step(w, g, state, wd, mask, lr, mu, mxnet, nesterov, div):
    """SGD.step in one pass: per element, the operations of :meth:`SGD._step_numpy` in its order.

    The scalars have the vectors' dtype (as NumPy casts a Python float), so float32 stays
    float32 throughout. ``state`` is the momentum buffer (PyTorch form), the velocity (MXNet
    form) or empty (PyTorch form without momentum); ``mask`` is empty when every weight decays;
    the gradient is ``g / div``, divided always (x / 1 is x exactly). Each form has a loop of its
    own: with the forms' branches in one loop, LLVM left the loop without momentum unvectorised
    (5x slower), as it did a branch around the division (7x).
    """
    if mxnet:
        _mxnet_pass(w, g, state, wd, mask, lr, mu, div)
    elif state.size == 0:
        _plain_pass(w, g, wd, mask, lr, div)
    else:
        _momentum_pass(w, g, state, wd, mask, lr, mu, nesterov, div)


@nb.njit(cache=True, nogil=True)
def _plain_pass(w, g, wd, mask, lr, div):
    masked = mask.size > 0
    for j in range(w.size):
        gp = g[j] / div
        if wd != 0:
            gp = w[j] * (wd * mask[j] if masked else wd) + gp    # g' = g + wd*m*w
        w[j] = w[j] - gp * lr                                    # w = w - lr*g'


@nb.njit(cache=True, nogil=True)
def _momentum_pass(w, g, b, wd, mask, lr, mu, nesterov, div):
    masked = mask.size > 0
    for j in range(w.size):
        gp = g[j] / div
        if wd != 0:
            gp = w[j] * (wd * mask[j] if masked else wd) + gp    # g' = g + wd*m*w
        b[j] = b[j] * mu + gp                                    # b = mu*b + g'
        d = b[j] * mu + gp if nesterov else b[j]
        w[j] = w[j] - d * lr                                     # w = w - lr*d


@nb.njit(cache=True, nogil=True)
def _mxnet_pass(w, g, v, wd, mask, lr, mu, div):
    masked = mask.size > 0
    for j in range(w.size):
        gp = g[j] / div
        if wd != 0:
            gp = w[j] * (wd * mask[j] if masked else wd) + gp    # g' = g + wd*m*w
        s = gp * lr
        if mu != 0:
            v[j] = v[j] * mu - s                                 # v = mu*v - lr*g'
        else:
            v[j] = -s
        w[j] = w[j] + v[j]                                       # w = w + v


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
