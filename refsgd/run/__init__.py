"""The Run context: what every distributed method needs, written once.

The Run composes three objects, each with its own state: its clock (``run.clock``,
:class:`~refsgd.run.timing.Clock`: the iteration's timers, the communication in flight, the
``--timeline`` recorder, Numba's compiling left out of every time), its collectives
(``run.collectives``, :class:`~refsgd.run.collectives.Collectives`: the sums over ranks, the
requests in flight, the codec wires and the channels of a thread beside the loop, timed by the
clock) and its records (``run.records``, :class:`~refsgd.run.records.Records`); the Run itself
holds the loop and its bookkeeping at the boundaries (:mod:`refsgd.run.bookkeeping`), the data
stream and the registered state.
An algorithm's ``train(run)`` receives a :class:`Run` and uses

* ``run.comm`` (the communicator; with ``--link`` a real communicator whose all-reduces
  complete no earlier than the emulated link's model), ``run.rank``, ``run.world``;
* ``run.net`` (a pure function of the weights) and ``run.init_params()``;
* ``run.grad(w, g, on_segment=None)``: the gradient of this rank's next micro-batch at ``w``
  (timed as *compute*); ``run.accumulate(w, g_i, g_ij)`` the mean of the iteration's tau of them
  (SSGD's and LAGA's L1);
* ``with run.clock.idle(): comm.Allreduce(...)`` and ``run.collectives.wait(req)``: time spent
  blocked on communication (timed as *idle*; so is the MPI library's work to start a non-blocking
  collective, ``with run.clock.idle(): req = run.collectives.started(comm.Iallreduce(...))``:
  MPICH copies and reduces its first step there); ``run.collectives.started(req)`` notes when a
  request began, so the request's lifetime is recorded as *communication* time;
* ``run.optimizer()`` (the local optimizer U of the command line, its state registered),
  ``run.lr(t)``, ``run.tau``, ``run.cfg``;
* ``run.collectives.ring`` (``--allreduce ring``) and ``run.collectives.ring_sum(comm, x, out)``:
  every uncompressed sum over ranks as refsgd's Ring-AllReduce over point-to-point messages,
  blocking, the serial renderings' order (``allreduce_sum`` and ``average_model`` of
  ``run.collectives`` follow ``ring`` themselves, and so does ``req = run.collectives.iallreduce(comm,
  x, out, "L5 MPI_Iallreduce(x)")``, the non-blocking twin a listing's ``MPI_Iallreduce`` calls:
  its request, or None under ring, the sum then complete; ``run.collectives.wait(None)`` returns
  at once);
* ``build_run(cfg, comm)`` (refsgd.run.build) builds the Run of a resolved Config, the one way
  (the API, bench and the tests); ``run.collectives.open_wire()``'s codec wires close when the
  loop ends;
* ``with run.clock.codec():`` times compression and decompression on the computation path
  (*codec*), ``with run.clock.update():`` the method's update of its state and the scalings of its
  listing (*update*), the one way to mark a method's arithmetic;
* ``with run.beside(target, stop, fail):`` runs ``target`` in a thread beside the loop (Pipe-SGD's
  communication thread), ``run.collectives.thread_channel(dtype)`` its own communicator and ring,
  ``with run.collectives.thread_comm(label):`` its communication (in flight, a --timeline span);
  the Run starts, stops and joins the thread and frees its channel;
* ``run.on_settle(fn)``: ``fn()`` completes the method's communication in flight and brings its
  registered state to a consistent form; the run calls it before a trace record or a
  checkpoint (methods whose communication runs in a thread use it);
* ``run.register(name, array)``: algorithm state, updated in place; checkpoints save it and a
  resumed run fills it back when it is registered (see :mod:`refsgd.checkpoint`). A method
  whose requests span iterations must register their receive buffers: at a checkpoint the
  requests are completed first, and a resumed method finds the completed result there;
* ``run.event(what, **fields)``: a change of the method's regime (e.g. DASO's phases) at the
  current iteration: logged, kept in the checkpoints and written to the metrics file;
* ``run.control_comm``: the same communicator without the emulated link and the traffic
  counter, for bookkeeping (the loss checks, evaluation, a model average) that is not part of
  the method's communication;
* ``label=`` of ``run.grad``, the clock's ``idle``, ``codec`` and ``update`` and the collectives'
  ``started``, ``wait``, ``waitall`` and ``allreduce_sum`` (and ``data=``, the buffer a call
  sends): the listing line the call executes, as the method's ``# Ln`` comment cites it, for
  ``--timeline`` (:mod:`refsgd.timeline`), which records the spans of a window of iterations
  through these timing points; ``run.clock.span(kind, label)`` for work of the method's own
  threads, ``run.clock.in_flight(key, label)`` and ``run.clock.idle(awaits=key)`` for
  communication handed to another thread. Without ``--timeline`` the labels are not used;
* ``for t in run.iterations():``: the loop; at iteration boundaries it records the times and
  the loss, checks for a non-finite loss on all ranks, shows progress, evaluates the model
  given by ``run.set_model(fn)`` on the test set, and stops after the last iteration. An
  iteration's recorded wall time runs from its start to the end of that bookkeeping: wall -
  compute - idle - codec is everything else it cost. The evaluation and the checkpoint after
  it are recorded apart (``evaluate``, ``checkpoint``); its time with communication in flight
  (``comm``) is cut to [start, end] (a request spanning the boundary counts in both
  iterations); the seconds Numba spends compiling kernels (a first run) or loading them from
  its cache are taken out of every timer of the thread that does it, and out of the wall
  time, and recorded as ``compile`` (the first record holds those of the run's set-up and
  warm-up too; rank 0 says before the first compiling starts); the warm-up calls the network's
  and the update's kernels (refsgd.optim.warm and the method module's ``warm(dtype)``), so the
  typing of a kernel's first call in the process (about 1 ms, which no Numba event covers) is
  in no timed update;
* ``run.records.add("gradients", n)``: a method whose iteration consumes a varying number of
  micro-batch gradients (all workers; default tau x workers) says how many; an epoch is
  ``grads_per_epoch`` of them, and with ``by_gradients`` (PP-ASGD's threaded mode) ``--epochs``
  is a budget of gradients (``run.budget``), the iterations as many as it takes;
* ``run.grad_at`` (from gradient threads), ``run.clock.awaiting_gradients()`` (the loop's thread
  waiting for them, timed as compute) and ``run.add_loss``;
* ``run.records`` (:class:`~refsgd.run.records.Records`): what the run keeps of itself, for the
  metrics file, the checkpoints and the trace: ``iterations`` (per iteration: the times, loss,
  lr, traffic and a method's own values, ``run.records.add(name, value)``, e.g. PP-ASGD's
  staleness), ``evals``, ``events`` (``run.event``), ``segments`` (the processes that made the
  run, the first and each ``--resume``, their iterations and wall time), ``found`` (options the
  run found rather than was given, e.g. DASO's ranks per node), ``interrupted`` and, with
  ``--trace``, ``trace`` (``run.records.trace_batches(idx)`` for the batches of gradient threads).

Data: rank r's micro-batch k is row ``k % nb`` of ``epoch_batches(seed, k // nb, r, world,
batch, n)`` (nb micro-batches per epoch and rank), a continuous stream across epochs;
iteration t consumes micro-batches ``t*tau .. t*tau + tau - 1``.
"""

from .timing import (  # noqa: F401
    Clock,
    _CompileClock,
    prompt_handover,
)
from .collectives import Collectives  # noqa: F401
from .records import (  # noqa: F401
    Records,
    eval_schedule,
    FIELDS,
)
from .progress import (  # noqa: F401
    Progress,
)
from .context import (  # noqa: F401
    Run,
)
from .build import build_run  # noqa: F401
from refsgd.finite import NonFiniteLoss, _all_finite, _no_nan  # noqa: F401  (where they were)
