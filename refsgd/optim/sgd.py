"""The local optimizer U (:class:`SGD`: momentum in the PyTorch or the MXNet form, Nesterov,
L2 weight decay; see :mod:`refsgd.optim` for the two forms) and the fused one-pass updates the
methods call directly (:func:`fused_step`, :func:`momentum_predict`)."""

import numba as nb
import numpy as np

from refsgd.errors import RefsgdError

from .checks import _integer, _real

FORMS = ("pytorch", "mxnet")

_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


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


def warm(dtype):
    """Call the kernels of :class:`SGD`, :func:`fused_step` and :func:`momentum_predict` once, on
    one-element vectors of ``dtype``: a kernel's first call in a process types its arguments in
    Python (about 1 ms) before Numba loads it from its cache or compiles it. A run does this
    before its clock starts, so that its first update holds the update alone. The wrappers cast
    every scalar to the vectors' dtype, so these calls have the run's signatures."""
    t = np.dtype(dtype).type
    w, g, none = np.ones(1, dtype), np.ones(1, dtype), np.zeros(0, dtype)
    _fused_step(w, g, none, t(0), none, t(0), t(0), False, False, t(1))
    _momentum_predict(w, g.copy(), g.copy(), g, t(0), t(0), t(0), False)


def horizon(mu, S):
    """sum_{s=1}^{S+1} mu^s, the coefficient of M in PP-ASGD's f_S (Sato et al. 2017, eq. 2)."""
    return float(sum(mu ** s for s in range(1, S + 2)))


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
