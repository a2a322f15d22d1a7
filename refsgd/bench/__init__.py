"""``refsgd bench``: speed measured side by side, reported as ratios (not tests).

Commands (``refsgd bench --help``):

* ``bench step`` times one forward+backward pass (``loss_and_grad``) of a model at a batch
  size, the same network in PyTorch on the same CPU when torch is installed, and a square
  matrix product as the machine's BLAS peak (:mod:`refsgd.bench.measure`).
* ``bench overlap`` (under ``mpiexec``) runs each method in this MPI world, with the real
  network or an emulated link (one or several: ``--ratio 0.5,1,2``), and prints its iteration
  time split into compute, idle and other next to its timing model evaluated with the measured
  costs; ``--json`` writes the same machine-readably (:func:`measure.overlap`).
* ``bench scale`` predicts each method's iteration time and speed-up over SSGD at 8 to 4096
  ranks from the measured t_C and a modelled link; ``--check`` compares the prediction with
  emulated runs at 2 and 4 ranks, those that have a core each (:mod:`refsgd.bench.scale`).
* ``bench all`` writes the whole performance table (markdown, CSV, figure) in a few minutes
  (:mod:`refsgd.bench.suite`).

The timing models (one table, :data:`refsgd.bench.models.MODELS`, used by overlap and scale)
----------------------------------------------------------------------------------------------

Symbols: ``p`` ranks; ``n`` bytes of the gradient (= of the parameters); a link of latency
``alpha`` (s) and ``beta`` = 8 / (Gbit/s x 1e9) seconds per byte; ``gamma`` CPU seconds per byte
of an element-wise addition (measured: ``np.add`` of two gradients); ``t_C`` one micro-batch's
forward+backward (measured), ``tau`` micro-batches per iteration; ``t_up`` the method's update
(measured on random vectors with the method's own step, each timing right after a
forward/backward pass of the model so that the vectors come from memory as in a run,
:func:`models.update_seconds`).

Communication (:class:`models.Network`)::

    X(p)    = 2(p-1) alpha + 2((p-1)/p) n beta        Ring-AllReduce transfer: Pipe-SGD (Li et al.
                                                      2018) eq. 5, = refsgd.comm.link.Link.time
    R(p)    = ((p-1)/p) n gamma                       the reduction's CPU work, eq. 5's gamma term
    T_AR(p) = X(p) + R(p)                             eq. 5 with the synchronisation S = 0
    T_PS(p) = (p-1)(alpha + n beta)                   a parameter server's Gather or Bcast, every
                                                      message through the server's link
                                                      (Link.ps_time; docs/algorithms.md, Pipe-SGD)
    T_msg   = alpha + n beta                          one message (DC-ASGD's push or pull)

A compressed all-reduce (``--compress``; ``bench overlap --algo ALGO+CODEC``) has n = its wire
bytes and R = its operator's measured seconds per all-reduce (decompress, add, compress at each
of the ring's p - 1 steps), the time Pipe-SGD's Figure 4 finds on D-Sync+T/+Q's critical path.

On this machine with an emulated link (``bench overlap --link/--ratio``) the real collective
runs first and the link holds it until X + R after its start (refsgd/comm/linkcomm.py: R timed
there as gamma is here, or the ring's operator seconds of that call), so a blocking all-reduce
takes ``max(X + R, C)`` with C the measured blocking all-reduce without a link (the collective's
CPU work here: shared-memory copies and the reduction); where a model puts the all-reduce's CPU
work on the computing core, C replaces R (the link's R is a hold, not work); DC-ASGD's Send/Recv
take ``max(alpha + n beta, the measured message of this machine)``. Without a link the
measured blocking all-reduce is T_AR, R comes from gamma and X is the rest.

Iteration time per method (:mod:`refsgd.bench.models`)::

    ssgd, ssgd-nag, d-sync  tau t_C + T_AR + t_up                Rigazzi 2019 eq. 13, LAGA (Hakimi et
                                                                 al. 2021) eq. 3, Sato et al. 2017
                                                                 Alg. 4, Pipe-SGD eq. 2
    ssgd-opt                tau t_C + max(R, T_AR - T_bwd) + t_up, T_bwd = 2/3 t_C     LAGA eq. 4
                            (psi_OPT: the all-reduce overlaps the last backward pass; R as below)
    dcs3gd, laga-*          max(tau t_C + R, T_AR) + t_up        Rigazzi eq. 14, LAGA eq. 6; the
                                                                 reduction also on the compute side
                                                                 (MPI without a progress thread),
                                                                 then the update (issue 15, item 2)
    pipe-sgd (K = 2)        max(t_up + t_C, T_AR)                Pipe-SGD eq. 4 with eq. 5's term;
                            max(t_up + t_C + R, T_AR) when the communication thread has no core of
                            its own (fewer than 2 cores per rank, ``Costs.cores_per_rank``)
    daso (cycling)          base = t_C + T_AR_loc(G) + t_up,     Coquelin et al. 2022 section 3,
                            base + (T_bc_loc(G) + max(R(P), T_AR(P) - W base)) / B
                            P = p / G nodes; T_AR_loc, T_bc_loc: eq. 5 and T_PS through the link
                            within a node; the global sync of the parameters every B batches,
                            received W batches later (B = 4, W = 1 by default, the paper's)
    ps-sync                 t_C + 2 T_PS + (p-2) n gamma + t_up  PS-Sync, Pipe-SGD's baseline
    dcasgd                  max(t_C + 2 T_msg + t_up, (p-1)(2 T_msg + t_up))
                            DC-ASGD (Zheng et al. 2017, Rigazzi's baseline): a worker's cycle or
                            the server serving p - 1 round trips, whichever is longer

Speed-up over SSGD (``bench scale``) is in samples per second: ``(workers x batch x tau) /
iteration``, a parameter server's rank computing none.

Not modelled: PP-ASGD and ASGD (Sato et al. 2017). Their gradient threads never wait for the
network; an update consumes however many gradients have arrived, so an "iteration" has no fixed
amount of work. With enough cores their throughput is G b / t_C per process (G threads) and the
update period max(T_AR + t_up, t_C / G); on fewer cores than threads (this machine: 2) the
threads share a core and the timing is set by the scheduler, not by a formula.
"""

from refsgd.bench import models                                           # noqa: F401
from refsgd.bench.measure import (CODEC_NAMES, blas_peak, codec_costs, format_codecs, format_overlap, format_ring,  # noqa: F401
                                  format_step, method_config, overlap, overlap_json, step, step_flops,
                                  synthetic_data, synthetic_size, timed_collective)
from refsgd.bench.models import MODELS                                    # noqa: F401

#: the methods ``bench overlap`` can time, each with its model (the table of refsgd.bench.models)
OVERLAP_MODELS = MODELS

__all__ = ["CODEC_NAMES", "MODELS", "OVERLAP_MODELS", "blas_peak", "codec_costs", "format_codecs", "format_overlap",
           "format_ring",
           "format_step", "method_config", "models", "overlap", "overlap_json", "step", "step_flops",
           "synthetic_data", "synthetic_size", "timed_collective"]
