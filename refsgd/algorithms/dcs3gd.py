"""DC-S3GD: Delay-Compensated Stale-Synchronous SGD (Rigazzi 2019, Algorithm 1).

A. Rigazzi, "DC-S3GD: Delay-Compensated Stale-Synchronous SGD for Large-Scale Decentralized
Neural Network Training", 2019. docs/algorithms.md, section DC-S3GD; equations 7-12 and 17.

    Input: step eta, momentum mu, variance control lambda_0. Initialize w_i = w_bar.
    L1  g_i <- grad l(w_i)
    L2  dw_i <- U(g_i, eta, mu)
    L3  w_i <- w_i + dw_i
    L4  for t < max_iterations do
    L5      MPI_Iallreduce(dw_i)                            non-blocking, dw_bar = sum_i dw_i
    L6      g_i <- grad l(w_i)
    L7      dw_bar <- MPI_Wait()
    L8      D_i <- (1/N) dw_bar - dw_i                      eq. 9
    L9      g~_i <- g_i + lambda_i g_i (.) g_i (.) D_i      eq. 10
    L10     dw_i <- U(g~_i, eta, mu)                        eq. 11
    L11     w_i <- w_i + D_i + dw_i                         eq. 12
    L12 end
    lambda_i = lambda_0 ||g_i|| / ||g_i (.) g_i (.) D_i||    eq. 17, lambda_0 = 0.2

Run: ``mpiexec -n 4 refsgd train --algo dcs3gd --momentum 0.9 --lambda0 0.2
--schedule warmup-linear:warmup_epochs=2,total_epochs=10 --lr <N * eta_sn>``. The gradient of
L6 is computed while the all-reduce of L5 is in flight: with communication as slow as
computation an iteration costs max(compute, all-reduce) (eq. 14) instead of their sum (eq. 13).

Deviations and readings:

* U is momentum SGD in MXNet's form with its state v local to the worker,
  ``v <- mu*v - eta*(g + wd*w); dw = v`` (the paper's toolkit is MXNet; ``--momentum-form`` and
  ``--nesterov`` do not apply and are refused). The weight decay follows the learning-rate schedule and is multiplied by k
  (section IV-A): ``wd_t = k * weight_decay * lr(t) / lr_peak`` with k = ``--wd-k``
  (2.3 in the paper) and lr_peak the schedule's largest value.
* The paper does not say over what eq. 17's norms run: over the whole parameter vector
  (``--lambda-norm whole``, the default) or over each tensor of the layout, each with its own
  lambda (``tensor``; the paper's MXNet KVStore updates one tensor at a time). The choice moves
  dw_i by ~20% on a small MLP and is recorded in every output. Where ``g (.) g (.) D`` is zero
  the correction is zero (no division by zero). ``--lambda0 0`` switches the compensation off.
* Weight decay enters U after the eq. 10 correction, at the worker's own w_i, outside eq. 17's
  norms, and never in frozen layers (their weights stay at their initial values).
* The prologue L1-L3 is iteration 0 (it consumes one micro-batch like every iteration), so a
  run of T iterations computes T gradients; the loop body L5-L11 is iterations 1..T-1.
* The listing leaves every worker with its own w_i. The model that is evaluated and returned
  is the average of the workers' w_i (an all-reduce at evaluation time only); its frozen
  weights are copied, not averaged, so that they stay bitwise w0 (``Collectives.average_model``).
* One micro-batch per iteration (``--tau 1``): the paper does not accumulate.
* ``--allreduce ring``: L5's non-blocking ``MPI_Iallreduce`` becomes refsgd's uncompressed
  Ring-AllReduce over point-to-point messages, blocking (:meth:`refsgd.run.Collectives.ring_sum`), and L7
  has nothing to wait for: the same bits under any MPI library and as the serial rendering, but
  no overlap of L5 with L6's gradient (eq. 13's cost, not eq. 14's). So is the evaluation's
  model average. Eq. 17's two norms are then summed in index order, as the serial rendering
  does; under the default ``--allreduce mpi`` LLVM vectorises them (``reassoc``, 5x faster in
  float32 here), in an order of the machine's, so that a trace matches the golden file to
  round-off even at 2 ranks. The default keeps the listing's overlap.
* L8-L11 are element-wise; they run as one Numba loop (:func:`corrected_step`, the listing's
  lines as comments) in two passes, because eq. 17 needs the norms of whole vectors before
  L9 can be applied. The NumPy form is the serial rendering's (refsgd/serial/dc.py).
"""

import numba as nb
import numpy as np

from refsgd.optim import decay_mask


def train(run):
    comm, N = run.comm, run.world
    lambda0, mu = run.cfg.lambda0, run.cfg.momentum
    w_i = run.register("w_i", run.init_params())          # Initialize w_i = w_bar
    dw_i = run.register("dw_i", np.zeros_like(w_i))
    v = run.register("U.v", np.zeros_like(w_i))            # U's momentum, local to the worker
    dw_bar = np.empty_like(w_i)
    g_i = np.empty_like(w_i)
    w_bar = np.empty_like(w_i)
    wd_at = weight_decay_schedule(run)
    bounds = parts(run.net, run.cfg.lambda_norm)
    lams = np.zeros(bounds.size - 1)
    mask = decay_mask(run.net)
    decay = np.zeros(0, w_i.dtype) if mask is None else mask

    def U(g, t):
        """dw = U(g, eta, mu): v <- mu*v - eta*(g + wd_t*w_i), in place (no decay in frozen layers);
        returns v."""
        eta, wd = run.lr(t), wd_at(t)
        # in the order of eq. 11 (and of the serial rendering): eta times the decayed gradient
        decayed = g + (wd * w_i if mask is None else (wd * mask) * w_i) if wd else g
        np.multiply(v, mu, out=v)
        np.subtract(v, eta * decayed, out=v)
        return v

    def average():
        with run.clock.idle("evaluation MPI_Allreduce(w_i)"):
            return run.collectives.average_model(comm, w_i, w_bar)
    run.set_model(average)

    for t in run.iterations():
        if t == 0:
            # L1: g_i <- grad l(w_i)                                         (compute)
            run.grad(w_i, g_i, label="L1 g_i <- grad l(w_i)")
            # L2: dw_i <- U(g_i, eta, mu)
            dw_i[...] = U(g_i, t)
            # L3: w_i <- w_i + dw_i
            w_i += dw_i
            continue
        # L4: for t < max_iterations
        # L5: MPI_Iallreduce(dw_i)                                           (start communication)
        req = run.collectives.iallreduce(comm, dw_i, dw_bar, "L5 MPI_Iallreduce(dw_i)")  # --allreduce ring: blocking, None
        # L6: g_i <- grad l(w_i)                                             (compute)
        run.grad(w_i, g_i, progress=req, label="L6 g_i <- grad l(w_i)")
        # L7: dw_bar <- MPI_Wait()                                           (complete communication)
        run.collectives.wait(req, "L7 dw_bar <- MPI_Wait()")
        # L8:  D_i <- (1/N) dw_bar - dw_i                                    eq. 9
        # L9:  g~_i <- g_i + lambda_i g_i (.) g_i (.) D_i                     eq. 10, 17
        # L10: dw_i <- U(g~_i, eta, mu)                                      eq. 11
        # L11: w_i <- w_i + D_i + dw_i                                       eq. 12
        with run.clock.update("L8 D_i, g~_i, dw_i, w_i (L8-L11)"):
            _corrected_step(w_i, dw_i, v, g_i, dw_bar, N, lambda0, run.lr(t), mu, wd_at(t), bounds, decay, lams,
                            run.collectives.ring)
    return w_i


@nb.njit(cache=True, nogil=True, fastmath={"reassoc"})
def _eq17_norms(dw_i, g_i, dw_bar, N):
    """(||g_i||^2, ||g_i (.) g_i (.) D_i||^2) with D_i = (1/N) dw_bar - dw_i, in float64.

    ``reassoc`` lets LLVM vectorise the two sums (it halves the time of the whole step); it
    changes only the order of their additions, not any element-wise result, but that order is
    the machine's (its vector width): :func:`_eq17_norms_ordered` is the reference's.
    """
    gg = 0.0
    ggDD = 0.0
    for j in range(g_i.size):
        D = dw_bar[j] / N - dw_i[j]                     # L8: D_i = (1/N) dw_bar - dw_i
        ggD = g_i[j] * g_i[j] * D
        gg += g_i[j] * g_i[j]
        ggDD += ggD * ggD
    return gg, ggDD


@nb.njit(cache=True, nogil=True)
def _eq17_norms_ordered(dw_i, g_i, dw_bar, N):
    """:func:`_eq17_norms` summed in index order j = 0, 1, ..., as the serial rendering does
    (``--allreduce ring``: bitwise the golden file on any machine)."""
    gg = 0.0
    ggDD = 0.0
    for j in range(g_i.size):
        D = dw_bar[j] / N - dw_i[j]                     # L8: D_i = (1/N) dw_bar - dw_i
        ggD = g_i[j] * g_i[j] * D
        gg += g_i[j] * g_i[j]
        ggDD += ggD * ggD
    return gg, ggDD


def corrected_step(w_i, dw_i, v, g_i, dw_bar, N, lambda0, eta, mu, wd, bounds=None, decay=None, lams=None,
                   ordered=False):
    """L8-L11 (eq. 9-12, 17) in place (see :func:`_corrected_step`); returns lams, each part's lambda_i.
    Defaults: one part (the whole vector), every parameter decayed."""
    if bounds is None:
        bounds = np.array([0, w_i.size], dtype=np.int64)
    if decay is None:
        decay = np.zeros(0, w_i.dtype)
    if lams is None:
        lams = np.zeros(bounds.size - 1)
    _corrected_step(w_i, dw_i, v, g_i, dw_bar, N, lambda0, eta, mu, wd, bounds, decay, lams, ordered)
    return lams


@nb.njit(cache=True, nogil=True)
def _corrected_step(w_i, dw_i, v, g_i, dw_bar, N, lambda0, eta, mu, wd, bounds, decay, lams, ordered):
    """L8-L11 (eq. 9-12, 17) element-wise, in two passes over each part of the vectors.

    The parts are ``[bounds[k], bounds[k+1])``: the whole vector (``--lambda-norm whole``,
    bounds = [0, d]) or each tensor of the layout (``tensor``); each part's lambda_i goes to
    ``lams[k]``. The second pass needs eq. 17's norms over the part, which the first computes.
    ``decay`` is 1 where a parameter is decayed and 0 in frozen layers (empty: all decayed).
    ``ordered``: eq. 17's norms in index order (:func:`_eq17_norms_ordered`), not vectorised.
    NumPy would take some fifteen passes with temporaries: on mnist_mlp that cost as much as
    the gradient and ate the overlap. The scalars (N, lambda_i, eta, mu, wd) enter the element-wise
    arithmetic in the vectors' dtype, as NumPy casts a Python float: a float32 run computes in
    float32 (in float64 it ran 2.7x slower), a float64 run is unchanged.
    """
    c = np.empty(5, w_i.dtype)                           # N, eta, mu, wd, lambda_i in w's dtype
    c[0], c[1], c[2], c[3] = N, eta, mu, wd
    for k in range(bounds.size - 1):
        # views of the part: loops from 0 over a view vectorise, loops from lo do not
        p = slice(bounds[k], bounds[k + 1])
        if ordered:
            gg, ggDD = _eq17_norms_ordered(dw_i[p], g_i[p], dw_bar[p], c[0])
        else:
            gg, ggDD = _eq17_norms(dw_i[p], g_i[p], dw_bar[p], c[0])
        lam = 0.0
        if ggDD > 0 and lambda0 != 0:
            lam = lambda0 * np.sqrt(gg) / np.sqrt(ggDD)     # eq. 17
        lams[k] = lam
        c[4] = lam
        if decay.size == 0:
            _update(w_i[p], dw_i[p], v[p], g_i[p], dw_bar[p], c[0], c[4], c[1], c[2], c[3])
        else:
            _update_masked(w_i[p], dw_i[p], v[p], g_i[p], dw_bar[p], c[0], c[4], c[1], c[2], c[3], decay[p])


@nb.njit(cache=True, nogil=True)
def _update(w_i, dw_i, v, g_i, dw_bar, N, lam, eta, mu, wd):
    """L8-L11 with lambda_i = lam (every weight decayed)."""
    for j in range(w_i.size):
        D = dw_bar[j] / N - dw_i[j]                         # L8: D_i = (1/N) dw_bar - dw_i
        gt = g_i[j] + lam * (g_i[j] * g_i[j] * D)           # L9: g~_i = g_i + lambda_i g_i g_i D_i
        v[j] = mu * v[j] - eta * (gt + wd * w_i[j])         # L10: dw_i = U(g~_i, eta, mu)
        dw_i[j] = v[j]
        w_i[j] = w_i[j] + D + dw_i[j]                       # L11: w_i = w_i + D_i + dw_i


@nb.njit(cache=True, nogil=True)
def _update_masked(w_i, dw_i, v, g_i, dw_bar, N, lam, eta, mu, wd, decay):
    """:func:`_update` with the weight decay where ``decay`` is 1 only (0 in frozen layers)."""
    for j in range(w_i.size):
        D = dw_bar[j] / N - dw_i[j]                         # L8
        gt = g_i[j] + lam * (g_i[j] * g_i[j] * D)           # L9
        v[j] = mu * v[j] - eta * (gt + (wd * decay[j]) * w_i[j])   # L10
        dw_i[j] = v[j]
        w_i[j] = w_i[j] + D + dw_i[j]                       # L11


def parts(net, lambda_norm):
    """The bounds of eq. 17's norms: [0, d] (whole) or every tensor's offsets (tensor)."""
    if lambda_norm == "tensor":
        return np.array([o for _, o, _ in net.layout] + [net.num_params], dtype=np.int64)
    return np.array([0, net.num_params], dtype=np.int64)


def weight_decay_schedule(run):
    """t -> wd_t = k * wd * lr(t) / lr_peak (section IV-A): the decay follows the schedule."""
    c = run.cfg
    peak = max((run.lr(s) for s in range(run.total)), default=0.0) if c.weight_decay else 0.0
    if not c.weight_decay or peak <= 0:
        return lambda t: 0.0
    return lambda t: c.wd_k * c.weight_decay * run.lr(t) / peak


def warm(dtype):
    """L8-L11's kernel called once on one-element vectors of ``dtype`` with the argument types of
    :func:`train`'s call, before the run's clock starts (the typing of a kernel's first call stays
    out of the update: refsgd.optim.warm)."""
    one = np.ones(1, dtype)
    _corrected_step(one.copy(), one.copy(), one.copy(), one.copy(), one.copy(), 1, 1.0, 1.0, 0.5, 0.0,
                    np.array([0, 1], np.int64), np.zeros(0, dtype), np.zeros(1), False)
