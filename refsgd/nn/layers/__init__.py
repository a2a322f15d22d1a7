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
The network fuses an activation that follows a convolution into it (``Conv2d.fuse``): the
convolution then applies it to its output blocks while they are in cache, and its derivative
to dy as it reads it, and the activation layer passes values and gradients through untouched.

``forward`` and ``backward`` take an optional ``ws``: a function ``ws(tag, shape, dtype)``
giving the layer's arrays (outputs, input gradients) from memory kept between calls by the
network (see ``kernels.Arena``); without it they allocate.

Modules: :mod:`.base`, :mod:`.dense` (Dense, Flatten, the loss), :mod:`.conv`, :mod:`.pool`,
:mod:`.activations`; this package re-exports them and holds :data:`LAYER_TYPES` (spec names).
"""

from .base import (  # noqa: F401
    _is_int,
    Layer,
)
from .dense import (  # noqa: F401
    Dense,
    Flatten,
    softmax_cross_entropy,
)
from .conv import (  # noqa: F401
    Conv2d,
)
from .pool import (  # noqa: F401
    MaxPool2d,
)
from .activations import (  # noqa: F401
    ReLU,
    LeakyReLU,
)


LAYER_TYPES = {
    "dense": Dense,
    "conv": Conv2d,
    "maxpool": MaxPool2d,
    "relu": ReLU,
    "leaky_relu": LeakyReLU,
    "flatten": Flatten,
}
