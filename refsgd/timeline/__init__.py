"""The timeline of a run (``refsgd train --timeline [SPEC] --out run.h5``): the spans of a window
of iterations on every rank and in every thread, each named by the listing line it executes.

Modules: :mod:`.recording` (:class:`Timeline`), :mod:`.file` (in the metrics file), :mod:`.chrome`
(Trace Event Format), :mod:`.gantt` (the chart); this package re-exports them.

Recording (:class:`Timeline`, owned by the Run's clock, ``run.clock.timeline``). Its timing points record
the spans while an iteration of the window runs (``active``) and nothing otherwise, so the
number of spans is bounded by the window, not by the run's length; a thread of the method (the
communication thread of Pipe-SGD, the gradient threads of PP-ASGD and ASGD) records into the
same list, with its own thread. A span is ``(start, end, kind, label, iteration, bytes, thread)``:

* kinds (:data:`KINDS`): ``iteration`` (the whole iteration on the thread that runs the loop,
  its boundary bookkeeping included), ``compute`` (a forward and backward pass; per layer where
  the method tests its requests between layers, ``--poll``), ``idle`` (blocked on communication:
  a blocking MPI call, posting a non-blocking one, a Wait, waiting for another thread's
  communication), ``codec`` (compression and decompression), ``update`` (the method's update),
  ``mpi`` (an MPI call that is not idle: a poll's ``MPI_Test``), ``comm`` (a collective that a
  communication thread carries out), ``flight`` (communication in flight: a request from its
  posting to its observed completion, a blocking call while it runs, Pipe-SGD's hand-over of
  g^c_local[t] (L10) to the arrival of its sum (L3)), ``link`` (``--link``: the emulated link's
  modelled transfer), ``evaluate`` and ``checkpoint`` (between iterations);
* label: the listing line as the code's ``# Ln`` comments cite it, e.g. ``L5 MPI_Iallreduce(dw_i)``
  (the run's own bookkeeping: ``loss check MPI_Allreduce``, ``evaluation``, ``checkpoint``);
* iteration: the run's iteration t (Pipe-SGD's communication thread: the t of the all-reduce);
* bytes: a collective's or message's payload (the send buffer), 0 otherwise.

Clocks. Spans are timed with ``time.perf_counter`` (the run's timers), mapped to ``MPI.Wtime``
(both read back to back) and then to rank 0's ``MPI.Wtime``: unless ``MPI_WTIME_IS_GLOBAL``,
each rank measures its offset against rank 0 with ping-pongs before the loop (the round trip
with the smallest time gives the offset, half of it bounds the error) and again after it (the
change is the clocks' drift over the run). Times in the file are seconds from rank 0's clock
at the start of the loop.

SPEC (:func:`parse_spec`): ``START:COUNT`` (iterations START .. START+COUNT-1; ``it100:5`` is
the same as ``100:5``), ``START`` (COUNT = 5) or ``:COUNT``; default ``3:5``, a few iterations
after the first epoch's start, past the first iterations where Numba compiles or loads its
kernels and the caches fill (after a --resume: 3 iterations after the resumed one). A window
past the run's end is moved back to fit, one before a --resume's first iteration forward.

File (in the metrics file, :mod:`refsgd.metrics`, format version 4): the group ``/timeline``
with one-dimensional datasets ``start``, ``end`` (float64 seconds), ``rank``, ``thread`` (index
into the rank's entry of the attribute ``threads``; -1 the requests in flight, -2 the link),
``kind`` (index into ``kinds``), ``label`` (index into ``labels``), ``iteration``, ``bytes``
(int64), and attributes ``kinds``, ``labels``, ``threads`` (JSON), ``window`` ([start, count]),
``clock`` (JSON, per rank: ``offset_s``, ``error_s``, ``drift_s``, ``method``), ``truncated``.

Export: :func:`chrome_trace` (``refsgd report run.h5 --timeline out.json``, the Trace Event
Format of Perfetto and speedscope) and :func:`gantt` (``--timeline-plot t.png``).
"""

from .recording import (  # noqa: F401
    KINDS,
    FLIGHT,
    LINK,
    DEFAULT_START,
    DEFAULT_COUNT,
    MAX_COUNT,
    MAX_SPANS,
    parse_spec,
    window,
    NoTimeline,
    Timeline,
)
from .file import (  # noqa: F401
    gather,
    write,
    read,
    clock_text,
)
from .chrome import (  # noqa: F401
    lanes,
    tracks,
    chrome_trace,
)
from .gantt import (  # noqa: F401
    COLOURS,
    LEGEND,
    line_of,
    listing_key,
    untimed,
    SCHEDULES,
    model_schedule,
    gantt,
)
