"""The base :class:`Layer` (name, shapes, parameter shapes) and the helpers the layers share."""

import numpy as np


def _new(ws, tag, shape, dtype):
    """An uninitialised array: from the workspace ``ws`` when given, else fresh."""
    return np.empty(shape, dtype=dtype) if ws is None else ws(tag, shape, dtype)


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
