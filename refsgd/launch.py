"""A launch on a cluster, checked and prepared (``refsgd check``, ``refsgd compile``).

:func:`report` (``mpiexec -n 4 refsgd check``, ``srun refsgd check``), as horovodrun's
--check-build does: the MPI library and what started it (the launcher, from the parent process:
hydra's proxy, Slurm's step daemon with the PMI it gave, Open MPI's daemon), ranks, nodes and
ranks per node (from ``MPI_COMM_TYPE_SHARED``, as DASO finds them), threads and cores per rank,
where the Numba cache is and how many of refsgd's kernels it holds (a cold cache: every rank
compiles them on first use, tens of seconds), a ping-pong within a node and between two nodes (the
fastest of 20 one-value and 1 MiB messages), and a warning for each of: oversubscribed cores, a
world of one under a launcher of several processes (which ``refsgd train`` refuses), a cache that
is cold, not writable, not shared between the nodes, or on a network file system.

:func:`warm` (``refsgd compile``) fills the Numba cache once before a job: every method a few
iterations in one process (``MPI_COMM_SELF``; nothing written) with the models and dtypes given,
which compiles the kernels of the model's layers, the method's step and codecs, and the checks.
The methods that need two ranks or more (a parameter server) are left out: their kernels are
those of the others.
"""

import os
import re
import time

from refsgd import api, busy, launchenv, mpilib
from refsgd.api import ranges
from refsgd.bench.measure.world import message_times
from refsgd.errors import AgreedError

#: file systems that every rank reads the Numba cache through the network from
NETWORK_FS = ("nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "ceph", "glusterfs", "fuse.sshfs", "panfs")
MIB = 1 << 20
#: the refsgd package's folder (Numba caches its kernels beside their modules)
PACKAGE = os.path.dirname(os.path.abspath(__file__))
#: the parent process of a rank -> what started it
LAUNCHERS = {"hydra_pmi_proxy": "mpiexec (MPICH's hydra)", "slurmstepd": "srun (Slurm)", "orted": "mpirun (Open MPI)",
             "prted": "mpirun (Open MPI)", "mpirun": "mpirun (Open MPI)", "mpiexec": "mpiexec"}
#: variables that only Open MPI's launcher sets in a rank's environment
OPEN_MPI_VARS = ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK")


def started_by(env=None, parent=None):
    """What started this process: the launcher (from the parent process's name) and, under Slurm,
    the PMI it gave the ranks."""
    env = os.environ if env is None else env
    if parent is None:
        try:
            with open(f"/proc/{os.getppid()}/comm") as f:
                parent = f.read().strip()
        except OSError:
            parent = ""
    if parent not in LAUNCHERS and launchenv.launcher_size(env) is None and launchenv.launcher_rank(env) is None:
        # no launcher's variables: one process started by hand (a shell, a batch script)
        what = f"no launcher: one process, started by {parent or 'an unknown process'}"
        return what + (f", in Slurm job {env['SLURM_JOB_ID']}" if "SLURM_JOB_ID" in env else "")
    what = LAUNCHERS.get(parent, f"{parent or 'an unknown process'}")
    if parent == "mpiexec" and any(v in env for v in OPEN_MPI_VARS):
        # Open MPI's mpiexec is its mpirun under another name: on one node it is the ranks' parent
        what = "mpirun (Open MPI)"
    if parent == "slurmstepd":
        pmi = "pmix" if "PMIX_RANK" in env else "pmi2" if "PMI_FD" in env else None
        what = f"srun --mpi={pmi} (Slurm)" if pmi else "srun without a PMI (--mpi=none)"
    if "SLURM_JOB_ID" in env and parent != "slurmstepd":
        what += f", in Slurm job {env['SLURM_JOB_ID']}"
    return what


def thread_variables_ignored(env=None):
    """A warning for each thread variable (busy.THREAD_VARIABLES) set to something other than a
    whole number above 0 (OMP_NUM_THREADS=lots): OpenMP and the BLAS libraries ignore it, and each
    rank starts a thread per core (NUMBA_NUM_THREADS is refused at the start: Numba cannot start)."""
    env = os.environ if env is None else env
    out = []
    for name in busy.THREAD_VARIABLES:
        v = env.get(name)
        if v is not None and not (v.strip().isdigit() and int(v) > 0):
            out.append(f"{name}={v!r} is not a whole number of threads above 0: the libraries ignore it and "
                       f"each rank may start a thread per core; set {name}=1 (or --blas-threads 1)")
    return out


def kernels_in_source(package):
    """How many of refsgd's Numba functions are cached (``cache=True`` in the source)."""
    count = 0
    for folder, _, files in os.walk(package):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    count += len(re.findall(r"cache\s*=\s*True", f.read()))
    return count


def numba_cache(package):
    """(the cache's folder, the number of kernels cached): NUMBA_CACHE_DIR, else the package's
    __pycache__ folders (Numba's default beside a writable source); a kernel compiled for two
    signatures counts once."""
    root = os.environ.get("NUMBA_CACHE_DIR", "").strip()
    folder = root or package
    found = set()
    for d, _, files in os.walk(folder):
        if root or os.path.basename(d) == "__pycache__":
            found.update(f.rsplit(".", 2)[0] for f in files if f.endswith(".nbi"))
    return folder, len(found)


def file_system(path):
    """The type of the file system holding ``path`` (/proc/mounts' longest prefix), or ''."""
    path, best, kind = os.path.realpath(path), "", ""
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 2:
                    mnt = parts[1].replace("\\040", " ")
                    if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                        best, kind = mnt, parts[2]
    except OSError:
        pass
    return kind


def _shared(comm, folder, leaders):
    """Whether every node sees the same ``folder`` (a file that rank 0 writes there, looked for by
    one rank of each node); None when rank 0 cannot write there."""
    token = comm.bcast(os.path.join(folder, f".refsgd-check-{os.getpid()}"), root=0)
    ok = True
    if comm.Get_rank() == 0:
        try:
            with open(token, "w") as f:
                f.write("refsgd check\n")
        except OSError:
            ok = False
    ok = comm.bcast(ok, root=0)
    if not ok:
        return None
    seen = os.path.exists(token) if comm.Get_rank() in leaders else True
    everywhere = all(comm.allgather(seen))
    comm.Barrier()
    if comm.Get_rank() == 0:
        os.remove(token)
    return everywhere


def report(comm):
    """The check's lines on rank 0 (None on the others); collective over ``comm`` (COMM_WORLD)."""
    from mpi4py import MPI  # noqa: PLC0415 mpi4py

    rank, world = comm.Get_rank(), comm.Get_size()
    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
    local_size = local.Get_size()
    leader = comm.allgather(local.allreduce(rank, op=MPI.MIN))  # each rank's node, named by its lowest rank
    local.Free()
    names = comm.allgather(mpilib.processor_name())
    nodes = sorted(set(leader))
    threads = busy.set_threads(comm)
    cores = busy.usable_cores()
    package = PACKAGE
    folder, cached = numba_cache(package)
    total = kernels_in_source(package)
    fs = file_system(folder)
    shared = _shared(comm, folder, nodes) if len(nodes) > 1 else True
    within = next((r for r in range(1, world) if leader[r] == leader[0]), None)
    between = next((r for r in range(1, world) if leader[r] != leader[0]), None)
    links = {key: message_times(comm, peer, (1, MIB // 8)) for key, peer in (("within", within), ("between", between))
             if peer is not None}
    facts = comm.gather(dict(started=started_by(), over=local_size * threads > cores, cores=cores,
                             local=local_size, bad=thread_variables_ignored()), root=0)
    if rank != 0:
        return None
    per_node = [[r for r in range(world) if leader[r] == n] for n in nodes]
    warnings = []
    lines = [f"refsgd check: {world} rank(s) on {len(nodes)} node(s)",
             f"  MPI library: {' '.join(mpilib.library_version(first_line=True).split())}",
             f"  started by: {', '.join(sorted({f['started'] for f in facts}))}",
             "  nodes (MPI_COMM_TYPE_SHARED): " + "; ".join(f"{names[g[0]]} ranks {ranges(g)}" for g in per_node),
             f"  ranks per node: {', '.join(sorted({str(len(g)) for g in per_node}))}",
             f"  threads per rank (BLAS, Numba): {threads}",
             "  cores per rank: " + "; ".join(f"{names[g[0]]} {facts[g[0]]['cores'] / len(g):.2g} "
                                              f"({facts[g[0]]['cores']} usable / {len(g)} ranks)" for g in per_node),
             f"  Numba cache: {folder} ({fs or 'file system unknown'}): {cached} of {total} kernels cached"]
    for key, peer in (("within", within), ("between", between)):
        if peer is None:
            lines.append(f"  ping-pong {key} nodes: no pair of ranks" + (" on one node" if key == "within" else ""))
            continue
        t = links[key]
        where = f"{names[0]}" if key == "within" else f"{names[0]} and {names[peer]}"
        lines.append(f"  ping-pong {key} {'node' if key == 'within' else 'nodes'} {where} (ranks 0 and {peer}): "
                     f"latency {1e6 * t[1]:.3g} us, bandwidth {MIB / t[MIB // 8] / 1e9:.3g} GB/s (one value and 1 MiB "
                     "one way, fastest of 20)")
    if any(f["over"] for f in facts):
        bad = sorted({names[leader[r]] for r, f in enumerate(facts) if f["over"]})
        fix = "fewer ranks per node" + (", or --blas-threads 1 (OMP_NUM_THREADS=1)" if threads > 1 else "")
        warnings.append(f"oversubscribed: ranks x threads exceed the usable cores on {', '.join(bad)}: {fix}")
    for line in sorted({b for f in facts for b in f["bad"]}):
        warnings.append(line)
    if world == 1:
        warnings.append("a world of one rank: this checks no launch; start it as the job starts refsgd train "
                        "(mpiexec -n 4 refsgd check, srun refsgd check)")
    if cached == 0:
        warnings.append("the Numba cache is cold: every rank compiles refsgd's kernels on first use (tens of "
                        "seconds, all ranks at once): run `refsgd compile` once before the job")
    if not os.access(folder, os.W_OK):
        warnings.append(f"the Numba cache {folder} is not writable: Numba caches elsewhere (NUMBA_CACHE_DIR sets "
                        "where)")
    if shared is False:
        warnings.append(f"the Numba cache {folder} is not the same folder on every node: each node compiles on "
                        "first use (`refsgd compile` on each node, or a shared NUMBA_CACHE_DIR)")
    if fs in NETWORK_FS:
        warnings.append(f"the Numba cache is on a network file system ({fs}): every rank reads it at start-up; "
                        "warm it with `refsgd compile`, or set NUMBA_CACHE_DIR to a node-local disk")
    lines.append("warnings: " + ("none" if not warnings else ""))
    lines += [f"  - {w}" for w in warnings]
    return lines


def warm(models, dtypes):
    """Train every method 3 iterations for each of ``models`` x ``dtypes`` in MPI_COMM_SELF;
    returns (seconds, the methods left out, the cache's folder, kernels cached, kernels in all)."""
    from mpi4py import MPI  # noqa: PLC0415 mpi4py

    from refsgd.registry import METHODS  # noqa: PLC0415 start-up
    t0 = time.perf_counter()
    skipped = set()
    for model in models:
        for dtype in dtypes:
            for algo in METHODS:
                try:
                    api.train(algo, comm=MPI.COMM_SELF, log=None, model=model, dtype=dtype, iterations=3,
                              eval_every="1it")
                except AgreedError as e:
                    if "needs a server" not in str(e):
                        raise
                    skipped.add(algo)
    package = PACKAGE
    folder, cached = numba_cache(package)
    return time.perf_counter() - t0, sorted(skipped), folder, cached, kernels_in_source(package)
