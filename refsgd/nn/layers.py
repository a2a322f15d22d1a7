"""Layers with hand-written forward and backward passes.

Each layer follows the forward/backward-with-cache convention::

    out, cache = layer.forward(x, params)          # params: tuple of views into the flat w
    dx = layer.backward(dout, cache, grads, need_dx)  # grads: views into the flat g, written

A layer owns no parameter memory: ``params`` and ``grads`` are views into the network's flat
vectors, in the order of ``layer.param_shapes``. ``backward`` overwrites (never accumulates
into) its gradient views and returns the input gradient, or None when ``need_dx`` is False
(the first layer's input gradient is never needed, and skipping it saves work: for a convolution,
an im2col of dy and one matrix product).

Shapes: batch-first for vectors, ``(N, D)``; channel-major for feature maps, ``(C, N, H, W)``
(see :mod:`refsgd.nn.kernels`). ``in_shape``/``out_shape`` are per-sample shapes in the public
(C, H, W) convention.

Activations work in place on their input (the previous layer's fresh output), which the
network guarantees is safe; their cache is their own output, from which the derivative follows.
"""

import numpy as np

from refsgd import RefsgdError
from refsgd.nn import kernels


def _is_int(v):
    """An integer in a spec (TOML's true/false are not: bool is an int subclass in Python)."""
    return isinstance(v, int) and not isinstance(v, bool)


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
        if not _is_int(units) or units < 1:
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
    backward: db = sum over (N, H, W) of dy, and, with cols_dy = im2col(dy) (F*k*k rows),
              dx = Wf_mat @ cols_dy,  Wf = weight flipped in (k, k), channel axes swapped
              dW[f, c, a, b] = (cols_dy @ x_mat^T)[(f, k-1-a, k-1-b), c]
              (when dx is not needed, e.g. for the first layer: dW_mat = dy_mat @ im2col(x)^T,
              cheaper when C < F)
    init:     W ~ N(0, 2/(C*k*k)) (He et al. 2015), b = 0

    The N*H image rows are processed in chunks whose unfolded block fits in the L2 cache
    (``CHUNK_BYTES``), and the chunks are shared between the cores (``kernels.run_split``):
    each thread runs its own im2col -> GEMM pipelines with a one-thread BLAS. The backward
    pass unfolds again rather than keeping a (C*k*k, N*H*W) matrix from the forward pass,
    which is faster (memory traffic dominates). Taking dx as a convolution of dy means a
    single im2col serves both backward products and dx is written once, where the direct
    adjoint needs im2col(x) plus a col2im scatter-add.
    """

    kind = "conv"
    CHUNK_BYTES = 1 << 20

    def __init__(self, name, filters, kernel=3):
        super().__init__(name)
        if not _is_int(filters) or filters < 1:
            raise RefsgdError(f"layer {name}: conv 'filters' must be a positive integer, got {filters!r}")
        if not _is_int(kernel) or kernel < 1 or kernel % 2 == 0:
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

    def _step(self, rows, W, itemsize):
        """Image rows per chunk: as many as keep a (rows, step*W) block within CHUNK_BYTES."""
        return max(1, self.CHUNK_BYTES // (rows * W * itemsize))

    def forward(self, x, params):
        Wt, b = params
        x = np.ascontiguousarray(x)  # im2col copies whole rows out of x's memory
        C, N, H, Wd = x.shape
        F, k = self.filters, self.k
        W_mat = Wt.reshape(F, -1)
        y = np.empty((F, N, H, Wd), dtype=x.dtype)
        y_mat = y.reshape(F, N * H * Wd)
        rows = C * k * k
        step = self._step(rows, Wd, x.itemsize)

        def work(lo, hi):  # image rows lo..hi-1
            buf = kernels.scratch("cols", (rows * step * Wd,), x.dtype)
            for r0 in range(lo, hi, step):
                r1 = min(hi, r0 + step)
                cols = buf[:rows * (r1 - r0) * Wd].reshape(rows, -1)
                kernels.im2col(x, k, r0, r1, cols)
                out = y_mat[:, r0 * Wd:r1 * Wd]
                np.matmul(W_mat, cols, out=out)
                kernels.add_channel_bias(out, b)  # while the block is still in cache

        kernels.run_split(work, N * H, step)
        return y, x

    def backward(self, dy, x, grads, need_dx=True, params=None):
        gW, gb = grads
        C, N, H, Wd = x.shape
        F, k = self.filters, self.k
        dy = np.ascontiguousarray(dy)
        dy_mat = dy.reshape(F, -1)
        x_mat = x.reshape(C, -1)
        if need_dx:
            # dx is the 'same' convolution of dy with the kernel flipped in space and with its
            # channel axes swapped, Wf[c, f, a, b] = W[f, c, k-1-a, k-1-b]. So one im2col, of
            # dy, serves both products: dx = Wf_mat @ cols_dy (a plain write, where the direct
            # adjoint would need a col2im scatter-add), and dW, since the (f, a', b') row of
            # cols_dy dotted with x[c] is dW[f, c, k-1-a', k-1-b'].
            Wf = np.ascontiguousarray(params[0][:, :, ::-1, ::-1].transpose(1, 0, 2, 3)).reshape(C, -1)
            dx = np.empty_like(x)
            dx_mat = dx.reshape(C, -1)
            rows = F * k * k
            acc_shape = (rows, C)
        else:
            # dW = dy_mat @ cols_x^T: the first layer's cols_x has only C*k*k (27) rows
            rows = C * k * k
            acc_shape = (F, rows)
        step = self._step(rows, Wd, x.itemsize)

        def work(lo, hi):  # image rows lo..hi-1; returns this part's dW terms and db
            buf = kernels.scratch("cols", (rows * step * Wd,), x.dtype)
            part = kernels.scratch("part", acc_shape, x.dtype)
            acc = np.empty(acc_shape, dtype=x.dtype)
            db = np.zeros(F, dtype=x.dtype)
            for r0 in range(lo, hi, step):
                r1 = min(hi, r0 + step)
                cols = buf[:rows * (r1 - r0) * Wd].reshape(rows, -1)
                d = dy_mat[:, r0 * Wd:r1 * Wd]
                db += d.sum(axis=1)
                if need_dx:
                    kernels.im2col(dy, k, r0, r1, cols)
                    np.matmul(cols, x_mat[:, r0 * Wd:r1 * Wd].T, out=acc if r0 == lo else part)
                    np.matmul(Wf, cols, out=dx_mat[:, r0 * Wd:r1 * Wd])
                else:
                    kernels.im2col(x, k, r0, r1, cols)
                    np.matmul(d, cols.T, out=acc if r0 == lo else part)
                if r0 != lo:
                    acc += part
            return acc, db

        results = kernels.run_split(work, N * H, step)
        acc, db = results[0]
        for a, d in results[1:]:
            acc += a
            db += d
        gb[...] = db
        if need_dx:
            gW[...] = acc.reshape(F, k, k, C)[:, ::-1, ::-1, :].transpose(0, 3, 1, 2)
            return dx
        gW[...] = acc.reshape(gW.shape)
        return None

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
        if not _is_int(size) or not 1 <= size <= 15:
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

    # below this many input entries a layer is not worth handing to a second thread
    PARALLEL_MIN = 1 << 16

    def _run(self, work, C, size):
        """work(c0, c1) over channel ranges, split between threads when the layer is large."""
        if size >= self.PARALLEL_MIN:
            kernels.run_split(work, C, 1)
        else:
            work(0, C)

    def forward(self, x, params):
        C, N, H, W = x.shape
        oshape = (C, N, H // self.k, W // self.k)
        y = np.empty(oshape, dtype=x.dtype)
        arg = np.empty(oshape, dtype=np.uint8)

        def work(c0, c1):
            kernels.maxpool_forward(x[c0:c1], self.k, y[c0:c1], arg[c0:c1])

        self._run(work, C, x.size)
        return y, (arg, x.shape)

    def backward(self, dy, cache, grads, need_dx=True, params=None):
        if not need_dx:
            return None
        arg, xshape = cache
        dy = np.ascontiguousarray(dy)
        dx = np.empty(xshape, dtype=dy.dtype)

        def work(c0, c1):
            kernels.maxpool_backward(dy[c0:c1], arg[c0:c1], self.k, dx[c0:c1])

        self._run(work, xshape[0], dx.size)
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
