"""A real link for a timing claim: ``scripts/cluster`` of the source tree, nodes that are network
namespaces of this machine joined by veth pairs shaped with ``tc ... tbf`` (docs/guide/cluster.md),
one rank per node, brought up for a seed's runs and removed after them, whatever happens
(:func:`across`: what every real-link claim does: dcs3gd-iteration-cluster, laga-idle-cluster,
pipesgd-speedup-cluster).

Unlike the emulated link (:mod:`refsgd.comm.link`, which waits out a transfer's modelled time and
charges no CPU for it), every byte crosses the kernel's TCP stack: the copies, the checksums and
the protocol run on the same cores as the ranks' compute. The script needs root (or
CAP_NET_ADMIN and CAP_SYS_ADMIN), Linux and ip, tc, nsenter, unshare; :func:`missing` says in one
line what this machine lacks, and a claim is then not testable here."""

import os
import shutil
import subprocess
import sys

from refsgd.errors import RefsgdError
from refsgd.reproduce.measure import link_for

#: scripts/cluster beside the package: in a source checkout (the wheel does not carry it)
SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "scripts", "cluster")
#: the tools the script runs
TOOLS = ("ip", "tc", "nsenter", "unshare")
#: what a real-link claim needs of the machine (:attr:`refsgd.reproduce.measure.Claim.requires`)
REQUIRES = ("root (or CAP_NET_ADMIN and CAP_SYS_ADMIN), Linux, ip/tc/nsenter/unshare and scripts/cluster of the "
            "source tree; without them not testable here, and it costs nothing; `all` leaves it out (it builds "
            "network namespaces and shapes their links as root: a user asks for that by name)")


def lacking_capabilities():
    """The capabilities among CAP_NET_ADMIN and CAP_SYS_ADMIN that this process lacks (Linux:
    /proc/self/status's CapEff, bits 12 and 21), as a list of names."""
    with open("/proc/self/status") as f:
        eff = int(next(line.split()[1] for line in f if line.startswith("CapEff:")), 16)
    return [name for bit, name in ((12, "CAP_NET_ADMIN"), (21, "CAP_SYS_ADMIN")) if not eff >> bit & 1]


def missing():
    """Why no cluster can be built here, in one line ('' when one can): not Linux, no
    scripts/cluster (an installed wheel), a tool missing, the capabilities, no mpiexec in this
    Python's environment (the script runs ``--venv sys.prefix``'s)."""
    if not sys.platform.startswith("linux"):
        return "scripts/cluster's network namespaces need Linux"
    if not os.path.isfile(SCRIPT):
        return f"no scripts/cluster at {SCRIPT}: it comes with refsgd's source tree, not with the installed package"
    tools = [t for t in TOOLS if shutil.which(t) is None]
    if tools:
        return f"scripts/cluster needs {', '.join(tools)} (iproute2, util-linux)"
    caps = lacking_capabilities()
    if caps:
        return ("scripts/cluster needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN: this process lacks "
                + " and ".join(caps))
    if not os.access(os.path.join(sys.prefix, "bin", "mpiexec"), os.X_OK):
        return f"scripts/cluster runs {sys.prefix}/bin/mpiexec, which is not there (the mpich wheel provides it)"
    return ""


def _script(*args, timeout=120):
    try:
        return subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RefsgdError(f"scripts/cluster {args[0]} did not finish in {timeout} s") from None


def _last_line(r):
    lines = [line for line in (r.stderr + r.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else f"exit {r.returncode}"


class Cluster:
    """``with Cluster(name, nodes, rate) as c:`` a cluster of ``nodes`` nodes whose links are
    limited to ``rate`` (tc's units, e.g. "312mbit", or "none") each way; ``c.command(n, PROGRAM)``
    is the mpiexec command line of n ranks, one per node, for :func:`refsgd.bench.suite.launch`.
    ``up`` failing is a RefsgdError with the script's line; ``down`` runs however the block ends."""

    def __init__(self, name, nodes, rate):
        self.name, self.nodes, self.rate = name, int(nodes), rate

    def __enter__(self):
        r = _script("up", "--name", self.name, "--nodes", str(self.nodes), "--rate", self.rate)
        if r.returncode != 0:
            why = _last_line(r)
            try:
                self._down()  # up removes what it made; this removes a leftover of this process's name
            except RefsgdError:
                pass
            raise RefsgdError(f"scripts/cluster up --name {self.name} failed: {why}")
        return self

    def __exit__(self, *exc):
        self._down()
        return False

    def _down(self):
        r = _script("down", "--name", self.name)
        if r.returncode != 0:
            raise RefsgdError(f"scripts/cluster down --name {self.name} failed: {_last_line(r)}; remove it with "
                              f"`sudo {SCRIPT} down --name {self.name}`")

    def command(self, n, *program):
        """``scripts/cluster run -- -n n -ppn 1 PROGRAM``: one rank per node, this Python's mpiexec."""
        return [SCRIPT, "run", "--name", self.name, "--venv", sys.prefix, "--", "-n", str(n), "-ppn", "1",
                *map(str, program)]

    def __str__(self):
        return f"scripts/cluster {self.name} ({self.nodes} nodes, link {self.rate} each way)"


def probe(nodes):
    """'' when a cluster of ``nodes`` nodes comes up here (brought up without a rate and removed at
    once), else why not in one line (:func:`missing`, or the script's own error)."""
    why = missing()
    if why:
        return why
    try:
        with Cluster(f"rpprobe{os.getpid() % 100000}", nodes, "none"):
            return ""
    except RefsgdError as e:
        return str(e)


def untestable(setup):
    """Why a real-link claim cannot run here (:func:`probe` of ``setup.ranks`` nodes), or None."""
    return probe(setup.ranks) or None


def rate_for(runs, setup, hp, seed, ratio):
    """(tc's rate, t_C in s): the bandwidth of the emulated link whose all-reduce of ``hp``'s model's
    gradient takes ``ratio`` x t_C, t_C of one micro-batch measured here first, with no link
    (:func:`refsgd.reproduce.measure.link_for`; with --link, its bandwidth), in Mbit/s as tc writes it."""
    link, t_c, _ = link_for(runs, setup, hp, seed, ratio=ratio)
    return f"{max(1, round(1e3 * float(link.split(',')[1])))}mbit", t_c


#: how far the first run's measured ratio may lie from the one asked for before the rate is corrected
CALIBRATION_TOLERANCE = 0.1


def across(runs, setup, hp, seed, ratio, variants, measured=None):
    """The runs of a real-link claim: the rate whose all-reduce takes ``ratio`` x t_C (:func:`rate_for`),
    a cluster of ``setup.ranks`` nodes at that rate (one per seed, removed after its runs however they
    end), and each of ``variants`` [(algo, variant, train's options)] across it, one rank per node.

    ``measured(run)``: the ratio the first variant's run (the claim's calibration) measured on the
    link. The rate comes from the emulated link's model, and tc's tbf on veth pairs does not keep
    it exactly (at 2.5 Gbit/s the all-reduce took 25 % less than the model's time, at 900 Mbit/s
    5 %): where the first run's ratio is more than :data:`CALIBRATION_TOLERANCE` off, the rate is
    scaled by measured / asked once, the cluster rebuilt at it, and every variant run there.
    Returns (the rate in Mbit/s, t_C measured here in s, [the runs])."""
    rate, t_c = rate_for(runs, setup, hp, seed, ratio)
    name = f"rp{os.getpid() % 100000}s{seed}"
    with Cluster(name, setup.ranks, rate) as c:
        if measured is not None:
            algo, variant, options = variants[0]
            got = measured(runs.train(algo, seed, variant=f"{variant}, at the model's rate {rate} (the rate's "
                                      "calibration)", cluster=c, **options))
            off = got == got and got > 0 and abs(got / ratio - 1) > CALIBRATION_TOLERANCE
        if measured is None or not off:  # the calibration's run is the first variant's (read again, not rerun)
            return float(rate[:-4]), t_c, [runs.train(algo, seed, variant=variant, cluster=c, **options)
                                            for algo, variant, options in variants]
    rate = f"{max(1, round(float(rate[:-4]) * got / ratio))}mbit"
    with Cluster(name, setup.ranks, rate) as c:
        out = [runs.train(algo, seed, variant=variant, cluster=c, **options) for algo, variant, options in variants]
    return float(rate[:-4]), t_c, out
