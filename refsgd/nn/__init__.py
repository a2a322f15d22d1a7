"""The network core: layers with hand-written backward passes over flat parameters.

Public API (stable; other implementations and refsgd's own checks use it):

    net = refsgd.nn.load_model("cifar10_cnn", dtype=np.float64)
    net.num_params, net.layout, net.segments, net.trainable
    w = net.init_params(seed)
    logits = net.forward(w, x)
    loss = net.loss_and_grad(w, x, y, out=g, on_segment=None)

See network.py for the conventions and layers.py for each layer's equations.
"""

from refsgd.nn.layers import (Conv2d, Dense, Flatten, LeakyReLU, MaxPool2d, ReLU,
                              softmax_cross_entropy)
from refsgd.nn.network import Network
from refsgd.nn.spec import available_models, build, load_model, read_spec

__all__ = ["load_model", "available_models", "read_spec", "build", "Network", "Dense", "Conv2d",
           "MaxPool2d", "ReLU", "LeakyReLU", "Flatten", "softmax_cross_entropy"]
