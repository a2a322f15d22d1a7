"""Checkpoints: everything needed to continue a run as if it had never stopped.

Layout of ``--checkpoint DIR``::

    DIR/latest                 the name of the newest complete checkpoint (one line)
    DIR/ckpt-<t>/meta.json     method, model, world size, dtype, the configuration, t, and
                               (format_version 3) data_sha256, the SHA-256 of the dataset's
                               content (refsgd.trace.dataset_sha256, test set included)
    DIR/ckpt-<t>/rank<r>.h5    rank r's state: every array the method registered (weights,
                               optimizer buffers, ...), the schedule's state, the per-iteration
                               records and the evaluations so far; attributes t, rank,
                               format_version, segments (JSON: the processes that made the
                               run so far, [{"iterations": [first, end], "wall_seconds"}]) and
                               sha256 (a checksum of all of it)

Format version 2 (meta.json and every rank file say ``format_version``) adds the segments; a
version-1 checkpoint (no format_version) is read as one segment whose wall time is the sum of
its per-iteration wall times (its evaluations and checkpoints left out). Version 3 (this one)
adds meta.json's data_sha256; a checkpoint without it (versions 1 and 2) resumes without that
check.

``t`` is the number of completed iterations. A checkpoint is written every K iterations, after
the last one, and when a signal stops the run; only the newest ``--keep-checkpoints`` are kept.
It is written only after the ranks agreed that the loss and every state array are finite. A
checkpoint is written at an iteration boundary,
after the requests a method still has in flight are completed (their receive buffers are
registered state, so they are saved in their completed form). All ranks write into
``DIR/.tmp-ckpt-<t>``; after a barrier rank 0 renames it to ``ckpt-<t>`` and then replaces
``latest`` (write, then rename), so a crash never leaves a checkpoint that looks complete.

Nothing else is needed: the sampler is a pure function of (seed, epoch, rank, world, batch)
and the micro-batch position is ``t * tau``; the initial weights come from the seed; no other
random state exists.

``--resume auto`` is ``--resume`` of the ``--checkpoint`` folder when it holds a checkpoint, and
a fresh start otherwise (:func:`auto_resume`). ``--resume DIR`` (the checkpoint root, whose ``latest`` is used, or one ``ckpt-<t>``) refuses a
checkpoint of another method, model, world size or trajectory-changing option, naming the
differences, and one whose dataset content differs (the same path may hold other data), naming
both SHA-256s, and one already past the end of the resuming run (nothing to do); the number of
epochs / iterations, evaluation and logging may change. Every rank
checks its own file before the first collective (readable, the same t and rank as the
checkpoint, the checksum, finite state), so a damaged, truncated or stale rank file is refused
with one message.
"""

import contextlib
import hashlib
import json
import os
import shutil

import numpy as np

from refsgd.errors import AgreedError, RefsgdError
from refsgd.files import h5_written, open_h5, read_array
from refsgd.finite import NonFiniteLoss
from refsgd.trace import dataset_sha256

#: 2 adds the segments, 3 the dataset's SHA-256 in meta.json (versions 1 and 2 are read too)
FORMAT_VERSION = 3

#: options that may differ between the run that wrote a checkpoint and the one resuming it
MAY_CHANGE = {"epochs", "iterations", "eval_every", "log_every", "progress", "out", "checkpoint",
              "checkpoint_every", "keep_checkpoints", "resume", "list", "link", "local_link", "poll", "force",
              "trace"}


def _ckpt_dir(path):
    """The ckpt-<t> folder that ``path`` names (itself, or the one in path/latest)."""
    if not os.path.isdir(path):
        raise RefsgdError(f"--resume {path}: no such checkpoint folder")
    if os.path.isfile(os.path.join(path, "meta.json")):
        return path
    latest = os.path.join(path, "latest")
    if not os.path.isfile(latest):
        raise RefsgdError(f"--resume {path}: not a checkpoint (no meta.json and no 'latest' file)")
    name = _read_latest(latest, f"--resume {path}")
    d = os.path.join(path, name)
    if not os.path.isfile(os.path.join(d, "meta.json")):
        raise RefsgdError(f"--resume {path}: 'latest' names {name}, which is missing or incomplete")
    return d


def auto_resume(root):
    """``--resume auto``: the folder to resume from (``root``, the ``--checkpoint`` folder, when its
    ``latest`` names a checkpoint), or None to start from the first iteration; one job script thus
    serves the first run and every requeue. A ``latest`` that names a missing checkpoint is an
    error, never a silent restart."""
    if not root:
        raise RefsgdError("--resume auto needs --checkpoint DIR: it resumes from DIR's latest checkpoint when there "
                          "is one and starts the run otherwise")
    if not os.path.isfile(os.path.join(root, "latest")):
        return None
    _ckpt_dir(root)
    return root


def read_meta(path, config, world, num_params, data_sha256=None, total=None):
    """Validate a checkpoint against this run (every rank, before any collective): its method,
    model, world size, options, dataset content (``data_sha256``) and that it is not past the
    run's ``total`` iterations; returns (folder, meta)."""
    d = _ckpt_dir(path)
    try:
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RefsgdError(f"--resume {d}: unreadable meta.json ({e})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict) or not isinstance(meta.get("t"), int):
        raise RefsgdError(f"--resume {d}: meta.json is not a refsgd checkpoint description")
    saved = meta["config"]
    if "allreduce" in config and "allreduce" not in saved:  # written before --allreduce: MPI's sums
        saved = {**saved, "allreduce": "mpi"}
    if saved.get("algo") != config["algo"]:
        raise RefsgdError(f"--resume {d}: the checkpoint is of method {saved.get('algo')!r}, "
                          f"this run is {config['algo']!r}")
    if saved.get("model") != config["model"] or meta.get("num_params") != num_params:
        raise RefsgdError(f"--resume {d}: the checkpoint is of model {saved.get('model')!r} "
                          f"({meta.get('num_params')} parameters), this run is {config['model']!r} "
                          f"({num_params})")
    if meta.get("world_size") != world:
        raise RefsgdError(f"--resume {d}: the checkpoint was written by {meta.get('world_size')} ranks, "
                          f"this run has {world}")
    diff = sorted(k for k in set(saved) | set(config)
                  if k not in MAY_CHANGE and saved.get(k) != config.get(k))
    if diff:
        shown = ", ".join(f"{k} ({saved.get(k)!r} -> {config.get(k)!r})" for k in diff)
        raise RefsgdError(f"--resume {d}: these options differ from the checkpointed run: {shown}")
    saved_sha = meta.get("data_sha256")
    if data_sha256 is not None and saved_sha is not None and saved_sha != data_sha256:
        raise RefsgdError(f"--resume {d}: the checkpoint was trained on other data: its dataset's SHA-256 is "
                          f"{saved_sha[:16]}..., this run's {_data_text(config)} is {data_sha256[:16]}...; resume "
                          f"with the checkpoint's data")
    if total is not None and meta["t"] > total:
        raise RefsgdError(f"--resume {d}: the checkpoint is at iteration {meta['t']}, already past the end of this run "
                          f"({total} iterations): nothing to do; give --iterations or --epochs beyond it to "
                          "continue")
    for r in range(world):
        if not os.path.isfile(os.path.join(d, f"rank{r}.h5")):
            raise RefsgdError(f"--resume {d}: rank{r}.h5 is missing")
    return d, meta


def _data_text(config):
    return f"--data {config['data']}" if config.get("data") else "dataset (the embedded digits)"


def digest(state, schedule_state, records, evals, events, t, segments=None):
    """SHA-256 of a rank file's content (kept in its ``sha256`` attribute and checked on resume);
    ``segments`` (JSON text) from format version 2 on."""
    h = hashlib.sha256(f"t={t}".encode())
    for k in sorted(state):
        v = np.ascontiguousarray(state[k])
        h.update(f"state/{k}:{v.dtype.str}:{v.shape}".encode())
        h.update(v.data)
    if schedule_state is not None:
        h.update(np.ascontiguousarray(schedule_state, dtype=np.float64).data)
    for k in sorted(records):
        h.update(f"records/{k}".encode())
        h.update(np.ascontiguousarray(records[k], dtype=np.float64).data)
    h.update(evals.encode())
    h.update(events.encode())
    if segments is not None:
        h.update(segments.encode())
    return h.hexdigest()


def save(run, root, config, keep=0):
    """Collective: write a checkpoint of ``run`` after ``run.t + 1`` completed iterations; keep
    the newest ``keep`` (0: all). Returns its folder. Nothing is written when a rank's state is
    not finite; a failed write on any rank removes the partial checkpoint and leaves ``latest``
    naming the previous one. Both stop every rank with one message."""
    comm = run.control_comm
    t = run.t + 1
    name = f"ckpt-{t}"
    tmp = os.path.join(root, f".tmp-{name}")
    previous = _latest_name(root)
    kept = f"latest still names {previous}" if previous else "no checkpoint was written before"
    bad = [r for r, ok in enumerate(comm.allgather(run.state_finite())) if not ok]
    if bad:
        raise NonFiniteLoss(f"the state of rank(s) {', '.join(map(str, bad))} is not finite after iteration {t}: "
                            f"not checkpointed ({kept}); lower the learning rate")
    err = None
    if run.rank == 0:
        try:
            os.makedirs(root, exist_ok=True)
            if os.path.exists(tmp):
                shutil.rmtree(tmp)
            os.makedirs(tmp)
        except OSError as e:
            err = f"rank 0: {_oserror(e)}"
    if comm.bcast(err, root=0) is None:
        try:
            _write_rank(run, os.path.join(tmp, f"rank{run.rank}.h5"), t)
        except RefsgdError as e:  # a failed write, already in words
            err = f"rank {run.rank}: {getattr(e, 'reason', e)}"
        except OSError as e:
            err = f"rank {run.rank}: {_oserror(e)}"
    errors = [e for e in comm.allgather(err) if e]
    if run.rank == 0 and not errors:
        try:
            meta = dict(format="refsgd-checkpoint", format_version=FORMAT_VERSION, t=t, world_size=run.world,
                        num_params=run.net.num_params, config=config, dtype=run.net.dtype.name,
                        state=sorted(run.state), data_sha256=dataset_sha256(run.data, run.net.dtype, test=True))
            with open(os.path.join(tmp, "meta.json"), "w") as f:
                json.dump(meta, f, indent=1, sort_keys=True)
            final = os.path.join(root, name)
            if os.path.exists(final):
                shutil.rmtree(final)
            os.replace(tmp, final)
            with open(os.path.join(root, ".latest.tmp"), "w") as f:
                f.write(name + "\n")
            os.replace(os.path.join(root, ".latest.tmp"), os.path.join(root, "latest"))
            _prune(root, keep, name)
        except OSError as e:
            errors = [f"rank 0: {_oserror(e)}"]
    errors = comm.bcast(errors, root=0)
    if errors:
        if run.rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        raise AgreedError(f"could not write checkpoint {os.path.join(root, name)} ({'; '.join(errors)}); "
                          f"{kept}")
    return os.path.join(root, name)


def _oserror(e):
    return f"{e.strerror or e}" + (f": {e.filename}" if getattr(e, "filename", None) else "")


def _write_rank(run, path, t):
    sched = getattr(run.schedule, "state", None)
    records = run.records
    evals, events, segments = json.dumps(records.evals), json.dumps(records.events), json.dumps(records.segments)
    with h5_written(path, what=f"rank {run.rank}'s checkpoint") as f:
        st = f.create_group("state")
        for k, v in run.state.items():
            st.create_dataset(k, data=v)
        if sched is not None:
            f.create_dataset("schedule_state", data=sched)
        rec = f.create_group("records")
        for k, v in records.iterations.items():
            rec.create_dataset(k, data=np.asarray(v, dtype=np.float64))
        f.attrs["evals"] = evals
        f.attrs["events"] = events
        f.attrs["t"] = t
        f.attrs["rank"] = run.rank
        f.attrs["format_version"] = FORMAT_VERSION
        f.attrs["segments"] = segments
        f.attrs["sha256"] = digest(run.state, sched, records.iterations, evals, events, t, segments)


def _read_latest(latest, flag):
    """The checkpoint name that the file ``latest`` holds; RefsgdError (one line) when it cannot be
    read or is not a name (bytes that are not UTF-8 text, a path: a damaged disk)."""
    try:
        with open(latest, "rb") as f:
            name = f.read().decode("utf-8").strip()
    except OSError as e:
        raise RefsgdError(f"{flag}: cannot read {latest} ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise RefsgdError(f"{flag}: {latest} holds bytes that are not a checkpoint's name (not UTF-8 text: a "
                          "damaged file?); resume from one ckpt-<t> folder (--resume DIR/ckpt-<t>) or give --force "
                          "to start again") from None
    if not name or os.sep in name or name in (".", ".."):
        raise RefsgdError(f"{flag}: {latest} holds {name!r}, not the name of a ckpt-<t> folder")
    return name


def _latest_name(root):
    try:
        return _read_latest(os.path.join(root, "latest"), "latest")
    except RefsgdError:
        return None


def resume_hint(root):
    """``--resume X`` that continues the run whose checkpoints are in ``root``: ``root`` when its
    ``latest`` names a complete checkpoint, else the newest complete ``ckpt-<t>`` folder (a folder
    without ``latest`` is refused by ``--resume root``); None when there is none."""
    name = _latest_name(root)
    if name and os.path.isfile(os.path.join(root, name, "meta.json")):
        return f"--resume {root}"
    for _, folder in reversed(checkpoints(root)):
        if os.path.isfile(os.path.join(root, folder, "meta.json")):
            return f"--resume {os.path.join(root, folder)}"
    return None


def checkpoints(root):
    """The ckpt-<t> folders in root, oldest first: [(t, name)]."""
    out = []
    with contextlib.suppress(OSError):
        for name in os.listdir(root):
            if name.startswith("ckpt-") and name[5:].isdigit():
                out.append((int(name[5:]), name))
    return sorted(out)


def remove_unfinished(root):
    """Remove what a run killed while writing a checkpoint left in ``root`` (the folder
    ``.tmp-ckpt-<t>`` and ``.latest.tmp``; ``latest`` still names the last complete checkpoint);
    returns the names removed."""
    removed = []
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(root)):
            path = os.path.join(root, name)
            if name.startswith(".tmp-ckpt-") and os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(name)
            elif name == ".latest.tmp":
                with contextlib.suppress(OSError):
                    os.unlink(path)
    return removed


def clear(root):
    """Remove the checkpoints and ``latest`` of another run from ``root`` (--force)."""
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(root, "latest"))
    for _, name in checkpoints(root):
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def _prune(root, keep, newest):
    """Remove all but the ``keep`` newest checkpoints (never ``newest``, which latest names)."""
    if keep <= 0:
        return
    for _, name in checkpoints(root)[:-keep]:
        if name != newest:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


class Restorer:
    """Rank r's saved state, checked (before the first collective) and handed to the arrays as
    the method registers them."""

    def __init__(self, folder, rank, t):
        self.path = os.path.join(folder, f"rank{rank}.h5")
        try:
            with open_h5(self.path, "a refsgd checkpoint rank file") as f:
                def read(name):
                    return read_array(f, name, advice=" (--resume); resume from an earlier checkpoint")
                self.state = {k: read(f"state/{k}") for k in f["state"]}
                self.schedule_state = read("schedule_state") if "schedule_state" in f else None
                self.records = {k: np.asarray(read(f"records/{k}"), dtype=np.float64) for k in f["records"]}
                evals, events = f.attrs["evals"], f.attrs.get("events", "[]")
                saved_t, saved_rank = int(f.attrs["t"]), int(f.attrs.get("rank", rank))
                segments = f.attrs.get("segments")    # None: format version 1
                checksum = f.attrs.get("sha256")
        except RefsgdError:
            raise
        except (KeyError, OSError, ValueError, TypeError) as e:
            raise RefsgdError(f"--resume: {self.path} is damaged ({type(e).__name__}: {e}); "
                              "resume from an earlier checkpoint") from None
        if saved_t != t or saved_rank != rank:
            raise RefsgdError(f"--resume: {self.path} belongs to iteration {saved_t} (rank {saved_rank}), "
                              f"the checkpoint to iteration {t} (rank {rank}): a stale or misplaced rank file")
        if checksum is None or digest(self.state, self.schedule_state, self.records, evals, events, t,
                                      segments) != checksum:
            raise RefsgdError(f"--resume: {self.path} is damaged (its content does not match its SHA-256 "
                              f"checksum); resume from an earlier checkpoint")
        bad = [k for k, v in self.state.items() if v.dtype.kind == "f" and np.any(np.isnan(v))]
        if bad:
            raise RefsgdError(f"--resume: {self.path} holds non-finite state ({', '.join(bad)}); resume from an "
                              "earlier checkpoint")
        self.records = {k: list(v) for k, v in self.records.items()}
        self.evals = json.loads(evals)
        self.events = json.loads(events)
        self.t = t
        if segments is None:  # version 1: one segment, timed by its iterations alone
            segments = json.dumps([{"iterations": [0, t], "wall_seconds": float(np.sum(self.records.get("wall", [])))}])
        self.segments = json.loads(segments)

    def fill(self, name, array):
        if name not in self.state:
            raise RefsgdError(f"{self.path}: no saved state {name!r} (saved: {', '.join(self.state)})")
        saved = self.state[name]
        if saved.shape != array.shape or saved.dtype != array.dtype:
            raise RefsgdError(f"{self.path}: state {name!r} is {saved.dtype} {saved.shape}, "
                              f"expected {array.dtype} {array.shape}")
        array[...] = saved
