"""The activation layers :class:`ReLU` and :class:`LeakyReLU`, in place on their input."""

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.nn import kernels

from .base import Layer


class ReLU(Layer):
    """y = max(x, 0), in place.  backward: dx = dy * (y > 0)."""

    kind = "relu"
    fused = False  # set by Conv2d.fuse: the convolution before applies it

    def forward(self, x, params, ws=None):
        if self.fused:
            return x, None
        np.maximum(x, 0, out=x)
        return x, x

    def backward(self, dy, y, grads, need_dx=True, params=None, ws=None):
        if not need_dx:
            return None
        if not self.fused:
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

    fused = False  # set by Conv2d.fuse: the convolution before applies it

    def forward(self, x, params, ws=None):
        if self.fused:
            return x, None
        kernels.leaky_relu_inplace(x.reshape(-1), x.dtype.type(self.slope))
        return x, x

    def backward(self, dy, y, grads, need_dx=True, params=None, ws=None):
        if not need_dx:
            return None
        if not self.fused:
            kernels.leaky_relu_backward_inplace(dy.reshape(-1), y.reshape(-1), dy.dtype.type(self.slope))
        return dy

    def describe(self):
        return f"leaky_relu {self.slope:g}"
