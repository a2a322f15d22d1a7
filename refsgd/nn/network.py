"""The network: a stack of layers as a pure function of one flat parameter vector.

    net = load_model("mnist_mlp")           # see refsgd.nn.spec
    w = net.init_params(seed=0)             # 1-D, net.num_params, dtype net.dtype
    g = np.empty_like(w)
    loss = net.loss_and_grad(w, x, y, out=g)
    logits = net.forward(w, x)

The network keeps no weights between calls. The parameters of all layers live in one
contiguous vector; ``net.layout`` lists ``(name, offset, shape)`` per tensor, in forward order,
each layer's weight then bias, so each layer's parameters form one contiguous *segment*
(``net.segments``: ``(layer name, lo, hi)``). The gradient has the same layout.

``loss_and_grad`` accepts ``on_segment(name, lo, hi)``, called during the backward pass as soon
as a layer's gradient segment ``g[lo:hi]`` is final, last layer first (for methods that start
communicating layer by layer). Frozen layers (a spec option) get a zero gradient, reported
after the trainable ones, and the backward pass stops below the lowest trainable layer.

Performance notes (none of them changes what is computed):

* a convolution takes over the activation and the 2x2 max pool that follow it (``_fuse``), so
  the full-resolution map between them is never written out;
* ``loss_and_grad`` keeps its activations and gradients in a per-thread workspace
  (``kernels.Arena``) reused while the batch size stays the same: no allocation, and no page
  faults, per step. It holds one step's worth of arrays per thread (about 50 MB for cifar10_cnn
  at batch 64, float32); ``forward``, ``loss`` and ``evaluate`` allocate as before;
* the results do not depend on the number of threads (see ``kernels``).
"""

import contextlib
import os
import threading

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.nn import kernels
from refsgd.nn.layers import Conv2d, Flatten, LeakyReLU, MaxPool2d, ReLU, softmax_cross_entropy


class _NoWorkspace:
    """ws[i] for every layer i: no workspace (the layers allocate)."""

    def __getitem__(self, i):
        return None


_no_ws = _NoWorkspace()


class Network:
    """A feed-forward classifier built from a spec (see :func:`refsgd.nn.load_model`).

    Attributes: name, dtype, input_shape (C, H, W), num_classes, layers, num_params,
    layout [(tensor name, offset, shape)], segments [(layer name, lo, hi)],
    trainable (bool mask over parameters, all True unless layers are frozen),
    spec (the parsed spec as a dict), source (where the spec came from).
    """

    def __init__(self, name, input_shape, num_classes, layers, dtype=np.float32, spec=None, source=None):
        self.name = name
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise RefsgdError(f"dtype must be float32 or float64, got {self.dtype}")
        self.input_shape = tuple(input_shape)
        self.num_classes = num_classes
        self.layers = list(layers)
        self.spec = spec
        self.source = source

        shape = self.input_shape
        for layer in self.layers:
            shape = layer.build(shape)
        if shape != (num_classes,):
            raise RefsgdError(
                f"model {name}: the last layer gives per-sample shape {shape}, "
                f"but the model declares {num_classes} classes")
        if self.layers and isinstance(self.layers[0], Flatten):
            self.layers[0].batch_first_input = True
        self._fuse()
        self._tls = threading.local()  # per thread: the kernels.Arena of loss_and_grad
        # only convolutions and pooling split their work between threads (and lower OpenBLAS's
        # thread count for it); a dense-only network skips kernels.blas_held
        self._chunked = any(isinstance(layer, (Conv2d, MaxPool2d)) for layer in self.layers)

        self.layout = []
        self.segments = []
        self._slices = []  # per layer: list of (offset, end, shape)
        offset = 0
        for layer in self.layers:
            lo = offset
            entries = []
            for suffix, pshape in layer.param_shapes:
                size = int(np.prod(pshape))
                self.layout.append((f"{layer.name}.{suffix}", offset, tuple(pshape)))
                entries.append((offset, offset + size, tuple(pshape)))
                offset += size
            self._slices.append(entries)
            if entries:
                self.segments.append((layer.name, lo, offset))
        self.num_params = offset
        # the weights, a gradient and two optimizer/communication buffers, before allocating any
        check_memory(4 * self.num_params * self.dtype.itemsize,
                     f"model {name}: {self.num_params:,d} parameters ({self.dtype.name})")

        self.trainable = np.ones(self.num_params, dtype=bool)
        for layer, (_name, lo, hi) in zip([l for l in self.layers if l.param_shapes], self.segments):
            if layer.frozen:
                self.trainable[lo:hi] = False
        trainable_idx = [i for i, l in enumerate(self.layers) if l.param_shapes and not l.frozen]
        if self.num_params and not trainable_idx:
            raise RefsgdError(f"model {name}: every layer is frozen, nothing to train")
        # the backward pass never needs to go below the lowest trainable layer
        self._lowest_trainable = trainable_idx[0] if trainable_idx else len(self.layers)

    def _fuse(self):
        """Let each convolution take over the activation right after it (not when another
        activation follows that one: it would change the output the convolution keeps for its
        backward), then a 2x2 max pool right after those (3x3 kernels, even sizes: the pool
        windows are then the Winograd tiles; not when an activation follows, for the same
        reason). The taken-over layers pass values and gradients through. A map that goes from
        one 3x3 convolution (and its activation) straight into another, with an even height and
        width, is handed over in the planar layout of ``kernels``."""
        acts = (ReLU, LeakyReLU)
        L = self.layers
        for i, layer in enumerate(L):
            if not isinstance(layer, Conv2d):
                continue
            j = i + 1
            if j < len(L) and isinstance(L[j], acts) and not (j + 1 < len(L) and isinstance(L[j + 1], acts)):
                layer.fuse(L[j])
                j += 1
            _, H, W = layer.out_shape
            even = H % 2 == 0 and W % 2 == 0
            if (j < len(L) and isinstance(L[j], MaxPool2d) and L[j].k == 2 and layer.k == 3 and even
                    and not (j + 1 < len(L) and isinstance(L[j + 1], acts))):
                layer.fuse_pool(L[j])
            elif j < len(L) and isinstance(L[j], Conv2d) and layer.k == 3 and L[j].k == 3 and even:
                # straight into another 3x3 convolution: the map goes over in the planar layout
                layer.out_planar = L[j].in_planar = True

    # ------------------------------------------------------------------ parameters
    def views(self, v, i):
        """The tensors of layer i as views into the flat vector v."""
        return tuple(v[o:e].reshape(s) for o, e, s in self._slices[i])

    def init_params(self, seed):
        """Initial weights, a documented scheme so that other implementations can reproduce it.

        ``rng = numpy.random.Generator(numpy.random.PCG64(seed))``; the layers are visited in
        forward order and each parametric layer draws its weight with
        ``rng.standard_normal(weight.shape) * sqrt(2 / fan_in)`` (He-normal; fan_in = inputs of a
        dense unit, or C*k*k for a convolution) and sets its bias to zero. The draw is in float64
        and rounded to the network's dtype, so float32 and float64 runs start from the same point.
        """
        rng = np.random.Generator(np.random.PCG64(seed))
        w = np.zeros(self.num_params, dtype=np.float64)
        for i, layer in enumerate(self.layers):
            if layer.param_shapes:
                layer.init(rng, self.views(w, i))
        return w.astype(self.dtype)

    def _check(self, w, x, y=None):
        if not isinstance(w, np.ndarray) or w.shape != (self.num_params,) or w.dtype != self.dtype:
            got = f"{w.dtype} {w.shape}" if isinstance(w, np.ndarray) else type(w).__name__
            raise ValueError(f"w must be a {self.dtype} vector of shape ({self.num_params},), got {got}")
        if x.shape[1:] != self.input_shape:
            raise ValueError(f"model {self.name} expects inputs of shape (N, {', '.join(map(str, self.input_shape))}), "
                             f"got {x.shape}")
        if y is not None and y.shape != (x.shape[0],):
            raise ValueError(f"labels must have shape ({x.shape[0]},), got {y.shape}")

    # ------------------------------------------------------------------ passes
    def _held(self):
        return kernels.blas_held() if self._chunked else contextlib.nullcontext()

    def _arena(self, batch):
        """This thread's kernels.Arena for a batch size, or None when it is in use (a call from
        inside on_segment): loss_and_grad's arrays, kept between calls. A new batch size
        replaces it, so it holds one step's activations and gradients (per thread)."""
        arena = getattr(self._tls, "arena", None)
        if arena is None or arena.batch != batch:
            if arena is not None and arena.busy:
                return None
            arena = self._tls.arena = kernels.Arena(batch, len(self.layers))
        return None if arena.busy else arena

    def _forward(self, w, x, arena=None, on_layer=None):
        x = np.asarray(x, dtype=self.dtype)
        ws = arena.layer if arena is not None else _no_ws
        if x.ndim == 4 and not isinstance(self.layers[0], Flatten):
            if arena is None:
                a = np.ascontiguousarray(x.transpose(1, 0, 2, 3))  # to (C, N, H, W)
            else:
                a = arena.get("input", (x.shape[1], x.shape[0]) + x.shape[2:], self.dtype)
                np.copyto(a, x.transpose(1, 0, 2, 3))
        elif x.ndim == 4:
            a = x
        elif arena is None:
            a = x.copy()  # activations work in place; never touch the caller's array
        else:
            a = arena.get("input", x.shape, self.dtype)
            np.copyto(a, x)
        caches = []
        for i, layer in enumerate(self.layers):
            a, cache = layer.forward(a, self.views(w, i), ws[i])
            caches.append(cache)
            if on_layer is not None:
                on_layer()
        return a, caches

    def forward(self, w, x):
        """Logits (N, num_classes) of the batch x (N, C, H, W) at weights w."""
        self._check(w, x)
        with self._held():
            z, _ = self._forward(w, x)
        return z

    def loss_and_grad(self, w, x, y, out, on_segment=None, on_layer=None):
        """Mean softmax cross-entropy over the batch; its gradient is written into ``out``.

        w: (num_params,);  x: (N, C, H, W);  y: (N,) integer labels;  out: like w.
        on_segment(layer name, lo, hi): optional, told when out[lo:hi] is final.
        on_layer(): optional, called after every layer of the forward and the backward pass
        (e.g. to let MPI progress the requests in flight).
        Returns the loss as a Python float.
        """
        self._check(w, x, y)
        if out.shape != w.shape or out.dtype != w.dtype:
            raise ValueError(f"out must be like w ({w.dtype} {w.shape}), got {out.dtype} {out.shape}")
        arena = self._arena(x.shape[0])
        with self._held():
            if arena is None:
                return self._loss_and_grad(w, x, y, out, on_segment, None, on_layer)
            arena.busy = True
            try:
                return self._loss_and_grad(w, x, y, out, on_segment, arena, on_layer)
            finally:
                arena.busy = False

    def _loss_and_grad(self, w, x, y, out, on_segment, arena, on_layer=None):
        z, caches = self._forward(w, x, arena, on_layer)
        ws = arena.layer if arena is not None else _no_ws
        loss, dz = softmax_cross_entropy(z, np.asarray(y, dtype=np.int64),
                                         None if arena is None else arena.get("dz", z.shape, z.dtype))
        d = dz
        seg = len(self.segments) - 1
        frozen_segments = []
        for i in range(len(self.layers) - 1, self._lowest_trainable - 1, -1):
            layer = self.layers[i]
            need_dx = i > self._lowest_trainable
            if layer.param_shapes:
                name, lo, hi = self.segments[seg]
                seg -= 1
                if layer.frozen:
                    frozen_segments.append((name, lo, hi))
                    # a frozen layer still passes the gradient down, into a scratch buffer
                    scratch = tuple(np.empty(s, dtype=self.dtype) for _, s in layer.param_shapes)
                    d = layer.backward(d, caches[i], scratch, need_dx, self.views(w, i), ws[i])
                    continue
                d = layer.backward(d, caches[i], self.views(out, i), need_dx, self.views(w, i), ws[i])
                if on_segment is not None:
                    on_segment(name, lo, hi)
            else:
                d = layer.backward(d, caches[i], (), need_dx, None, ws[i])
            if on_layer is not None:
                on_layer()
        frozen_segments += self.segments[:seg + 1]
        for name, lo, hi in frozen_segments:
            out[lo:hi] = 0
            if on_segment is not None:
                on_segment(name, lo, hi)
        return float(loss)

    def loss(self, w, x, y):
        """Mean softmax cross-entropy at w, without the gradient."""
        self._check(w, x, y)
        with self._held():
            z, _ = self._forward(w, x)
        loss, _ = softmax_cross_entropy(z, np.asarray(y, dtype=np.int64))
        return float(loss)

    def evaluate(self, w, x, y, batch=1000):
        """(mean loss, accuracy) over a whole set, in batches of ``batch``."""
        total, correct = 0.0, 0
        for s in range(0, len(x), batch):
            xb, yb = x[s:s + batch], np.asarray(y[s:s + batch], dtype=np.int64)
            self._check(w, xb, yb)
            with self._held():
                z, _ = self._forward(w, xb)
            loss, _ = softmax_cross_entropy(z, yb)
            total += loss * len(xb)
            correct += int(np.sum(np.argmax(z, axis=1) == yb))
        return total / len(x), correct / len(x)

    def summary(self):
        """A human-readable table of the layers and their parameter counts."""
        lines = [f"model {self.name} ({self.dtype}, input {self.input_shape}, {self.num_classes} classes)"]
        seg = {n: (lo, hi) for n, lo, hi in self.segments}
        for layer in self.layers:
            lo, hi = seg.get(layer.name, (0, 0))
            extra = f"{hi - lo:>10,d} params" if hi > lo else ""
            if layer.frozen:
                extra += " (frozen)"
            lines.append(f"  {layer.name:<10} {layer.describe():<22} -> {str(layer.out_shape):<16} {extra}")
        lines.append(f"  total {self.num_params:,d} parameters ({int(self.trainable.sum()):,d} trainable)")
        return "\n".join(lines)


def available_memory():
    """Bytes of memory this machine can still give (MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(nbytes, what):
    """Refuse (RefsgdError) to go on when ``nbytes`` exceed the memory available."""
    free = available_memory()
    if free is not None and nbytes > free:
        raise RefsgdError(f"{what} need about {nbytes / 2**30:,.1f} GiB, more than the {free / 2**30:,.1f} GiB "
                          "of memory available")


def model_copies(count, net, what):
    """Refuse ``count`` copies of the model when they exceed the memory available, saying what
    would be allocated (``what``: the option and its buffers; pipe-sgd's --dependency, pp-asgd's
    --staleness and --threads, --trace)."""
    check_memory(count * net.num_params * net.dtype.itemsize,
                 f"{what}: {count:,d} copies of the model ({net.num_params:,d} parameters, {net.dtype.name}) per rank")
