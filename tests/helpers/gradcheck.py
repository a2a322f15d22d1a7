"""Centred-difference gradient checks in float64, shared by the layer and model tests.

The error measure is norm-wise over the checked entries of one tensor,
``||numeric - analytic|| / max(||numeric||, ||analytic||)``: per-entry ratios are dominated by
round-off on entries near zero (a centred difference with eps = 1e-6 carries ~1e-10 absolute
noise), which says nothing about the correctness of the backward pass.

Each check is made with three step sizes and the best agreement counts: a small step loses to
round-off where the loss is flat (entries of 1e-5 in a loss of 4.6), a large step to the kinks
of ReLU and max pooling. A wrong backward pass is off at every step size.
"""

import numpy as np

EPS = 1e-6
STEPS = (1e-6, 1e-5, 1e-4)
TOL = 1e-7


def rel_err(num, ana):
    num, ana = np.asarray(num, float), np.asarray(ana, float)
    scale = max(np.linalg.norm(num), np.linalg.norm(ana))
    if scale < 1e-12:
        return float(np.linalg.norm(num - ana))
    return float(np.linalg.norm(num - ana) / scale)


def numeric_grad(f, v, idx, eps=EPS):
    """Centred differences of the scalar f() with respect to entries idx of array v (in place)."""
    flat = v.reshape(-1)
    out = np.empty(len(idx))
    for j, i in enumerate(idx):
        old = flat[i]
        flat[i] = old + eps
        fp = f()
        flat[i] = old - eps
        fm = f()
        flat[i] = old
        out[j] = (fp - fm) / (2 * eps)
    return out


def model_grad_errors(net, w, x, y, coords=8, directions=2, seed=0):
    """{tensor name or 'direction k': relative error} for the model's loss_and_grad at w."""
    rng = np.random.default_rng(seed)
    g = np.empty_like(w)
    net.loss_and_grad(w, x, y, out=g)
    f = lambda: net.loss(w, x, y)  # noqa: E731
    errs = {}
    for name, off, shape in net.layout:
        if not net.trainable[off]:
            continue
        size = int(np.prod(shape))
        idx = off + rng.choice(size, min(coords, size), replace=False)
        errs[name] = min(rel_err(numeric_grad(f, w, idx, eps), g[idx]) for eps in STEPS)
    # unit-norm directions: the gradient's own, then random reweightings of it (a direction
    # unrelated to g has g.v ~ |g|/sqrt(d), lost in round-off for a model of millions)
    dirs = [g] + [g * (1 + rng.standard_normal(w.shape)) for _ in range(directions)]
    for k, v in enumerate(dirs):
        v = v / np.linalg.norm(v)
        errs[f"direction {k}"] = min(
            rel_err([(net.loss(w + eps * v, x, y) - net.loss(w - eps * v, x, y)) / (2 * eps)], [g @ v])
            for eps in STEPS)
    return errs
