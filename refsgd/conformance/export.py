"""The suite in plain files, for implementations in other languages (C++, Julia, JAX, ...):
``refsgd conformance export DIR`` writes one folder per configuration with its inputs and its
expected states (HDF5 and NPY, a README each); the implementation writes its states back into
``DIR/<name>/result/``; ``refsgd conformance check DIR`` compares them."""

import json
import os
import shutil
import tempfile

import numpy as np

from refsgd import trace
from refsgd.conformance.suite import FAIL, PASS, Configuration, Outcome, References, configurations, failed
from refsgd.errors import RefsgdError
from refsgd.files import atomic_path, h5_written
from refsgd.version import __version__

NO_RESULT = "no result"

README = """# refsgd conformance: {name}

{method} with {workers} workers (world size, servers included), {steps} steps, {dtype}, codec {codec}.
Reproduce the expected states from the inputs below; the computation is the section of
`{method}` in refsgd's implementer's guide, implementers.md (installed with refsgd: `refsgd train
--list` prints where; docs/implementers.md in its repository), which states the order of every operation.

## Inputs

| file | content |
|---|---|
| `config.json` | `hyperparameters` (the run's options: lr, batch, tau, momentum, ...), `model_spec`, `layout` ([tensor, offset, shape] of the flat weight vector), `state_names`, `state_shapes`, `tolerances` |
| `x_train.npy` | ({n}, {input}) {dtype}: the normalised training images |
| `y_train.npy` | ({n},) int64: their labels |
| `w0.npy` | ({d},) {dtype}: the initial weights of every worker |
| `batches.npy` | {batches_shape} int64: `batches[t, i, j]`, the training-set indices of micro-batch (or thread) j of worker i at step t; a row of -1: a parameter server |
| `lr.npy` | ({steps},) float64: the learning rate of every step |
| `inputs.h5` | the same arrays in one HDF5 file (datasets of those names; config.json as its attribute `config`) |

## Expected

`expected.h5` is the reference trace (the schema of docs/implementers.md; `refsgd verify` reads it);
`expected/loss.npy` ({steps}, {workers}) float64 and {expected_files}: every worker's loss at step t
and its arrays after step t.

## Write back, then check

Write `result/loss.npy` ({steps}, {workers}) float64 and {result_files}, in {dtype} (or `result.h5`, a
whole trace), then

    refsgd conformance check {parent}

renders the expected states itself and compares them at rtol {rtol:g}, atol {atol:g} (the suite's: editing
`tolerances` or `expected/` here changes nothing), names the first step, worker, array and element
that differ, and exits 1 when a result is missing.
"""


def export(folder, configurations, force=False, log=print):
    """Write one folder per configuration into ``folder`` (made if absent; an existing
    configuration folder is replaced only with ``force``, and only if it is one of ours)."""
    for c in configurations:
        target = os.path.join(folder, c.name)
        if os.path.lexists(target) and not (force and os.path.isfile(os.path.join(target, "config.json"))):
            raise RefsgdError(f"{target} exists; give --force to replace it" if not force else
                              f"{target} exists and is not an exported configuration: not replaced")
    os.makedirs(folder, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".refsgd-export-", dir=folder)   # the expected traces, and each folder
    try:                                                               # until it is whole
        references = References(work)
        for c in configurations:
            s = references.setup(c)
            staging = tempfile.mkdtemp(prefix=f"{c.name}.", dir=work)
            _write(staging, c, s, references.path(c), folder)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(staging, 0o777 & ~umask)           # mkdtemp's folder is the owner's alone
            target = os.path.join(folder, c.name)
            if os.path.lexists(target):
                shutil.rmtree(target)
            os.replace(staging, target)
            log(f"{target}: {c.method}, {c.workers} workers, {c.steps} steps, {c.dtype}, codec {c.codec}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _write(staging, c, s, expected_path, parent):
    ref = trace.Trace(expected_path)
    T, N, d = s.steps, s.workers, len(s.w0)
    rtol, atol = c.tolerances
    meta = dict(name=c.name, method=c.method, workers=N, steps=T, dtype=s.dtype, codec=c.codec,
                hyperparameters=s.config, model_spec=s.model_spec, layout=[list(e[:2]) + [list(e[2])] for e in s.layout],
                state_names=s.state_names,
                state_shapes={k: [T, N, *shape] for k, shape in s.state_shapes.items()},
                tolerances=dict(rtol=rtol, atol=atol), dataset=ref.attrs["dataset"],
                dataset_sha256=ref.attrs["dataset_sha256"], refsgd_version=__version__)
    arrays = dict(x_train=s.x_train, y_train=s.y_train, w0=s.w0, batches=ref.batches, lr=s.lr)
    with atomic_path(os.path.join(staging, "config.json")) as tmp, open(tmp, "w") as f:
        json.dump(meta, f, indent=1)
    with h5_written(os.path.join(staging, "inputs.h5")) as f:
        f.attrs["config"] = json.dumps(meta)
        for k, v in arrays.items():
            f.create_dataset(k, data=v, compression="gzip", shuffle=True)
    for k, v in arrays.items():
        np.save(os.path.join(staging, f"{k}.npy"), v)
    shutil.copyfile(expected_path, os.path.join(staging, "expected.h5"))
    os.makedirs(os.path.join(staging, "expected"))
    np.save(os.path.join(staging, "expected", "loss.npy"), ref.loss)
    for k in s.state_names:
        np.save(os.path.join(staging, "expected", f"{k}.npy"), ref.state[k])
    files = ", ".join(f"`{{}}/{k}.npy` ({', '.join(map(str, [T, N, *s.state_shapes[k]]))})" for k in s.state_names)
    with open(os.path.join(staging, "README.md"), "w") as f:
        f.write(README.format(name=c.name, method=c.method, workers=N, steps=T, dtype=s.dtype, codec=c.codec,
                              n=len(s.y_train), input=", ".join(map(str, s.x_train.shape[1:])), d=d,
                              batches_shape=tuple(ref.batches.shape), expected_files=files.format(*["expected"] *
                                                                                                   len(s.state_names)),
                              result_files=files.format(*["result"] * len(s.state_names)), parent=parent,
                              rtol=rtol, atol=atol))


def check(folder, log=print):
    """Compare the results written back into every configuration folder of ``folder`` with the
    suite's own expected states, rendered afresh at the suite's tolerances (nothing of what the
    folder holds is trusted but the results: an edited ``expected.h5`` or ``tolerances`` changes
    nothing): a list of Outcomes, pass, fail (a wrong, unreadable or damaged folder: one line
    each) or no result, in the suite's order."""
    if not os.path.isdir(folder):
        raise RefsgdError(f"{folder}: no such folder (made by refsgd conformance export)")
    suite = {c.name: c for c in configurations()}
    names = sorted(n for n in os.listdir(folder) if not n.startswith(".") and os.path.isdir(os.path.join(folder, n))
                   and (n in suite or os.path.lexists(os.path.join(folder, n, "config.json"))))
    if not names:
        raise RefsgdError(f"{folder}: no configuration folder in it (refsgd conformance export {folder} writes them)")
    order = {name: k for k, name in enumerate(suite)}
    with tempfile.TemporaryDirectory(prefix="refsgd-check-") as tmp:
        references = References(tmp)
        outcomes = []
        for n in sorted(names, key=lambda n: order.get(n, len(order))):
            c = suite.get(n) or Configuration(n, "?", 0, 0, "?", "?", {})
            try:
                outcomes.append(_check_one(os.path.join(folder, n), c, suite, references))
            except RefsgdError as e:
                outcomes.append(Outcome(c, FAIL, str(e)))
            log(f"  {n}: {outcomes[-1].status}" + (f" {outcomes[-1].message}" if outcomes[-1].status == FAIL else ""))
    return outcomes


def _check_one(path, c, suite, references):
    name = os.path.basename(path)
    if name not in suite:
        raise RefsgdError(f"{path}: not a configuration of this suite (refsgd {__version__}; "
                          f"`refsgd conformance --list` names them): export it again")
    where = os.path.join(path, "config.json")
    try:
        with open(where) as f:
            meta = json.load(f)
        for key in ("name", "method", "workers", "steps", "dtype", "state_names", "state_shapes"):
            meta[key]  # noqa: B018 -- the keys an export writes: one missing is a damaged folder
    except FileNotFoundError:
        raise RefsgdError(f"{path}: damaged, config.json is missing (export it again with --force)") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        what = f"has no {e}" if isinstance(e, KeyError) else f"does not read ({e})"
        raise RefsgdError(f"{where}: damaged, {what} (export it again with --force)") from None
    ident = {k: getattr(c, k) for k in ("name", "method", "workers", "steps", "dtype")}
    if {k: meta[k] for k in ident} != ident:
        raise RefsgdError(f"{where}: damaged, it describes {meta['name']} ({meta['method']}, {meta['workers']} "
                          f"workers, {meta['steps']} steps, {meta['dtype']}), not {c.name}")
    s = references.setup(c)
    expected = references.path(c)
    mine = os.path.join(path, "result.h5")
    rtol, atol = c.tolerances                  # the suite's, whatever config.json says
    with tempfile.TemporaryDirectory() as tmp:
        if not os.path.isfile(mine):
            if not os.path.isdir(os.path.join(path, "result")):
                return Outcome(c, NO_RESULT, f"{path}: neither result/ nor result.h5")
            mine = os.path.join(tmp, "result.h5")
            try:
                _assemble(os.path.join(path, "result"), expected, mine, s)
            except (RefsgdError, OSError, ValueError, EOFError) as e:
                return Outcome(c, FAIL, f"{os.path.join(path, 'result')}: {e}")
        try:
            comparison = trace.compare(mine, expected, rtol=rtol, atol=atol)
        except (RefsgdError, OSError, ValueError, KeyError) as e:
            return Outcome(c, FAIL, f"{mine}: {e}")
        if comparison.ok:
            return Outcome(c, PASS, lines=comparison.lines)
        return failed(c, comparison, mine, expected)


def _assemble(result, expected, out, s):
    """A trace of the arrays written back in ``result/`` (the identification, w0, batches and lr
    of the expected trace; the names and shapes of the suite's Setup ``s``)."""
    arrays = {}
    for name in ["loss"] + s.state_names:
        p = os.path.join(result, f"{name}.npy")
        if not os.path.isfile(p):
            raise RefsgdError(f"{name}.npy is missing")
        try:
            arrays[name] = np.load(p, allow_pickle=False)
        except (OSError, ValueError, EOFError) as e:
            raise RefsgdError(f"{name}.npy is not a NumPy array file ({e or type(e).__name__})") from None
        want = (s.steps, s.workers) + (tuple(s.state_shapes[name]) if name != "loss" else ())
        if arrays[name].shape != want:
            raise RefsgdError(f"{name}.npy is {arrays[name].shape}, expected {want}")
    with trace.Writer(out, like=expected, source="result") as w:
        for t in range(s.steps):
            w.step(loss=arrays["loss"][t], states={k: arrays[k][t] for k in s.state_names})
