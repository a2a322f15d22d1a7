"""The Run's records (:class:`Records`, ``run.records``): what a run keeps of itself, for the
metrics file (refsgd.metrics), the checkpoints (refsgd.checkpoint) and the trace (refsgd.trace).
The boundary's work that fills them (the loss check, the evaluation, the checkpoint, the stop on
a signal) is :mod:`refsgd.run.bookkeeping`'s."""

import numpy as np

#: the per-iteration records of every run (a method may add its own with Records.add)
FIELDS = ("compute", "idle", "comm", "wall", "loss", "codec", "update", "global_bytes", "local_bytes", "lr",
          "compile", "evaluate", "checkpoint", "gradients")


class Records:
    """The records of a run: ``iterations`` (per iteration, this rank: the columns of FIELDS and a
    method's own, :meth:`add`), ``evals`` (the evaluations), ``events`` (a method's changes of
    regime, refsgd.run.Run.event), ``segments`` (the processes that made the trajectory: the first
    and each ``--resume``, [{"iterations": [first, last], "wall_seconds"}]), ``found`` (options
    the run found rather than was given, e.g. DASO's ranks per node: the trace names the layout its
    trajectory followed), ``interrupted`` (the signal's name when a signal stopped the loop) and,
    with --trace, ``trace`` (every iteration's state, batches, loss and lr). A checkpoint's
    ``restorer`` fills them back; ``gradients``: the micro-batch gradients an iteration consumes
    unless the method says otherwise (tau x workers); ``traffic``: the communicator's traffic
    counter, or None."""

    def __init__(self, gradients, tracing=False, traffic=None, restorer=None):
        self.iterations = {k: [] for k in FIELDS}
        self.evals = []
        self.events = []
        self.segments = []
        self.found = {}
        self.interrupted = None
        self.tracing = tracing
        self.trace = {"batches": [], "loss": [], "lr": [], "states": {}} if tracing else None
        self.batches = []          # this iteration's sample indices (--trace)
        self._gradients = float(gradients)
        self._extra = {}           # this iteration's values of the method (add)
        self._traffic, self._traffic_seen = traffic, (0, 0)
        if restorer is not None:
            rec = self.iterations
            rec.update({k: list(v) for k, v in restorer.records.items()})
            n = len(rec["wall"])
            # a field the checkpoint predates: zeros (gradients: what each iteration consumed then)
            rec["gradients"].extend([self._gradients] * (n - len(rec["gradients"])))
            for v in rec.values():
                v.extend([0.0] * (n - len(v)))
            self.segments = list(restorer.segments)
            self.evals = list(restorer.evals)
            self.events = list(restorer.events)

    def add(self, name, value):
        """A per-iteration value of the method (e.g. PP-ASGD's staleness): kept in the records,
        the checkpoints and the metrics file (/iterations/<name>); NaN where not given."""
        self._extra[name] = float(value)

    def trace_batches(self, batches):
        """The sample indices this iteration used, (tau, b), for --trace (with refsgd.run.Run.grad_at)."""
        if self.tracing:
            self.batches.extend(np.asarray(batches, dtype=np.int64))

    def append(self, seconds, loss, compile_seconds, lr, thread_compute=None):
        """Append an iteration: the clock's ``seconds`` (compute, idle, codec, update), its mean
        ``loss`` (NaN: no gradient here), its ``compile`` seconds, its ``lr``, the method's values
        and the traffic since the last; the wall time, the time in flight, the evaluation and the
        checkpoint are set at the end of the boundary (the loop's). Returns the gradients it consumed."""
        rec = self.iterations
        rec["wall"].append(0.0)
        rec["compute"].append(seconds["compute"])
        rec["idle"].append(seconds["idle"])
        rec["comm"].append(0.0)
        rec["loss"].append(loss)
        rec["codec"].append(seconds["codec"])
        rec["update"].append(seconds["update"])
        rec["compile"].append(compile_seconds)  # outside the times above (first runs only)
        rec["evaluate"].append(0.0)    # set after the boundary's evaluation and checkpoint, if any
        rec["checkpoint"].append(0.0)
        rec["lr"].append(lr)  # as used: a plateau schedule's lr depends on the run so far
        # the micro-batch gradients this iteration consumed, all workers (a method whose
        # iterations consume a varying number says so with add("gradients", n))
        rec["gradients"].append(self._extra.pop("gradients", self._gradients))
        if thread_compute is not None:
            self._extra["thread_compute"] = thread_compute
        if self._extra or len(rec) > len(FIELDS):  # the method's own records (add)
            for name in set(self._extra) | (set(rec) - set(FIELDS)):
                rec.setdefault(name, [np.nan] * (len(rec["wall"]) - 1)).append(self._extra.get(name, np.nan))
            self._extra = {}
        if self._traffic is not None:
            seen = (self._traffic.global_bytes, self._traffic.local_bytes)
            rec["global_bytes"].append(float(seen[0] - self._traffic_seen[0]))
            rec["local_bytes"].append(float(seen[1] - self._traffic_seen[1]))
            self._traffic_seen = seen
        else:
            rec["global_bytes"].append(0.0)
            rec["local_bytes"].append(0.0)
        return rec["gradients"][-1]

    def append_trace(self, lr, state, untraced, shape):
        """--trace: the iteration just appended: its batches (-1 of ``shape``, (tau, b), for a rank
        that computed no gradient: a server), loss, ``lr`` and the registered ``state`` but the
        names in ``untraced`` (copied)."""
        tr = self.trace
        tr["batches"].append(np.array(self.batches) if self.batches else np.full(shape, -1, dtype=np.int64))
        self.batches = []
        tr["loss"].append(self.iterations["loss"][-1])
        tr["lr"].append(lr)
        for name, arr in state.items():
            if name not in untraced:
                tr["states"].setdefault(name, []).append(arr.copy())


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
