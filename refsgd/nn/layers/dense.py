"""The layers of a network's head: :class:`Flatten` (feature maps to vectors), :class:`Dense`, and
the loss, :func:`softmax_cross_entropy`."""

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.nn import kernels

from .base import Layer, _is_int, _new


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

    def forward(self, x, params, ws=None):
        W, b = params
        kernels.restore_blas()  # after convolutions, which may have left it at one thread
        y = np.matmul(x, W.T, out=_new(ws, "y", (x.shape[0], self.units), x.dtype))
        y += b
        return y, x

    def backward(self, dy, x, grads, need_dx=True, params=None, ws=None):
        gW, gb = grads
        kernels.restore_blas()
        np.matmul(dy.T, x, out=gW)
        np.sum(dy, axis=0, out=gb)
        if not need_dx:
            return None
        return np.matmul(dy, params[0], out=_new(ws, "dx", x.shape, dy.dtype))

    def describe(self):
        return f"dense {self.units}"


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

    def forward(self, x, params, ws=None):
        if self.batch_first_input or x.ndim == 2:
            return x.reshape(x.shape[0], -1), x.shape
        C, N, H, W = x.shape
        y = _new(ws, "y", (N, C, H, W), x.dtype)
        np.copyto(y, x.transpose(1, 0, 2, 3))
        return y.reshape(N, -1), x.shape

    def backward(self, dy, xshape, grads, need_dx=True, params=None, ws=None):
        if not need_dx:
            return None
        if self.batch_first_input or len(xshape) == 2:
            return dy.reshape(xshape)
        C, N, H, W = xshape
        dx = _new(ws, "dx", xshape, dy.dtype)
        np.copyto(dx, dy.reshape(N, C, H, W).transpose(1, 0, 2, 3))
        return dx


def softmax_cross_entropy(z, y, out=None):
    """Mean softmax cross-entropy.

    z: logits (N, K);  y: int labels (N,);  out: optional array like z for dz
    returns (loss, dz) with loss = mean_n [log sum_j exp z_nj - z_n,y_n] and dz = dloss/dz,
    i.e. (softmax(z) - onehot(y)) / N.
    """
    dz = np.empty_like(z) if out is None else out
    loss = kernels.softmax_xent(z, y, dz)
    return loss, dz
