"""``refsgd.train``: run any method from Python, as ``refsgd train`` does (the CLI calls it).

    import refsgd
    result = refsgd.train("laga-sgdm", model="digits_mlp", epochs=2, tau=2)   # mpiexec -n N python ...
    result.model           # the final model (flat weights), on every rank
    result.evals           # the evaluations: iteration, epoch, train_loss, test_loss, test_acc, seconds
    result.metrics         # {field: (ranks, iterations) array} on rank 0 (None elsewhere)

Every keyword is an option of ``refsgd train`` with ``-`` written ``_`` (``weight_decay=1e-4``,
``out="run.h5"``), its Python value checked against the option's type and range in the table of
:mod:`refsgd.options` (``epochs=0: expected a positive integer``; ``lr="0.1"`` is refused; no
argparse is involved); ``comm`` is the communicator whose
ranks are the workers (default ``MPI.COMM_WORLD``); ``log`` receives rank 0's lines (header,
evaluations, summary; None: silent); ``progress`` shows the bar or the status lines.

Every rank must call it with the same options: the ranks check their input before the first
collective and agree on it (options, model, dataset content), so a bad input raises the same
:class:`refsgd.AgreedError` on every rank, never a hang.
"""

import dataclasses
import hashlib
import json
import os
import warnings

import numpy as np

from refsgd import busy, checkpoint, datasets, mpilib, options, registry, timeline
from refsgd.errors import AgreedError, RefsgdError, Stopped
from refsgd.version import __version__
from refsgd.busy import ranks_on_node, set_threads
from refsgd.comm.link import Link
from refsgd.files import check_distinct, check_folder, check_output, same_path
from refsgd.nn import load_model
from refsgd.options import checks
from refsgd.optim import parse_schedule
from refsgd.trace import dataset_sha256

# Imported inside the functions below, never here (noqa "mpi4py"): mpi4py.MPI and the modules that
# import it at their top (refsgd.run, refsgd.metrics, refsgd.comm.linkcomm, the methods of
# refsgd.algorithms), because importing mpi4py.MPI starts MPI, and `refsgd golden` and
# `refsgd.train`'s keyword checks use this module before (or without) any MPI.


@dataclasses.dataclass
class Result:
    """What a training run returns (on every rank unless said otherwise)."""

    model: np.ndarray           # the final model, the one evaluated (None if the method has none)
    net: object                 # the network (refsgd.nn.Network): net.loss_and_grad(model, x, y), ...
    evals: list                 # one dict per evaluation
    events: list                # the method's regime changes (e.g. DASO's phases)
    metrics: dict               # {field: (world, T) float64} of every rank, on rank 0; None elsewhere
    config: dict                # the configuration recorded in every output
    wall: float                 # seconds of the training loop
    threads: int                # BLAS / Numba threads of this rank


def train(algo="ssgd", *, comm=None, log=print, progress=False, **opts):
    """Train with method ``algo`` (see the module docstring); returns a :class:`Result`."""
    return run(options.from_keywords(dict(opts, algo=algo, progress=progress)), comm, log)


def run(given, comm=None, log=print):
    """Train with the configuration ``given`` (a :class:`refsgd.options.Config`, as given: the
    method's defaults are filled and its options checked here, on every rank; collective). NumPy's
    floating-point warnings are silenced: refsgd detects a non-finite loss or state itself and
    stops every rank with one message (NonFiniteLoss)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return _run(given, comm, log)


def _run(given, comm, log):
    from mpi4py import MPI  # noqa: PLC0415 mpi4py

    from refsgd.comm.linkcomm import Traffic, wrap  # noqa: PLC0415 mpi4py
    from refsgd.algorithms import warm_of  # noqa: PLC0415 mpi4py
    from refsgd.run import build_run  # noqa: PLC0415 mpi4py

    world_comm = MPI.COMM_WORLD if comm is None else comm
    if not isinstance(world_comm, MPI.Intracomm) or world_comm == MPI.COMM_NULL:
        shown = "MPI.COMM_NULL" if isinstance(comm, MPI.Comm) and comm == MPI.COMM_NULL else repr(comm)
        raise RefsgdError(f"comm={shown}: expected an mpi4py intracommunicator whose ranks are the workers "
                          "(e.g. MPI.COMM_WORLD or one of its Split()s), or None for MPI.COMM_WORLD")
    rank = world_comm.Get_rank()
    say = (lambda line: None) if log is None else log
    load_before = busy.load_average()
    cfg, algo, link, net, data, schedule, restorer = on_every_rank(
        world_comm, lambda: prepare(given, world_comm), lambda p: fingerprint(p[0], p[3], p[4]))
    threads = set_threads(world_comm, cfg.blas_threads)
    unfinished = []
    if rank == 0 and cfg.checkpoint:
        if cfg.force and holds_other_run(cfg):
            checkpoint.clear(cfg.checkpoint)  # --force: this folder now belongs to this run
        unfinished = checkpoint.remove_unfinished(cfg.checkpoint)  # left by a kill -9 while writing one
    comm = wrap(world_comm, link, traffic=Traffic())  # delayed by --link if given, its payload counted
    recorded = options.config(cfg)
    ckpt = (cfg.checkpoint, cfg.checkpoint_every, recorded, cfg.keep_checkpoints) if cfg.checkpoint else None
    r = build_run(cfg, comm, net=net, data=data, schedule=schedule, log=say, restorer=restorer, checkpoint=ckpt,
                  warm=warm_of(cfg.algo))
    for line in header(cfg, r, net, data, schedule, link, threads):
        r.log(line)
    crowded = busy.note(load_before, ranks_on_node(world_comm), threads, world=world_comm.Get_size())
    if crowded:
        r.log(f"  note: {crowded}")
    if restorer:
        r.log(f"  resumed from {restorer.path.rsplit(os.sep, 1)[0]} at iteration {r.t}")
    if unfinished:
        r.log(f"  removed from {cfg.checkpoint} the unfinished checkpoint(s) {', '.join(unfinished)}, left by a run "
              "killed while writing them")
    try:
        algo(r)
    except Stopped as stop:  # a signal, agreed on by every rank at the same boundary
        if not stop.collective:
            raise
        # the iterations done are written as a finished run's, marked interrupted
        _outputs(cfg, r, recorded, link, threads, say, load_before, summary=False)
        stop.saved += [f"{what} of the {r.t + 1} iterations done written to {path} (marked interrupted)"
                       for what, path in (("metrics", cfg.out), ("trace", cfg.trace)) if path]
        raise
    return _outputs(cfg, r, recorded, link, threads, say, load_before)


def _outputs(cfg, r, recorded, link, threads, say, load_before, summary=True):
    """Collective: the final model, the --trace file, the summary and the --out file."""
    from refsgd import metrics  # noqa: PLC0415 mpi4py
    from refsgd.run.bookkeeping import write_trace  # noqa: PLC0415 mpi4py
    model = r.final_model()  # on every rank: it may be a collective (an average of the workers)
    load_after = busy.load_average()
    if cfg.trace:
        write_trace(r, cfg.trace, {**recorded, **r.records.found})
        if summary:
            r.log(f"trace written to {cfg.trace}")
    gathered = metrics.gather(r)
    spans = timeline_gather(r)
    rec = None
    if r.rank == 0:
        rec, nodes = gathered
        shown = link_text(cfg, link)
        if summary:
            say(metrics.summary(r.records.evals, rec, metrics.total_wall(r.records.segments), shown,
                                batch=cfg.batch, segments=r.records.segments))
        if cfg.out:
            metrics.write(cfg.out, r, rec, nodes, recorded, shown, model=model, threads=threads,
                          load=(load_before, load_after), timeline=spans)
            if summary:
                say(f"metrics written to {cfg.out}")
    return Result(model=None if model is None else np.array(model), net=r.net, evals=list(r.records.evals),
                  events=list(r.records.events), metrics=rec, config=recorded, wall=r.wall, threads=threads)


def timeline_gather(run):
    """Collective with --timeline: every rank's spans on rank 0 (None without one)."""
    if not run.clock.timeline.enabled:
        return None
    return timeline.gather(run.control_comm, run.clock.timeline)


#: what an option left unset (None) means, as the header says it
UNSET = {"ranks_per_node": "from shared memory", "local_link": "the real network",
         "staleness": "measured (threaded)"}


def header(cfg, run, net, data, schedule, link, threads):
    """The lines that open a run: what runs, and every hyperparameter that shapes it."""
    own = options.APPLIES[cfg.algo]
    hyper = [f"lr {cfg.lr:g} ({options.lr_meaning(cfg.algo)})", f"schedule {schedule.describe()}"]
    for k in own:
        v = getattr(cfg, k)
        if k == "momentum_form" and not cfg.momentum:
            continue
        shown = (UNSET.get(k, "none") if v is None else ("on" if v else "off") if isinstance(v, bool)
                 else f"{v:g}" if isinstance(v, float) else v)
        hyper.append(f"{k.replace('_', ' ')} {shown}")
    update = registry.method(cfg.algo).update_note
    if update:
        hyper.append(update)
    lines = [f"refsgd {__version__}: {cfg.algo} on {run.world} rank(s), {net.name} ({net.num_params:,d} parameters, "
             f"{net.dtype.name}), {data.name} ({len(data.y_train)} train / {len(data.y_test)} test)",
             f"  batch {cfg.batch} x tau {run.tau} per worker, {_length(run)}, seed {cfg.seed}, "
             f"{threads} BLAS/Numba thread(s) per rank",
             "  " + "; ".join(hyper)]
    if cfg.algo in options.POLLED and run.world > 1:
        lines.append("  requests in flight tested after every layer of the forward and backward pass (--poll)" if cfg.poll
                     else "  requests in flight left to the MPI library's own progress (--no-poll)")
    if link:
        lines.append(f"  {link} -- EMULATED, not the real network")
    note = options.one_worker_note(cfg.algo, run.world)
    if note:
        lines.append(f"  {note} (3 or more ranks give it several workers)")
    return lines


def _length(run):
    """How long the run is, as the header says it."""
    if run.budget is None:
        return f"{run.iters_per_epoch} iterations per epoch, {run.total} iterations"
    return (f"an epoch is {run.grads_per_epoch:,d} micro-batch gradients, {run.cfg.epochs} epoch(s) "
            f"= {run.budget:,d} gradients, in as many iterations (updates) as they take")


def link_text(cfg, link):
    """The link as the summary and the metrics file name it (DASO: both tiers)."""
    if not cfg.local_link:
        return link
    return (f"between nodes: {link or 'the real network'}; within nodes: "
            f"{Link.parse(cfg.local_link, '--local-link')}")


# ---------------------------------------------------------------------------- before the first collective
def method(given, world):
    """The configuration ``given`` resolved (refsgd.options.resolve: the method's defaults) and
    checked (the method's own check); returns it."""
    registry.method(given.algo)  # an unknown name: one error with a did-you-mean
    cfg = options.resolve(given)
    if cfg.momentum >= 1:
        raise RefsgdError(f"--momentum must be in [0, 1), got {cfg.momentum}")
    if cfg.nesterov and not cfg.momentum:  # checked here, before the first collective
        raise RefsgdError(f"--nesterov needs --momentum > 0 (Nesterov's look-ahead is along the momentum), got "
                          f"momentum {cfg.momentum:g}")
    checks.check(cfg, world)   # MPI-free: refsgd golden calls this too
    return cfg


def prepare(given, comm):
    """Everything that can fail on bad input, done identically on every rank before any
    collective: (the resolved configuration, the method's train function, link, net, data,
    schedule, restorer)."""
    from refsgd.algorithms import check_mpi, check_sizes, train_of  # noqa: PLC0415 mpi4py

    world = comm.Get_size()
    cfg = method(given, world)
    check_mpi(cfg.algo, cfg, world)
    m = registry.method(cfg.algo)
    link = None
    if cfg.link is not None:  # --link '' is refused, not taken for no link
        link = Link.parse(cfg.link)
    if cfg.local_link is not None:
        Link.parse(cfg.local_link, "--local-link")
    dtype = np.dtype(cfg.dtype)
    net = load_model(cfg.model, dtype=dtype)
    data = datasets.load(cfg.data, dtype=dtype)
    datasets.check_fits(data, net.input_shape, net.num_classes, model=net.name)
    if len(data.y_test) == 0:
        raise RefsgdError(f"dataset {data.name} has no test samples: refsgd train evaluates the model on the test set")
    ipe = m.iterations_per_epoch(cfg, len(data.y_train), world - m.servers)
    schedule = parse_schedule(cfg.schedule, cfg.lr, ipe)
    # the run's iterations (None: --epochs of gradients, in as many iterations as they take)
    total = cfg.iterations or (None if m.counts_gradients(cfg) else cfg.epochs * ipe)
    check_sizes(cfg.algo, cfg, net, total)
    if cfg.checkpoint_every and not cfg.checkpoint:
        raise RefsgdError("--checkpoint-every needs --checkpoint DIR")
    if cfg.checkpoint and not cfg.checkpoint_every:
        raise RefsgdError("--checkpoint DIR needs --checkpoint-every K")
    if cfg.resume == "auto":
        cfg = dataclasses.replace(cfg, resume=checkpoint.auto_resume(cfg.checkpoint))
    if cfg.trace and cfg.resume:
        raise RefsgdError("--trace records a run from its first step: it cannot be combined with --resume")
    check_outputs(cfg)
    if cfg.timeline is not None:  # '' too: refused, not taken for no timeline
        timeline.parse_spec(cfg.timeline)
        if not cfg.out:
            raise RefsgdError("--timeline needs --out RUN.h5: the spans are written into the metrics file")
    restorer = None
    if cfg.resume:
        folder, meta = checkpoint.read_meta(cfg.resume, options.config(cfg), world, net.num_params,
                                            data_sha256=dataset_sha256(data, dtype, test=True),
                                            total=total)
        restorer = checkpoint.Restorer(folder, comm.Get_rank(), meta["t"])
    return cfg, train_of(cfg.algo), link, net, data, schedule, restorer


def check_outputs(cfg):
    """Every output of `train` can be written, collides with no input or other output, and
    replaces no file and no other run's checkpoints unless --force (before any work)."""
    model_file = cfg.model if os.path.isfile(cfg.model) else None
    check_distinct([("--data", cfg.data), ("--model", model_file), ("--resume", cfg.resume)],
                   [("--out", cfg.out), ("--trace", cfg.trace)])
    # --checkpoint may be the folder --resume reads (the run goes on there)
    check_distinct([("--data", cfg.data), ("--model", model_file), ("--out", cfg.out), ("--trace", cfg.trace)],
                   [("--checkpoint", cfg.checkpoint)])
    for flag, path in (("--out", cfg.out), ("--trace", cfg.trace)):
        if path:
            check_output(path, flag, cfg.force)
    if cfg.checkpoint:
        check_folder(cfg.checkpoint, "--checkpoint")
        if holds_other_run(cfg) and not cfg.force:
            hint = checkpoint.resume_hint(cfg.checkpoint)
            raise RefsgdError(f"--checkpoint {cfg.checkpoint} holds the checkpoints of another run; "
                              + (f"continue that run with {hint}, " if hint else "")
                              + "choose another folder, or give --force to replace them")
        for flag, path in (("--data", cfg.data), ("--model", model_file)):
            if path and same_path(os.path.dirname(os.path.abspath(path)), cfg.checkpoint):
                raise RefsgdError(f"{flag} {path} is inside --checkpoint {cfg.checkpoint}, whose content refsgd "
                                  "replaces")


def holds_other_run(cfg):
    """Whether --checkpoint holds checkpoints that are not the ones this run resumes from."""
    root = cfg.checkpoint
    if not root or not (checkpoint.checkpoints(root) or os.path.exists(os.path.join(root, "latest"))):
        return False
    return not (cfg.resume and (same_path(cfg.resume, root) or
                                 same_path(os.path.dirname(os.path.abspath(cfg.resume)), root)))


# ---------------------------------------------------------------------------- the ranks agree
def on_every_rank(comm, prepare_fn, fingerprint_fn=None):
    """prepare_fn() on every rank, and its result; AgreedError on every rank if it raised a
    RefsgdError anywhere, or if the ranks' fingerprint_fn(prepared) differ (ranks launched with
    different options, models or data). These are the first collectives, so a bad input never
    leaves a rank waiting in another. A launch that MPI left as worlds of one is refused first."""
    from mpi4py import MPI  # noqa: PLC0415 mpi4py
    if comm == MPI.COMM_WORLD:  # (refsgd compile trains in MPI_COMM_SELF, a world of its own)
        mpilib.refuse_singleton()
    try:
        prepared, err = prepare_fn(), None
    except RefsgdError as e:
        prepared, err = None, str(e)
    errors = comm.allgather(err)
    if any(errors):
        raise AgreedError(agreed_message(errors))
    if fingerprint_fn is not None:
        differ = _differences(comm.allgather(fingerprint_fn(prepared)))
        if differ:
            raise AgreedError("the ranks were launched with different settings, so their replicas would not be "
                              "the same run: " + "; ".join(differ))
    return prepared


def agreed_message(errors):
    """The first error of the ranks' errors, and the ranks it (or another) came from."""
    bad = [r for r, e in enumerate(errors) if e]
    first = errors[bad[0]]
    return first + ("" if len(bad) == len(errors) else f" (on rank(s) {ranges(bad)})")


def fingerprint(cfg, net, data):
    """What every rank of a run must agree on: every option (paths of the data and a model spec
    excepted, which may differ between nodes), the model and the dataset's content."""
    opts = {k: v for k, v in cfg.asdict().items() if k not in ("data", "model", "progress")}
    model = f"{net.name} ({net.num_params:,d} parameters, spec {_sha(json.dumps(net.spec, sort_keys=True))})"
    content = dataset_sha256(data, net.dtype, test=True)
    return dict(options=opts, model=model, data=f"{cfg.data or 'the embedded digits'} (sha256 {content[:12]})",
                data_sha=content, version=__version__)


def _sha(text):
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _differences(prints):
    """Human-readable differences between the ranks' fingerprints (empty when they agree)."""
    def by_value(values):
        groups = {}
        for r, v in enumerate(values):
            groups.setdefault(repr(v), []).append(r)
        return groups

    def shown(values, fmt):
        groups = by_value(values)
        return ", ".join(f"{fmt(values[ranks[0]])} on rank(s) {ranges(ranks)}" for ranks in groups.values())

    out = []
    keys = sorted(set().union(*(p["options"] for p in prints)))
    for k in keys:
        values = [p["options"].get(k) for p in prints]
        if len(by_value(values)) > 1:
            out.append(f"--{k.replace('_', '-')} is " + shown(values, repr))
    for key, what in (("model", "the model is"), ("data_sha", "the dataset is"), ("version", "refsgd is")):
        values = [p[key] for p in prints]
        if len(by_value(values)) > 1:
            shown_key = "data" if key == "data_sha" else key
            out.append(what + " " + shown([p[shown_key] for p in prints], str))
    return out


def ranges(ranks):
    """[0, 1, 2, 5] -> '0-2, 5'."""
    out, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            out.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ", ".join(out)

