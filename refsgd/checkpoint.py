"""Checkpoints: everything needed to continue a run as if it had never stopped.

Layout of ``--checkpoint DIR``::

    DIR/latest                 the name of the newest complete checkpoint (one line)
    DIR/ckpt-<t>/meta.json     method, model, world size, dtype, the configuration, t
    DIR/ckpt-<t>/rank<r>.h5    rank r's state: every array the method registered (weights,
                               optimizer buffers, ...), the schedule's state, the per-iteration
                               records and the evaluations so far

``t`` is the number of completed iterations. A checkpoint is written at an iteration boundary,
after the requests a method still has in flight are completed (their receive buffers are
registered state, so they are saved in their completed form). All ranks write into
``DIR/.tmp-ckpt-<t>``; after a barrier rank 0 renames it to ``ckpt-<t>`` and then replaces
``latest`` (write, then rename), so a crash never leaves a checkpoint that looks complete.

Nothing else is needed: the sampler is a pure function of (seed, epoch, rank, world, batch)
and the micro-batch position is ``t * tau``; the initial weights come from the seed; no other
random state exists.

``--resume DIR`` (the checkpoint root, whose ``latest`` is used, or one ``ckpt-<t>``) refuses a
checkpoint of another method, model, world size or trajectory-changing option, naming the
differences; the number of epochs / iterations, evaluation and logging may change.
"""

import json
import os
import shutil

import h5py
import numpy as np

from refsgd import RefsgdError

#: options that may differ between the run that wrote a checkpoint and the one resuming it
MAY_CHANGE = {"epochs", "iterations", "eval_every", "log_every", "progress", "out", "checkpoint",
              "checkpoint_every", "resume", "list", "link", "local_link", "poll"}


def _ckpt_dir(path):
    """The ckpt-<t> folder that ``path`` names (itself, or the one in path/latest)."""
    if not os.path.isdir(path):
        raise RefsgdError(f"--resume {path}: no such checkpoint folder")
    if os.path.isfile(os.path.join(path, "meta.json")):
        return path
    latest = os.path.join(path, "latest")
    if not os.path.isfile(latest):
        raise RefsgdError(f"--resume {path}: not a checkpoint (no meta.json and no 'latest' file)")
    with open(latest) as f:
        name = f.read().strip()
    d = os.path.join(path, name)
    if not os.path.isfile(os.path.join(d, "meta.json")):
        raise RefsgdError(f"--resume {path}: 'latest' names {name}, which is missing or incomplete")
    return d


def read_meta(path, config, world, num_params):
    """Validate a checkpoint against this run (every rank, before any collective); returns
    (folder, meta)."""
    d = _ckpt_dir(path)
    try:
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise RefsgdError(f"--resume {d}: unreadable meta.json ({e})") from None
    saved = meta.get("config", {})
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
    for r in range(world):
        if not os.path.isfile(os.path.join(d, f"rank{r}.h5")):
            raise RefsgdError(f"--resume {d}: rank{r}.h5 is missing")
    return d, meta


def save(run, root, config):
    """Collective: write a checkpoint of ``run`` after ``run.t + 1`` completed iterations."""
    comm = run.comm
    t = run.t + 1
    name = f"ckpt-{t}"
    tmp = os.path.join(root, f".tmp-{name}")
    if run.rank == 0:
        os.makedirs(root, exist_ok=True)
        if os.path.exists(tmp):
            shutil.rmtree(tmp)
        os.makedirs(tmp)
    comm.Barrier()
    with h5py.File(os.path.join(tmp, f"rank{run.rank}.h5"), "w") as f:
        st = f.create_group("state")
        for k, v in run.state.items():
            st.create_dataset(k, data=v)
        sched = getattr(run.schedule, "state", None)
        if sched is not None:
            f.create_dataset("schedule_state", data=sched)
        rec = f.create_group("records")
        for k, v in run.records.items():
            rec.create_dataset(k, data=np.asarray(v, dtype=np.float64))
        f.attrs["evals"] = json.dumps(run.evals)
        f.attrs["events"] = json.dumps(run.events)
        f.attrs["t"] = t
    comm.Barrier()
    if run.rank == 0:
        meta = dict(t=t, world_size=run.world, num_params=run.net.num_params, config=config,
                    dtype=run.net.dtype.name, state=sorted(run.state))
        with open(os.path.join(tmp, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True)
        final = os.path.join(root, name)
        if os.path.exists(final):
            shutil.rmtree(final)
        os.replace(tmp, final)
        with open(os.path.join(root, ".latest.tmp"), "w") as f:
            f.write(name + "\n")
        os.replace(os.path.join(root, ".latest.tmp"), os.path.join(root, "latest"))
    comm.Barrier()


class Restorer:
    """Rank r's saved state, handed to arrays as the method registers them."""

    def __init__(self, folder, rank):
        self.path = os.path.join(folder, f"rank{rank}.h5")
        with h5py.File(self.path, "r") as f:
            self.state = {k: f["state"][k][...] for k in f["state"]}
            self.schedule_state = f["schedule_state"][...] if "schedule_state" in f else None
            self.records = {k: list(f["records"][k][...]) for k in f["records"]}
            self.evals = json.loads(f.attrs["evals"])
            self.events = json.loads(f.attrs.get("events", "[]"))
            self.t = int(f.attrs["t"])

    def fill(self, name, array):
        if name not in self.state:
            raise RefsgdError(f"{self.path}: no saved state {name!r} (saved: {', '.join(self.state)})")
        saved = self.state[name]
        if saved.shape != array.shape or saved.dtype != array.dtype:
            raise RefsgdError(f"{self.path}: state {name!r} is {saved.dtype} {saved.shape}, "
                              f"expected {array.dtype} {array.shape}")
        array[...] = saved
