"""Layers with hand-written forward and backward passes.

Each layer follows the forward/backward-with-cache convention::

    out, cache = layer.forward(x, params)          # params: tuple of views into the flat w
    dx = layer.backward(dout, cache, grads, need_dx)  # grads: views into the flat g, written

A layer owns no parameter memory: ``params`` and ``grads`` are views into the network's flat
vectors, in the order of ``layer.param_shapes``. ``backward`` overwrites (never accumulates
into) its gradient views and returns the input gradient, or None when ``need_dx`` is False
(the first layer's input gradient is never needed, and skipping it saves a col2im).

Shapes: batch-first for vectors, ``(N, D)``; channel-major for feature maps, ``(C, N, H, W)``
(see :mod:`refsgd.nn.kernels`). ``in_shape``/``out_shape`` are per-sample shapes in the public
(C, H, W) convention.

Activations work in place on their input (the previous layer's fresh output), which the
network guarantees is safe; their cache is their own output, from which the derivative follows.
"""

import numpy as np

from refsgd import RefsgdError
from refsgd.nn import kernels


class Layer:
    """Base class: no parameters, shape-preserving."""

    kind = "layer"
    param_shapes = ()  # tuple of (suffix, shape)

    def __init__(self, name):
        self.name = name
        self.in_shape = None
        self.out_shape = None
        self.frozen = False

    def build(self, in_shape):
        """Fix the per-sample input shape; return the per-sample output shape."""
        self.in_shape = tuple(in_shape)
        self.out_shape = self.in_shape
        return self.out_shape

    def init(self, rng, params):
        """Write initial values into ``params`` (views); no-op for parameter-free layers."""

    def describe(self):
        return self.kind

    def __repr__(self):
        return f"{self.name}: {self.describe()} {self.in_shape} -> {self.out_shape}"


class Dense(Layer):
    """Fully connected layer ``y = x W^T + b``.

    params: weight (out, in), bias (out,)  (PyTorch's nn.Linear layout)
    forward:  x (N, in) -> y (N, out)
    backward: dW = dy^T x,  db = sum_n dy,  dx = dy W
    init:     W ~ N(0, 2/in) (He et al. 2015), b = 0
    """

    kind = "dense"

    def __init__(self, name, units):
        super().__init__(name)
        if not isinstance(units, int) or units < 1:
            raise RefsgdError(f"layer {name}: dense 'units' must be a positive integer, got {units!r}")
        self.units = units

    def build(self, in_shape):
        if len(in_shape) != 1:
            raise RefsgdError(
                f"layer {self.name}: dense expects a flat input, got shape {tuple(in_shape)} "
                "(put a flatten layer before it)")
        self.in_shape = tuple(in_shape)
        self.out_shape = (self.units,)
        self.param_shapes = (("weight", (self.units, in_shape[0])), ("bias", (self.units,)))
        return self.out_shape

    def init(self, rng, params):
        W, b = params
        W[...] = rng.standard_normal(W.shape) * np.sqrt(2.0 / W.shape[1])
        b[...] = 0

    def forward(self, x, params):
        W, b = params
        y = np.matmul(x, W.T)
        y += b
        return y, x

    def backward(self, dy, x, grads, need_dx=True, params=None):
        gW, gb = grads
        np.matmul(dy.T, x, out=gW)
        np.sum(dy, axis=0, out=gb)
        if not need_dx:
            return None
        return np.matmul(dy, params[0])

    def describe(self):
        return f"dense {self.units}"


class Conv2d(Layer):
    """k x k convolution, stride 1, 'same' zero padding (p = (k-1)/2, k odd).

    params: weight (F, C, k, k), bias (F,)  (PyTorch's nn.Conv2d layout; cross-correlation)
    forward:  x (C, N, H, W) -> y (F, N, H, W)
              y = W_mat @ im2col(x) + b,  W_mat = weight.reshape(F, C*k*k)
    backward: dW_mat = dy_mat @ cols^T,  db = sum over (N, H, W) of dy,
              dx = col2im(W_mat^T @ dy_mat)
    init:     W ~ N(0, 2/(C*k*k)) (He et al. 2015), b = 0

    The batch is processed in chunks of images whose ``cols`` block fits in the L2 cache
    (``CHUNK_BYTES``); the backward pass unfolds each chunk again rather than keeping a
    (C*k*k, N*H*W) matrix from the forward pass, which is faster (memory traffic dominates).
    """

    kind = "conv"
    CHUNK_BYTES = 1 << 20

    def __init__(self, name, filters, kernel=3):
        super().__init__(name)
        if not isinstance(filters, int) or filters < 1:
            raise RefsgdError(f"layer {name}: conv 'filters' must be a positive integer, got {filters!r}")
        if not isinstance(kernel, int) or kernel < 1 or kernel % 2 == 0:
            raise RefsgdError(
                f"layer {name}: conv 'kernel' must be a positive odd integer ('same' padding), got {kernel!r}")
        self.filters = filters
        self.k = kernel

    def build(self, in_shape):
        if len(in_shape) != 3:
            raise RefsgdError(
                f"layer {self.name}: conv expects a (C, H, W) input, got shape {tuple(in_shape)}")
        C, H, W = in_shape
        self.in_shape = tuple(in_shape)
        self.out_shape = (self.filters, H, W)
        self.param_shapes = (("weight", (self.filters, C, self.k, self.k)), ("bias", (self.filters,)))
        return self.out_shape

    def init(self, rng, params):
        W, b = params
        fan_in = W.shape[1] * self.k * self.k
        W[...] = rng.standard_normal(W.shape) * np.sqrt(2.0 / fan_in)
        b[...] = 0

    def _chunks(self, x):
        C, N, H, W = x.shape
        per_image = C * self.k * self.k * H * W * x.itemsize
        step = max(1, min(N, self.CHUNK_BYTES // per_image))
        return [(n0, min(N, n0 + step)) for n0 in range(0, N, step)], step * H * W

    def forward(self, x, params):
        Wt, b = params
        C, N, H, Wd = x.shape
        F, HW = self.filters, H * Wd
        W_mat = Wt.reshape(F, -1)
        y = np.empty((F, N * HW), dtype=x.dtype)
        chunks, width = self._chunks(x)
        cols = np.empty((C * self.k * self.k, width), dtype=x.dtype)
        for n0, n1 in chunks:
            c = cols[:, :(n1 - n0) * HW]
            kernels.im2col(x, self.k, n0, n1, c)
            np.matmul(W_mat, c, out=y[:, n0 * HW:n1 * HW])
        kernels.add_channel_bias(y, b)
        return y.reshape(F, N, H, Wd), x

    def backward(self, dy, x, grads, need_dx=True, params=None):
        gW, gb = grads
        C, N, H, Wd = x.shape
        F, HW = self.filters, H * Wd
        dy_mat = dy.reshape(F, -1)
        gW_mat = gW.reshape(F, -1)
        np.sum(dy_mat, axis=1, out=gb)
        W_mat = params[0].reshape(F, -1)
        chunks, width = self._chunks(x)
        cols = np.empty((C * self.k * self.k, width), dtype=x.dtype)
        part = np.empty_like(gW_mat) if len(chunks) > 1 else None
        dx = np.zeros(x.shape, dtype=x.dtype) if need_dx else None
        for i, (n0, n1) in enumerate(chunks):
            c = cols[:, :(n1 - n0) * HW]
            d = dy_mat[:, n0 * HW:n1 * HW]
            kernels.im2col(x, self.k, n0, n1, c)
            if i == 0:
                np.matmul(d, c.T, out=gW_mat)
            else:
                np.matmul(d, c.T, out=part)
                gW_mat += part
            if need_dx:
                np.matmul(W_mat.T, d, out=c)  # reuse the block for dcols
                kernels.col2im_add(c, self.k, n0, n1, dx)
        return dx

    def describe(self):
        return f"conv {self.k}x{self.k} x{self.filters}"


class MaxPool2d(Layer):
    """Non-overlapping k x k max pooling (stride k; trailing rows/columns are dropped).

    forward:  x (C, N, H, W) -> y (C, N, H//k, W//k), cache = argmax positions (uint8)
    backward: the window's gradient goes to its maximum, the other positions get zero.
    """

    kind = "maxpool"

    def __init__(self, name, size=2):
        super().__init__(name)
        if not isinstance(size, int) or not 1 <= size <= 15:
            raise RefsgdError(f"layer {name}: maxpool 'size' must be an integer in [1, 15], got {size!r}")
        self.k = size

    def build(self, in_shape):
        if len(in_shape) != 3:
            raise RefsgdError(
                f"layer {self.name}: maxpool expects a (C, H, W) input, got shape {tuple(in_shape)}")
        C, H, W = in_shape
        if H < self.k or W < self.k:
            raise RefsgdError(
                f"layer {self.name}: maxpool {self.k}x{self.k} does not fit a {H}x{W} input")
        self.in_shape = tuple(in_shape)
        self.out_shape = (C, H // self.k, W // self.k)
        return self.out_shape

    def forward(self, x, params):
        C, N, H, W = x.shape
        oshape = (C, N, H // self.k, W // self.k)
        y = np.empty(oshape, dtype=x.dtype)
        arg = np.empty(oshape, dtype=np.uint8)
        kernels.maxpool_forward(x, self.k, y, arg)
        return y, (arg, x.shape)

    def backward(self, dy, cache, grads, need_dx=True, params=None):
        if not need_dx:
            return None
        arg, xshape = cache
        dx = np.empty(xshape, dtype=dy.dtype)
        kernels.maxpool_backward(np.ascontiguousarray(dy), arg, self.k, dx)
        return dx

    def describe(self):
        return f"maxpool {self.k}x{self.k}"


class ReLU(Layer):
    """y = max(x, 0), in place.  backward: dx = dy * (y > 0)."""

    kind = "relu"

    def forward(self, x, params):
        np.maximum(x, 0, out=x)
        return x, x

    def backward(self, dy, y, grads, need_dx=True, params=None):
        if not need_dx:
            return None
        kernels.relu_backward_inplace(dy.reshape(-1), y.reshape(-1))
        return dy


class LeakyReLU(Layer):
    """y = max(x, slope*x), in place (Sato et al.: slope 0.01).  backward: dx = dy * (1 or slope)."""

    kind = "leaky_relu"

    def __init__(self, name, slope=0.01):
        super().__init__(name)
        if not isinstance(slope, (int, float)) or not 0 < slope < 1:
            raise RefsgdError(f"layer {name}: leaky_relu 'slope' must be in (0, 1), got {slope!r}")
        self.slope = float(slope)

    def forward(self, x, params):
        kernels.leaky_relu_inplace(x.reshape(-1), x.dtype.type(self.slope))
        return x, x

    def backward(self, dy, y, grads, need_dx=True, params=None):
        if not need_dx:
            return None
        kernels.leaky_relu_backward_inplace(dy.reshape(-1), y.reshape(-1), dy.dtype.type(self.slope))
        return dy

    def describe(self):
        return f"leaky_relu {self.slope:g}"


class Flatten(Layer):
    """(C, H, W) feature maps -> flat vectors in PyTorch's order (index c*H*W + h*W + w).

    forward:  x (C, N, H, W) -> y (N, C*H*W); when the network's input feeds it directly,
              x is the public batch-first (N, C, H, W) array and only a reshape is needed.
    backward: the inverse permutation.
    """

    kind = "flatten"
    batch_first_input = False  # set by the network when this layer is the first

    def build(self, in_shape):
        self.in_shape = tuple(in_shape)
        self.out_shape = (int(np.prod(in_shape)),)
        return self.out_shape

    def forward(self, x, params):
        if self.batch_first_input or x.ndim == 2:
            return x.reshape(x.shape[0], -1), x.shape
        C, N = x.shape[:2]
        return np.ascontiguousarray(x.transpose(1, 0, 2, 3)).reshape(N, -1), x.shape

    def backward(self, dy, xshape, grads, need_dx=True, params=None):
        if not need_dx:
            return None
        if self.batch_first_input or len(xshape) == 2:
            return dy.reshape(xshape)
        C, N, H, W = xshape
        return np.ascontiguousarray(dy.reshape(N, C, H, W).transpose(1, 0, 2, 3))


def softmax_cross_entropy(z, y):
    """Mean softmax cross-entropy.

    z: logits (N, K);  y: int labels (N,)
    returns (loss, dz) with loss = mean_n [log sum_j exp z_nj - z_n,y_n] and dz = dloss/dz,
    i.e. (softmax(z) - onehot(y)) / N.
    """
    dz = np.empty_like(z)
    loss = kernels.softmax_xent(z, y, dz)
    return loss, dz


LAYER_TYPES = {
    "dense": Dense,
    "conv": Conv2d,
    "maxpool": MaxPool2d,
    "relu": ReLU,
    "leaky_relu": LeakyReLU,
    "flatten": Flatten,
}
