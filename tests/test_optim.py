"""Tests for refsgd.optim: the local optimizer SGD and the learning-rate schedules.

Expected values are written out from the update formulas (scalar recurrences worked by
hand in the comments), so a test failure points at the formula, not at another implementation.
"""

import numpy as np
import pytest

from refsgd import RefsgdError
from refsgd import optim
from refsgd.optim import (SCHEDULES, SGD, Constant, ReduceOnPlateau, WarmupConstant,
                          WarmupLinearDecay, WarmupStep, make_schedule)

TOL = dict(rtol=0, atol=1e-12)

# The scalar gradient sequence used by the hand-computed trajectories below.
G_SEQ = (1.0, 2.0, -1.0)


def run_scalar(opt, w0, grads, lrs):
    """Run opt on a 1-parameter problem with a fixed gradient sequence; return the w's."""
    w = np.array([w0])
    out = []
    for gval, lr in zip(grads, lrs):
        opt.step(w, np.array([gval]), lr)
        out.append(w[0])
    return out


def quadratic_problem(n, seed):
    """A gradient that depends on w (so trajectories feed back): g = A w - c + noise_k."""
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, n)) / np.sqrt(n)
    a = m @ m.T + 0.1 * np.eye(n)
    c = rng.standard_normal(n)
    noise = rng.standard_normal((50, n)) * 0.1
    w0 = rng.standard_normal(n)

    def grad(w, k):
        return a @ w - c + noise[k]
    return w0, grad


# ------------------------------------------------------------------------------------- SGD

def test_plain_sgd_one_step():
    opt = SGD(3, np.float64)
    assert opt.state == {}
    w = np.array([1.0, 2.0, -3.0])
    g = np.array([0.5, -1.0, 2.0])
    opt.step(w, g, 0.1)
    # w - 0.1 * g
    np.testing.assert_allclose(w, [0.95, 2.1, -3.2], **TOL)


def test_pytorch_momentum_three_steps():
    opt = SGD(1, np.float64, momentum=0.9)
    b = opt.state["momentum_buffer"]
    ws, bs = [], []
    w = np.array([1.0])
    for gval in G_SEQ:
        opt.step(w, np.array([gval]), 0.1)
        ws.append(w[0])
        bs.append(b[0])
    # b1 = 1                      w1 = 1    - 0.1*1    = 0.9
    # b2 = 0.9*1    + 2  = 2.9    w2 = 0.9  - 0.1*2.9  = 0.61
    # b3 = 0.9*2.9  - 1  = 1.61   w3 = 0.61 - 0.1*1.61 = 0.449
    np.testing.assert_allclose(bs, [1.0, 2.9, 1.61], **TOL)
    np.testing.assert_allclose(ws, [0.9, 0.61, 0.449], **TOL)
    assert opt.state["momentum_buffer"] is b  # updated in place, never replaced


def test_pytorch_nesterov_three_steps():
    opt = SGD(1, np.float64, momentum=0.9, nesterov=True)
    ws = run_scalar(opt, 1.0, G_SEQ, [0.1] * 3)
    # b as above (1, 2.9, 1.61); d = g + 0.9*b
    # d1 = 1  + 0.9   = 1.9     w1 = 1     - 0.19   = 0.81
    # d2 = 2  + 2.61  = 4.61    w2 = 0.81  - 0.461  = 0.349
    # d3 = -1 + 1.449 = 0.449   w3 = 0.349 - 0.0449 = 0.3041
    np.testing.assert_allclose(ws, [0.81, 0.349, 0.3041], **TOL)
    np.testing.assert_allclose(opt.state["momentum_buffer"], [1.61], **TOL)


def test_weight_decay_plain():
    opt = SGD(1, np.float64, weight_decay=0.1)
    ws = run_scalar(opt, 2.0, [1.0, 1.0], [0.5, 0.5])
    # g'1 = 1 + 0.1*2   = 1.2     w1 = 2   - 0.5*1.2  = 1.4
    # g'2 = 1 + 0.1*1.4 = 1.14    w2 = 1.4 - 0.5*1.14 = 0.83
    np.testing.assert_allclose(ws, [1.4, 0.83], **TOL)


def test_weight_decay_with_momentum():
    opt = SGD(1, np.float64, momentum=0.5, weight_decay=0.1)
    ws = run_scalar(opt, 2.0, [1.0, 1.0], [0.5, 0.5])
    # g'1 = 1.2, b1 = 1.2, w1 = 2 - 0.6 = 1.4
    # g'2 = 1.14, b2 = 0.5*1.2 + 1.14 = 1.74, w2 = 1.4 - 0.87 = 0.53
    np.testing.assert_allclose(ws, [1.4, 0.53], **TOL)


@pytest.mark.parametrize("form", ["pytorch", "mxnet"])
def test_decay_mask_leaves_masked_weights_unchanged(form):
    mask = np.array([True, False, True, False])
    opt = SGD(4, np.float64, momentum=0.9, weight_decay=0.1, form=form, decay_mask=mask)
    w0 = np.array([1.0, 2.0, 3.0, 4.0])
    w = w0.copy()
    g = np.array([0.5, 0.0, 0.5, 0.0])  # frozen entries get a zero gradient
    opt.step(w, g, 0.1)
    # decayed entries, first step (both forms): w - 0.1*(0.5 + 0.1*w)
    np.testing.assert_allclose(w[[0, 2]], [1 - 0.1 * 0.6, 3 - 0.1 * 0.8], **TOL)
    for _ in range(4):
        opt.step(w, g, 0.1)
    assert np.array_equal(w[[1, 3]], w0[[1, 3]])
    state = next(iter(opt.state.values()))
    assert np.all(state[[1, 3]] == 0.0)
    # without the mask the frozen weights would decay
    w2 = w0.copy()
    SGD(4, np.float64, weight_decay=0.1, form=form).step(w2, g, 0.1)
    assert w2[1] != w0[1]


def test_mxnet_three_steps():
    opt = SGD(1, np.float64, momentum=0.9, form="mxnet")
    v = opt.state["v"]
    lrs = [0.1, 0.2, 0.05]
    w = np.array([1.0])
    ws, vs = [], []
    for gval, lr in zip(G_SEQ, lrs):
        opt.step(w, np.array([gval]), lr)
        ws.append(w[0])
        vs.append(v[0])
    # v1 = -0.1*1                      = -0.1     w1 = 1    - 0.1   = 0.9
    # v2 = 0.9*(-0.1)  - 0.2*2         = -0.49    w2 = 0.9  - 0.49  = 0.41
    # v3 = 0.9*(-0.49) - 0.05*(-1)     = -0.391   w3 = 0.41 - 0.391 = 0.019
    np.testing.assert_allclose(vs, [-0.1, -0.49, -0.391], **TOL)
    np.testing.assert_allclose(ws, [0.9, 0.41, 0.019], **TOL)
    assert opt.state["v"] is v


def test_mxnet_weight_decay():
    opt = SGD(1, np.float64, momentum=0.9, weight_decay=0.1, form="mxnet")
    ws = run_scalar(opt, 1.0, [1.0, 1.0], [0.1, 0.1])
    # v1 = -0.1*(1 + 0.1*1)                 = -0.11     w1 = 0.89
    # v2 = 0.9*(-0.11) - 0.1*(1 + 0.1*0.89) = -0.2079   w2 = 0.6821
    np.testing.assert_allclose(ws, [0.89, 0.6821], **TOL)


def test_mxnet_without_momentum_is_plain_sgd():
    opt = SGD(1, np.float64, form="mxnet")
    ws = run_scalar(opt, 1.0, G_SEQ, [0.1, 0.2, 0.05])
    # w - lr*g: 1 - 0.1 = 0.9; 0.9 - 0.4 = 0.5; 0.5 + 0.05 = 0.55
    np.testing.assert_allclose(ws, [0.9, 0.5, 0.55], **TOL)
    np.testing.assert_allclose(opt.state["v"], [0.05], **TOL)


def test_forms_differ_when_lr_changes():
    # Same gradients and lr sequence as test_mxnet_three_steps, PyTorch form:
    # b = 1, 2.9, 1.61;  w1 = 1 - 0.1*1 = 0.9;  w2 = 0.9 - 0.2*2.9 = 0.32;
    # w3 = 0.32 - 0.05*1.61 = 0.2395   (MXNet gave 0.9, 0.41, 0.019)
    opt = SGD(1, np.float64, momentum=0.9)
    ws = run_scalar(opt, 1.0, G_SEQ, [0.1, 0.2, 0.05])
    np.testing.assert_allclose(ws, [0.9, 0.32, 0.2395], **TOL)


@pytest.mark.parametrize("wd", [0.0, 1e-3])
def test_forms_equivalent_at_constant_lr(wd):
    n, lr, steps = 40, 0.05, 30
    w0, grad = quadratic_problem(n, seed=1)
    a = SGD(n, np.float64, momentum=0.9, weight_decay=wd, form="pytorch")
    b = SGD(n, np.float64, momentum=0.9, weight_decay=wd, form="mxnet")
    wa, wb = w0.copy(), w0.copy()
    for k in range(steps):
        a.step(wa, grad(wa, k), lr)
        b.step(wb, grad(wb, k), lr)
        np.testing.assert_allclose(wa, wb, **TOL)
        # v = -lr * b
        np.testing.assert_allclose(b.state["v"], -lr * a.state["momentum_buffer"], **TOL)
    assert not np.allclose(wa, w0)


def test_delta_returns_v_and_leaves_w():
    opt = SGD(2, np.float64, momentum=0.9, weight_decay=0.1, form="mxnet")
    w = np.array([1.0, -2.0])
    w_before = w.copy()
    g = np.array([1.0, 0.5])
    dw = opt.delta(w, g, 0.1)
    assert dw is opt.state["v"]
    assert np.array_equal(w, w_before)
    # v1 = -0.1*(g + 0.1*w) = -0.1*[1.1, 0.3]
    np.testing.assert_allclose(dw, [-0.11, -0.03], **TOL)
    dw = opt.delta(w, g, 0.1)
    # v2 = 0.9*v1 - 0.1*[1.1, 0.3] = -0.19*[1.1, 0.3]
    np.testing.assert_allclose(dw, [-0.209, -0.057], **TOL)
    assert np.array_equal(w, w_before)
    # step() is delta() followed by w += dw
    wa, wb = w_before.copy(), w_before.copy()
    sa = SGD(2, np.float64, momentum=0.9, weight_decay=0.1, form="mxnet")
    sb = SGD(2, np.float64, momentum=0.9, weight_decay=0.1, form="mxnet")
    for lr in (0.1, 0.3, 0.2):
        sa.step(wa, g, lr)
        wb += sb.delta(wb, g, lr)
    assert np.array_equal(wa, wb)


def test_delta_is_mxnet_only():
    opt = SGD(2, np.float64, momentum=0.9)
    with pytest.raises(RefsgdError, match="only defined for form='mxnet'"):
        opt.delta(np.zeros(2), np.ones(2), 0.1)


@pytest.mark.parametrize("kw", [
    dict(),
    dict(momentum=0.9),
    dict(momentum=0.9, nesterov=True, weight_decay=1e-2),
    dict(momentum=0.9, weight_decay=1e-2, form="mxnet"),
])
def test_float32_keeps_dtype(kw):
    n = 16
    w0, grad = quadratic_problem(n, seed=2)
    o32 = SGD(n, np.float32, **kw)
    o64 = SGD(n, np.float64, **kw)
    w32, w64 = w0.astype(np.float32), w0.copy()
    for k in range(5):
        g = grad(w64, k)
        o32.step(w32, g.astype(np.float32), 0.05)
        o64.step(w64, g, 0.05)
    assert w32.dtype == np.float32
    for arr in o32.state.values():
        assert arr.dtype == np.float32
    np.testing.assert_allclose(w32, w64, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kw", [
    dict(),
    dict(weight_decay=0.1),
    dict(momentum=0.9),
    dict(momentum=0.9, weight_decay=0.1),
    dict(momentum=0.9, nesterov=True),
    dict(momentum=0.9, nesterov=True, weight_decay=0.1),
    dict(momentum=0.9, weight_decay=0.1, decay_mask=np.array([True, False, True])),
    dict(form="mxnet"),
    dict(momentum=0.9, weight_decay=0.1, form="mxnet"),
])
def test_g_not_modified(kw):
    opt = SGD(3, np.float64, **kw)
    w = np.array([1.0, 2.0, 3.0])
    g = np.array([0.3, -0.2, 0.1])
    g_copy = g.copy()
    for _ in range(3):
        opt.step(w, g, 0.1)
        if opt.form == "mxnet":
            opt.delta(w, g, 0.1)
    assert np.array_equal(g, g_copy)


@pytest.mark.parametrize("kw", [
    dict(),
    dict(momentum=0.9, weight_decay=0.1),
    dict(momentum=0.9, nesterov=True, weight_decay=0.1),
    dict(momentum=0.9, weight_decay=0.1, form="mxnet"),
])
def test_step_allocates_no_vectors(kw):
    import tracemalloc
    n = 100_000  # 800 kB per vector; a temporary would show up in the peak
    opt = SGD(n, np.float64, **kw)
    w, g = np.ones(n), np.full(n, 0.5)
    opt.step(w, g, 0.1)
    tracemalloc.start()
    try:
        opt.step(w, g, 0.1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10_000


def test_state_restore_reproduces_trajectory():
    n = 10
    w0, grad = quadratic_problem(n, seed=3)
    opt = SGD(n, np.float64, momentum=0.9, weight_decay=1e-3)
    w = w0.copy()
    for k in range(3):
        opt.step(w, grad(w, k), 0.1)
    saved_w = w.copy()
    saved = {k: v.copy() for k, v in opt.state.items()}
    for k in range(3, 6):
        opt.step(w, grad(w, k), 0.1)
    fresh = SGD(n, np.float64, momentum=0.9, weight_decay=1e-3)
    fresh.load_state(saved)
    w2 = saved_w.copy()
    for k in range(3, 6):
        fresh.step(w2, grad(w2, k), 0.1)
    assert np.array_equal(w, w2)
    with pytest.raises(RefsgdError, match="state has entries"):
        fresh.load_state({"v": np.zeros(n)})


@pytest.mark.parametrize("kwargs, match", [
    (dict(momentum=1.5), r"momentum must be in \[0, 1\), got 1.5"),
    (dict(momentum=1.0), r"momentum must be in \[0, 1\)"),
    (dict(momentum=-0.1), r"momentum must be in \[0, 1\)"),
    (dict(weight_decay=-1e-4), r"weight_decay must be >= 0"),
    (dict(weight_decay=float("nan")), r"weight_decay must be >= 0"),
    (dict(form="torch"), r"form must be one of pytorch, mxnet, got 'torch'"),
    (dict(momentum=0.9, nesterov=True, form="mxnet"), r"nesterov=True is only available"),
    (dict(nesterov=True), r"nesterov=True needs momentum > 0"),
    (dict(decay_mask=np.ones(3, dtype=bool)), r"decay_mask must have shape \(4,\)"),
    (dict(decay_mask=np.ones(4)), r"decay_mask must be a bool array"),
])
def test_sgd_bad_arguments(kwargs, match):
    with pytest.raises(RefsgdError, match=match):
        SGD(4, np.float64, **kwargs)


def test_sgd_bad_dtype_and_size():
    with pytest.raises(RefsgdError, match="dtype must be float32 or float64, got int64"):
        SGD(4, np.int64)
    with pytest.raises(RefsgdError, match="dtype must be float32 or float64"):
        SGD(4, "float16")
    with pytest.raises(RefsgdError, match="num_params must be an integer >= 0"):
        SGD(-1, np.float64)


def test_step_bad_arrays_and_lr():
    opt = SGD(3, np.float64)
    w, g = np.zeros(3), np.zeros(3)
    with pytest.raises(RefsgdError, match="w must be a 1-D float64 array of length 3"):
        opt.step(np.zeros(4), g, 0.1)
    with pytest.raises(RefsgdError, match="g must be a 1-D float64 array of length 3, got shape"):
        opt.step(w, g.astype(np.float32), 0.1)
    with pytest.raises(RefsgdError, match="learning rate must be >= 0, got -0.1"):
        opt.step(w, g, -0.1)
    with pytest.raises(RefsgdError, match="learning rate must be >= 0"):
        opt.step(w, g, float("inf"))


def test_repr():
    r = repr(SGD(5, np.float32, momentum=0.9, nesterov=True, weight_decay=1e-4))
    assert r == ("SGD(num_params=5, dtype=float32, momentum=0.9, nesterov=True, "
                 "weight_decay=0.0001, form='pytorch')")


# ------------------------------------------------------------------------------- schedules

def test_constant():
    s = Constant(0.3)
    assert s.lr(0) == 0.3 and s.lr(10**9) == 0.3
    assert s(5) == 0.3
    assert s.describe() == "constant 0.3"


def test_warmup_step_values():
    s = WarmupStep(peak=0.4, warmup_iters=4, milestones=[10, 20], gamma=0.1)
    # warm-up: 0.4*(t+1)/4
    assert s.lr(0) == pytest.approx(0.1)
    assert s.lr(1) == pytest.approx(0.2)
    assert s.lr(3) == pytest.approx(0.4)     # t = warmup - 1 reaches the peak
    assert s.lr(4) == pytest.approx(0.4)
    assert s.lr(9) == pytest.approx(0.4)
    assert s.lr(10) == pytest.approx(0.04)   # first milestone
    assert s.lr(19) == pytest.approx(0.04)
    assert s.lr(20) == pytest.approx(0.004)  # second milestone
    assert s.lr(10**6) == pytest.approx(0.004)
    # pure: order of calls does not matter
    assert [s.lr(t) for t in (20, 0, 10)] == [s.lr(20), s.lr(0), s.lr(10)]


def test_warmup_step_start_and_no_warmup():
    s = WarmupStep(peak=0.4, warmup_iters=4, milestones=[], start=0.1)
    # 0.1 + 0.3*(t+1)/4
    assert s.lr(0) == pytest.approx(0.175)
    assert s.lr(3) == pytest.approx(0.4)
    assert s.lr(100) == pytest.approx(0.4)
    s0 = WarmupStep(peak=1.0, warmup_iters=0, milestones=[0, 5], gamma=0.5)
    assert s0.lr(0) == pytest.approx(0.5)
    assert s0.lr(5) == pytest.approx(0.25)


def test_warmup_linear_decay_values():
    s = WarmupLinearDecay(peak=1.0, warmup_iters=4, total_iters=14)
    # warm-up (t+1)/4, then (14 - t)/10
    assert s.lr(0) == pytest.approx(0.25)
    assert s.lr(3) == pytest.approx(1.0)
    assert s.lr(4) == pytest.approx(1.0)
    assert s.lr(9) == pytest.approx(0.5)
    assert s.lr(13) == pytest.approx(0.1)
    assert s.lr(14) == 0.0                    # zero at total_iters
    assert s.lr(1000) == 0.0                  # clipped after
    vals = [s.lr(t) for t in range(4, 20)]
    assert all(a >= b for a, b in zip(vals, vals[1:]))


def test_warmup_linear_decay_warmup_stop():
    s = WarmupLinearDecay(peak=1.0, warmup_iters=4, total_iters=14, warmup_stop=2)
    # warm-up (t+1)/4 for t < 2, plateau p = 2/4 = 0.5, then 0.5*(14 - t)/12
    assert s.plateau == pytest.approx(0.5)
    assert s.lr(0) == pytest.approx(0.25)
    assert s.lr(1) == pytest.approx(0.5)
    assert s.lr(2) == pytest.approx(0.5)
    assert s.lr(8) == pytest.approx(0.25)
    assert s.lr(14) == 0.0
    # warmup_stop == warmup_iters is the default behaviour
    full = WarmupLinearDecay(peak=1.0, warmup_iters=4, total_iters=14, warmup_stop=4)
    ref = WarmupLinearDecay(peak=1.0, warmup_iters=4, total_iters=14)
    assert [full.lr(t) for t in range(16)] == [ref.lr(t) for t in range(16)]


def test_warmup_linear_decay_with_start():
    s = WarmupLinearDecay(peak=0.5, warmup_iters=5, total_iters=10, start=0.1)
    # 0.1 + 0.4*(t+1)/5: 0.18 at t=0, 0.5 at t=4; then 0.5*(10 - t)/5
    assert s.lr(0) == pytest.approx(0.18)
    assert s.lr(4) == pytest.approx(0.5)
    assert s.lr(7) == pytest.approx(0.3)
    assert s.lr(10) == 0.0


def test_warmup_constant():
    s = WarmupConstant(peak=0.2, warmup_iters=5)
    assert s.lr(0) == pytest.approx(0.04)
    assert s.lr(4) == pytest.approx(0.2)
    assert s.lr(5) == pytest.approx(0.2)
    assert s.lr(10**7) == pytest.approx(0.2)
    assert WarmupConstant(peak=0.2, warmup_iters=0).lr(0) == 0.2


def test_reduce_on_plateau():
    s = ReduceOnPlateau(lr=1.0, factor=0.1, patience=2, threshold=0.05)
    state = s.state
    assert state.dtype == np.float64
    assert s.observe(1.0) is False            # first value: improvement, best = 1
    assert s.observe(0.99) is False           # not < 0.95: bad 1 of 2
    assert s.lr(0) == 1.0
    assert s.observe(0.97) is True            # bad 2 of 2: reduce
    assert s.lr(100) == pytest.approx(0.1)
    assert s.bad_count == 0
    assert s.observe(0.5) is False            # improvement: best = 0.5
    assert s.best == 0.5
    assert s.observe(0.49) is False           # not < 0.475: bad 1
    assert s.observe(0.4) is False            # improvement resets the count
    assert s.observe(0.39) is False           # bad 1
    assert s.lr(0) == pytest.approx(0.1)
    assert s.observe(float("nan")) is True    # NaN counts as no improvement: bad 2
    assert s.lr(0) == pytest.approx(0.01)
    assert s.state is state                   # updated in place
    np.testing.assert_allclose(state, [0.4, 0.0, 0.01])


def test_reduce_on_plateau_min_lr_and_restore():
    s = ReduceOnPlateau(lr=1.0, factor=0.1, patience=1, min_lr=0.05)
    s.observe(1.0)
    assert s.observe(1.0) is True and s.lr(0) == pytest.approx(0.1)
    assert s.observe(1.0) is True and s.lr(0) == pytest.approx(0.05)
    assert s.observe(1.0) is False and s.lr(0) == pytest.approx(0.05)
    # restore from a checkpoint by writing into the state array
    saved = s.state.copy()
    r = ReduceOnPlateau(lr=1.0, factor=0.1, patience=1, min_lr=0.05)
    r.state[:] = saved
    assert r.lr(0) == pytest.approx(0.05) and r.best == 1.0


def test_repr_and_describe():
    for s in (Constant(0.1),
              WarmupStep(0.4, 4, [10, 20], gamma=0.5, start=0.01),
              WarmupLinearDecay(1.0, 4, 14, warmup_stop=2),
              WarmupConstant(0.2, 5),
              ReduceOnPlateau(0.1, patience=3)):
        again = eval(repr(s), vars(optim))
        assert type(again) is type(s) and repr(again) == repr(s)
        assert [again.lr(t) for t in range(30)] == [s.lr(t) for t in range(30)]
        assert isinstance(s.describe(), str) and s.describe()
    assert WarmupStep(0.4, 4, [10, 20]).describe() == (
        "linear warm-up 0 -> 0.4 over 4 iterations, then x0.1 at iterations 10, 20")
    assert WarmupLinearDecay(1.0, 4, 14, warmup_stop=2).describe() == (
        "linear warm-up 0 -> 1 over 4 iterations, stopped at iteration 2 on 0.5, "
        "then linear decrease to 0 at iteration 14")


def test_make_schedule_builds_each():
    assert set(SCHEDULES) == {"constant", "warmup-step", "warmup-linear", "warmup-constant",
                              "plateau"}
    assert isinstance(make_schedule("constant", lr=0.1), Constant)
    s = make_schedule("warmup-step", peak=0.4, warmup_iters=4, milestones=[10, 20])
    assert isinstance(s, WarmupStep) and s.lr(10) == pytest.approx(0.04)
    assert isinstance(make_schedule("warmup-linear", peak=1, warmup_iters=2, total_iters=5),
                      WarmupLinearDecay)
    assert isinstance(make_schedule("warmup-constant", peak=1, warmup_iters=2), WarmupConstant)
    assert isinstance(make_schedule("plateau", lr=0.1, patience=3), ReduceOnPlateau)


def test_make_schedule_epochs():
    s = make_schedule("warmup-step", peak=0.1, warmup_epochs=2, milestone_epochs=[3, 5],
                      iters_per_epoch=10)
    assert s.warmup_iters == 20 and s.milestones == (30, 50)
    s = make_schedule("warmup-linear", peak=0.1, warmup_epochs=0.5, total_epochs=4,
                      warmup_stop_epochs=0.25, iters_per_epoch=8)
    assert (s.warmup_iters, s.total_iters, s.warmup_stop) == (4, 32, 2)


@pytest.mark.parametrize("name, kwargs, match", [
    ("cosine", dict(lr=0.1), r"unknown learning-rate schedule 'cosine'; choose one of constant"),
    ("constant", dict(lr=-0.1), r"lr must be >= 0, got -0.1"),
    ("constant", dict(lr="0.1"), r"lr must be a number >= 0, got '0.1'"),
    ("constant", dict(lr=0.1, peak=1), r"unknown argument\(s\) peak"),
    ("warmup-step", dict(peak=0.1, milestones=[1]), r"missing argument\(s\) warmup_iters"),
    ("warmup-step", dict(peak=0.1, warmup_iters=-1, milestones=[]),
     r"warmup_iters must be an integer >= 0, got -1"),
    ("warmup-step", dict(peak=0.1, warmup_iters=2, milestones=[20, 10]),
     r"milestones must be strictly increasing, got \[20, 10\]"),
    ("warmup-step", dict(peak=0.1, warmup_iters=2, milestones=[10, 10]),
     r"milestones must be strictly increasing"),
    ("warmup-step", dict(peak=0.1, warmup_iters=50, milestones=[30, 60]),
     r"milestones must not fall inside the warm-up"),
    ("warmup-step", dict(peak=0.1, warmup_iters=2, milestones=[5], gamma=0.0),
     r"gamma must be in \(0, 1\]"),
    ("warmup-step", dict(peak=0.1, warmup_iters=2, milestones=5),
     r"milestones must be a list of iterations"),
    ("warmup-linear", dict(peak=0.1, warmup_iters=10, total_iters=10),
     r"total_iters must be > warmup_iters, got total_iters=10, warmup_iters=10"),
    ("warmup-linear", dict(peak=0.1, warmup_iters=10, total_iters=20, warmup_stop=11),
     r"warmup_stop must be in \[1, warmup_iters=10\], got 11"),
    ("warmup-linear", dict(peak=0.1, warmup_iters=0, total_iters=20, warmup_stop=1),
     r"warmup_stop needs a warm-up"),
    ("warmup-constant", dict(peak=0.1, warmup_iters=1.5), r"warmup_iters must be an integer"),
    ("plateau", dict(lr=0.1, factor=1.0), r"factor must be in \(0, 1\), got 1.0"),
    ("plateau", dict(lr=0.1, patience=0), r"patience must be an integer >= 1, got 0"),
    ("plateau", dict(lr=0.01, min_lr=0.1), r"lr must be >= min_lr=0.1"),
    ("warmup-step", dict(peak=0.1, warmup_epochs=1, milestones=[]),
     r"warmup_epochs given in epochs needs iters_per_epoch"),
    ("warmup-step", dict(peak=0.1, warmup_epochs=1, warmup_iters=3, milestones=[],
                         iters_per_epoch=10), r"give warmup_epochs or warmup_iters, not both"),
])
def test_make_schedule_errors(name, kwargs, match):
    with pytest.raises(RefsgdError, match=match):
        make_schedule(name, **kwargs)


def test_schedule_bad_iteration():
    s = Constant(0.1)
    with pytest.raises(RefsgdError, match="iteration t must be an integer >= 0, got -1"):
        s.lr(-1)
    with pytest.raises(RefsgdError, match="iteration t must be an integer >= 0"):
        s.lr(1.0)


# ---------------------------------------------------------------------------- torch oracle

@pytest.mark.parametrize("momentum, nesterov", [(0.9, False), (0.9, True), (0.0, False)])
def test_against_torch_sgd(momentum, nesterov):
    torch = pytest.importorskip("torch")
    n, wd = 57, 1e-4
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal(n)
    grads = rng.standard_normal((5, n))
    lrs = [0.1, 0.1, 0.05, 0.2, 0.01]  # a changing lr is part of the semantics checked

    p = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    topt = torch.optim.SGD([p], lr=lrs[0], momentum=momentum, nesterov=nesterov,
                           weight_decay=wd)
    ours = SGD(n, np.float64, momentum=momentum, nesterov=nesterov, weight_decay=wd)
    w = w0.copy()
    for g, lr in zip(grads, lrs):
        for group in topt.param_groups:
            group["lr"] = lr
        p.grad = torch.from_numpy(g.copy())
        topt.step()
        ours.step(w, g, lr)
        # Not bit-identical (torch's kernels may fuse or reorder the products), so an entry
        # that cancels to near zero can exceed rtol alone: atol=1e-14 covers it (w ~ 1).
        np.testing.assert_allclose(w, p.detach().numpy(), rtol=1e-12, atol=1e-14)
    if momentum:
        tbuf = topt.state[p]["momentum_buffer"].numpy()
        np.testing.assert_allclose(ours.state["momentum_buffer"], tbuf, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", [dict(), dict(momentum=0.9), dict(momentum=0.9, nesterov=True),
                                dict(momentum=0.9, weight_decay=0.01), dict(momentum=0.9, nesterov=True, weight_decay=0.01),
                                dict(weight_decay=0.01), dict(form="mxnet"), dict(form="mxnet", momentum=0.9),
                                dict(form="mxnet", momentum=0.9, weight_decay=0.01)])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("divide", [1, 3])
def test_fused_step_equals_the_numpy_passes_bit_for_bit(dtype, kw, masked, divide):
    """SGD.step (one Numba pass) and SGD._step_numpy (the readable NumPy form) agree exactly, over
    steps with a changing lr, in float32 and float64, with and without a frozen part; with
    divide = 3 both equal ``g /= 3`` followed by the step, and g is left as it was."""
    rng = np.random.default_rng(0)
    n = 257
    mask = (np.arange(n) % 3 != 0) if masked else None
    a, b = SGD(n, dtype, decay_mask=mask, **kw), SGD(n, dtype, decay_mask=mask, **kw)
    w1 = rng.standard_normal(n).astype(dtype)
    w2 = w1.copy()
    for t in range(5):
        g = rng.standard_normal(n).astype(dtype)
        if masked:
            g[~mask] = 0
        lr = 0.1 / (t + 1)
        g0 = g.copy()
        a.step(w1, g, lr, divide=divide)
        np.testing.assert_array_equal(g, g0)
        if divide == 1:
            b._step_numpy(w2, g, lr)
        else:
            g /= divide
            b._step_numpy(w2, g, lr)
        np.testing.assert_array_equal(w1, w2)
        for k in a.state:
            np.testing.assert_array_equal(a.state[k], b.state[k])


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_step_refuses_a_divide_that_is_not_a_positive_integer(bad):
    opt = SGD(4, np.float64)
    with pytest.raises(RefsgdError, match="divide must be a positive integer"):
        opt.step(np.zeros(4), np.ones(4), 0.1, divide=bad)
