"""The max-pool layer :class:`MaxPool2d` (k x k, stride k)."""

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.nn import kernels

from .base import Layer, _is_int, _new


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

    fused = False  # set by Conv2d.fuse_pool: the convolution before does the pooling

    def forward(self, x, params, ws=None):
        if self.fused:
            return x, None
        C, N, H, W = x.shape
        oshape = (C, N, H // self.k, W // self.k)
        y = _new(ws, "y", oshape, x.dtype)
        arg = _new(ws, "arg", oshape, np.uint8)

        def work(c0, c1):
            if self.k == 2:
                kernels.maxpool2_forward(x[c0:c1], y[c0:c1], arg[c0:c1])
            else:
                kernels.maxpool_forward(x[c0:c1], self.k, y[c0:c1], arg[c0:c1])

        self._run(work, C, x.size)
        return y, (arg, x.shape)

    def backward(self, dy, cache, grads, need_dx=True, params=None, ws=None):
        if not need_dx:
            return None
        if self.fused:
            return dy
        arg, xshape = cache
        dy = np.ascontiguousarray(dy)
        dx = _new(ws, "dx", xshape, dy.dtype)

        def work(c0, c1):
            if self.k == 2:
                kernels.maxpool2_backward(dy[c0:c1], arg[c0:c1], dx[c0:c1])
            else:
                kernels.maxpool_backward(dy[c0:c1], arg[c0:c1], self.k, dx[c0:c1])

        self._run(work, xshape[0], dx.size)
        return dx

    def describe(self):
        return f"maxpool {self.k}x{self.k}"
