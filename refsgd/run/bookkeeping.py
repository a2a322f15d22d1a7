"""The Run's bookkeeping at iteration boundaries, functions of the run (its loop calls them):
the agreed loss check and the stop on a signal, the evaluation, the checkpoints, and the trace
file. What they fill is the run's :class:`~refsgd.run.records.Records`."""

import time

import numpy as np
from mpi4py import MPI

from refsgd.errors import Stopped
from refsgd import failure
from refsgd import checkpoint, trace
from refsgd.finite import NonFiniteLoss


def write_trace(run, path, config):
    """Collective: gather every rank's trace and write it (rank 0); see refsgd.trace."""
    tr = run.records.trace
    mine = dict(batches=np.array(tr["batches"]), loss=np.array(tr["loss"]),
                states={k: np.array(v) for k, v in tr["states"].items()})
    every = run.comm.gather(mine, root=0)
    if run.rank != 0:
        return
    # the arrays every rank has (a server's extra state, e.g. DC-ASGD's w_bak, is not traced)
    names = [k for k in every[0]["states"] if all(k in e["states"] for e in every)]
    states = {k: np.stack([e["states"][k] for e in every], axis=1) for k in names}
    trace.write(path, method=run.cfg.algo, source="mpi", config=config, net=run.net, data=run.data,
                w0=run.init_params(), batches=np.stack([e["batches"] for e in every], axis=1),
                loss=np.stack([e["loss"] for e in every], axis=1), lr=np.array(tr["lr"]), states=states,
                interrupted=run.records.interrupted)


def save_checkpoint(run):
    """Complete the requests still in flight, then write every rank's state (collective)."""
    if run._settle is not None:
        run._settle()
    run.collectives.complete_pending()
    segments = run.records.segments
    if segments:  # this process's segment so far, as the checkpoint keeps it
        segments[-1]["iterations"][1] = run.t + 1
        segments[-1]["wall_seconds"] = time.perf_counter() - run._run_start
    root, _, config, keep = run._checkpoint
    return checkpoint.save(run, root, config, keep)


#: "no rank saw a non-finite loss" in the check's MIN-reduction
NEVER = np.iinfo(np.int64).max


def check(run, t, last=False, lagged=False):
    """All ranks agree on the loss so far, stop together on a non-finite one, and stop
    together when a rank received SIGINT or SIGTERM (after a checkpoint, with --checkpoint).
    Returns the mean loss agreed on (None when no check has completed yet).

    The state itself is checked only where no next gradient follows: after the last iteration
    (``last``) and when a signal stops the run (a checkpoint checks it too); elsewhere a
    non-finite state shows in the next gradient's loss. (A pass over every state array at
    every check cost 1-2 % of mnist_mlp's compute.)

    ``lagged`` (communication in flight across the boundary: LAGA's all-reduce, Pipe-SGD's
    thread): the check's all-reduce is started here and completed at the next check, because a
    blocking one waits until the bytes in flight before it have crossed the link (one TCP
    stream between two ranks carries both: measured on scripts/cluster's link, LAGA's whole
    T_comm moved into this check and its overlap vanished). A non-finite loss or a signal then
    ends the run one check later; the stop itself comes after a blocking check of its own
    boundary, so no unchecked state is saved; the last boundary and a checkpoint's are never
    lagged."""
    before = _complete_lagged(run)
    signalled = 0
    if before is not None:
        first_bad, signalled, _ = before
        if first_bad < NEVER:
            _non_finite(run, first_bad)
        if signalled:
            lagged = False   # the stop comes at this boundary, after the check of its state below
    lo = max(0, t + 1 - run.cfg.log_every)
    losses = np.asarray(run.records.iterations["loss"][lo:t + 1], dtype=np.float64)
    seen = losses[~np.isnan(losses)]
    bad = run.first_bad if run.first_bad is not None else NEVER
    if bad == NEVER and (last or failure.requested()) and not run.state_finite():  # the last update went wrong
        bad = t
    # the first bad iteration (MIN) and the signal (MAX, as -MIN) of any rank
    mine = (np.array([float(np.sum(seen)), float(len(seen))]), np.array([bad, -failure.requested()], dtype=np.int64))
    sums, agreed = np.empty(2), np.empty(2, dtype=np.int64)
    comm = run.control_comm
    if lagged:
        with run.clock.idle("loss check MPI_Iallreduce (completed at the next check)"):
            reqs = [comm.Iallreduce(mine[0], sums, op=MPI.SUM), comm.Iallreduce(mine[1], agreed, op=MPI.MIN)]
        run._lagged_check = (reqs, mine, sums, agreed)   # mpi4py does not keep the buffers alive
        return None if before is None else before[2]
    with run.clock.idle("loss check MPI_Allreduce"):
        comm.Allreduce(mine[0], sums, op=MPI.SUM)
        comm.Allreduce(mine[1], agreed, op=MPI.MIN)
    first_bad, signum, mean = _agreed(sums, agreed)
    if first_bad < NEVER:
        _non_finite(run, first_bad)
    if signum or signalled:
        stop(run, t, signum or signalled)
    return mean


def _agreed(sums, agreed):
    """(the first non-finite iteration of any rank or NEVER, the signal of any rank or 0, the mean loss)."""
    return int(agreed[0]), int(-agreed[1]), sums[0] / max(sums[1], 1)


def _complete_lagged(run):
    """The lagged check started at an earlier boundary, completed (:func:`_agreed`), or None."""
    if run._lagged_check is None:
        return None
    reqs, _, sums, agreed = run._lagged_check
    with run.clock.idle("loss check MPI_Waitall (started at the previous check)"):
        MPI.Request.Waitall(reqs)
    run._lagged_check = None
    return _agreed(sums, agreed)


def _non_finite(run, first_bad):
    run.collectives.complete_pending()
    raise NonFiniteLoss(f"the loss or the weights became non-finite at iteration {first_bad}; lower the "
                        "learning rate (nothing non-finite was written)")


def stop(run, t, signum):
    """Every rank: a signal was agreed on at the boundary after iteration t."""
    failure.STOP.cancel()
    word, name = failure.describe(signum)
    saved = []
    if run._checkpoint is not None:
        path = save_checkpoint(run)
        written = [f for f in (run.cfg.out, run.cfg.trace) if f]   # written below: a rerun must replace them
        saved.append(f"checkpoint written to {path}; continue with --resume {run._checkpoint[0]}"
                     + (f" --force (the rerun replaces {' and '.join(written)}, written here)" if written else ""))
    run.collectives.complete_pending()
    # the run ends here: the --out and --trace files are written for the iterations done
    run.records.interrupted = name
    run.wall = time.perf_counter() - run._run_start
    segments = run.records.segments
    if segments:  # this process's segment ends here
        segments[-1]["iterations"][1] = t + 1
        segments[-1]["wall_seconds"] = run.wall
    if run._bar is not None:
        run._bar.close()
        run._bar = None
    raise Stopped(failure.exit_code(signum), f"{word} ({name}) after iteration {t + 1}", collective=True,
                  saved=saved)


def evaluate(run, t):
    """Mean training loss of the epoch and test loss/accuracy of the model, over all ranks."""
    if run._model is None:
        return
    w = run._model()
    x, y = run.data.x_test[run.rank::run.world], run.data.y_test[run.rank::run.world]
    loss, acc = run.net.evaluate(w, x, y) if len(y) else (0.0, 0.0)
    # the iterations of the last epoch of gradients (iters_per_epoch of them for a method
    # that consumes a fixed number per iteration)
    done = run.records.iterations
    consumed = np.cumsum(np.asarray(done["gradients"][:t + 1], dtype=np.float64))
    ep_lo = int(np.searchsorted(consumed, run.grads_done - run.grads_per_epoch, side="right"))
    tr = np.asarray(done["loss"][ep_lo:t + 1], dtype=np.float64)
    tr = tr[~np.isnan(tr)]
    buf = np.array([loss * len(y), acc * len(y), float(len(y)), float(np.sum(tr)), float(len(tr))])
    out = np.empty_like(buf)
    with run.clock.idle("evaluation MPI_Allreduce"):
        run.control_comm.Allreduce(buf, out, op=MPI.SUM)
    rec = dict(iteration=t + 1, epoch=run.epochs_done, train_loss=out[3] / max(out[4], 1),
               test_loss=out[0] / out[2], test_acc=out[1] / out[2],
               seconds=time.perf_counter() - run._run_start)
    run.records.evals.append(rec)
    if hasattr(run.schedule, "observe"):
        run.schedule.observe(rec["train_loss"])
    run.log(f"iter {t + 1:>6}  epoch {rec['epoch']:6.2f}  lr {run.lr(t):.4g}  train loss {rec['train_loss']:.4f}  "
             f"test loss {rec['test_loss']:.4f}  test acc {100 * rec['test_acc']:.2f}%  (elapsed {rec['seconds']:.1f} s)")
