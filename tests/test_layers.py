"""Every layer against centred differences in float64, all entries, and against closed forms."""

import numpy as np
import pytest

from gradcheck import TOL, numeric_grad, rel_err
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
