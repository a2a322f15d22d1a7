"""The timing models of one iteration: one table (:data:`MODELS`) for ``bench overlap`` and ``bench scale``.

Each model turns the costs of a step (:class:`Costs`: compute, update) and of the network
(:class:`Network`: the all-reduce, a parameter server's messages, DASO's two tiers) into the
seconds of one iteration at ``p`` ranks. The formulas and their sources are in the package
docstring (:mod:`refsgd.bench`) and in each function's docstring.
"""

import dataclasses
import time

import numpy as np

from refsgd.optim import SGD, fused_step, momentum_predict
from refsgd.registry import METHODS, TAU, Timing, Update

#: DASO's cycling parameters when not given: B = 4 (the paper's B_max), W = max(1, B / 4)
DASO_B = 4


def daso_wait(B):
    """DASO's W for a given B at the start of cycling (Coquelin et al. 2022, section 3.3)."""
    return max(1, B // 4)


@dataclasses.dataclass
class Network:
    """The communication times of a ``nbytes`` message (the gradient, or DASO's parameters).

    Every all-reduce costs Pipe-SGD's eq. 5 with S = 0, ``T_AR(p) = X(p) + R(p)``: the transfer
    ``X(p) = 2(p-1) alpha + 2((p-1)/p) n beta`` (:meth:`Link.time`) plus the reduction
    ``R(p)``, eq. 5's gamma term: ``((p-1)/p) n gamma`` for a plain all-reduce (the time to add
    the received blocks), or ``reduce_s`` when given, the measured seconds of a compressed
    all-reduce's operator (decompress, add, compress at each of its p - 1 steps; n then the
    wire bytes). ``kind``:

    * ``"model"``: a cluster, from formulas only (``bench scale``): ``T_AR(p) = X(p) + R(p)``;
      a parameter server's one direction ``(p-1)(alpha + n beta)`` (:meth:`Link.ps_time`); one
      message ``alpha + n beta``.
    * ``"emulated"``: this machine with an emulated link (``bench overlap --link/--ratio``).
      The real collective runs first and the link holds it until ``X(p) + R(p)`` after its
      start (:mod:`refsgd.comm.linkcomm`: R timed there as here, or the operator's measured
      seconds), so a blocking all-reduce takes ``max(X(p) + R(p), C)``, with C (``cpu_real``)
      the measured real all-reduce of this machine. A parameter server's Gather/Bcast take
      ``max((p-1)(alpha + n beta), C)``; a Send/Recv takes ``max(alpha + n beta, p2p_real)``,
      with ``p2p_real`` the measured message of this machine.
    * ``"real"``: the real network, no link (``bench overlap`` without --link): the blocking
      all-reduce is the measured ``blocking_real``, its reduction ``R(p)``, the transfer the rest.

    A non-blocking all-reduce also costs its rank CPU on the computation's side
    (:meth:`compute_side`: an MPI library without a progress thread reduces inside Test/Wait):
    R(p) on a cluster, C on this machine, where the link's R is a hold, not work.

    ``local_link``: DASO's link within a node (None: the real one, the CPU work C on this
    machine; a "model" network needs one).
    """

    nbytes: int
    kind: str = "model"
    link: object = None          # refsgd.comm.link.Link between nodes (every flat all-reduce)
    local_link: object = None    # within a node (DASO's local tier)
    gamma: float = 0.0           # CPU seconds per byte of the reduction (eq. 5's gamma)
    cpu_real: float = 0.0        # measured blocking all-reduce of the gradient without a link (this machine)
    blocking_real: float = 0.0   # measured blocking all-reduce through the network used ("real")
    p2p_real: float = 0.0        # measured one message of nbytes between two ranks (this machine)
    reduce_s: float = None       # measured reduction seconds of one all-reduce (a compressed ring's operator)

    # ------------------------------------------------------------- the flat all-reduce
    def reduce_cpu(self, p, n=None):
        """R(p): seconds of the reduction of an all-reduce over p ranks (eq. 5's gamma term)."""
        if p <= 1:
            return 0.0
        if self.reduce_s is not None:
            return self.reduce_s
        r = (p - 1) / p * (self.nbytes if n is None else n) * self.gamma
        return min(r, self.blocking_real) if self.kind == "real" else r

    def compute_side(self, p):
        """The CPU an all-reduce in flight takes from the computation: R(p) (a cluster, the real
        network) or C (this machine with an emulated link, whose R is a hold, not work)."""
        if p <= 1:
            return 0.0
        return self.cpu_real if self.kind == "emulated" else self.reduce_cpu(p)

    def transfer(self, p, link=None):
        """X(p): seconds of the all-reduce's transfer over p ranks (no CPU work)."""
        link = self.link if link is None else link
        if p <= 1:
            return 0.0
        if self.kind == "real":
            return max(0.0, self.blocking_real - self.reduce_cpu(p))
        return 0.0 if link is None else link.time(self.nbytes, p)

    def allreduce(self, p):
        """T_AR(p): an all-reduce over p ranks, X(p) + R(p) (eq. 5)."""
        if p <= 1:
            return 0.0
        if self.kind == "model":
            return self.transfer(p) + self.reduce_cpu(p)
        if self.kind == "emulated":
            return max(self.transfer(p) + self.reduce_cpu(p), self.cpu_real)
        return self.blocking_real

    # ------------------------------------------------------------- parameter server
    def ps(self, p):
        """T_PS(p): one direction of a parameter server's exchange (Gather or Bcast) of p - 1
        messages of nbytes through the server's one link."""
        return self._through_one_link(self.link, p)

    def _through_one_link(self, link, p):
        """p - 1 messages of nbytes through one link (a model's formula; on this machine the
        measured messages, delayed to the link's time when one is emulated)."""
        if p <= 1:
            return 0.0
        if self.kind == "model":
            return link.ps_time(self.nbytes, p)
        real = (p - 1) * self.p2p_real
        return real if link is None else max(link.ps_time(self.nbytes, p), real)

    def message(self):
        """T_msg: one message of nbytes (Send/Recv)."""
        if self.kind == "model":
            return self.link.message_time(self.nbytes)
        if self.link is None:
            return self.p2p_real
        return max(self.link.message_time(self.nbytes), self.p2p_real)

    def add_cpu(self, k):
        """k element-wise additions of a vector of nbytes (a server's sum)."""
        return max(0, k) * self.nbytes * self.gamma

    # ------------------------------------------------------------- DASO's node-local tier
    def local_allreduce(self, G):
        """A blocking all-reduce of the G ranks of a node (through ``local_link``)."""
        if G <= 1:
            return 0.0
        R = (G - 1) / G * self.nbytes * self.gamma
        if self.kind == "model":
            return self.local_link.time(self.nbytes, G) + R
        if self.local_link is None:
            return self.cpu_real
        return max(self.local_link.time(self.nbytes, G) + R, self.cpu_real)

    def local_bcast(self, G):
        """A Bcast within a node of G ranks: the parameter-server model through the local link,
        as the emulated link delays it, ``(G-1)(alpha_l + n beta_l)``."""
        return self._through_one_link(self.local_link, G)


@dataclasses.dataclass
class Costs:
    """The per-rank costs of a step, in seconds: ``t_c`` one micro-batch's forward and
    backward pass, ``tau`` micro-batches per iteration, ``t_up`` the update of each method
    (method -> seconds; DC-ASGD: the server's step per push), DASO's ranks per node ``G`` and
    cycling parameters ``B``, ``W``; ``cores_per_rank``: the cores each rank may use (below 2,
    a communication thread shares its rank's core: Pipe-SGD's reduction then takes time from
    the computation)."""

    t_c: float
    tau: int = 1
    t_up: dict = dataclasses.field(default_factory=dict)
    G: int = 1
    B: int = DASO_B
    W: int = 1
    cores_per_rank: float = 2.0

    def up(self, algo):
        return float(self.t_up.get(algo, 0.0))


# ------------------------------------------------------------------------------ the models
def sequential(c, net, p, algo):
    """tau t_C + T_AR(p) + t_up: compute, then the blocking all-reduce, then the update.

    SSGD: Rigazzi 2019 eq. 13, LAGA (Hakimi et al. 2021) eq. 3; SSGD-NAG: Sato et al. 2017
    Algorithm 4; D-Sync: Pipe-SGD (Li et al. 2018) eq. 2. T_AR(p) = 2(p-1) alpha +
    2((p-1)/p) n beta + ((p-1)/p) n gamma, Pipe-SGD eq. 5 with S = 0."""
    return c.tau * c.t_c + net.allreduce(p) + c.up(algo)


def per_layer(c, net, p, algo):
    """tau t_C + max(R_c, T_AR(p) - T_bwd) + t_up, T_bwd = 2/3 t_C: each layer's all-reduce
    starts in the last backward pass, so it overlaps that pass (SSGD-OPT, LAGA eq. 4,
    psi = max(0, T_comm - T_bwd); the backward pass taken as 2/3 of a forward+backward). As in
    :func:`overlapped` the all-reduce's CPU work R_c (:meth:`Network.compute_side`) is also on
    the computation's side; the latency of the extra segments, 2(p-1)(L-1) alpha (Pipe-SGD
    eq. 6), is left out."""
    return c.tau * c.t_c + max(net.compute_side(p), net.allreduce(p) - 2 * c.t_c / 3) + c.up(algo)


def overlapped(c, net, p, algo):
    """max(tau t_C + R_c, T_AR(p)) + t_up: the all-reduce (transfer and reduction, eq. 5) beside
    the next compute.

    DC-S3GD: Rigazzi 2019 eq. 14; LAGA: eq. 6. The reduction's CPU work R_c
    (:meth:`Network.compute_side`) is also on the computation's side (an MPI library without a
    progress thread performs it inside Test/Wait, on this core), and the update follows the
    wait (issue 15, item 2)."""
    return max(c.tau * c.t_c + net.compute_side(p), net.allreduce(p)) + c.up(algo)


def pipelined(c, net, p, algo):
    """max(t_up + t_C, T_AR(p)): Pipe-SGD with K >= 2, limited resources (Li et al. 2018
    eq. 4, with eq. 5's all-reduce X + R); the communication thread carries transfer and
    reduction. When that thread has no core of its own (``cores_per_rank`` < 2, e.g. 2 ranks on
    2 cores), the all-reduce's CPU work R_c (:meth:`Network.compute_side`) also takes its time
    from the computation: max(t_up + t_C + R_c, T_AR(p))."""
    if c.cores_per_rank < 2:
        return max(c.up(algo) + c.t_c + net.compute_side(p), net.allreduce(p))
    return max(c.up(algo) + c.t_c, net.allreduce(p))


def hierarchical(c, net, p, algo):
    """DASO's cycling phase, P = p / G nodes of G ranks (Coquelin et al. 2022, section 3,
    Figures 2-4; each tier's all-reduce by Pipe-SGD eq. 5, the local Bcast by the
    parameter-server model)::

        base = t_C + T_AR_local(G) + t_up                  every batch: local gradient sync
        iter = base + (T_bcast_local(G) + max(R_g(P), T_AR_g(P) - W base)) / B

    Every B batches one group sends its parameters (a non-blocking all-reduce over the P
    nodes), received W batches later; only the part of its all-reduce not hidden by those W
    batches stalls, and its CPU work R_g is on the computation's side, as in
    :func:`overlapped`. P = 1: no global syncs."""
    G = max(1, c.G)
    P = max(1, p // G)
    base = c.t_c + net.local_allreduce(G) + c.up(algo)
    if P <= 1:
        return base
    stall = max(net.compute_side(P), net.allreduce(P) - c.W * base)
    return base + (net.local_bcast(G) + stall) / max(1, c.B)


def periodic(c, net, p, algo):
    """t_C + t_up + T_AR(p) / B: local SGD (Lin et al. 2020, Algorithm 1), B = H local steps
    between two blocking all-reduces of the model (its T_AR, eq. 5, as the gradient's: the same
    n bytes), nothing overlapped."""
    return c.t_c + c.up(algo) + net.allreduce(p) / max(1, c.B)


def ps_sync(c, net, p, algo):
    """t_C + 2 T_PS(p) + (p-2) n gamma + t_up: PS-Sync (Pipe-SGD's baseline), a worker's
    gradient to the server (Gather), the server's sum of p - 1 gradients, its update and w back
    (Bcast); T_PS(p) = (p-1)(alpha + n beta), every message through the server's one link
    (docs/algorithms.md, Pipe-SGD; refsgd/comm/link.py)."""
    return c.t_c + 2 * net.ps(p) + net.add_cpu(p - 2) + c.up(algo)


def ps_async(c, net, p, algo):
    """max(t_C + 2 T_msg + t_up, (p-1)(2 T_msg + t_up)): DC-ASGD (Zheng et al. 2017, the
    baseline of Rigazzi 2019 section II), p - 1 workers and a server that serves one push at a
    time, T_msg = alpha + n beta. A worker's cycle is its compute and its round trip; the
    server's link and update serve p - 1 round trips per iteration, whichever is longer."""
    rtt = 2 * net.message() + c.up(algo)
    return max(c.t_c + rtt, (p - 1) * rtt)


@dataclasses.dataclass(frozen=True)
class Model:
    text: str          # the model in words, with its source
    time: object       # (Costs, Network, p, algo) -> seconds of one iteration
    servers: int = 0   # ranks without data (parameter servers)
    tau: bool = False  # accumulates tau micro-batches per iteration (else one)


#: method -> its timing model (the registry's Method.timing_model and timing_text; the methods
#: without one, PP-ASGD and ASGD, say why in Method.lacks)
#: the function of each kind of timing model (the registry's Timing)
TIMINGS = {Timing.SEQUENTIAL: sequential, Timing.PER_LAYER: per_layer, Timing.OVERLAPPED: overlapped,
           Timing.PIPELINED: pipelined, Timing.HIERARCHICAL: hierarchical, Timing.PERIODIC: periodic,
           Timing.PS_SYNC: ps_sync, Timing.PS_ASYNC: ps_async}

#: (a kind with no function here is left out: tests/methods/test_registry_checks.py names it)
MODELS = {m.name: Model(m.timing_text, TIMINGS[m.timing_model], servers=m.servers, tau=m.micro_batches is TAU)
          for m in METHODS.values() if m.timing_model in TIMINGS}


def iteration_time(algo, costs, net, p):
    """Seconds of one iteration of ``algo`` at p ranks (tau = 1 for a method that does not
    accumulate micro-batches)."""
    model = MODELS[algo]
    if not model.tau and costs.tau != 1:
        costs = dataclasses.replace(costs, tau=1)
    return model.time(costs, net, p, algo)


def samples_per_iteration(algo, p, batch, tau=1):
    """Samples of one iteration over all workers (a parameter server's rank computes none)."""
    model = MODELS[algo]
    return max(0, p - model.servers) * batch * (tau if model.tau else 1)


def speedup(algo, costs, net, p, batch, base="ssgd"):
    """Samples per second of ``algo`` over those of ``base`` at p ranks (the models')."""
    mine = samples_per_iteration(algo, p, batch, costs.tau) / iteration_time(algo, costs, net, p)
    theirs = samples_per_iteration(base, p, batch, costs.tau) / iteration_time(base, costs, net, p)
    return mine / theirs


# ------------------------------------------------------------------------------ measured inputs
def median_time(fn, repeat, warmup=3, before=None):
    """Median seconds of fn(); ``before()``, when given, runs untimed before each call."""
    return float(np.median(interleaved_times([fn], repeat, warmup, before)[0]))


def interleaved_times(fns, repeat, warmup=3, before=None):
    """[(repeat,) seconds of each fn]: the functions called in turn, A B A B ..., so that load
    arriving on the machine during the measurement lands on every side alike; ``before()``, when
    given, runs untimed before each call. The first ``warmup`` rounds are not kept."""
    times = np.zeros((len(fns), repeat))
    for i in range(warmup + repeat):
        for k, fn in enumerate(fns):
            if before is not None:
                before()
            t = time.perf_counter()
            fn()
            if i >= warmup:
                times[k, i - warmup] = time.perf_counter() - t
    return list(times)


def spread(values):
    """{median, p25, p75, min, max} of ``values`` (seconds or ratios)."""
    v = np.asarray(values, dtype=np.float64)
    p25, med, p75 = np.percentile(v, [25, 50, 75])
    return dict(median=float(med), p25=float(p25), p75=float(p75), min=float(v.min()), max=float(v.max()),
                n=int(len(v)))


def reduction_gamma(n, dtype=np.float32, repeat=20):
    """gamma: seconds per byte of an element-wise addition of two vectors of n values."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    return median_time(lambda: np.add(a, b, out=a), repeat) / a.nbytes


def update_seconds(algo, n, dtype=np.float32, world=2, B=DASO_B, repeat=20, before=None):
    """t_up: seconds of ``algo``'s update of n parameters (its kind: the registry's Method.update),
    timed on random vectors with the method's own step where it has one (refsgd.optim.SGD, DC-S3GD's corrected_step, DC-ASGD's
    compensated_step, DASO's merge), else its NumPy lines. ``before()`` runs untimed before
    each timing: a forward/backward pass of the model leaves the caches as a run's update
    finds them (the vectors are then read from memory, not from cache: 2-4x slower)."""
    rng = np.random.default_rng(1)
    dt = np.dtype(dtype)

    def vec(scale=1e-2):
        return (rng.standard_normal(n) * scale).astype(dt)

    w, g, h, m = vec(1.0), vec(), vec(), vec()
    lr = 1e-3
    method = METHODS[algo]
    kind, mu = method.update, 0.9 if "momentum" in method.optimizer else 0.0
    if kind in (Update.U_OVER_N, Update.U_OVER_N_MERGE, Update.DIVIDE_U, Update.DIVIDE_U_NESTEROV, Update.U_MEAN):
        opt = SGD(n, dt, momentum=mu, nesterov=kind is Update.DIVIDE_U_NESTEROV)
        if kind in (Update.DIVIDE_U, Update.DIVIDE_U_NESTEROV):
            def step():  # LAGA: L3/L4's 1/N before the send, then the fused L2(-L3)
                np.divide(g, world, out=h)
                opt.step(w, h, lr)
        elif kind in (Update.U_OVER_N, Update.U_OVER_N_MERGE):
            def step():  # SSGD and DASO divide within the step
                opt.step(w, g, lr, divide=world)
        else:
            def step():  # local SGD's U, no 1/N
                opt.step(w, g, lr)
        base = median_time(step, repeat, before=before)
        if kind is Update.U_OVER_N_MERGE:  # DASO's eq. 1 merge every B batches
            from refsgd.algorithms import daso  # noqa: PLC0415 mpi4py: refsgd.algorithms imports it; bench scale runs without MPI
            base += median_time(lambda: daso.merge(w, g, 1, 2), repeat, before=before) / max(1, B)
        if kind is Update.U_MEAN:  # local SGD's mean of the models every B steps
            base += median_time(lambda: np.divide(h, world, out=m), repeat, before=before) / max(1, B)
        return base
    if kind is Update.PREDICT:
        return median_time(lambda: momentum_predict(w, m, h, g, lr, 0.99, 0.99), repeat, before=before)
    if kind is Update.FUSED:  # w <- w - gamma g_sum, one fused pass
        return median_time(lambda: fused_step(w, g, None, lr), repeat, before=before)
    if kind is Update.CORRECTED:
        from refsgd.algorithms import dcs3gd  # noqa: PLC0415 mpi4py
        dw, v, bar = vec(), vec(), vec()
        return median_time(lambda: dcs3gd.corrected_step(w, dw, v, g, bar, world, 0.2, lr, 0.9, 0.0), repeat,
                           before=before)
    if kind is Update.COMPENSATED:
        from refsgd.algorithms import dcasgd  # noqa: PLC0415 mpi4py
        bak = vec(1.0)
        return median_time(lambda: dcasgd.compensated_step(w, g, bak, lr, 0.04, 0.0), repeat, before=before)
    raise KeyError(algo)
