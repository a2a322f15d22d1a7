"""refsgd's synchronous methods in PyTorch, checked against refsgd's golden trajectories:

    refsgd conformance run examples/conformance/torch_backend.py:Backend
    pytest --pyargs refsgd.conformance --backend examples/conformance/torch_backend.py:Backend

Written as an outside implementation would be, from docs/implementers.md: it imports nothing of
refsgd but the interface. Autograd gives the gradients; torch.optim.SGD is the update wherever
the method's is PyTorch's form (ssgd, ssgd-opt and d-sync's U, LAGA's three updates on the lagged
gradient); DC-S3GD's update (MXNet's form, with the delay compensation) is written out. The N
workers are simulated in one process: every sum over workers is the Ring-AllReduce's, with the
codecs that PyTorch rounds to (t16 is a truncation, bf16 and fp16 PyTorch's own conversions).
"""

import numpy as np
import torch
from torch import nn

from refsgd.conformance import Backend as Interface

PREFIX = {"dense": "fc", "conv": "conv", "maxpool": "pool", "relu": "relu", "leaky_relu": "lrelu", "flatten": "flatten"}


def build(spec, dtype):
    """A torch.nn.Sequential of a refsgd model spec, its layers named as refsgd names them."""
    model, count, (c, h, w) = nn.Sequential(), {}, spec["input"]
    for layer in spec["layers"]:
        kind = layer["type"]
        count[kind] = count.get(kind, 0) + 1
        if kind == "dense":
            module, c, h, w = nn.Linear(c * h * w, layer["units"]), layer["units"], 1, 1
        elif kind == "conv":
            k = layer.get("kernel", 3)
            module, c = nn.Conv2d(c, layer["filters"], k, padding=(k - 1) // 2), layer["filters"]
        elif kind == "maxpool":
            k = layer.get("size", 2)
            module, h, w = nn.MaxPool2d(k), h // k, w // k
        elif kind == "leaky_relu":
            module = nn.LeakyReLU(layer.get("slope", 0.01))
        elif kind == "flatten":
            module, c, h, w = nn.Flatten(), c * h * w, 1, 1
        else:
            module = nn.ReLU()
        module.requires_grad_(not layer.get("frozen", False))
        model.add_module(layer.get("name", f"{PREFIX[kind]}{count[kind]}"), module)
    return model.to(dtype)


# a codec: (encode, decode) of float32 vectors; the sums between them are float32
CODECS = {"none": (lambda v: v, lambda v: v),
          "t16": (lambda v: (v.view(torch.int32) & -65536).view(torch.float32), lambda v: v),
          "bf16": (lambda v: v.to(torch.bfloat16), lambda v: v.to(torch.float32)),
          "fp16": (lambda v: v.to(torch.float16), lambda v: v.to(torch.float32))}


def ring_sum(G, codec="none"):
    """The sum of the rows of G (N, d) in the Ring-AllReduce's order: block b of N blocks summed
    from worker b on, each partial sum encoded again."""
    N, d = G.shape
    enc, dec = CODECS[codec]
    rows = [enc(g.to(torch.float32)) for g in G] if codec != "none" else list(G)
    out = torch.empty(d, dtype=torch.float32 if codec != "none" else G.dtype)
    for b in range(N):
        lo, hi = b * (d // N) + min(b, d % N), (b + 1) * (d // N) + min(b + 1, d % N)
        p = rows[b][lo:hi]
        for k in range(1, N):
            p = enc(dec(p) + dec(rows[(b + k) % N][lo:hi]))
        out[lo:hi] = dec(p)
    return out.to(G.dtype)


class Backend(Interface):
    methods = ("ssgd", "ssgd-opt", "d-sync", "laga-sgd", "laga-sgdm", "laga-sgdn", "dcs3gd")
    dtypes = ("float64", "float32")
    codecs = ("none", "t16", "bf16", "fp16")

    def supports(self, configuration):
        return super().supports(configuration) and configuration.options.get("momentum_form", "pytorch") == "pytorch"

    def setup(self, s):
        self.s, self.N, c = s, s.workers, s.config
        self.model = build(s.model_spec, getattr(torch, s.dtype))
        self.params = list(self.model.parameters())
        self.x, self.y = torch.from_numpy(s.x_train), torch.from_numpy(s.y_train)
        w0 = torch.from_numpy(s.w0)
        nn.utils.vector_to_parameters(w0.clone(), self.params)
        self.mask = torch.cat([torch.full((p.numel(),), float(p.requires_grad), dtype=w0.dtype) for p in self.params])
        if s.method == "dcs3gd":
            self.W, self.DW, self.V = w0.repeat(self.N, 1), torch.zeros(self.N, len(w0), dtype=w0.dtype), \
                torch.zeros(self.N, len(w0), dtype=w0.dtype)
            self.parts = [slice(o, o + int(np.prod(shape))) for _, o, shape in s.layout] \
                if c["lambda_norm"] == "tensor" else [slice(0, len(w0))]
        else:
            self.opt = torch.optim.SGD(self.params, lr=0.0, momentum=c.get("momentum", 0.0),
                                       nesterov=c.get("nesterov", False) or s.method == "laga-sgdn",
                                       weight_decay=c.get("weight_decay", 0.0))
            self.lagged = torch.zeros_like(w0)           # LAGA's g^{t-1}, 0 before the first all-reduce

    def grad(self, rows, w=None):
        """The mean loss and mean gradient of the micro-batches ``rows`` (tau, b) at the flat weights
        w (default: the model's own)."""
        if w is not None:
            nn.utils.vector_to_parameters(w.clone(), self.params)
        self.model.zero_grad()
        loss = 0.0
        for idx in torch.from_numpy(rows):
            batch = nn.functional.cross_entropy(self.model(self.x[idx]), self.y[idx])
            batch.backward()                             # accumulates g_0 + g_1 + ...
            loss += batch.item()
        g = torch.cat([p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel(), dtype=self.x.dtype)
                       for p in self.params])
        return loss / len(rows), g / len(rows)

    def apply(self, g, lr):
        """torch.optim.SGD's step at rate lr with the flat gradient g."""
        offset = 0
        for p in self.params:
            p.grad = g[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.step()

    def step(self, t, lr, batches):
        if self.s.method == "dcs3gd":
            return self.dcs3gd(t, lr, batches)
        losses, G = zip(*(self.grad(rows) for rows in batches))
        G = torch.stack(G)
        if self.s.method.startswith("laga"):             # apply last step's mean, start this step's
            self.apply(self.lagged, lr)
            self.lagged = ring_sum(G / self.N)
        elif self.s.method == "d-sync":                  # the sum of the workers' gradients
            self.apply(ring_sum(G, self.s.config["compress"]), lr)
        else:                                            # ssgd, ssgd-opt: their mean
            self.apply(ring_sum(G, self.s.config.get("compress", "none")) / self.N, lr)
        return losses

    def dcs3gd(self, t, lr, batches):
        """DC-S3GD (Rigazzi 2019, eq. 9-12, 17), every worker its own w_i, dw_i and v_i."""
        c, losses = self.s.config, []
        mu, lr_max = c["momentum"], max(self.s.lr)
        wd = c["wd_k"] * c["weight_decay"] * lr / lr_max if c["weight_decay"] and lr_max > 0 else 0.0
        dbar = ring_sum(self.DW) / self.N                # the all-reduce of the last moves
        for i, rows in enumerate(batches):
            loss, g = self.grad(rows, self.W[i])
            losses.append(loss)
            if t == 0:
                self.V[i] = mu * self.V[i] - lr * (g + wd * self.mask * self.W[i])
                self.DW[i] = self.V[i]
                self.W[i] = self.W[i] + self.DW[i]
                continue
            D = dbar - self.DW[i]                        # eq. 9
            ggD = g * g * D
            lam = torch.zeros_like(g)
            for part in self.parts:                      # eq. 17, per tensor or over the whole vector
                den = (ggD[part].double() ** 2).sum().sqrt()
                if den > 0 and c["lambda0"]:
                    lam[part] = float(c["lambda0"] * (g[part].double() ** 2).sum().sqrt() / den)
            self.V[i] = mu * self.V[i] - lr * (g + lam * ggD + wd * self.mask * self.W[i])    # eq. 10, 11
            self.DW[i] = self.V[i]
            self.W[i] = self.W[i] + D + self.DW[i]       # eq. 12
        return losses

    def state(self):
        if self.s.method == "dcs3gd":
            return {"w_i": self.W, "dw_i": self.DW, "U.v": self.V}
        x = nn.utils.parameters_to_vector(self.params).detach()
        kept = {"x": x, "y": x, "w": x, "g": self.lagged}
        if self.opt.state:                               # the momentum buffer, once a step made it
            kept["m"] = kept["U.momentum_buffer"] = torch.cat(
                [self.opt.state[p]["momentum_buffer"].reshape(-1) for p in self.params])
        return {name: kept[name].expand(self.N, -1) for name in self.s.state_names}
