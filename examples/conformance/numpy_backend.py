"""refsgd's asynchronous methods in plain NumPy, checked against refsgd's golden trajectories:

    refsgd conformance run examples/conformance/numpy_backend.py:Backend

Written as an outside implementation would be, from docs/implementers.md: it imports nothing of
refsgd but the interface. SSGD and SSGD-OPT (PyTorch's or MXNet's momentum, Nesterov, weight decay),
D-Sync and local SGD, uncompressed; PP-ASGD and ASGD in their deterministic mode (every gradient thread of
update t computes at the w^ published S + 1 updates before), DC-ASGD and PS-Sync on a parameter
server (rank 0) that serves its workers in turn; the network is a multilayer perceptron (flatten,
dense, relu, leaky_relu) with its gradient written out.
"""

import numpy as np

from refsgd.conformance import Backend as Interface


class MLP:
    """The loss and gradient of a refsgd model spec made of flatten, dense, relu and leaky_relu
    layers, at a flat weight vector laid out as the spec's layout says."""

    def __init__(self, spec, layout):
        tensors = {name: (offset, tuple(shape)) for name, offset, shape in layout}
        self.layers, count = [], 0
        for layer in spec["layers"]:
            kind = layer["type"]
            if layer.get("frozen"):
                raise NotImplementedError("this example's network has no frozen layers")
            if kind == "dense":
                count += 1
                name = layer.get("name", f"fc{count}")
                self.layers.append(("dense", tensors[f"{name}.weight"], tensors[f"{name}.bias"]))
            elif kind in ("relu", "leaky_relu"):
                self.layers.append(("relu", layer.get("slope", 0.01) if kind == "leaky_relu" else 0.0))
            elif kind != "flatten":
                raise NotImplementedError(f"this example's network has no {kind} layer")

    @staticmethod
    def _view(w, where):
        offset, shape = where
        return w[offset:offset + int(np.prod(shape))].reshape(shape)

    def loss_and_grad(self, w, x, y):
        """The mean cross-entropy over the batch (x, y) and its gradient with respect to w."""
        h, kept = x.reshape(len(x), -1), []
        for layer in self.layers:
            kept.append(h)
            if layer[0] == "dense":
                h = h @ self._view(w, layer[1]).T + self._view(w, layer[2])
            else:
                h = np.where(h > 0, h, layer[1] * h)
        z = h - h.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        loss = -logp[np.arange(len(y)), y].mean()
        dh = np.exp(logp)
        dh[np.arange(len(y)), y] -= 1
        dh /= len(y)
        g = np.zeros_like(w)
        for layer, h in zip(reversed(self.layers), reversed(kept)):
            if layer[0] == "dense":
                self._view(g, layer[1])[...] = dh.T @ h
                self._view(g, layer[2])[...] = dh.sum(axis=0)
                dh = dh @ self._view(w, layer[1])
            else:
                dh = np.where(h > 0, dh, layer[1] * dh)
        return float(loss), g


class U:
    """The local optimizer of docs/implementers.md, "The local optimizer U": PyTorch's momentum
    (with Nesterov) or MXNet's, and coupled weight decay, on one flat weight vector."""

    def __init__(self, c, w):
        self.mu, self.wd = c.get("momentum", 0.0), c.get("weight_decay", 0.0)
        self.nesterov, self.mxnet = c.get("nesterov", False), c.get("momentum_form", "pytorch") == "mxnet"
        self.state = {"U.v": np.zeros_like(w)} if self.mxnet else \
            {"U.momentum_buffer": np.zeros_like(w)} if self.mu > 0 else {}

    def step(self, w, g, lr):
        g = self.wd * w + g
        if self.mxnet:
            v = self.state["U.v"] = self.state["U.v"] * self.mu - g * lr if self.mu > 0 else -(g * lr)
            return w + v
        if self.mu > 0:
            b = self.state["U.momentum_buffer"] = self.state["U.momentum_buffer"] * self.mu + g
            g = b * self.mu + g if self.nesterov else b
        return w - g * lr


class Backend(Interface):
    methods = ("pp-asgd", "asgd", "dcasgd", "ps-sync", "ssgd", "ssgd-opt", "d-sync", "local-sgd")
    dtypes = ("float64", "float32")

    def setup(self, s):
        self.s, self.c, self.N = s, s.config, s.workers
        self.net = MLP(s.model_spec, s.layout)
        self.w = s.w0.copy()
        if s.method in ("pp-asgd", "asgd"):
            S, mu = self.c["staleness"], self.c["momentum"]
            self.M = np.zeros_like(self.w)
            self.published = {0: s.w0.copy()}            # V_v: the w^ published after v updates
            self.h = sum(mu ** k for k in range(1, S + 2)) if s.method == "pp-asgd" else 0.0
        elif s.method == "dcasgd":
            self.backup = [s.w0.copy() for _ in range(self.N)]   # w_bak(m): what worker m last received
            self.mean_square = np.zeros_like(self.w)
        elif s.method in ("ssgd", "ssgd-opt"):
            self.U = U(self.c, self.w)
        elif s.method == "local-sgd":
            self.X = [s.w0.copy() for _ in range(self.N)]        # every worker its own model and U
            self.Us = [U(self.c, self.w) for _ in range(self.N)]

    def grad(self, w, idx):
        return self.net.loss_and_grad(w, self.s.x_train[idx], self.s.y_train[idx])

    def step(self, t, lr, batches):
        return getattr(self, self.s.method.replace("-", "_"))(t, lr, batches)

    def pp_asgd(self, t, lr, batches):
        """Sato et al. 2017, Algorithms 1-3 and eq. 2: G threads per process, staleness S."""
        S, mu, b = self.c["staleness"], self.c["momentum"], self.c["batch"]
        at = self.published[max(t - S, 0)]
        losses, D_A = [], None
        for threads in batches:                          # every process r
            D_L, loss = None, 0.0
            for idx in threads:                          # every gradient thread g
                lg, g = self.grad(at, idx)
                loss += lg
                D_L = g * b if D_L is None else D_L + g * b
            losses.append(loss / len(threads))
            D_A = D_L if D_A is None else D_A + D_L     # the all-reduce over processes
        self.M = mu * self.M - lr * D_A
        self.w = self.w + self.M
        self.published[t + 1] = self.w + self.h * self.M if self.s.method == "pp-asgd" else self.w.copy()
        return losses

    asgd = pp_asgd

    def dcasgd(self, t, lr, batches):
        """Zheng et al. 2017 on a server: worker m's gradient at w_bak(m), compensated, in turn."""
        losses = [np.nan] + [0.0] * (self.N - 1)
        wd, lam0 = self.c["weight_decay"], self.c["dc_lambda"]
        for m in range(1, self.N):
            losses[m], g = self.grad(self.backup[m], batches[m, 0])
            lam = lam0
            if self.c["dc_adaptive"]:
                decay = self.c["dc_ms_decay"]
                self.mean_square = decay * self.mean_square + (1 - decay) * g * g
                lam = lam0 / np.sqrt(self.mean_square + 1e-7)
            self.w = self.w - lr * (g + wd * self.w + lam * g * g * (self.w - self.backup[m]))
            self.backup[m] = self.w
        return losses

    def ps_sync(self, t, lr, batches):
        """Pipe-SGD's parameter-server baseline: the server sums its workers' gradients in rank order."""
        losses, total = [np.nan], None
        for m in range(1, self.N):
            loss, g = self.grad(self.w, batches[m, 0])
            losses.append(loss)
            total = g if total is None else total + g
        self.w = self.w - lr * total
        return losses

    def ssgd(self, t, lr, batches):
        """LAGA Algorithms 1-2: every worker's mean over its tau micro-batches, their mean over workers, U."""
        losses, total = [], None
        for rows in batches:
            loss, g_i = 0.0, None
            for idx in rows:
                lg, g = self.grad(self.w, idx)
                loss += lg
                g_i = g if g_i is None else g_i + g
            losses.append(loss / len(rows))
            total = g_i / len(rows) if total is None else total + g_i / len(rows)
        self.w = self.U.step(self.w, total / self.N, lr)
        return losses

    ssgd_opt = ssgd

    def d_sync(self, t, lr, batches):
        """Pipe-SGD's D-Sync: S_t, the sum of the workers' gradients, w = w - lr S_t."""
        losses, S = [], None
        for rows in batches:
            loss, g = self.grad(self.w, rows[0])
            losses.append(loss)
            S = g if S is None else S + g
        self.w = self.w - lr * S
        return losses

    def local_sgd(self, t, lr, batches):
        """Lin et al. 2020 Algorithm 1: H local steps of every worker's U, then the models averaged."""
        losses = []
        for i, rows in enumerate(batches):
            loss, g = self.grad(self.X[i], rows[0])
            losses.append(loss)
            self.X[i] = self.Us[i].step(self.X[i], g, lr)
        if (t + 1) % self.c["sync_every"] == 0:
            mean = sum(self.X[1:], self.X[0]) / self.N
            self.X = [mean.copy() for _ in range(self.N)]
        return losses

    def state(self):
        if self.s.method == "local-sgd":
            rows = {"x": np.stack(self.X)}
            rows.update((k, np.stack([u.state[k] for u in self.Us])) for k in self.Us[0].state)
            return {name: rows[name] for name in self.s.state_names}
        if self.s.method == "dcasgd":
            return {"w": np.stack([self.w] + self.backup[1:])}
        rows = {"w": self.w, "x": self.w}
        if self.s.method in ("ssgd", "ssgd-opt"):
            rows.update(self.U.state)
        if self.s.method in ("pp-asgd", "asgd"):
            rows.update(M=self.M, w_hat=self.published[max(self.published)])   # the last one published
        return {name: np.tile(rows[name], (self.N, 1)) for name in self.s.state_names}
