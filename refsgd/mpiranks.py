"""The processes of a job that an ``mpiexec`` started here runs, seen from outside it (Linux
/proc, pidfds and prctl; nothing elsewhere): the launcher tied to this process (:func:`tied`),
signals handed to the ranks themselves (:func:`forward`), each rank's pid and rank noted
(:func:`ranks_below`) and the order in which they end (:class:`Exits`), and refsgd's line naming
the rank that a signal ended, which hydra's banner or Open MPI's exit code only hints at
(:func:`killed_rank_line`, :func:`signalled_rank_line`), and the MPICH shared-memory segments
that an aborted job leaves in /dev/shm (:class:`Segments`). :mod:`refsgd.mpilib` finds the launcher
and runs jobs with these (``python -m refsgd.mpilib``, :func:`refsgd.mpilib.run_job`).
"""

import ctypes
import os
import platform
import re
import select
import signal
import sys
import threading
import time

from refsgd import launchenv


def _prctl():
    """libc's prctl (Linux), loaded in the parent: a child between fork and exec must not dlopen."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PR_SET_PDEATHSIG = 1


def tied():
    """A ``preexec_fn`` that has the child (an mpiexec) sent SIGTERM when this process ends, kill -9
    included (Linux ``prctl(PR_SET_PDEATHSIG)``, sent when the thread that started the child ends:
    start it from the main thread); None elsewhere."""
    prctl, parent = _prctl(), os.getpid()
    if prctl is None:
        return None

    def tie():  # in the child, between fork and exec
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent was gone before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)
    return tie


def _children(pid):
    """The process ids whose parent is ``pid`` (Linux /proc; empty elsewhere)."""
    kids = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return kids
    for d in entries:
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(d))
    return kids


def forward(proc, sig, kind):
    """Deliver ``sig`` to the ranks of the job that ``proc`` (an mpiexec of ``kind``, "openmpi" or
    another: :func:`refsgd.mpilib.launcher`'s, started in a session of its own) runs, as srun and
    scancel do. Hydra keeps its ranks in its own process group, which gets the signal. Open MPI's
    mpirun puts each rank in a process group of its own and, itself signalled, kills the ranks and
    exits 1: the signal goes to each rank's group only."""
    targets = [proc.pid]
    if kind == "openmpi":
        targets = _children(proc.pid)
        for _ in range(100):             # a signal at the launch: wait (up to 10 s) for the ranks
            if targets or proc.poll() is not None:
                break
            time.sleep(0.1)
            targets = _children(proc.pid)
    for pgid in targets:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def ranks_below(pid, known):
    """Note in ``known`` (pid -> rank) the ranks among the processes descended from ``pid`` (an
    mpiexec): those whose environment has their launcher's rank variable (hydra's PMI_RANK,
    Open MPI's OMPI_COMM_WORLD_RANK, ...); returns the pids found now. Linux /proc, nothing
    elsewhere."""
    parent, found = {}, []
    try:
        entries = [d for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return found
    for d in entries:
        try:
            with open(f"/proc/{d}/stat") as f:
                parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    for p in parent:
        if p in known:
            continue
        q = parent[p]
        while q not in (pid, 0, 1) and q in parent:
            q = parent[q]
        if q != pid:
            continue
        try:
            with open(f"/proc/{p}/environ", "rb") as f:
                env = dict(v.decode(errors="replace").split("=", 1) for v in f.read().split(b"\0") if b"=" in v)
        except OSError:
            continue
        rank = launchenv.launcher_rank(env)
        if rank is not None:
            known[p] = rank
            found.append(p)
    return found


#: hydra's banner for a rank that ended badly: its pid and host, and for a signal its name
_BANNER_PID = re.compile(r"^=   PID (\d+) RUNNING AT (\S+)", re.M)
_BANNER_SIGNAL = re.compile(r"EXIT STRING: .*\(signal (\d+)\)")


def killed_rank_line(banner, ranks, first=None):
    """refsgd's line after hydra's banner (``banner``: mpiexec's last output) for a rank that a
    signal ended (kill -9, the OOM killer, a crash): which rank (``ranks``: pid -> rank, from
    :func:`ranks_below`), on which host, which signal; "" when the banner says no such thing.
    ``first``: the pid of the rank seen to end first, where known. The banner names the lowest
    rank that a signal ended, which is not that rank when hydra's cleanup (SIGKILL) ended a lower
    one: the line then names the rank that ended first, whose signal the banner does not give."""
    pid, sig = _BANNER_PID.search(banner), _BANNER_SIGNAL.search(banner)
    if not (pid and sig):
        return ""
    host, culprit, n = pid.group(2), int(pid.group(1)), int(sig.group(1))
    tail = "; mpiexec then ended every rank of the job"
    if first is not None and first != culprit and first in ranks:
        return (f"refsgd: rank {ranks[first]} on {host} (pid {first}) ended first, without a word of refsgd's (a "
                f"signal: kill -9, the OOM killer, a crash){tail}")
    try:
        name = signal.Signals(n).name
    except ValueError:
        name = f"signal {n}"
    who = f"rank {ranks[culprit]}" if culprit in ranks else "a rank"
    return f"refsgd: {who} on {host} (pid {culprit}) was ended by signal {n} ({name}){tail}"


#: exit codes 128 + N of refsgd's own (a stop on SIGINT, SIGTERM, SIGUSR1): not a rank killed by N
_OWN_SIGNAL_CODES = (128 + signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGUSR1)


def signalled_rank_line(code, ranks, first=None):
    """refsgd's line after an Open MPI job whose ``mpirun --quiet`` said nothing of a rank that a
    signal ended (kill -9, the OOM killer, a crash): mpirun's exit code ``code`` is 128 + the
    signal; ``ranks`` (pid -> rank) and ``first`` (the pid seen to end first, where known) name the
    rank. "" for any other code (refsgd's own 130, 143 and 138 are stops its ranks announced)."""
    if not 128 < code < 160 or code in _OWN_SIGNAL_CODES:
        return ""
    n = code - 128
    try:
        name = signal.Signals(n).name
    except ValueError:
        name = f"signal {n}"
    tail = f"; mpirun then ended every rank of the job (exit code {code})"
    if first in ranks:
        return (f"refsgd: rank {ranks[first]} on {platform.node()} (pid {first}) ended first, by signal {n} "
                f"({name}) as mpirun's exit code says{tail}")
    return f"refsgd: a rank was ended by signal {n} ({name}){tail}"


class Exits:
    """The order in which the ranks end (Linux pidfds; nothing where there are none): :meth:`wait`
    waits up to ``timeout`` s for one to end; ``first`` is the pid of the one that ended first, once
    one has (None while none has, or when two ended within one wait)."""

    def __init__(self):
        self.poller = select.poll()
        self.fds = {}
        self.first = None
        self.ended = False

    def watch(self, pid):
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            return
        self.fds[fd] = pid
        self.poller.register(fd, select.POLLIN)

    def wait(self, timeout):
        if not self.fds:
            time.sleep(timeout)
            return
        ready = [self.fds[fd] for fd, _ in self.poller.poll(1000 * timeout)]
        if ready and not self.ended:
            self.ended = True
            self.first = ready[0] if len(ready) == 1 else None
        for fd in [fd for fd, pid in self.fds.items() if pid in ready]:
            self.poller.unregister(fd)
            os.close(fd)
            del self.fds[fd]

    def close(self):
        for fd in self.fds:
            os.close(fd)


def relay_output(src, keep=8192):
    """Copy ``src`` (mpiexec's stdout) to this process's as it comes; returns the thread and a list
    that holds the last ``keep`` bytes once the thread ends."""
    last = [b""]

    def copy():
        out = sys.stdout.fileno()
        while chunk := os.read(src.fileno(), 65536):
            last[0] = (last[0] + chunk)[-keep:]
            try:
                os.write(out, chunk)
            except OSError:  # a reader that left (piped into head): keep reading, for the banner
                pass
    t = threading.Thread(target=copy, daemon=True)
    t.start()
    return t, last


def shared_segments(maps="/proc/self/maps"):
    """The MPICH shared-memory segments (``/dev/shm/mpich_shm_*``, one per node and job) that the
    process whose ``/proc/PID/maps`` is ``maps`` maps and that still have a name, sorted; [] where
    it cannot be read (a process that ended, one not ours, no /proc)."""
    try:
        with open(maps) as f:
            paths = {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/dev/shm/mpich_shm_") and not p.endswith("(deleted)"))


class Segments:
    """The MPICH shared-memory segments of a job's ranks on this node, noted while the job runs
    (:meth:`note`: each rank's maps read until it maps one; MPI_Init creates it), and removed
    after a job that failed (:meth:`remove`): MPICH removes them in MPI_Finalize, which an aborted
    job never reaches, and each one left holds about 2 MB of the node's memory until a reboot."""

    def __init__(self):
        self.paths, self.done = set(), set()

    def note(self, pids):
        for pid in set(pids) - self.done:
            found = shared_segments(f"/proc/{pid}/maps")
            if found:
                self.paths.update(found)
                self.done.add(pid)

    def remove(self):
        """Unlink the segments noted that still have a name (call once every rank has ended);
        returns the paths removed."""
        removed = []
        for path in sorted(self.paths):
            try:
                os.unlink(path)
                removed.append(path)
            except OSError:  # gone already (MPI_Finalize ran on some rank)
                pass
        return removed
