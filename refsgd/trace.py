"""Traces and golden files: one HDF5 schema for ``refsgd train --trace`` and ``refsgd golden``.

A trace records a method's trajectory step by step for every worker, with everything another
implementation needs to replay it without refsgd's code or random numbers::

    attrs  format = "refsgd-trace", format_version = 1
           method        the --algo name (e.g. "ssgd")
           source        "mpi" (refsgd train --trace) or "serial" (refsgd golden)
           world_size    N, the number of workers
           steps         T, the number of recorded steps
           dtype         "float64" or "float32" (of every array below but the indices)
           config        JSON: every option of the run (lr, momentum, tau, batch, seed, ...)
           model         the model's name; model_spec: the spec as JSON (layers, input, classes)
           layout        JSON: [[tensor name, offset, shape], ...] of the flat parameter vector
           dataset       the dataset's name; dataset_sha256: SHA-256 of its normalised
                         training images (in the trace's dtype) followed by the int64 labels
           state_names   JSON list: the arrays recorded under /state
           refsgd_version
    /w0                 (d,)              the initial weights (every worker starts there)
    /batches            (T, N, tau, b)    int64 indices into the training set of micro-batch j
                                          of worker i at step t (-1 on a parameter server)
    /loss               (T, N)            mean loss over worker i's micro-batches at step t
                                          (NaN on a parameter server, which computes none)
    /lr                 (T,)              the learning rate of step t
    /state/<name>       (T, N, d)         worker i's array <name> after step t

Steps count from 0; ``/state/<name>[t]`` is the state after step t has been applied. The state
arrays are the ones the method's listing defines as a worker's state (e.g. SSGD's x and the
momentum buffer of U; SSGD-NAG's w, M and w^), named as the MPI code registers them.

Cost: per step, 8 (float64) or 4 bytes x d x N for every state array, plus 8 x N x tau x b
bytes of indices; gzip-compressed. digits_mlp (d = 4810) for 300 steps on 4 workers with one
state array is about 46 MB before compression: keep traces to small models and a few hundred
steps.
"""

import hashlib
import json

import h5py
import numpy as np

from refsgd import RefsgdError, __version__
from refsgd.files import atomic_path, open_h5

FORMAT = "refsgd-trace"
FORMAT_VERSION = 1


def dataset_sha256(data, dtype):
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(data.x_train, dtype=dtype).tobytes())
    h.update(np.ascontiguousarray(data.y_train, dtype=np.int64).tobytes())
    return h.hexdigest()


def write(path, *, method, source, config, net, data, w0, batches, loss, lr, states):
    """Write a trace atomically. states: {name: (T, N, d) array}."""
    T, N = loss.shape
    comp = dict(compression="gzip", shuffle=True)
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        f.attrs.update(format=FORMAT, format_version=FORMAT_VERSION, method=method, source=source,
                       world_size=N, steps=T, dtype=net.dtype.name,
                       config=json.dumps(config, sort_keys=True), model=net.name,
                       model_spec=json.dumps(net.spec, sort_keys=True),
                       layout=json.dumps([[n, o, list(s)] for n, o, s in net.layout]),
                       dataset=data.name, dataset_sha256=dataset_sha256(data, net.dtype),
                       state_names=json.dumps(list(states)), refsgd_version=__version__)
        f.create_dataset("w0", data=w0)
        f.create_dataset("batches", data=np.asarray(batches, dtype=np.int64), **comp)
        f.create_dataset("loss", data=loss)
        f.create_dataset("lr", data=np.asarray(lr, dtype=np.float64))
        g = f.create_group("state")
        for name, arr in states.items():
            g.create_dataset(name, data=arr, **comp)


class Trace:
    """A trace file read into memory."""

    def __init__(self, path):
        self.path = path
        with open_h5(path, "a refsgd trace") as f:
            if f.attrs.get("format") != FORMAT:
                raise RefsgdError(f"{path}: not a refsgd trace (made by refsgd train --trace or refsgd golden)")
            self.attrs = dict(f.attrs)
            self.config = json.loads(self.attrs["config"])
            self.state_names = json.loads(self.attrs["state_names"])
            self.w0 = f["w0"][...]
            self.batches = f["batches"][...]
            self.loss = f["loss"][...]
            self.lr = f["lr"][...]
            self.state = {k: f["state"][k][...] for k in self.state_names}


#: configuration entries that do not change a trajectory (verify does not compare them)
_NOT_TRAJECTORY = {"eval_every", "log_every", "progress", "out", "trace", "checkpoint", "checkpoint_every",
                   "resume", "link", "local_link", "list", "epochs", "iterations", "data", "workers", "steps", "poll"}


def verify(a_path, b_path, rtol=1e-10, atol=1e-12):
    """Compare two traces; returns (ok, lines of text). The first difference found is named."""
    a, b = Trace(a_path), Trace(b_path)
    lines = [f"A: {a_path} ({a.attrs['source']}, {a.attrs['method']}, {a.attrs['world_size']} workers, "
             f"{a.attrs['steps']} steps, {a.attrs['dtype']})",
             f"B: {b_path} ({b.attrs['source']}, {b.attrs['method']}, {b.attrs['world_size']} workers, "
             f"{b.attrs['steps']} steps, {b.attrs['dtype']})"]
    for key in ("method", "world_size", "dtype", "model", "model_spec", "dataset_sha256", "state_names"):
        if a.attrs[key] != b.attrs[key]:
            return False, lines + [f"MISMATCH in {key}: {a.attrs[key]!r} vs {b.attrs[key]!r}"]
    ca = {k: v for k, v in a.config.items() if k not in _NOT_TRAJECTORY}
    cb = {k: v for k, v in b.config.items() if k not in _NOT_TRAJECTORY}
    diff = sorted(k for k in set(ca) & set(cb) if ca[k] != cb[k])
    if diff:
        return False, lines + ["MISMATCH in the configuration: " +
                               ", ".join(f"{k} ({ca[k]!r} vs {cb[k]!r})" for k in diff)]
    only = sorted(set(ca) ^ set(cb))
    if only:  # e.g. another implementation records only the options its method reads
        lines.append(f"note: options recorded on one side only (not compared): {', '.join(only)}")
    if not np.array_equal(a.w0, b.w0):
        return False, lines + [f"MISMATCH in w0: max |A - B| = {np.max(np.abs(a.w0 - b.w0)):.3e}"]
    T = min(a.attrs["steps"], b.attrs["steps"])
    if a.attrs["steps"] != b.attrs["steps"]:
        lines.append(f"note: A has {a.attrs['steps']} steps, B {b.attrs['steps']}; comparing the first {T}")
    N = a.attrs["world_size"]
    worst = 0.0
    for t in range(T):
        for i in range(N):
            if not np.array_equal(a.batches[t, i], b.batches[t, i]):
                return False, lines + [f"MISMATCH at step {t}, worker {i}: different batch indices"]
            for name in ["loss"] + a.state_names:
                x = a.loss[t, i] if name == "loss" else a.state[name][t, i]
                y = b.loss[t, i] if name == "loss" else b.state[name][t, i]
                x, y = np.asarray(x, float), np.asarray(y, float)
                both_nan = np.isnan(x) & np.isnan(y)  # no loss on a parameter server
                err = np.where(both_nan, 0.0, np.abs(x - y))
                tol = np.where(both_nan, 0.0, atol + rtol * np.abs(y))
                if not np.all(err <= tol):
                    j = int(np.argmax(err - tol)) if np.ndim(err) else 0
                    rel = np.max(err / np.maximum(np.abs(np.asarray(y, float)), 1e-300))
                    where = f"{name}[{j}]" if np.ndim(err) else name
                    return False, lines + [
                        f"MISMATCH at step {t}, worker {i}, {where}: A = {np.ravel(x)[j]!r}, B = {np.ravel(y)[j]!r}",
                        f"  max |A - B| = {np.max(err):.3e}, max relative = {rel:.3e} (rtol {rtol:g}, atol {atol:g})"]
                scale = np.maximum(np.where(both_nan, 1.0, np.abs(y)), atol / max(rtol, 1e-300))
                worst = max(worst, float(np.max(err / scale)))
    lines.append(f"OK: {T} steps x {N} workers agree (state {', '.join(a.state_names)} and loss; "
                 f"largest relative difference {worst:.2e}; rtol {rtol:g}, atol {atol:g})")
    return True, lines
