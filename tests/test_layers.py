"""Every layer against centred differences in float64, all entries, and against closed forms."""

import numpy as np
import pytest

from tests.helpers.gradcheck import TOL, numeric_grad, rel_err
from refsgd import RefsgdError
from refsgd.nn import Conv2d, Dense, Flatten, LeakyReLU, MaxPool2d, ReLU, softmax_cross_entropy

N = 3


def internal_input(layer, rng, batch_first=False):
    """A random input in the layer's internal layout: (N, D) or channel-major (C, N, H, W)."""
    s = layer.in_shape
    if len(s) == 1:
        return rng.standard_normal((N, s[0]))
    if batch_first:
        return rng.standard_normal((N,) + s)
    return rng.standard_normal((s[0], N) + s[1:])


def check_layer(layer, in_shape, seed=0, batch_first=False):
    """Gradient of sum(R * layer(x)) with respect to x and every parameter, all entries."""
    rng = np.random.default_rng(seed)
    layer.build(in_shape)
    x = internal_input(layer, rng, batch_first)
    params = tuple(rng.standard_normal(s) for _, s in layer.param_shapes)
    grads = tuple(np.full(s, np.nan) for _, s in layer.param_shapes)
    out, cache = layer.forward(x.copy(), params)
    R = rng.standard_normal(out.shape)
    f = lambda: float(np.sum(R * layer.forward(x.copy(), params)[0]))  # noqa: E731
    dx = layer.backward(R.copy(), cache, grads, True, params)
    assert dx.shape == x.shape
    assert rel_err(numeric_grad(f, x, range(x.size)), dx.reshape(-1)) < TOL
    for p, gp in zip(params, grads):
        assert not np.isnan(gp).any(), "backward must overwrite every gradient entry"
        assert rel_err(numeric_grad(f, p, range(p.size)), gp.reshape(-1)) < TOL
    return layer, x, params, out


def test_dense_gradcheck_and_closed_form():
    layer, x, (W, b), out = check_layer(Dense("fc", 4), (5,))
    np.testing.assert_allclose(out, x @ W.T + b, rtol=1e-14)


@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("shape", [(2, 5, 4), (1, 3, 3)])
def test_conv_gradcheck(k, shape):
    check_layer(Conv2d("conv", 3, kernel=k), shape, seed=k)


def test_conv_matches_direct_sum():
    """y[f, n, i, j] = b[f] + sum_{c, dy, dx} W[f, c, dy, dx] * xpad[c, n, i + dy, j + dx]."""
    layer, x, (W, b), out = check_layer(Conv2d("conv", 2, kernel=3), (3, 4, 5), seed=7)
    C, n, H, Wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((2, n, H, Wd))
    for f in range(2):
        for i in range(H):
            for j in range(Wd):
                ref[f, :, i, j] = b[f] + np.einsum("cnyx,cyx->n", xp[:, :, i:i + 3, j:j + 3], W[f])
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)


def test_conv_large_batch_chunks():
    """A batch split into several chunks gives the same result as one image at a time."""
    rng = np.random.default_rng(3)
    layer = Conv2d("conv", 4, kernel=3)
    layer.build((3, 6, 6))
    params = (rng.standard_normal((4, 3, 3, 3)), rng.standard_normal(4))
    x = rng.standard_normal((3, 37, 6, 6))
    old = Conv2d.CHUNK_BYTES
    try:
        Conv2d.CHUNK_BYTES = 3 * 9 * 36 * 8 * 5  # 5 images per chunk, 37 = 7*5 + 2
        y, cache = layer.forward(x, params)
        dy = rng.standard_normal(y.shape)
        gW, gb = np.empty((4, 3, 3, 3)), np.empty(4)
        dx = layer.backward(dy.copy(), cache, (gW, gb), True, params)
    finally:
        Conv2d.CHUNK_BYTES = old
    for n in (0, 5, 36):
        yn, cn = layer.forward(np.ascontiguousarray(x[:, n:n + 1]), params)
        np.testing.assert_allclose(y[:, n:n + 1], yn, rtol=1e-12, atol=1e-12)
        dxn = layer.backward(np.ascontiguousarray(dy[:, n:n + 1]), cn, (np.empty_like(gW), np.empty(4)),
                             True, params)
        np.testing.assert_allclose(dx[:, n:n + 1], dxn, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gb, dy.sum(axis=(1, 2, 3)), rtol=1e-12)


@pytest.mark.parametrize("size,shape", [(2, (2, 4, 6)), (2, (1, 5, 5)), (3, (2, 6, 3))])
def test_maxpool_gradcheck_and_values(size, shape):
    layer, x, _, out = check_layer(MaxPool2d("pool", size), shape, seed=size)
    C, n, H, W = x.shape
    Ho, Wo = H // size, W // size
    ref = x[:, :, :Ho * size, :Wo * size].reshape(C, n, Ho, size, Wo, size).max(axis=(3, 5))
    np.testing.assert_array_equal(out, ref)


def test_relu_and_leaky_relu():
    layer, x, _, out = check_layer(ReLU("relu"), (7,))
    np.testing.assert_array_equal(out, np.maximum(x, 0))
    layer, x, _, out = check_layer(LeakyReLU("lrelu", 0.01), (2, 3, 3))
    np.testing.assert_array_equal(out, np.maximum(x, 0.01 * x))


def test_flatten_orders_like_pytorch():
    layer, x, _, out = check_layer(Flatten("flat"), (2, 3, 4))
    # channel-major (C, N, H, W) input; the output row n is x[:, n] in (C, H, W) order
    np.testing.assert_array_equal(out[1], x[:, 1].reshape(-1))
    layer = Flatten("flat")
    layer.batch_first_input = True
    layer, x, _, out = check_layer(layer, (2, 3, 4), batch_first=True)
    np.testing.assert_array_equal(out, x.reshape(N, -1))


def test_softmax_cross_entropy():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((4, 5)) * 3
    y = np.array([0, 4, 2, 2])
    loss, dz = softmax_cross_entropy(z, y)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    assert loss == pytest.approx(-np.mean(np.log(p[np.arange(4), y])), rel=1e-14)
    onehot = np.eye(5)[y]
    np.testing.assert_allclose(dz, (p - onehot) / 4, rtol=1e-12, atol=1e-15)
    f = lambda: softmax_cross_entropy(z, y)[0]  # noqa: E731
    assert rel_err(numeric_grad(f, z, range(z.size)), dz.reshape(-1)) < TOL
    # large logits do not overflow
    loss, _ = softmax_cross_entropy(np.array([[1000.0, 0.0]]), np.array([0]))
    assert loss == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("make,msg", [
    (lambda: Dense("fc", 0), "units"),
    (lambda: Conv2d("c", 4, kernel=2), "odd"),
    (lambda: MaxPool2d("p", 0), "size"),
    (lambda: LeakyReLU("l", 1.5), "slope"),
])
def test_bad_layer_arguments(make, msg):
    with pytest.raises(RefsgdError, match=msg):
        make()


def test_shape_mismatches():
    with pytest.raises(RefsgdError, match="flatten"):
        Dense("fc", 3).build((2, 4, 4))
    with pytest.raises(RefsgdError, match=r"\(C, H, W\)"):
        Conv2d("c", 3).build((10,))
    with pytest.raises(RefsgdError, match="does not fit"):
        MaxPool2d("p", 4).build((1, 3, 3))


# ---------------------------------------------------------------------- Winograd, fusion, threads
def _conv_block(C, F, shape, act, pool, winograd, chunk_bytes, seed=0, need_dx=True, dtype=np.float64):
    """(out, arg, dx, gW, gb) of a conv [+ fused activation] [+ fused 2x2 max pool] layer."""
    rng = np.random.default_rng(seed)
    layer = Conv2d("conv", F)
    layer.build((C,) + shape)
    if act is not None:
        layer.fuse(act)
    if pool:
        layer.fuse_pool(MaxPool2d("pool", 2))
    params = (rng.standard_normal((F, C, 3, 3)).astype(dtype), rng.standard_normal(F).astype(dtype))
    x = rng.standard_normal((C, 5) + shape).astype(dtype)
    old = Conv2d.WINOGRAD, Conv2d.CHUNK_BYTES
    try:
        Conv2d.WINOGRAD, Conv2d.CHUNK_BYTES = winograd, chunk_bytes
        out, cache = layer.forward(x, params)
        out = out.copy()
        dy = np.random.default_rng(seed + 1).standard_normal(out.shape).astype(dtype)
        grads = (np.full((F, C, 3, 3), np.nan, dtype), np.full(F, np.nan, dtype))
        dx = layer.backward(dy, cache, grads, need_dx, params)
    finally:
        Conv2d.WINOGRAD, Conv2d.CHUNK_BYTES = old
    return out, (cache[2].copy() if pool else None), dx, grads[0], grads[1]


@pytest.mark.parametrize("shape", [(6, 8), (5, 4), (7, 7), (1, 1), (2, 3)])
@pytest.mark.parametrize("act", [None, "leaky", "relu"])
@pytest.mark.parametrize("pool", [False, True])
def test_winograd_matches_im2col(shape, act, pool):
    """Winograd F(2x2, 3x3) (with the activation and pooling fused) against im2col, float64,
    in chunks of a few tile rows (several chunks and reduction parts), with and without dx."""
    if pool and (shape[0] % 2 or shape[1] % 2):
        pytest.skip("pooling fuses for even sizes only")
    for C, need_dx in [(3, True), (9, True), (9, False), (2, False)]:
        make = {None: lambda: None, "leaky": lambda: LeakyReLU("act", 0.1), "relu": lambda: ReLU("act")}[act]
        a = _conv_block(C, 4, shape, make(), pool, True, 3000, need_dx=need_dx)
        b = _conv_block(C, 4, shape, make(), pool, False, 3000, need_dx=need_dx)
        np.testing.assert_allclose(a[0], b[0], rtol=1e-12, atol=1e-12)
        if pool:
            np.testing.assert_array_equal(a[1], b[1])
        if need_dx:
            np.testing.assert_allclose(a[2], b[2], rtol=1e-12, atol=1e-12)
        else:
            assert a[2] is None and b[2] is None
        for u, v in zip(a[3:], b[3:]):
            assert not np.isnan(u).any()
            np.testing.assert_allclose(u, v, rtol=1e-11, atol=1e-11)


def test_fused_conv_block_equals_separate_layers():
    """conv -> leaky ReLU -> 2x2 max pool fused into the convolution = the three layers apart."""
    rng = np.random.default_rng(5)
    conv, act, pool = Conv2d("conv", 6), LeakyReLU("act", 0.01), MaxPool2d("pool", 2)
    conv.build((4, 6, 8)), act.build((6, 6, 8)), pool.build((6, 6, 8))
    params = (rng.standard_normal((6, 4, 3, 3)), rng.standard_normal(6))
    x = rng.standard_normal((4, 3, 6, 8))
    y1, c1 = conv.forward(x, params)
    y2, c2 = act.forward(y1, ())
    y3, c3 = pool.forward(y2, ())
    dy = rng.standard_normal(y3.shape)
    g1 = (np.empty((6, 4, 3, 3)), np.empty(6))
    dx = conv.backward(act.backward(pool.backward(dy, c3, ()), c2, ()), c1, g1, True, params)

    fused = Conv2d("conv", 6)
    fused.build((4, 6, 8))
    fused.fuse(LeakyReLU("act", 0.01))
    fused.fuse_pool(MaxPool2d("pool", 2))
    z, cache = fused.forward(x, params)
    np.testing.assert_allclose(z, y3, rtol=1e-13, atol=1e-13)
    g2 = (np.empty((6, 4, 3, 3)), np.empty(6))
    dz = fused.backward(dy, cache, g2, True, params)
    np.testing.assert_allclose(dz, dx, rtol=1e-12, atol=1e-12)
    for u, v in zip(g1, g2):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("threads", [2, 3])
def test_gradients_do_not_depend_on_the_thread_count(monkeypatch, threads):
    """The convolutions split their chunks between threads; the weight and bias gradients are
    summed over parts fixed independently of the threads, so every bit agrees (float32)."""
    from refsgd.nn import kernels, load_model
    if kernels._blas is None:
        pytest.skip("the chunk threads need an OpenBLAS whose thread count refsgd can set")
    net = load_model("cifar10_cnn", dtype=np.float32)
    rng = np.random.default_rng(0)
    w = net.init_params(0)
    x = rng.standard_normal((6,) + net.input_shape).astype(np.float32)
    y = rng.integers(0, 10, 6)
    out = {}
    for t in (1, threads):
        monkeypatch.setattr(kernels.threads, "chunk_threads", lambda t=t: t)  # run_split looks it up there
        monkeypatch.setattr(Conv2d, "CHUNK_BYTES", 1 << 16)  # many chunks and parts
        g = np.empty_like(w)
        loss = net.loss_and_grad(w, x, y, out=g)
        out[t] = (loss, g)
    assert out[1][0] == out[threads][0]
    np.testing.assert_array_equal(out[1][1], out[threads][1])


def test_loss_and_grad_from_inside_on_segment():
    """A call made from the on_segment callback gets its own arrays (the workspace is busy)."""
    from refsgd.nn import load_model
    net = load_model("digits_cnn", dtype=np.float64)
    rng = np.random.default_rng(1)
    w = net.init_params(0)
    x = rng.standard_normal((4,) + net.input_shape)
    y = rng.integers(0, 10, 4)
    g0 = np.empty_like(w)
    l0 = net.loss_and_grad(w, x, y, out=g0)
    inner = []

    def on_segment(name, lo, hi):
        g1 = np.empty_like(w)
        inner.append((net.loss_and_grad(w, x, y, out=g1), g1))

    g = np.empty_like(w)
    assert net.loss_and_grad(w, x, y, out=g, on_segment=on_segment) == l0
    np.testing.assert_array_equal(g, g0)
    for loss, g1 in inner:
        assert loss == l0
        np.testing.assert_array_equal(g1, g0)


SPECS = {
    "conv-relu-conv": [{"type": "conv", "filters": 4}, {"type": "relu"}, {"type": "conv", "filters": 5}],
    "conv-conv": [{"type": "conv", "filters": 4}, {"type": "conv", "filters": 3}],
    "conv-lrelu-pool-conv": [{"type": "conv", "filters": 4}, {"type": "leaky_relu", "slope": 0.1},
                             {"type": "maxpool", "size": 2}, {"type": "conv", "filters": 3},
                             {"type": "leaky_relu", "slope": 0.1}],
    "frozen-conv-lrelu-conv": [{"type": "conv", "filters": 4, "frozen": True}, {"type": "leaky_relu", "slope": 0.1},
                               {"type": "conv", "filters": 6}, {"type": "relu"}],
    "conv-relu-relu-conv": [{"type": "conv", "filters": 4}, {"type": "relu"}, {"type": "relu"},
                            {"type": "conv", "filters": 3}],
}


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("size", [(6, 8), (5, 7)])
def test_fused_networks_match_plain_im2col(name, size):
    """Networks whose convolutions fuse their activation and pooling, and hand maps over in the
    planar layout (even sizes), against the same networks on the plain im2col path, float64."""
    from refsgd.nn import build
    spec = {"name": name, "input": [2, *size], "classes": 3,
            "layers": SPECS[name] + [{"type": "flatten"}, {"type": "dense", "units": 3}]}
    rng = np.random.default_rng(7)
    net = build(spec, dtype=np.float64)
    w = net.init_params(1) + 0.05 * rng.standard_normal(net.num_params)
    x = rng.standard_normal((5, 2, *size))
    y = rng.integers(0, 3, 5)
    out = []
    for winograd in (True, False):
        old = Conv2d.WINOGRAD, Conv2d.CHUNK_BYTES
        try:
            Conv2d.WINOGRAD, Conv2d.CHUNK_BYTES = winograd, 4000
            g = np.empty_like(w)
            out.append((net.loss_and_grad(w, x, y, out=g), g, net.forward(w, x)))
        finally:
            Conv2d.WINOGRAD, Conv2d.CHUNK_BYTES = old
    (l1, g1, z1), (l2, g2, z2) = out
    assert l1 == pytest.approx(l2, rel=1e-12)
    np.testing.assert_allclose(g1, g2, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(z1, z2, rtol=1e-10, atol=1e-12)
