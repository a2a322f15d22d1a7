"""Golden references: verify, the golden files still matching, and an outside replay (the SSGD
family's MPI traces against its serial renderings: tests/methods/test_ssgd.py). Every test here
runs in this process (`refsgd verify` by tests.helpers.in_process: its exit code and output are
refsgd.cli.main's, without a process per command)."""

import glob
import importlib.util
import json
import os
import shutil

import h5py
import numpy as np
import pytest
from tests.helpers import world
from tests.helpers.in_process import refsgd
from tests.helpers.launch import ROOT

pytestmark = pytest.mark.in_process

GOLDEN = os.path.join(ROOT, "tests", "golden")


def test_verify_names_the_first_perturbed_step_and_worker(tmp_path, capfd):
    bad = tmp_path / "bad.h5"
    shutil.copy(os.path.join(GOLDEN, "ssgd-n4.h5"), bad)
    with h5py.File(bad, "r+") as f:
        x = f["state/x"]
        v = x[6, 2, 100]
        x[6, 2, 100] = v * (1 + 1e-6)
        x[8, 1, 3] += 1.0  # a later, larger difference must not be the one reported
    r = refsgd(capfd, "verify", str(bad), os.path.join(GOLDEN, "ssgd-n4.h5"))
    assert r.returncode == 1
    assert "MISMATCH at step 6, worker 2, x[100]" in r.stdout
    with h5py.File(bad) as f, h5py.File(os.path.join(GOLDEN, "ssgd-n4.h5")) as g:
        norm = np.max(np.abs(g["state/x"][6, 2]))
        diff = abs(f["state/x"][6, 2, 100] - g["state/x"][6, 2, 100])
    assert f"max |A - B| = {diff:.3e}, normwise relative max |A - B| / max |B| = {diff / norm:.3e}" in r.stdout
    # and configurations are compared before any step
    with h5py.File(bad, "r+") as f:
        cfg = json.loads(f.attrs["config"])
        cfg["lr"] = 0.3
        f.attrs["config"] = json.dumps(cfg)
    r = refsgd(capfd, "verify", str(bad), os.path.join(GOLDEN, "ssgd-n4.h5"))
    assert r.returncode == 1 and "MISMATCH in the configuration: lr (0.3 vs 0.2)" in r.stdout


def test_verify_gives_no_relative_figure_of_an_entry_near_zero(tmp_path, capfd):
    """An entry of B near zero made "max relative = 9.6e+297": the figure is normwise now, and
    absent where B is all zero."""
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    shutil.copy(os.path.join(GOLDEN, "ssgd-n4.h5"), a)
    shutil.copy(os.path.join(GOLDEN, "ssgd-n4.h5"), b)
    with h5py.File(a, "r+") as fa, h5py.File(b, "r+") as fb:
        fb["state/x"][6, 2, 100] = 1e-305
        fa["state/x"][6, 2, 100] = 1e-3
        norm = np.max(np.abs(fb["state/x"][6, 2]))
    r = refsgd(capfd, "verify", str(a), str(b))
    assert r.returncode == 1 and "MISMATCH at step 6, worker 2, x[100]" in r.stdout
    assert f"normwise relative max |A - B| / max |B| = {1e-3 / norm:.3e}" in r.stdout, r.stdout
    assert "e+2" not in r.stdout and "e+3" not in r.stdout
    with h5py.File(a, "r+") as fa, h5py.File(b, "r+") as fb:   # B all zero: no relative figure
        fb["state/x"][6, 2] = 0.0
        fa["state/x"][6, 2] = 0.0
        fa["state/x"][6, 2, 100] = 1e-3
    r = refsgd(capfd, "verify", str(a), str(b))
    assert "max |A - B| = 1.000e-03 (rtol" in r.stdout and "relative" not in r.stdout.split("MISMATCH")[1]


@pytest.mark.parametrize("name, readable", [("ssgd-n4", True), ("ssgd-fp16-n4", False), ("daso-2x2-n4", False),
                                            ("pipe-sgd-k2-t16-n4", False)])
def test_format_version_1_is_read_where_its_meaning_is_unchanged(tmp_path, name, readable, capfd):
    """Version 1 summed compressed all-reduces in MPICH's recursive-doubling order: such a trace
    is refused with one message; one without a compressed all-reduce verifies as before."""
    old = tmp_path / "old.h5"
    _edit_attrs(os.path.join(GOLDEN, f"{name}.h5"), old, format_version=lambda v: 1)
    r = refsgd(capfd, "verify", str(old), os.path.join(GOLDEN, f"{name}.h5"), "--rtol", "0", "--atol", "0")
    if readable:
        assert r.returncode == 0 and "OK: 10 steps x 4 workers agree" in r.stdout, r.stdout + r.stderr
    else:
        assert r.returncode == 2 and r.stderr.count("refsgd: error:") == 1, r.stderr
        assert "trace format version 1 summed its compressed all-reduces in MPICH's recursive-doubling order" \
            in r.stderr and "Traceback" not in r.stderr
    _edit_attrs(os.path.join(GOLDEN, f"{name}.h5"), old, format_version=lambda v: 4)
    r = refsgd(capfd, "verify", str(old), os.path.join(GOLDEN, f"{name}.h5"))
    assert r.returncode == 2 and "trace format version 4 is newer than this refsgd reads (3)" in r.stderr


def _edit_attrs(src, dst, **change):
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        for k, fn in change.items():
            f.attrs[k] = fn(f.attrs[k])
    return str(dst)


def test_verify_compares_json_values_not_their_text(tmp_path, capfd):
    ref = os.path.join(GOLDEN, "dcasgd-n3.h5")
    # the same spec and state names written compactly, with another description: equal
    same = _edit_attrs(ref, tmp_path / "same.h5",
                       model_spec=lambda s: json.dumps(dict(json.loads(s), description="mine"), separators=(",", ":")),
                       state_names=lambda s: json.dumps(json.loads(s), separators=(",", ":")))
    r = refsgd(capfd, "verify", same, ref)
    assert r.returncode == 0, r.stdout
    # a layer that differs is a mismatch
    def wider(s):
        spec = json.loads(s)
        spec["layers"][1]["units"] += 1
        return json.dumps(spec)
    r = refsgd(capfd, "verify", _edit_attrs(ref, tmp_path / "wide.h5", model_spec=wider), ref)
    assert r.returncode == 1 and "MISMATCH in model_spec" in r.stdout
    # dcasgd's MeanSquare decay shapes nothing without the adaptive lambda: not compared
    def decay(v):
        return lambda s: json.dumps(dict(json.loads(s), dc_ms_decay=v))
    with h5py.File(ref, "r") as f:
        assert json.loads(f.attrs["config"])["dc_adaptive"] is False
    r = refsgd(capfd, "verify", _edit_attrs(ref, tmp_path / "decay.h5", config=decay(0.5)), ref)
    assert r.returncode == 0, r.stdout
    both = [_edit_attrs(ref, tmp_path / f"adaptive{v}.h5", config=lambda s, v=v: json.dumps(
        dict(json.loads(s), dc_adaptive=True, dc_ms_decay=v))) for v in (0.5, 0.9)]
    r = refsgd(capfd, "verify", *both)
    assert r.returncode == 1 and "dc_ms_decay (0.5 vs 0.9)" in r.stdout


def test_verify_bad_input(capfd):
    r = refsgd(capfd, "verify", os.path.join(ROOT, "setup.cfg"), os.path.join(GOLDEN, "ssgd-n4.h5"))
    assert r.returncode == 2 and "not an HDF5 file" in r.stderr
    r = refsgd(capfd, "verify", os.path.join(ROOT, "data", "digits.h5"), os.path.join(GOLDEN, "ssgd-n4.h5"))
    assert r.returncode == 2 and "not a refsgd trace" in r.stderr


def _regenerate_commands():
    """refsgd golden's command of every golden file of the registry (tests/golden/regenerate.sh)."""
    from refsgd.registry import METHODS
    for m in METHODS.values():
        for g in m.goldens:
            yield ["golden", *g.argv(m.name), "--out", g.file]


def test_every_golden_file_is_a_registry_entry():
    """regenerate.sh writes the registry's Golden entries: a file here that none names would go stale."""
    named = {cmd[-1] for cmd in _regenerate_commands()}
    assert {f for f in os.listdir(GOLDEN) if f.endswith(".h5")} == named


@pytest.mark.parametrize("cmd", list(_regenerate_commands()), ids=lambda c: c[c.index("--out") + 1])
def test_golden_files_still_match(tmp_path, cmd):
    """The checked-in golden files are what today's serial renderings produce (refsgd golden's and
    refsgd verify's own functions, in this process: no MPI)."""
    from refsgd import golden, trace
    name = cmd[cmd.index("--out") + 1]
    argv = cmd[:cmd.index("--out")]
    workers, steps = (int(argv[argv.index(flag) + 1]) for flag in ("--workers", "--steps"))
    golden.render(world.parse(argv), workers, steps, tmp_path / name)
    ok, lines = trace.verify(str(tmp_path / name), os.path.join(GOLDEN, name), rtol=1e-12, atol=1e-14)
    assert ok, "\n".join(lines)


# ---------------------------------------------------------------------- an outside implementation
# What an implementer outside the project does: read the golden file and the dataset with h5py,
# rebuild the network (dense / relu / flatten here) and the method's equations in NumPy, and
# replay every step. Nothing from refsgd is imported.

def _load_digits(path, dtype):
    with h5py.File(path, "r") as f:
        x = f["train/images"][...].astype(np.float64)
        y = f["train/labels"][...].astype(np.int64)
        mean, std = f.attrs["mean"], f.attrs["std"]
    x = (x - mean[None, :, None, None]) / std[None, :, None, None]
    return x.astype(dtype), y


def _mlp_loss_grad(spec, layout, w, x, y):
    params = {name: w[off:off + int(np.prod(shape))].reshape(shape) for name, off, shape in layout}
    a, stack, grads = x.reshape(len(x), -1), [], np.zeros_like(w)
    dense = 0
    for layer in spec["layers"]:
        if layer["type"] == "dense":
            dense += 1
            W, b = params[f"fc{dense}.weight"], params[f"fc{dense}.bias"]
            stack.append(("dense", dense, a))
            a = a @ W.T + b
        elif layer["type"] == "relu":
            stack.append(("relu", None, a))
            a = np.maximum(a, 0)
    z = a - a.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    loss = -np.mean(np.log(p[np.arange(len(y)), y]))
    d = p.copy()
    d[np.arange(len(y)), y] -= 1
    d /= len(y)
    offsets = {name: (off, shape) for name, off, shape in layout}
    for kind, k, inp in reversed(stack):
        if kind == "relu":
            d = d * (inp > 0)
        else:
            (ow, sw), (ob, sb) = offsets[f"fc{k}.weight"], offsets[f"fc{k}.bias"]
            grads[ow:ow + int(np.prod(sw))] = (d.T @ inp).ravel()
            grads[ob:ob + int(np.prod(sb))] = d.sum(axis=0)
            d = d @ params[f"fc{k}.weight"]
    return loss, grads


def _replay_ssgd(grad, w0, batches, lr, cfg, check):
    """LAGA Alg. 2 with PyTorch-form momentum: b = mu*b + g, x -= lr*b (Nesterov: x -= lr*(g + mu*b))."""
    T, N, tau = batches.shape[:3]
    mu = cfg["momentum"]
    X, B = np.tile(w0, (N, 1)), np.zeros((N, len(w0)))
    for t in range(T):
        G = np.zeros_like(X)
        for i in range(N):
            for j in range(tau):
                G[i] += grad(X[i], batches[t, i, j]) / tau
        compress = cfg.get("compress") or "none"
        g = G.mean(axis=0) if compress == "none" else _allreduce(G, compress) / N
        B = mu * B + g if mu else np.tile(g, (N, 1))
        X = X - lr[t] * (g + mu * B if cfg.get("nesterov") else B)
        check(t, x=X, **({"U.momentum_buffer": B} if mu else {}))


def _replay_ssgd_nag(grad, w0, batches, lr, cfg, check):
    """Sato Alg. 4: summed gradients at w^, M = mu*M - lr*D_A, w += M, w^ = w + mu*M."""
    T, N, tau, b = batches.shape
    mu = cfg["momentum"]
    W, M = w0.copy(), np.zeros_like(w0)
    W_hat = W.copy()
    for t in range(T):
        D_A = sum(b * grad(W_hat, batches[t, i, j]) for i in range(N) for j in range(tau))
        M = mu * M - lr[t] * D_A
        W = W + M
        W_hat = W + mu * M
        check(t, w=np.tile(W, (N, 1)), M=np.tile(M, (N, 1)), w_hat=np.tile(W_hat, (N, 1)))


def _replay_dcs3gd(grad, w0, batches, lr, cfg, check, layout):
    """Rigazzi 2019 Alg. 1, eq. 9-12 and 17, U = MXNet momentum with wd_t = k*wd*lr_t/max(lr);
    eq. 17's norms over the whole vector or each tensor of the layout (lambda_norm)."""
    T, N = batches.shape[:2]
    mu, lam0 = cfg["momentum"], cfg["lambda0"]
    parts = [slice(0, len(w0))]
    if cfg.get("lambda_norm", "whole") == "tensor":
        parts = [slice(o, o + int(np.prod(s))) for _, o, s in layout]
    wd = cfg["wd_k"] * cfg["weight_decay"] * lr / lr.max()
    W, DW, V = np.tile(w0, (N, 1)), np.zeros((N, len(w0))), np.zeros((N, len(w0)))
    for t in range(T):
        dw_bar = DW.sum(axis=0)  # the all-reduce of the previous moves
        for i in range(N):
            g = grad(W[i], batches[t, i, 0])
            if t == 0:
                V[i] = mu * V[i] - lr[t] * (g + wd[t] * W[i])
                DW[i] = V[i]
                W[i] = W[i] + DW[i]
                continue
            D = dw_bar / N - DW[i]
            ggD = g * g * D
            lam = np.zeros(len(w0))
            for p in parts:
                lam[p] = lam0 * np.linalg.norm(g[p]) / np.linalg.norm(ggD[p]) if np.any(ggD[p]) else 0.0
            V[i] = mu * V[i] - lr[t] * (g + lam * ggD + wd[t] * W[i])
            DW[i] = V[i]
            W[i] = W[i] + D + DW[i]
        check(t, w_i=W, dw_i=DW, **{"U.v": V})


def _replay_dcasgd(grad, w0, batches, lr, cfg, check):
    """Zheng et al. 2017 on a server, workers 1..N-1 served round-robin; row 0 is the server's w,
    row m the weights worker m last received (and computes its next gradient at)."""
    T, N = batches.shape[:2]
    lam, wd = cfg["dc_lambda"], cfg["weight_decay"]
    w, w_bak = w0.copy(), np.tile(w0, (N - 1, 1))
    for t in range(T):
        for m in range(1, N):
            g = grad(w_bak[m - 1], batches[t, m, 0])
            w = w - lr[t] * (g + wd * w + lam * g * g * (w - w_bak[m - 1]))
            w_bak[m - 1] = w
        check(t, w=np.vstack([w, w_bak]))


def _replay_laga(grad, w0, batches, lr, cfg, check, nesterov):
    """LAGA Alg. 4 (x) or 5 (y): m = gamma*m + d, d = g^{t-1} + wd*x; x -= eta*m or
    y -= eta*(gamma*m + d); g^{-1} = 0."""
    T, N, tau = batches.shape[:3]
    gamma, wd = cfg.get("momentum", 0.0), cfg["weight_decay"]   # LAGA-SGD (Alg. 3): no momentum, m = d
    x, m, g_prev = w0.copy(), np.zeros_like(w0), np.zeros_like(w0)
    for t in range(T):
        g = np.mean([grad(x, batches[t, i, j]) for i in range(N) for j in range(tau)], axis=0)
        d = g_prev + wd * x
        m = gamma * m + d
        x = x - lr[t] * (gamma * m + d if nesterov else m)
        g_prev = g
        mine = {"y" if nesterov else "x": np.tile(x, (N, 1)), "m": np.tile(m, (N, 1)), "g": np.tile(g, (N, 1))}
        check(t, **{k: v for k, v in mine.items() if k != "m" or "momentum" in cfg})


def _round16(x, codec):
    """A float32 vector rounded to a 16-bit codec and back: t16 keeps the upper 16 bits
    (truncation), bf16 rounds to nearest even on them, fp16 is IEEE half."""
    x = np.asarray(x, np.float32)
    if codec == "fp16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16).astype(np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    if codec == "bf16":
        u = u + 0x7FFF + ((u >> 16) & 1)
    return ((u >> 16) << 16).astype(np.uint32).view(np.float32)


def _allreduce(G, compress):
    """Sum of the rows; with a 16-bit codec, the Ring-AllReduce's order: each row rounded, the d
    values cut into N blocks (the first d mod N one value longer), block b summing the rows
    b, b + 1, ..., b + N - 1 (mod N) in float32 with a rounding after each addition."""
    if compress in (None, "none"):
        return G.sum(axis=0)
    if compress == "q8v":
        return _allreduce_q8v(G)
    N, d = G.shape
    q, r = divmod(d, N)
    bounds = [b * q + min(b, r) for b in range(N + 1)]
    out = np.empty(d)
    for b in range(N):
        lo, hi = bounds[b], bounds[b + 1]
        acc = _round16(G[b, lo:hi], compress)
        for k in range(1, N):
            acc = _round16(acc + _round16(G[(b + k) % N, lo:hi], compress), compress)
        out[lo:hi] = acc
    return out


def _allreduce_q8v(G):
    """q8v as docs/implementers.md states it: row i in float32 has the scale s_i = max|v| / 127
    and q_i = clip(rint(v / s_i), +-127); the rows of a set M sum at S(M) = the float32 sum of
    their s_i in row order; block b (cut as above) starts at q_b and adds row j = b + 1, ...,
    b + N - 1 (mod N): q = clip(rint((q S(M) + q_j s_j) / S(M + j))), all in float32."""
    N, d = G.shape
    f = np.float32
    rows = [np.asarray(g, f) for g in G]
    s = [f(np.max(np.abs(v))) / f(127) for v in rows]

    def rnd(v, scale):
        return np.clip(np.rint(v / scale), -127, 127) if scale > 0 else np.zeros_like(v)

    def S(members):
        acc = f(0)
        for k in sorted(members):
            acc = f(acc + s[k])
        return acc
    q = [rnd(v, s[i]) for i, v in enumerate(rows)]
    n, r = divmod(d, N)
    bounds = [b * n + min(b, r) for b in range(N + 1)]
    out = np.empty(d, f)
    for b in range(N):
        lo, hi = bounds[b], bounds[b + 1]
        acc, members = q[b][lo:hi], [b]
        for k in range(1, N):
            j = (b + k) % N
            acc = rnd(acc * S(members) + q[j][lo:hi] * s[j], S(members + [j]))
            members.append(j)
        out[lo:hi] = acc
    return (out * S(range(N))).astype(np.float64)


def _replay_pipe_sgd(grad, w0, batches, lr, cfg, check):
    """Li et al. 2018 Alg. 1, no warm-up: w[t] = w[t-1] - lr_t * S[t-K] (S[s < 0] = 0), then the
    gradients at w[t]; S[t] = the (compressed) sum; state: w[t] and S[t-K+1 .. t]."""
    T, N = batches.shape[:2]
    K, S, w = cfg["dependency"], {}, w0.copy()
    for t in range(T):
        if t - K >= 0:
            w = w - lr[t] * S[t - K]
        S[t] = _allreduce(np.array([grad(w, batches[t, i, 0]) for i in range(N)]), cfg["compress"])
        pending = np.stack([S.get(s, np.zeros_like(w)) for s in range(t - K + 1, t + 1)])
        check(t, w=np.tile(w, (N, 1)), g_sum=np.tile(pending, (N, 1, 1)))


def _replay_ps_sync(grad, w0, batches, lr, cfg, check):
    """PS-Sync: row 0 the server (no batch); w <- w - lr_t * (g_1 + ... + g_{N-1}), in that order."""
    T, N = batches.shape[:2]
    w = w0.copy()
    for t in range(T):
        g = grad(w, batches[t, 1, 0])
        for m in range(2, N):
            g = g + grad(w, batches[t, m, 0])
        w = w - lr[t] * g
        check(t, w=np.tile(w, (N, 1)))


def _replay_d_sync(grad, w0, batches, lr, cfg, check):
    """D-Sync: w <- w - lr_t * (compressed) sum of the workers' gradients at w."""
    T, N = batches.shape[:2]
    w = w0.copy()
    for t in range(T):
        w = w - lr[t] * _allreduce(np.array([grad(w, batches[t, i, 0]) for i in range(N)]), cfg["compress"])
        check(t, w=np.tile(w, (N, 1)))


def _replay_daso(grad, w0, batches, lr, cfg, check, loss_grad, n_train):
    """Coquelin et al. 2022, section 3 (README 'DASO'): nodes of G consecutive workers. Per step:
    every worker's gradient, the node's mean, PyTorch-form momentum. Warm-up and cool-down epochs:
    x of local rank k averaged over the nodes in bf16 (rounded at every addition) and copied to
    the node; k rotates. Cycling: every B steps the float sum over nodes of local rank k's x,
    merged W steps later as (2S x + sum) / (2S + P) and copied to the node; k rotates at the send.
    At each cycling epoch boundary the epoch's mean loss feeds the plateau rule: B and W halve
    (to 1), or reset to B_max, B_max/4 when both are 1."""
    T, N = batches.shape[:2]
    opt = {k: cfg.get(k) if cfg.get(k) is not None else v for k, v in
           dict(warmup_epochs=1, cooldown_epochs=1, sync_every=4, plateau_patience=2, plateau_threshold=0.05).items()}
    G, mu = cfg["ranks_per_node"], cfg["momentum"]
    P, ipe = N // G, n_train // (N * cfg["batch"])
    warm_end = min(opt["warmup_epochs"] * ipe, T)
    cool_start = max(T - opt["cooldown_epochs"] * ipe, warm_end)
    bmax = opt["sync_every"]
    X, Mom, losses = np.tile(w0, (N, 1)), np.zeros((N, len(w0))), np.zeros((T, N))
    B = W = c = k = bad = 0
    best, slots = np.inf, []
    for t in range(T):
        cycling = warm_end <= t < cool_start
        if cycling and t == warm_end:
            B, W, c = bmax, max(1, bmax // 4), 0
        elif cycling and t % ipe == 0 and t - ipe >= warm_end:
            m = losses[t - ipe:t].mean()
            if m < best * (1 - opt["plateau_threshold"]):
                best, bad = m, 0
            else:
                bad += 1
                if bad >= opt["plateau_patience"]:
                    bad, c = 0, 0
                    B, W = (bmax, max(1, bmax // 4)) if B == W == 1 else (max(1, B // 2), max(1, W // 2))
        grads = np.zeros_like(X)
        for i in range(N):
            losses[t, i], grads[i] = loss_grad(X[i], batches[t, i, 0])
        for p in range(P):
            gbar = grads[p * G:(p + 1) * G].sum(axis=0) / G
            Mom[p * G:(p + 1) * G] = mu * Mom[p * G:(p + 1) * G] + gbar
        X = X - lr[t] * Mom
        if P > 1 and not cycling:
            X[:] = np.repeat(_allreduce(X[k::G], "bf16")[None] / P, N, axis=0)
            k = (k + 1) % G
        elif P > 1:
            if c % B == 0:
                slots.append((t + W, -W, k, X[k::G].sum(axis=0)))
                k = (k + 1) % G
            c += 1
        for due, minus_S, kk, s in sorted(slots, key=lambda e: e[:2]):
            if due == t:
                S = -minus_S
                for p in range(P):
                    X[p * G:(p + 1) * G] = (X[p * G + kk] * (2 * S) + s) / (2 * S + P)
        slots = [e for e in slots if e[0] != t]
        check(t, x=X, **{"U.momentum_buffer": Mom})


def _replay_pp_asgd(grad, w0, batches, lr, cfg, check, predict=True):
    """Sato et al. 2017, deterministic staleness S: update t sums b * gradient over every worker's
    G sub-batches at V[max(t-S, 0)] (V[0] = w0); M = mu*M - lr*D_A; w += M;
    V[t+1] = w + M * (mu + ... + mu^(S+1)) (PP-ASGD) or w (ASGD)."""
    T, N, G, b = batches.shape
    mu, S = cfg["momentum"], cfg["staleness"]
    w, M, V = w0.copy(), np.zeros_like(w0), {0: w0.copy()}
    for t in range(T):
        D_A = sum(b * grad(V[max(t - S, 0)], batches[t, r, g]) for r in range(N) for g in range(G))
        M = mu * M - lr[t] * D_A
        w = w + M
        V[t + 1] = w + M * sum(mu ** s for s in range(1, S + 2)) if predict else w
        check(t, w=np.tile(w, (N, 1)), M=np.tile(M, (N, 1)), w_hat=np.tile(V[t + 1], (N, 1)))


REPLAY = {"pp-asgd": _replay_pp_asgd, "asgd": lambda *a: _replay_pp_asgd(*a, predict=False),
          "daso": _replay_daso, "pipe-sgd": _replay_pipe_sgd, "d-sync": _replay_d_sync, "ssgd": _replay_ssgd, "ssgd-nag": _replay_ssgd_nag, "dcs3gd": _replay_dcs3gd, "dcasgd": _replay_dcasgd,
          "ssgd-opt": _replay_ssgd, "ps-sync": _replay_ps_sync,
          "laga-sgd": lambda *a: _replay_laga(*a, nesterov=False),
          "laga-sgdm": lambda *a: _replay_laga(*a, nesterov=False),
          "laga-sgdn": lambda *a: _replay_laga(*a, nesterov=True)}


def _method_replays():
    """The replays kept with a method's own tests: ``REPLAY`` of tests/methods/test_<name>.py."""
    found = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "methods", "test_*.py"))):
        spec = importlib.util.spec_from_file_location(f"_replays_{os.path.basename(path)[:-3]}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found.update(getattr(module, "REPLAY", {}))
    return found


REPLAY.update(_method_replays())


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(GOLDEN) if f.endswith(".h5")))
def test_replay_golden_with_numpy_and_h5py_only(name):
    with h5py.File(os.path.join(GOLDEN, name), "r") as f:
        a = dict(f.attrs)
        cfg, spec = json.loads(a["config"]), json.loads(a["model_spec"])
        layout = json.loads(a["layout"])
        w0, batches, lr = f["w0"][...], f["batches"][...], f["lr"][...]
        states = {k: f["state"][k][...] for k in json.loads(a["state_names"])}
    x, y = _load_digits(os.path.join(ROOT, "data", "digits.h5"), np.float64)
    checked = set()

    def grad(w, idx):
        return _mlp_loss_grad(spec, layout, w, x[idx], y[idx])[1]

    def check(t, **mine):
        for k, v in mine.items():
            np.testing.assert_allclose(v, states[k][t], rtol=1e-10, atol=1e-12, err_msg=f"{k} at step {t}")
            checked.add(k)

    def loss_grad(w, idx):
        return _mlp_loss_grad(spec, layout, w, x[idx], y[idx])

    extra = dict(loss_grad=loss_grad, n_train=len(y)) if a["method"] == "daso" else {}
    if a["method"] == "dcs3gd":
        extra = dict(layout=layout)
    REPLAY[a["method"]](grad, w0, batches, lr, cfg, check, **extra)
    assert checked == set(states)  # every recorded state was replayed
