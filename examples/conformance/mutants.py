"""A catalogue of realistic bugs planted one at a time in the NumPy example backend
(numpy_backend.py): each is a small patch, the text ``old`` replaced by ``new`` (found exactly once).
tests/test_conformance_mutants.py asserts that the conformance suite catches every one and names
the configuration and the step that catch it; docs/conformance.md shows the catalogue and its
kill rate. Mutants that change nothing but the round-off of a sum are left out: the suite compares
at rtol 1e-10 and is right to let those pass."""

#: (name, the bug in words, old, new)
MUTANTS = (
    # -- the network and its gradient (every method)
    ("loss-sum", "the loss summed over the batch, not averaged",
     "loss = -logp[np.arange(len(y)), y].mean()", "loss = -logp[np.arange(len(y)), y].sum()"),
    ("grad-not-mean", "the gradient of the summed loss (the 1/b left out)", "dh /= len(y)", "dh /= 1"),
    ("bias-grad-mean", "the bias gradient averaged over the batch a second time",
     "self._view(g, layer[2])[...] = dh.sum(axis=0)", "self._view(g, layer[2])[...] = dh.mean(axis=0)"),
    ("relu-backward", "the ReLU's backward pass lets every gradient through",
     "dh = np.where(h > 0, dh, layer[1] * dh)", "dh = np.where(h > 0, dh, dh)"),
    ("float64-in-float32", "a float32 run computed and stored in float64",
     "self.w = s.w0.copy()", "self.w = s.w0.astype(np.float64)"),
    # -- the learning rate a step reads
    ("lr-previous-step", "the schedule read one step late",
     "return getattr(self, self.s.method.replace(\"-\", \"_\"))(t, lr, batches)",
     "return getattr(self, self.s.method.replace(\"-\", \"_\"))(t, float(self.s.lr[max(t - 1, 0)]), batches)"),
    ("lr-next-step", "the schedule read one step early",
     "return getattr(self, self.s.method.replace(\"-\", \"_\"))(t, lr, batches)",
     "return getattr(self, self.s.method.replace(\"-\", \"_\"))(t, float(self.s.lr[min(t + 1, self.s.steps - 1)]), "
     "batches)"),
    ("lr-peak", "the schedule ignored: the peak rate at every step",
     "return getattr(self, self.s.method.replace(\"-\", \"_\"))(t, lr, batches)",
     "return getattr(self, self.s.method.replace(\"-\", \"_\"))(t, float(self.s.lr.max()), batches)"),
    # -- PP-ASGD and ASGD (Sato et al. 2017)
    ("staleness-minus-one", "the gradient at the w^ of update t-S (a lag of S, not S + 1)",
     "at = self.published[max(t - S, 0)]", "at = self.published[max(t - S + 1, 0)]"),
    ("staleness-plus-one", "the gradient at the w^ of update t-S-2 (a lag of S + 2)",
     "at = self.published[max(t - S, 0)]", "at = self.published[max(t - S - 1, 0)]"),
    ("fresh-gradient", "the fresh w^ instead of the stale one (no staleness)",
     "at = self.published[max(t - S, 0)]", "at = self.published[t]"),
    ("published-late", "w^ of update t+1 filed as update t's (a lag off by one)",
     "self.published[t + 1] = self.w", "self.published[t] = self.published[t + 1] = self.w"),
    ("momentum-inside", "the momentum applied to the step too, M = mu (M - lr D)",
     "self.M = mu * self.M - lr * D_A", "self.M = mu * (self.M - lr * D_A)"),
    ("momentum-missing", "the momentum term left out, M = -lr D",
     "self.M = mu * self.M - lr * D_A", "self.M = - lr * D_A"),
    ("momentum-pytorch-form", "PyTorch's form b = mu b + D, w -= lr b instead of Sato's M = mu M - lr D, w += M",
     "self.M = mu * self.M - lr * D_A\n        self.w = self.w + self.M",
     "self.M = mu * self.M + D_A\n        self.w = self.w - lr * self.M"),
    ("prediction-missing", "PP-ASGD without eq. 2's prediction (w^ = w)",
     "self.w + self.h * self.M if", "self.w if"),
    ("prediction-short", "eq. 2's f_S summed to mu^S, not mu^(S+1)",
     "sum(mu ** k for k in range(1, S + 2))", "sum(mu ** k for k in range(1, S + 1))"),
    ("prediction-from-one", "eq. 2's f_S from mu^0",
     "sum(mu ** k for k in range(1, S + 2))", "sum(mu ** k for k in range(0, S + 1))"),
    ("asgd-predicts", "ASGD publishing w + M (a prediction it does not make)",
     "else self.w.copy()", "else self.w + self.M"),
    ("sato-mean-over-samples", "the mean gradient over samples where Sato's lambda multiplies their sum",
     "D_L = g * b if D_L is None else D_L + g * b", "D_L = g if D_L is None else D_L + g"),
    ("sato-mean-over-processes", "the all-reduce divided by the processes (a mean, not Sato's sum)",
     "D_A = D_L if D_A is None else D_A + D_L", "D_A = D_L / self.N if D_A is None else D_A + D_L / self.N"),
    ("sato-float32-sum", "the all-reduce accumulated in float32",
     "D_A = D_L if D_A is None else D_A + D_L", "D_A = D_L if D_A is None else (D_A + D_L).astype(np.float32)"),
    ("one-thread", "only the first gradient thread's sub-batch used",
     "for idx in threads:", "for idx in threads[:1]:"),
    ("thread-loss-sum", "a process's loss summed over its threads, not averaged",
     "losses.append(loss / len(threads))", "losses.append(loss)"),
    # -- DC-ASGD (Zheng et al. 2017) on a server
    ("dc-sign", "the compensation towards the stale copy (w_bak - w) instead of away from it",
     "(self.w - self.backup[m])", "(self.backup[m] - self.w)"),
    ("dc-missing", "no delay compensation (plain ASGD)",
     "+ lam * g * g * (self.w - self.backup[m]))", ")"),
    ("dc-fresh-gradient", "the worker's gradient at the server's current w, not at its copy",
     "self.grad(self.backup[m], batches[m, 0])", "self.grad(self.w, batches[m, 0])"),
    ("dc-backup-before", "w_bak(m) taken before the update (the compensation then vanishes)",
     "self.w = self.w - lr * (g + wd * self.w + lam * g * g * (self.w - self.backup[m]))\n"
     "            self.backup[m] = self.w",
     "self.backup[m] = self.w\n"
     "            self.w = self.w - lr * (g + wd * self.w + lam * g * g * (self.w - self.backup[m]))"),
    ("dc-wrong-batch", "worker m computing on worker m-1's batch",
     "self.grad(self.backup[m], batches[m, 0])", "self.grad(self.backup[m], batches[m - 1, 0])"),
    ("dc-order", "the server serving its workers N-1, ..., 1 instead of 1, ..., N-1",
     "for m in range(1, self.N):\n            losses[m], g", "for m in reversed(range(1, self.N)):\n            losses[m], g"),
    ("wd-decoupled", "decoupled weight decay, w -= wd w, not scaled by the rate",
     "self.w = self.w - lr * (g + wd * self.w + lam", "self.w = self.w - wd * self.w - lr * (g + lam"),
    ("wd-missing", "the weight decay left out", "g + wd * self.w + lam", "g + lam"),
    ("wd-at-copy", "the weight decay taken at w_bak(m), not at w", "g + wd * self.w + lam",
     "g + wd * self.backup[m] + lam"),
    ("dc-adaptive-ignored", "--dc-adaptive ignored (lambda_0 used as lambda)",
     "lam = lam0 / np.sqrt(self.mean_square + 1e-7)", "lam = lam0"),
    ("dc-ms-decay-swapped", "MeanSquare's decay on the wrong term, (1-m) MS + m g^2",
     "decay * self.mean_square + (1 - decay) * g * g", "(1 - decay) * self.mean_square + decay * g * g"),
    ("dc-eps-outside", "the epsilon outside the square root, sqrt(MS) + 1e-7",
     "np.sqrt(self.mean_square + 1e-7)", "(np.sqrt(self.mean_square) + 1e-7)"),
    ("dc-ms-after", "lambda_t from MeanSquare before this gradient's update",
     "                self.mean_square = decay * self.mean_square + (1 - decay) * g * g\n"
     "                lam = lam0 / np.sqrt(self.mean_square + 1e-7)",
     "                lam = lam0 / np.sqrt(self.mean_square + 1e-7)\n"
     "                self.mean_square = decay * self.mean_square + (1 - decay) * g * g"),
    ("dc-server-loss", "a loss of 0 on the server, where it computes none (NaN)",
     "losses = [np.nan] + [0.0] * (self.N - 1)", "losses = [0.0] * self.N"),
    ("dc-copies-not-kept", "every worker's row the server's w (w_bak not reported)",
     "np.stack([self.w] + self.backup[1:])", "np.stack([self.w] * self.N)"),
    # -- PS-Sync (Pipe-SGD's baseline)
    ("ps-mean", "the mean over workers where the rate multiplies their sum",
     "self.w = self.w - lr * total", "self.w = self.w - lr * total / (self.N - 1)"),
    ("ps-divisor-world", "the sum divided by the world size, the server counted",
     "self.w = self.w - lr * total", "self.w = self.w - lr * total / self.N"),
    ("ps-float32-sum", "the server's sum accumulated in float32",
     "total = g if total is None else total + g", "total = g if total is None else (total + g).astype(np.float32)"),
    ("ps-first-worker-dropped", "the server summing workers 2..N-1 only",
     "            losses.append(loss)\n            total =",
     "            losses.append(loss)\n            g = g if m > 1 else 0 * g\n            total ="),
    # -- SSGD and SSGD-OPT, their local optimizer U (PyTorch's or MXNet's momentum, Nesterov, weight decay)
    ("ssgd-sum-not-mean", "the workers' gradients summed where SSGD averages them",
     "self.w = self.U.step(self.w, total / self.N, lr)", "self.w = self.U.step(self.w, total, lr)"),
    ("ssgd-tau-sum", "the tau micro-batches' gradients summed, not averaged",
     "total = g_i / len(rows) if total is None else total + g_i / len(rows)",
     "total = g_i if total is None else total + g_i"),
    ("ssgd-first-micro-batch", "only the first micro-batch of the tau",
     "for idx in rows:\n                lg, g = self.grad(self.w, idx)",
     "for idx in rows[:1]:\n                lg, g = self.grad(self.w, idx)"),
    ("u-momentum-dampened", "PyTorch's momentum with dampening, b = mu b + (1 - mu) g",
     "* self.mu + g\n", "* self.mu + (1 - self.mu) * g\n"),
    ("u-nesterov-ignored", "--nesterov ignored", "g = b * self.mu + g if self.nesterov else b", "g = b"),
    ("u-nesterov-lookahead", "Nesterov's look-ahead on the old buffer, d = mu b_old + g",
     "            b = self.state[\"U.momentum_buffer\"] = self.state[\"U.momentum_buffer\"] * self.mu + g\n"
     "            g = b * self.mu + g if self.nesterov else b",
     "            old = self.state[\"U.momentum_buffer\"]\n"
     "            b = self.state[\"U.momentum_buffer\"] = old * self.mu + g\n"
     "            g = old * self.mu + g if self.nesterov else b"),
    ("u-mxnet-as-pytorch", "--momentum-form mxnet ignored (PyTorch's form, which differs once the rate changes)",
     "self.mxnet = c.get(\"nesterov\", False), c.get(\"momentum_form\", \"pytorch\") == \"mxnet\"",
     "self.mxnet = c.get(\"nesterov\", False), False"),
    ("u-mxnet-rate-outside", "MXNet's form with the rate outside the buffer, v = mu v - g, w += lr v",
     "v = self.state[\"U.v\"] = self.state[\"U.v\"] * self.mu - g * lr if self.mu > 0 else -(g * lr)\n"
     "            return w + v",
     "v = self.state[\"U.v\"] = self.state[\"U.v\"] * self.mu - g if self.mu > 0 else -g\n"
     "            return w + lr * v"),
    ("u-wd-decoupled", "decoupled weight decay (AdamW's), w -= lr wd w after the momentum step",
     "        g = self.wd * w + g\n", "        w = w - lr * self.wd * w\n"),
    ("u-wd-missing", "the weight decay left out of U", "        g = self.wd * w + g\n", ""),
    # -- D-Sync and local SGD
    ("d-sync-mean", "D-Sync's sum of the gradients averaged", "self.w = self.w - lr * S",
     "self.w = self.w - lr * S / self.N"),
    ("local-sync-early", "local SGD's average after steps H-1, 2H-1, ... (t % H == 0)",
     "if (t + 1) % self.c[\"sync_every\"] == 0:", "if t % self.c[\"sync_every\"] == 0:"),
    ("local-never-sync", "local SGD's models never averaged", "if (t + 1) % self.c[\"sync_every\"] == 0:",
     "if False:"),
    ("local-average-momentum", "local SGD averaging the momentum buffers too",
     "            self.X = [mean.copy() for _ in range(self.N)]",
     "            self.X = [mean.copy() for _ in range(self.N)]\n"
     "            for k in self.Us[0].state:\n"
     "                m = sum(u.state[k] for u in self.Us) / self.N\n"
     "                for u in self.Us:\n"
     "                    u.state[k] = m.copy()"),
    ("local-one-optimizer", "local SGD's workers sharing one U (one momentum buffer)",
     "self.Us = [U(self.c, self.w) for _ in range(self.N)]", "self.Us = [U(self.c, self.w)] * self.N"),
)


def catch(source, mutant, folder, references, configurations):
    """Run the NumPy example with ``mutant`` planted (its source text ``source``) through the
    ``configurations`` in turn until one fails: (configuration name, step, message) of the first
    that catches it, or None when every one passes (a mutant that survives)."""
    import os  # noqa: PLC0415 -- the catalogue above is data; this is only for the test and the docs

    from refsgd.conformance import load_backend, run  # noqa: PLC0415

    name, _, old, new = mutant
    assert source.count(old) == 1, name
    path = os.path.join(folder, f"mutant_{name.replace('-', '_')}.py")
    with open(path, "w") as f:
        f.write(source.replace(old, new))
    backend = load_backend(f"{path}:Backend")
    first = _methods_of(source, source.index(old))      # the configurations of the code patched, first
    for c in sorted(configurations, key=lambda c: c.method not in first):
        o = run(backend, c, references, os.path.join(folder, f"{name}-{c.name}.h5"))
        if not o.ok:
            step = o.where["step"] if o.where else o.message.split(":")[0]
            return c.name, step, o.message
    return None


#: the NumPy example's code -> the methods that run it: (class, function) -> methods
_RUN_BY = {("U", None): ("ssgd", "ssgd-opt", "local-sgd"), ("Backend", "pp_asgd"): ("pp-asgd", "asgd"),
           ("Backend", "ssgd"): ("ssgd", "ssgd-opt")}


def _methods_of(source, position):
    """The methods whose step runs the code at ``position`` of the example (none: every method)."""
    import re  # noqa: PLC0415

    cls = re.findall(r"^class (\w+)", source[:position], re.M)[-1]
    fn = re.findall(r"^    def (\w+)", source[:position], re.M)
    fn = fn[-1] if fn and source[:position].rfind(f"def {fn[-1]}") > source[:position].rfind(f"class {cls}") else None
    return _RUN_BY.get((cls, None)) or _RUN_BY.get((cls, fn)) or ((fn.replace("_", "-"),) if fn else ())


def markdown(caught):
    """The catalogue as docs/conformance.md shows it: ``caught`` maps a mutant's name to what
    :func:`catch` returned."""
    killed = sum(v is not None for v in caught.values())
    lines = [f"{killed} of {len(MUTANTS)} mutants caught ({100 * killed / len(MUTANTS):.0f} %).", "",
             "| mutant | the bug | caught by | at |", "|---|---|---|---|"]
    for name, what, _, _ in MUTANTS:
        c = caught.get(name)
        at = "survived" if c is None else (f"step {c[1]}" if isinstance(c[1], int) else str(c[1]))
        lines.append(f"| `{name}` | {what} | {'-' if c is None else f'`{c[0]}`'} | {at} |")
    return "\n".join(lines) + "\n"
