"""The Run's bookkeeping at iteration boundaries: the fields recorded per iteration, the
evaluation schedule, the trace, the agreed loss check, the stop on a signal, the checkpoints."""

import time

import numpy as np
from mpi4py import MPI

from refsgd.errors import Stopped
from refsgd import failure
from refsgd import checkpoint, trace
from refsgd.finite import NonFiniteLoss, _all_finite, _no_nan


class Bookkeeping:
    """The Run's bookkeeping at iteration boundaries: the records of each iteration, the
    trace, the agreed loss check and stop on a signal, the checkpoints and the evaluation; mixed
    into :class:`Run`."""

    def _record(self):
        """Append this iteration's times, loss, the method's records and the traffic (its wall
        time, idle time and communication are set at the end of the boundary, the loop's)."""
        rec, seconds = self.records, self.clock.seconds
        rec["wall"].append(0.0)
        rec["compute"].append(seconds["compute"])
        rec["idle"].append(seconds["idle"])
        rec["comm"].append(0.0)
        rec["loss"].append(self._loss / self._nloss if self._nloss else np.nan)  # nan: no gradient here
        rec["codec"].append(seconds["codec"])
        rec["update"].append(seconds["update"])
        rec["compile"].append(self.clock.compiling.take())  # outside the times above (first runs only)
        rec["evaluate"].append(0.0)    # set after the boundary's evaluation and checkpoint, if any
        rec["checkpoint"].append(0.0)
        rec["lr"].append(self.lr(self.t))  # as used: a plateau schedule's lr depends on the run so far
        # the micro-batch gradients this iteration consumed, all workers (a method whose
        # iterations consume a varying number says so with record("gradients", n))
        rec["gradients"].append(self._extra.pop("gradients", float(self.tau * self.workers)))
        self.grads_done += rec["gradients"][-1]
        if self._thread_compute is not None:
            with self._lock:
                self._extra["thread_compute"], self._thread_compute = self._thread_compute, 0.0
        if self._extra or len(rec) > len(FIELDS):  # the method's own records (Run.record)
            for name in set(self._extra) | (set(rec) - set(FIELDS)):
                rec.setdefault(name, [np.nan] * (len(rec["wall"]) - 1)).append(self._extra.get(name, np.nan))
            self._extra = {}
        if self.traffic is not None:
            seen = (self.traffic.global_bytes, self.traffic.local_bytes)
            rec["global_bytes"].append(float(seen[0] - self._traffic_seen[0]))
            rec["local_bytes"].append(float(seen[1] - self._traffic_seen[1]))
            self._traffic_seen = seen
        else:
            rec["global_bytes"].append(0.0)
            rec["local_bytes"].append(0.0)

    def _record_trace(self, t):
        if self._settle is not None:
            self._settle()
        self.collectives.complete_pending()  # receive buffers in flight are registered state: recorded completed
        tr = self.trace
        if self._iter_batches:
            tr["batches"].append(np.array(self._iter_batches))
        else:  # a server computes no gradient: -1 marks "no batch"
            tr["batches"].append(np.full((self.tau, self.cfg.batch), -1, dtype=np.int64))
        self._iter_batches = []
        tr["loss"].append(self.records["loss"][-1])
        tr["lr"].append(self.lr(t))
        for name, arr in self.state.items():
            if name not in self._untraced:
                tr["states"].setdefault(name, []).append(arr.copy())

    def write_trace(self, path, config):
        """Collective: gather every rank's trace and write it (rank 0); see refsgd.trace."""
        tr = self.trace
        mine = dict(batches=np.array(tr["batches"]), loss=np.array(tr["loss"]),
                    states={k: np.array(v) for k, v in tr["states"].items()})
        every = self.comm.gather(mine, root=0)
        if self.rank != 0:
            return
        # the arrays every rank has (a server's extra state, e.g. DC-ASGD's w_bak, is not traced)
        names = [k for k in every[0]["states"] if all(k in e["states"] for e in every)]
        states = {k: np.stack([e["states"][k] for e in every], axis=1) for k in names}
        trace.write(path, method=self.cfg.algo, source="mpi", config=config, net=self.net, data=self.data,
                    w0=self.init_params(), batches=np.stack([e["batches"] for e in every], axis=1),
                    loss=np.stack([e["loss"] for e in every], axis=1), lr=np.array(tr["lr"]), states=states,
                    interrupted=self.interrupted)

    def save_checkpoint(self):
        """Complete the requests still in flight, then write every rank's state (collective)."""
        if self._settle is not None:
            self._settle()
        self.collectives.complete_pending()
        if self.segments:  # this process's segment so far, as the checkpoint keeps it
            self.segments[-1]["iterations"][1] = self.t + 1
            self.segments[-1]["wall_seconds"] = time.perf_counter() - self._run_start
        root, _, config, keep = self._checkpoint
        return checkpoint.save(self, root, config, keep)

    def _check(self, t, last=False):
        """All ranks agree on the loss so far, stop together on a non-finite one, and stop
        together when a rank received SIGINT or SIGTERM (after a checkpoint, with --checkpoint).

        The state itself is checked only where no next gradient follows: after the last iteration
        (``last``) and when a signal stops the run (a checkpoint checks it too); elsewhere a
        non-finite state shows in the next gradient's loss. (A pass over every state array at
        every check cost 1-2 % of mnist_mlp's compute.)"""
        lo = max(0, t + 1 - self.cfg.log_every)
        losses = np.asarray(self.records["loss"][lo:t + 1], dtype=np.float64)
        seen = losses[~np.isnan(losses)]
        never = np.iinfo(np.int64).max
        bad = self.first_bad if self.first_bad is not None else never
        if bad == never and (last or failure.requested()) and not self.state_finite():  # the last update went wrong
            bad = t
        sums, agreed = np.empty(2), np.empty(2, dtype=np.int64)
        with self.clock.idle("loss check MPI_Allreduce"):
            self.control_comm.Allreduce(np.array([float(np.sum(seen)), float(len(seen))]), sums, op=MPI.SUM)
            # the first bad iteration (MIN) and the signal (MAX, as -MIN) of any rank
            self.control_comm.Allreduce(np.array([bad, -failure.requested()], dtype=np.int64), agreed, op=MPI.MIN)
        first_bad, signum = int(agreed[0]), int(-agreed[1])
        if first_bad < never:
            self.collectives.complete_pending()
            raise NonFiniteLoss(f"the loss or the weights became non-finite at iteration {first_bad}; lower the "
                                "learning rate (nothing non-finite was written)")
        if signum:
            self._stop(t, signum)
        return sums[0] / max(sums[1], 1)

    def state_finite(self):
        """Whether this rank's state is valid: the traced arrays (the worker's state of the
        listing) finite, the bookkeeping arrays free of NaN (they may hold an infinite "best so far")."""
        return all(_no_nan(v.reshape(-1)) if name in self._untraced else _all_finite(v.reshape(-1))
                   for name, v in self.state.items() if v.dtype.kind == "f")

    def _stop(self, t, signum):
        """Every rank: a signal was agreed on at the boundary after iteration t."""
        failure.STOP.cancel()
        word, name = failure.describe(signum)
        saved = []
        if self._checkpoint is not None:
            path = self.save_checkpoint()
            written = [f for f in (self.cfg.out, self.cfg.trace) if f]   # written below: a rerun must replace them
            saved.append(f"checkpoint written to {path}; continue with --resume {self._checkpoint[0]}"
                         + (f" --force (the rerun replaces {' and '.join(written)}, written here)" if written else ""))
        self.collectives.complete_pending()
        # the run ends here: the --out and --trace files are written for the iterations done
        self.interrupted = name
        self.wall = time.perf_counter() - self._run_start
        if self.segments:  # this process's segment ends here
            self.segments[-1]["iterations"][1] = t + 1
            self.segments[-1]["wall_seconds"] = self.wall
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        raise Stopped(failure.exit_code(signum), f"{word} ({name}) after iteration {t + 1}", collective=True,
                      saved=saved)

    def evaluate(self, t):
        """Mean training loss of the epoch and test loss/accuracy of the model, over all ranks."""
        if self._model is None:
            return
        w = self._model()
        x, y = self.data.x_test[self.rank::self.world], self.data.y_test[self.rank::self.world]
        loss, acc = self.net.evaluate(w, x, y) if len(y) else (0.0, 0.0)
        # the iterations of the last epoch of gradients (iters_per_epoch of them for a method
        # that consumes a fixed number per iteration)
        consumed = np.cumsum(np.asarray(self.records["gradients"][:t + 1], dtype=np.float64))
        ep_lo = int(np.searchsorted(consumed, self.grads_done - self.grads_per_epoch, side="right"))
        tr = np.asarray(self.records["loss"][ep_lo:t + 1], dtype=np.float64)
        tr = tr[~np.isnan(tr)]
        buf = np.array([loss * len(y), acc * len(y), float(len(y)), float(np.sum(tr)), float(len(tr))])
        out = np.empty_like(buf)
        with self.clock.idle("evaluation MPI_Allreduce"):
            self.control_comm.Allreduce(buf, out, op=MPI.SUM)
        rec = dict(iteration=t + 1, epoch=self.epochs_done, train_loss=out[3] / max(out[4], 1),
                   test_loss=out[0] / out[2], test_acc=out[1] / out[2],
                   seconds=time.perf_counter() - self._run_start)
        self.evals.append(rec)
        if hasattr(self.schedule, "observe"):
            self.schedule.observe(rec["train_loss"])
        self.log(f"iter {t + 1:>6}  epoch {rec['epoch']:6.2f}  lr {self.lr(t):.4g}  train loss {rec['train_loss']:.4f}  "
                 f"test loss {rec['test_loss']:.4f}  test acc {100 * rec['test_acc']:.2f}%  (elapsed {rec['seconds']:.1f} s)")


def eval_schedule(every, iters_per_epoch, grads_per_epoch=None):
    """--eval-every ("E" epochs or "Nit" iterations, or an int of epochs) -> due(done, before,
    after): whether to evaluate after ``done`` iterations, the gradients consumed having gone
    from ``before`` to ``after`` in the last one. Epochs count gradients (``grads_per_epoch`` a
    epoch; without it, ``iters_per_epoch`` iterations): every E epochs is at the iteration that
    crosses a multiple of E epochs of gradients (with a fixed number per iteration, every E x
    iters_per_epoch iterations)."""
    text = str(every)
    if text.endswith("it"):
        n = int(text[:-2])
        return lambda done, before=None, after=None: done % n == 0
    if grads_per_epoch is None:
        n = int(text) * iters_per_epoch
        return lambda done, before=None, after=None: done % n == 0
    n = int(text) * grads_per_epoch
    return lambda done, before, after: int(after // n) > int(before // n)

#: the per-iteration records of every run (a method may add its own with Run.record)
FIELDS = ("compute", "idle", "comm", "wall", "loss", "codec", "update", "global_bytes", "local_bytes", "lr",
          "compile", "evaluate", "checkpoint", "gradients")
