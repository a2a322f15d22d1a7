"""Traces and golden files: one HDF5 schema for ``refsgd train --trace`` and ``refsgd golden``.

A trace records a method's trajectory step by step for every worker, with everything another
implementation needs to replay it without refsgd's code or random numbers::

    attrs  format = "refsgd-trace", format_version = 3 (see FORMAT_VERSION below)
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
           refsgd_version  the refsgd version that wrote the file (informational, not compared)
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
import typing

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.version import __version__
from refsgd.files import h5_written, open_h5, read_array
from refsgd.options import trajectory_keys
from refsgd.registry import METHODS

FORMAT = "refsgd-trace"
#: 3: every sum over workers of a golden file (serial) is in the Ring-AllReduce's order, the
#: uncompressed ones too, and an MPI trace records how it summed (config "allreduce": "mpi", the
#: MPI library's order, or "ring", bitwise the golden's); 2: compressed all-reduces (--compress,
#: DASO's bf16 syncs) sum in the ring's order, uncompressed sums in row order 0, 1, ..., N-1;
#: 1: compressed all-reduces in MPICH's recursive-doubling order. Versions 2 and 3 differ only in
#: the roundings of uncompressed sums over 3 or more workers (within verify's default tolerance):
#: version 2 is read. Version 1 traces without a compressed all-reduce are read too; the others
#: are refused.
FORMAT_VERSION = 3
def compressed(method, config):
    """Whether a trajectory of ``method`` with ``config`` has a compressed all-reduce (the
    registry's Method.compressed: whatever --compress says)."""
    m = METHODS.get(method)
    return (m is not None and m.compressed) or (config.get("compress") or "none") != "none"


def dataset_sha256(data, dtype, test=False):
    """SHA-256 of the normalised training images (in ``dtype``) and the int64 labels; with
    ``test``, of the test set too (computed once per data set and dtype)."""
    cache = data.__dict__.setdefault("_sha256", {})
    key = (np.dtype(dtype).str, test)
    if key not in cache:
        h = hashlib.sha256()
        splits = ("train", "test") if test else ("train",)
        for split in splits:
            # little-endian bytes whatever the machine's order, as docs/implementers.md says
            h.update(np.ascontiguousarray(getattr(data, f"x_{split}"), dtype=np.dtype(dtype).newbyteorder("<")).data)
            h.update(np.ascontiguousarray(getattr(data, f"y_{split}"), dtype="<i8").data)
        cache[key] = h.hexdigest()
    return cache[key]


def check_finite(out, what):
    """Refuse (RefsgdError) a trajectory with a non-finite weight, state, lr or loss. A loss may be
    NaN only where the worker computed none (a parameter server: batch indices -1)."""
    bad = []
    for name, arr in [("w0", out["w0"]), ("lr", out["lr"])] + [(f"state/{k}", v) for k, v in out["states"].items()]:
        arr = np.asarray(arr, dtype=np.float64)
        if not np.all(np.isfinite(arr)):
            step = int(np.argwhere(~np.isfinite(arr))[0][0]) if arr.ndim > 1 else None
            bad.append(name + (f" from step {step}" if step is not None else ""))
    loss = np.asarray(out["loss"], dtype=np.float64)
    server = np.all(np.asarray(out["batches"]).reshape(loss.shape + (-1,)) < 0, axis=-1)
    wrong = ~np.isfinite(loss) & ~server
    if np.any(wrong):
        bad.append(f"loss from step {int(np.argwhere(wrong)[0][0])}")
    if bad:
        raise RefsgdError(f"{what} became non-finite ({', '.join(bad)}): no trace written; lower the learning "
                          "rate or take fewer steps")


def write(path, *, method, source, config, net, data, w0, batches, loss, lr, states, interrupted=None):
    """Write a trace atomically. states: {name: (T, N, d) array}. interrupted: the signal that
    stopped the run ("SIGINT"), kept in the attribute of that name (the trace holds the steps done)."""
    T, N = loss.shape
    attrs = dict(method=method, source=source, world_size=N, steps=T, dtype=net.dtype.name,
                 config=json.dumps(config, sort_keys=True), model=net.name,
                 model_spec=json.dumps(net.spec, sort_keys=True),
                 layout=json.dumps([[n, o, list(s)] for n, o, s in net.layout]),
                 dataset=data.name, dataset_sha256=dataset_sha256(data, net.dtype),
                 state_names=json.dumps(list(states)), refsgd_version=__version__)
    if interrupted:
        attrs["interrupted"] = interrupted
    _store(path, attrs, w0, batches, loss, lr, states)


def _store(path, attrs, w0, batches, loss, lr, states):
    """The file itself, written atomically: the attributes, then the arrays of the schema."""
    comp = dict(compression="gzip", shuffle=True)
    with h5_written(path, what="the trace") as f:
        f.attrs.update(format=FORMAT, format_version=FORMAT_VERSION, **attrs)
        f.create_dataset("w0", data=w0)
        f.create_dataset("batches", data=np.asarray(batches, dtype=np.int64), **comp)
        f.create_dataset("loss", data=np.asarray(loss, dtype=np.float64))
        f.create_dataset("lr", data=np.asarray(lr, dtype=np.float64))
        g = f.create_group("state")
        for name, arr in states.items():
            g.create_dataset(name, data=arr, **comp)


class Writer:
    """Write a trace of your own loop from arrays, step by step (NumPy and h5py only: no MPI, no
    Numba), in the schema above, so that ``refsgd verify mine.h5 ref.h5`` reads it::

        with refsgd.trace.Writer("mine.h5", like="ref.h5", source="torch") as w:
            for t in range(w.steps):
                ...                                   # your step t on w.batches[t], at rate w.lr[t]
                w.step(loss=losses, states={"x": X, "U.momentum_buffer": B})   # (N,), {name: (N, d)}

    ``like``: a trace or golden file whose identification (method, world size, dtype, config,
    model, model_spec, layout, dataset, dataset_sha256, state_names), ``/w0``, ``/batches`` and
    ``/lr`` the new file takes (its arrays as ``w.w0``, ``w.batches``, ``w.lr``); any of them may
    be given as keywords instead, and must be where there is no ``like`` (``config`` and
    ``model_spec`` as dicts, ``layout`` as [[name, offset, shape], ...]). ``step`` takes each
    step's losses (N,) and states ({name: (N, d)}, pipe-sgd's ``g_sum`` (N, K, d)), and the
    step's ``batches`` (N, tau, b) and ``lr`` where there is no ``like``. The file appears when
    the block ends without an exception (write-then-rename; never a half-written file); an array
    of the wrong shape or dtype is refused (:class:`refsgd.RefsgdError`) when it is given.
    """

    IDENTITY = ("method", "world_size", "dtype", "config", "model", "model_spec", "layout", "dataset",
                "dataset_sha256", "state_names")

    def __init__(self, path, *, like=None, source="user", w0=None, **identity):
        unknown = sorted(set(identity) - set(self.IDENTITY))
        if unknown:
            raise RefsgdError(f"Writer: unknown keyword {', '.join(unknown)}; the trace's identification is "
                              f"{', '.join(self.IDENTITY)}")
        self.path, self.source = path, source
        self.batches = self.lr = self._ref_steps = None
        attrs = {}
        if like is not None:
            ref = Trace(like)
            attrs = {k: ref.attrs[k] for k in self.IDENTITY if k in ref.attrs}
            attrs.update(config=ref.config, model_spec=json.loads(ref.attrs["model_spec"]), state_names=ref.state_names)
            if "layout" in attrs:
                attrs["layout"] = json.loads(attrs["layout"])
            w0 = ref.w0 if w0 is None else w0
            self.batches, self.lr, self._ref_steps = ref.batches, ref.lr, int(ref.attrs["steps"])
        attrs.update(identity)
        missing = [k for k in self.IDENTITY if attrs.get(k) is None] + (["w0"] if w0 is None else [])
        if missing:
            raise RefsgdError(f"Writer: missing {', '.join(missing)} (give them, or like= a trace to take them from)")
        self.attrs = attrs
        self.dtype = np.dtype(str(attrs["dtype"]))
        self.N, self.names = int(attrs["world_size"]), list(attrs["state_names"])
        self.w0 = np.asarray(w0)
        if self.w0.ndim != 1 or self.w0.dtype != self.dtype:
            raise RefsgdError(f"Writer: w0 must be a ({self.dtype.name}) vector, got {self.w0.dtype} of shape "
                              f"{self.w0.shape}")
        self._rows = dict(batches=[], loss=[], lr=[], **{n: [] for n in self.names})

    @property
    def steps(self):
        """The number of steps of ``like`` (None without it)."""
        return self._ref_steps

    def step(self, loss, states, batches=None, lr=None):
        """Record step t = the number of steps recorded so far: each worker's loss and state after it."""
        t, N, d = len(self._rows["loss"]), self.N, self.w0.shape[0]
        if self.batches is not None:
            if t >= self._ref_steps:
                raise RefsgdError(f"Writer: step {t}: the reference {self.attrs['method']} trace has {t} steps")
            batches = self.batches[t] if batches is None else batches
            lr = self.lr[t] if lr is None else lr
        if batches is None or lr is None:
            raise RefsgdError(f"Writer: step {t} needs its batches and lr (or a like= trace holding them)")
        loss, batches = np.asarray(loss, dtype=np.float64), np.asarray(batches)
        if loss.shape != (N,) or batches.ndim != 3 or batches.shape[0] != N:
            raise RefsgdError(f"Writer: step {t}: loss must be ({N},) and batches ({N}, tau, b), got {loss.shape} "
                              f"and {batches.shape}")
        if set(states) != set(self.names):
            raise RefsgdError(f"Writer: step {t}: the states are {', '.join(self.names)}, got "
                              f"{', '.join(states) or 'none'}")
        for name in self.names:
            arr = np.asarray(states[name])
            if arr.dtype != self.dtype or arr.shape[:1] != (N,) or arr.shape[-1:] != (d,):
                raise RefsgdError(f"Writer: step {t}: state {name} must be {self.dtype.name} of shape ({N}, ..., {d}), "
                                  f"got {arr.dtype} of shape {arr.shape}")
            if self._rows[name] and arr.shape != self._rows[name][0].shape:
                raise RefsgdError(f"Writer: step {t}: state {name} has shape {arr.shape}, at step 0 "
                                  f"{self._rows[name][0].shape}")
            self._rows[name].append(arr.copy())
        self._rows["batches"].append(batches.astype(np.int64))
        self._rows["loss"].append(loss)
        self._rows["lr"].append(float(lr))

    def close(self):
        """Write the file (RefsgdError when no step was recorded)."""
        rows, T = self._rows, len(self._rows["loss"])
        if T == 0:
            raise RefsgdError(f"Writer: no step recorded, {self.path} not written")
        if len({b.shape for b in rows["batches"]}) > 1:
            raise RefsgdError("Writer: the batches of the steps differ in shape (tau, b)")
        a = self.attrs
        attrs = dict(method=a["method"], source=self.source, world_size=self.N, steps=T, dtype=self.dtype.name,
                     config=json.dumps(a["config"], sort_keys=True), model=a["model"],
                     model_spec=json.dumps(a["model_spec"], sort_keys=True), layout=json.dumps(a["layout"]),
                     dataset=a["dataset"], dataset_sha256=a["dataset_sha256"], state_names=json.dumps(self.names),
                     refsgd_version=__version__)
        _store(self.path, attrs, self.w0, np.stack(rows["batches"]), np.stack(rows["loss"]), np.array(rows["lr"]),
               {n: np.stack(rows[n]) for n in self.names})

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is None:
            self.close()
        return False


#: the attributes a trace must have (docs/implementers.md, "The trace schema")
REQUIRED_ATTRS = ("format_version", "method", "source", "world_size", "steps", "dtype", "config", "model",
                  "model_spec", "dataset_sha256", "state_names")


#: a model spec's free-text fields, which verify does not compare
SPEC_TEXT = ("description", "source")


class Trace:
    """A trace file read into memory, its schema checked (RefsgdError naming what is wrong)."""

    def __init__(self, path):
        self.path = path
        with open_h5(path, "a refsgd trace") as f:
            if f.attrs.get("format") != FORMAT:
                raise RefsgdError(f"{path}: not a refsgd trace (made by refsgd train --trace or refsgd golden)")
            missing = [k for k in REQUIRED_ATTRS if k not in f.attrs]
            missing += [f"/{k}" for k in ("w0", "batches", "loss", "lr") if k not in f]
            if missing:
                raise RefsgdError(f"{path}: malformed trace, missing {', '.join(missing)}")
            # NumPy scalars as Python values, so that messages print 4, not np.int64(4)
            self.attrs = {k: v.item() if isinstance(v, np.generic) else v for k, v in f.attrs.items()}
            try:
                self.config = json.loads(self.attrs["config"])
                self.state_names = json.loads(self.attrs["state_names"])
                spec = json.loads(self.attrs["model_spec"])
                T, N = int(self.attrs["steps"]), int(self.attrs["world_size"])
            except (TypeError, ValueError) as e:
                raise RefsgdError(f"{path}: malformed trace attributes ({e})") from None
            if not isinstance(self.config, dict) or not isinstance(self.state_names, list) \
                    or not isinstance(spec, dict):
                raise RefsgdError(f"{path}: malformed trace: config and model_spec must be JSON objects, "
                                  f"state_names a list")
            self.format_version = self._version(path)
            #: the spec as verify compares it: JSON values, without its free-text fields
            self.network = {k: v for k, v in spec.items() if k not in SPEC_TEXT}
            absent = [n for n in self.state_names if f"state/{n}" not in f]
            if absent:
                raise RefsgdError(f"{path}: malformed trace, state_names lists {', '.join(absent)} but "
                                  f"/state has no such array")
            self.w0, self.batches, self.loss, self.lr = (read_array(f, k) for k in ("w0", "batches", "loss", "lr"))
            self.state = {k: read_array(f, f"state/{k}") for k in self.state_names}
        d = self.w0.shape[0] if self.w0.ndim == 1 else None
        expect = {"w0": (self.w0.shape, (d,)), "loss": (self.loss.shape, (T, N)), "lr": (self.lr.shape, (T,))}
        expect["batches"] = (self.batches.shape[:2], (T, N))
        for k, v in self.state.items():  # (T, N, d), or (T, N, ..., d) for a stack of vectors (Pipe-SGD)
            expect[f"state/{k}"] = ((v.shape[:2] + v.shape[-1:]) if v.ndim >= 3 else v.shape, (T, N, d))
        wrong = [f"/{k} is {tuple(got)}, expected {tuple(want)}" for k, (got, want) in expect.items() if
                 tuple(got) != tuple(want)]
        if self.batches.ndim != 4:
            wrong.append(f"/batches is {self.batches.shape}, expected (T, N, tau, b)")
        if wrong:
            raise RefsgdError(f"{path}: malformed trace (steps {T}, workers {N}, {d} parameters): "
                              + "; ".join(wrong))


    def _version(self, path):
        """The format version, refusing one whose meaning this refsgd cannot reproduce."""
        version = self.attrs["format_version"]  # present: REQUIRED_ATTRS (every version wrote it)
        # an integer of HDF5 (not 2.5, not "3", not a bool); 0 and below were never written
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise RefsgdError(f"{path}: malformed trace attribute format_version {version!r}: expected an integer "
                              f"1 .. {FORMAT_VERSION}")
        if version > FORMAT_VERSION:
            raise RefsgdError(f"{path}: trace format version {version} is newer than this refsgd reads "
                              f"({FORMAT_VERSION}): update refsgd")
        if version < 2 and compressed(self.attrs["method"], self.config):
            raise RefsgdError(f"{path}: trace format version {version} summed its compressed all-reduces in "
                              "MPICH's recursive-doubling order, which this refsgd no longer reproduces (it "
                              "sums them in the Ring-AllReduce's order, format version 2); make the trace "
                              "again with this refsgd (refsgd train --trace, refsgd golden)")
        return version


def _compared(method, config):
    """The configuration entries verify compares: the options that shape the method's trajectory
    (refsgd.options), less the data path (the content is compared by its SHA-256)."""
    keys = trajectory_keys(method, config) - {"data"}
    return {k: v for k, v in config.items() if k in keys}


class Comparison(typing.NamedTuple):
    """What :func:`compare` found: ``ok``, the lines of text verify prints, and ``where`` the first
    step-level difference as a dict (step, worker, array, index (None for a scalar), a, b; for
    batch indices, array "batches" and the indices' position), None when there is none or the
    difference is in the files' identification (configuration, w0, length, ...)."""

    ok: bool
    lines: list
    where: dict = None


def verify(a_path, b_path, rtol=1e-10, atol=1e-12, prefix=False):
    """Compare two traces; returns (ok, lines of text). The first difference found is named.
    Traces of different lengths are a mismatch unless ``prefix`` (compare the common steps).
    A non-finite value is never an agreement (NaN loss on a parameter server excepted)."""
    return tuple(compare(a_path, b_path, rtol=rtol, atol=atol, prefix=prefix)[:2])


def compare(a_path, b_path, rtol=1e-10, atol=1e-12, prefix=False):
    """:func:`verify`, returning a :class:`Comparison` (the first difference located)."""
    a, b = Trace(a_path), Trace(b_path)
    lines = [f"A: {a_path} ({a.attrs['source']}, {a.attrs['method']}, {a.attrs['world_size']} workers, "
             f"{a.attrs['steps']} steps, {a.attrs['dtype']})",
             f"B: {b_path} ({b.attrs['source']}, {b.attrs['method']}, {b.attrs['world_size']} workers, "
             f"{b.attrs['steps']} steps, {b.attrs['dtype']})"]
    for key in ("method", "world_size", "dtype", "model", "dataset_sha256"):
        if a.attrs[key] != b.attrs[key]:
            return Comparison(False, lines + [f"MISMATCH in {key}: {a.attrs[key]!r} vs {b.attrs[key]!r}"])
    for name, tr in (("A", a), ("B", b)):  # a float32 array in a float64 trace is no difference of values
        wrong = [f"/{k} is {arr.dtype}" for k, arr in [("w0", tr.w0)] + [(f"state/{n}", v) for n, v in tr.state.items()]
                 if arr.dtype != np.dtype(str(tr.attrs["dtype"]))]
        if wrong:
            return Comparison(False, lines + [f"MISMATCH in dtype: in {name} ({tr.path}), a {tr.attrs['dtype']} "
                                              "trace, " + ", ".join(wrong)])
    if a.network != b.network:
        return Comparison(False, lines + [f"MISMATCH in model_spec: {a.network} vs {b.network}"])
    if a.state_names != b.state_names:
        return Comparison(False, lines + [f"MISMATCH in state_names: {a.state_names} vs {b.state_names}"])
    ca, cb = _compared(a.attrs["method"], a.config), _compared(b.attrs["method"], b.config)
    diff = sorted(k for k in set(ca) & set(cb) if ca[k] != cb[k])
    if diff:
        return Comparison(False, lines + ["MISMATCH in the configuration: " +
                                          ", ".join(f"{k} ({ca[k]!r} vs {cb[k]!r})" for k in diff)])
    ra, rb = a.config.get("allreduce"), b.config.get("allreduce")
    if ra != rb and ra is not None and rb is not None:  # not compared: the order of the sums only
        lines.append(f"note: A summed over workers with --allreduce {ra}, B with {rb}: at 3 or more workers "
                     "expect differences of round-off (bitwise only when both sum in the ring's order)")
    only = sorted(set(ca) ^ set(cb))
    if only:  # e.g. another implementation records only the options its method reads
        lines.append(f"note: options recorded on one side only (not compared): {', '.join(only)}")
    if not np.array_equal(a.w0, b.w0):
        return Comparison(False, lines + [f"MISMATCH in w0: max |A - B| = {np.max(np.abs(a.w0 - b.w0)):.3e}"])
    T = min(a.attrs["steps"], b.attrs["steps"])
    if a.attrs["steps"] != b.attrs["steps"]:
        if not prefix:
            short = "A" if a.attrs["steps"] < b.attrs["steps"] else "B"
            return Comparison(False, lines + [
                f"MISMATCH in length: A has {a.attrs['steps']} steps, B {b.attrs['steps']}: "
                f"steps {T}..{max(a.attrs['steps'], b.attrs['steps']) - 1} are missing from "
                f"{short} (--prefix compares the first {T} only)"])
        lines.append(f"note: A has {a.attrs['steps']} steps, B {b.attrs['steps']}; comparing the first {T} (--prefix)")
    if T == 0:
        return Comparison(False, lines + ["MISMATCH: no step to compare"])
    for name, tr in (("A", a), ("B", b)):
        try:
            check_finite(dict(w0=tr.w0, lr=tr.lr[:T], loss=tr.loss[:T], batches=tr.batches[:T],
                              states={k: v[:T] for k, v in tr.state.items()}), f"{name} ({tr.path})")
        except RefsgdError as e:
            return Comparison(False, lines + [f"MISMATCH: {str(e).split(': no trace written')[0]}"])
    N = a.attrs["world_size"]
    worst = 0.0
    for t in range(T):
        for i in range(N):
            if not np.array_equal(a.batches[t, i], b.batches[t, i]):
                m, k = (int(v) for v in np.argwhere(a.batches[t, i] != b.batches[t, i])[0])
                return Comparison(False, lines + _batch_mismatch(t, i, a.batches[t, i], b.batches[t, i]),
                                  dict(step=t, worker=i, array="batches", index=(m, k), a=int(a.batches[t, i, m, k]),
                                       b=int(b.batches[t, i, m, k])))
            for name in ["loss"] + a.state_names:
                x = a.loss[t, i] if name == "loss" else a.state[name][t, i]
                y = b.loss[t, i] if name == "loss" else b.state[name][t, i]
                x, y = np.asarray(x, float), np.asarray(y, float)
                both_nan = np.isnan(x) & np.isnan(y)  # no loss on a parameter server (finite elsewhere: checked)
                err = np.where(both_nan, 0.0, np.abs(x - y))
                tol = np.where(both_nan, 0.0, atol + rtol * np.abs(y))
                if not np.all(err <= tol):
                    j = int(np.argmax(err - tol)) if np.ndim(err) else 0
                    where = f"{name}[{j}]" if np.ndim(err) else name
                    rel = _normwise(err, y, both_nan)
                    return Comparison(False, lines + [
                        f"MISMATCH at step {t}, worker {i}, {where}: A = {float(np.ravel(x)[j])!r}, "
                        f"B = {float(np.ravel(y)[j])!r}",
                        f"  max |A - B| = {np.max(err):.3e}"
                        + (f", normwise relative max |A - B| / max |B| = {rel:.3e}" if rel is not None else "")
                        + f" (rtol {rtol:g}, atol {atol:g})"],
                        dict(step=t, worker=i, array=name, index=j if np.ndim(err) else None,
                             a=float(np.ravel(x)[j]), b=float(np.ravel(y)[j])))
                rel = _normwise(err, y, both_nan)
                worst = worst if rel is None else max(worst, rel)
    lines.append(f"OK: {T} steps x {N} workers agree (state {', '.join(a.state_names)} and loss; "
                 f"largest normwise relative difference {worst:.2e}; rtol {rtol:g}, atol {atol:g})")
    return Comparison(True, lines)


def _normwise(err, y, both_nan):
    """max |A - B| / max |B| over one array (the infinity norms), where B is not all zero (None
    then): a relative figure that stays meaningful when single entries of B are near zero, unlike
    the largest elementwise ratio."""
    norm = float(np.max(np.where(both_nan, 0.0, np.abs(y)))) if np.size(y) else 0.0
    return float(np.max(err)) / norm if norm > 0 else None


def _batch_mismatch(t, i, a, b):
    """The lines naming where two workers' batch indices (tau, b) differ, and what they hold."""
    where = np.argwhere(a != b)
    m, k = (int(v) for v in where[0])
    show = 16  # one micro-batch's indices, shortened past this many

    def row(x):
        x = [int(v) for v in x]
        return "[" + " ".join(map(str, x[:show])) + (" ..." if len(x) > show else "") + "]"
    at = ", ".join(f"({int(p)}, {int(q)})" for p, q in where[:8]) + (", ..." if len(where) > 8 else "")
    return [f"MISMATCH at step {t}, worker {i}: different batch indices: {len(where)} of {a.size} differ, at "
            f"(micro-batch, position) {at}; the first: A = {int(a[m, k])}, B = {int(b[m, k])}",
            f"  micro-batch {m}: A {row(a[m])}", f"  micro-batch {m}: B {row(b[m])}"]
