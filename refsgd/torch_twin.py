"""The same network in PyTorch, built from a refsgd model spec: an optional oracle.

Used by ``refsgd bench`` (speed against PyTorch on the same CPU) and by the tests (gradients
against torch autograd). PyTorch is never a dependency of refsgd: importing this module
raises ImportError when torch is missing, and callers skip.

The parameters map one to one: ``net.layout`` names ``<layer>.weight`` / ``<layer>.bias`` and
the tensor shapes are PyTorch's own (Linear (out, in), Conv2d (F, C, k, k)), so the flat
vector is copied in by offset.
"""

import numpy as np
import torch
from torch import nn as tnn


def build_torch(net):
    """A torch.nn.Module computing the same function as the refsgd Network ``net``."""
    mods = []
    shapes = {}
    for layer in net.layers:
        kind = layer.kind
        if kind == "dense":
            m = tnn.Linear(layer.in_shape[0], layer.units)
        elif kind == "conv":
            m = tnn.Conv2d(layer.in_shape[0], layer.filters, layer.k, padding=(layer.k - 1) // 2)
        elif kind == "maxpool":
            m = tnn.MaxPool2d(layer.k)
        elif kind == "relu":
            m = tnn.ReLU()
        elif kind == "leaky_relu":
            m = tnn.LeakyReLU(layer.slope)
        elif kind == "flatten":
            m = tnn.Flatten()
        else:  # pragma: no cover - a new layer type must be added here too
            raise NotImplementedError(kind)
        mods.append((layer.name, m))
        shapes[layer.name] = layer
    model = tnn.Sequential()
    for name, m in mods:
        model.add_module(name, m)
    dtype = torch.float64 if net.dtype == np.float64 else torch.float32
    model = model.to(dtype)
    for layer in net.layers:
        if layer.frozen:
            for p in getattr(model, layer.name).parameters():
                p.requires_grad_(False)
    return model


def load_flat(model, net, w):
    """Copy the flat refsgd vector w into the torch model's parameters."""
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, off, shape in net.layout:
            size = int(np.prod(shape))
            params[name].copy_(torch.from_numpy(np.ascontiguousarray(w[off:off + size]).reshape(shape)))


def flat_grad(model, net):
    """The torch model's parameter gradients as one flat vector in refsgd's layout (frozen: 0)."""
    params = dict(model.named_parameters())
    g = np.zeros(net.num_params, dtype=net.dtype)
    for name, off, shape in net.layout:
        p = params[name]
        if p.grad is not None:
            g[off:off + int(np.prod(shape))] = p.grad.detach().numpy().reshape(-1)
    return g


def loss_and_grad(model, net, w, x, y):
    """(loss, flat gradient) of the torch twin at w, for comparison with refsgd's."""
    load_flat(model, net, w)
    model.zero_grad(set_to_none=True)
    xt = torch.from_numpy(np.ascontiguousarray(x, dtype=net.dtype))
    loss = tnn.functional.cross_entropy(model(xt), torch.from_numpy(np.asarray(y, dtype=np.int64)))
    loss.backward()
    return float(loss.detach()), flat_grad(model, net)
