"""The MPI library this process uses: its text, cleaned before it is stored, and the ``mpiexec``
that belongs to it, with that library's flags.

Text: :func:`text` cleans a string that comes from the MPI library (``MPI.Get_library_version()``
ends in a NUL byte under Open MPI 4.1, which HDF5's variable-length strings refuse); every place
that stores such text (metrics, bench outputs) takes it through :func:`library_version` or
:func:`text`.

Launcher (:func:`launcher`): ``$MPIEXEC`` (split like a shell would) when set; else the first
of these that belongs to the MPI library mpi4py loads (read once, in a child process that does
not initialise MPI: ``MPI.Get_library_version()``), judged by its ``--version``:

1. the ``mpiexec`` beside this Python (what the ``mpich`` wheel installs in the venv);
2. ``mpiexec``, ``mpirun``, ``mpiexec.openmpi``, ``mpiexec.hydra``, ``mpiexec.mpich`` on PATH
   (Debian installs each library's launcher under its own name too).

A venv built with ``REFSGD_SYSTEM_MPI=1`` against Open MPI thus gets Open MPI's mpiexec even when
an MPICH mpiexec comes first on PATH. The launcher's kind brings its flags:

* Open MPI (``mpiexec (OpenRTE) 4.x``, ``mpiexec (Open MPI) 5.x``): ``--oversubscribe`` (it
  refuses more ranks than cores otherwise), ``--quiet`` (no banner after refsgd's one message
  when a rank exits non-zero; the exit code is the rank's, as under hydra), and as root ``OMPI_ALLOW_RUN_AS_ROOT=1
  OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1`` (it refuses root otherwise). Open MPI's ``mpirun`` puts
  every rank in a process group of its own, so a signal to mpirun's group (Ctrl-C, ``kill --
  -PGID``) reaches mpirun alone, which then kills the ranks and exits 1; ``python -m
  refsgd.mpilib`` (:func:`refsgd.mpiranks.forward`) hands SIGINT and SIGTERM to the ranks themselves, as srun and
  scancel do, and the job ends with their 130 or 143 as under MPICH.
* MPICH's hydra (and Intel MPI's, also hydra): no flags.

The variables of an enclosing MPI job (``PMI_*``, ``OMPI_*``, ...) are not passed on when this
process is a rank of one: a launch from inside a rank starts a new job, not a part of the old one.

Command line: ``python -m refsgd.mpilib -n 4 refsgd train ...`` runs ``mpiexec -n 4 refsgd
train ...`` with these flags (``run.sh`` starts training this way); ``python -m refsgd.mpilib
--show`` prints the launcher and its kind. Under hydra, whose banner for a rank that a signal
ended (kill -9, the OOM killer) names only its pid, it notes each rank's pid while the job runs
(:func:`refsgd.mpiranks.ranks_below`) and ends with a line naming the rank and the signal (:func:`refsgd.mpiranks.killed_rank_line`), and after a job that failed it removes the MPICH shared-memory segments
its ranks on this node mapped (:class:`refsgd.mpiranks.Segments`: an aborted job never reaches the
MPI_Finalize that removes them).

Singletons (:func:`refuse_singleton`, called before the first collective of every MPI command):
a launcher that cannot start the library (``srun`` without the PMI it speaks) leaves each process
in a world of one; the launcher's variables give it away, and every process stops with exit
code 2, the launcher's rank 0 printing the one line.

The processes of a running job (tied to this process, signals handed to the ranks, the rank a
signal ended named) are :mod:`refsgd.mpiranks`'s.

This module does not import ``mpi4py.MPI`` at import time: the processes that launch jobs (the
tests, ``refsgd bench all``) must not start an MPI singleton of their own.
"""

import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys

from refsgd import launchenv, mpiranks
from refsgd.errors import RefsgdError

#: launcher variables of an enclosing MPI job, not passed on to the mpiexec started here
LAUNCHER_PREFIXES = ("PMI_", "PMIX_", "HYDRA_", "HYDI_", "OMPI_", "MPIR_", "PRTE_", "OPAL_", "ORTE_")
#: variables that say this process is a rank of a job (or an MPI singleton)
_IN_A_JOB = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_hnp_uri")


def outside_job(base=None):
    """``base`` (default os.environ) without an enclosing job's launcher variables, where this
    process is a rank of one; unchanged otherwise (a user's own OMPI_MCA_* settings stay)."""
    base = os.environ if base is None else base
    if not any(k in base for k in _IN_A_JOB):
        return dict(base)
    return {k: v for k, v in base.items() if not k.startswith(LAUNCHER_PREFIXES)}


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

def singleton_error(world_size, library="", env=None):
    """The one line that refuses a world of one started as one of N processes, or "" when the launch
    is fine. A launcher that cannot start this MPI library (``srun`` without the PMI the library
    speaks, one MPI's mpiexec starting another's ranks) leaves each process alone in a world of
    one: N independent trainings. A process finds it out from the launcher's variables: a size
    above 1 or a rank above 0 while MPI says the world is 1."""
    env = os.environ if env is None else env
    if world_size != 1:
        return ""
    size_name, size = launchenv.launched(launchenv.LAUNCHED_SIZE, env)
    rank_name, rank = launchenv.launched(launchenv.LAUNCHED_RANK, env)
    if not ((size or 0) > 1 or (rank or 0) > 0):
        return ""
    said = f"{size_name}={size}" if size_name and size > 1 else f"{rank_name}={rank}"
    lib = library or "this MPI library"
    fix = ("under Slurm start the ranks with `srun --mpi=pmi2` (the mpich wheel, MPICH, Cray MPICH) or "
           "`srun --mpi=pmix` (Open MPI), or with the library's own mpiexec inside the allocation; "
           "elsewhere use the mpiexec of the MPI that mpi4py loads (python -m refsgd.mpilib --show)")
    return (f"the launcher started several processes ({said}) but MPI made each one a world of 1: {lib} was not "
            f"started by this launcher (it does not speak the launcher's PMI), so the processes would train "
            f"alone; {fix}")


def refuse_singleton():
    """RefsgdError (:func:`singleton_error`) in every process of a launch that MPI left as worlds of
    one; only the launcher's rank 0 carries the message (``quiet`` on the others), so the user
    reads one line. Call with MPI up, before the first collective."""
    from mpi4py import MPI  # noqa: PLC0415 mpi4py: the launcher's side of this module runs without MPI
    line = singleton_error(MPI.COMM_WORLD.Get_size(), " ".join(library_version(first_line=True).split()))
    if line:
        err = RefsgdError(line)
        err.quiet = not launchenv.speaks()  # rank 0 says it, where there is one
        raise err



def text(value):
    """``value`` (str or bytes from the MPI library) as text that can be stored anywhere: trailing
    NULs and blanks dropped, other control characters (an embedded NUL) made spaces, newlines
    and tabs kept."""
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", errors="replace")
    return _CONTROL.sub(" ", str(value).rstrip("\x00 \t\r\n")).strip()


def library_version(first_line=False):
    """``MPI.Get_library_version()``, cleaned (:func:`text`); only its first line with
    ``first_line``."""
    from mpi4py import MPI  # noqa: PLC0415 mpi4py: the launcher's side of this module runs without MPI
    version = text(MPI.Get_library_version())
    return version.splitlines()[0].strip() if first_line and version else version


def processor_name():
    """``MPI.Get_processor_name()``, cleaned (:func:`text`)."""
    from mpi4py import MPI  # noqa: PLC0415 mpi4py: the launcher's side of this module runs without MPI
    return text(MPI.Get_processor_name())


class Launcher:
    """An ``mpiexec`` (``argv``: the program and the flags that always go with it) of a ``kind``
    ("openmpi", "hydra" or "unknown"), and the variables (``env``) it needs."""

    def __init__(self, argv, kind, env=None, version=""):
        self.argv, self.kind, self.env, self.version = list(argv), kind, dict(env or {}), version

    def command(self, n, *program):
        """``mpiexec FLAGS -n n PROGRAM...`` as an argument list."""
        return self.argv + ["-n", str(n), *map(str, program)]

    def mpmd(self, *parts):
        """``mpiexec FLAGS -n n1 PROG1 : -n n2 PROG2 ...``; each part is (n, [program...])."""
        cmd = list(self.argv)
        for i, (n, program) in enumerate(parts):
            cmd += ([":"] if i else []) + ["-n", str(n), *map(str, program)]
        return cmd

    def environ(self, base=None, **extra):
        """``base`` (default os.environ) less an enclosing job's launcher variables, plus this
        launcher's variables and ``extra``."""
        env = outside_job(base)
        env.update(self.env)
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def __str__(self):
        return " ".join(shlex.quote(a) for a in self.argv) + f" ({self.kind})"


_LIBRARY_PROBE = ("import mpi4py; mpi4py.rc.initialize = False; mpi4py.rc.finalize = False\n"
                  "from mpi4py import MPI; print(MPI.Get_library_version())")


def library_kind():
    """"openmpi", "hydra" (MPICH and its derivatives) or "unknown": the MPI library that mpi4py
    loads in this Python, read in a child process that does not initialise MPI (so that a
    launching process never starts an MPI singleton)."""
    try:
        r = subprocess.run([sys.executable, "-c", _LIBRARY_PROBE], capture_output=True, text=True, timeout=120,
                           env=outside_job())
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    out = text(r.stdout)
    if "Open MPI" in out:
        return "openmpi"
    if re.search(r"MPICH|Intel\(R\) MPI|MVAPICH", out):
        return "hydra"
    return "unknown"


def candidates():
    """The mpiexec programs to consider, in the order of this module's docstring (without
    $MPIEXEC)."""
    found = [os.path.join(os.path.dirname(sys.executable), "mpiexec")]
    for name in ("mpiexec", "mpirun", "mpiexec.openmpi", "mpiexec.hydra", "mpiexec.mpich"):
        path = shutil.which(name)
        if path:
            found.append(path)
    out = []
    for path in found:
        if os.access(path, os.X_OK) and path not in out:
            out.append(path)
    return out


def _version_text(argv):
    try:
        r = subprocess.run(argv + ["--version"], capture_output=True, text=True, timeout=60,
                           env=outside_job())
        return r.stdout + r.stderr
    except FileNotFoundError:
        raise RefsgdError(f"cannot start {argv[0]} (set $MPIEXEC to the MPI launcher)") from None
    except (OSError, subprocess.TimeoutExpired):
        return ""


def kind_of(version_text):
    """"openmpi", "hydra" or "unknown" from ``mpiexec --version``'s output."""
    if re.search(r"OpenRTE|Open MPI|Open-MPI|PRRTE", version_text):
        return "openmpi"
    if "HYDRA" in version_text or "Intel(R) MPI" in version_text:
        return "hydra"
    return "unknown"


@functools.lru_cache(maxsize=None)
def launcher():
    """This process's :class:`Launcher` (found once): $MPIEXEC as given, else the first candidate
    whose kind is that of the MPI library mpi4py loads (RefsgdError when there is none)."""
    given = os.environ.get("MPIEXEC", "").strip()
    if given:
        argv = shlex.split(given)
        version = _version_text(argv)
    else:
        want = library_kind()
        seen = []
        for path in candidates():
            version = _version_text([path])
            seen.append(f"{path} ({kind_of(version)})")
            if want == "unknown" or kind_of(version) == want:
                argv = [path]
                break
        else:
            lib = {"openmpi": "Open MPI", "hydra": "MPICH"}.get(want, want)
            raise RefsgdError(f"no mpiexec of mpi4py's MPI library ({lib}) found"
                              + (f" (found {', '.join(seen)})" if seen else "")
                              + ": set $MPIEXEC to its launcher")
    kind = kind_of(version)
    env, flags = {}, []
    if kind == "openmpi":
        flags = ["--oversubscribe", "--quiet"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    return Launcher(argv + flags, kind, env, version_line(version))


def version_line(version_text):
    """The launcher's version in one line from its ``--version`` output: the first line
    ("mpiexec (Open MPI) 5.0.3", "Intel(R) MPI Library ..., Version 2021.6"), or for MPICH's
    hydra, whose first line is only "HYDRA build details:", "HYDRA" and its "Version:" field."""
    lines = [line.strip() for line in version_text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    m = re.search(r"^\s*Version:\s*(\S+)", version_text, re.MULTILINE)
    if lines[0].endswith("build details:") and m:
        return f"{lines[0][:-len('build details:')].strip()} {m.group(1)}"
    return lines[0]


def exit_code(returncode):
    """A launcher's return code as a shell reports it: 128 + N when it was stopped by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def command(n, *program):
    """``mpiexec FLAGS -n n PROGRAM...`` of this process's launcher."""
    return launcher().command(n, *program)


def environ(base=None, **extra):
    """The environment for this process's launcher (:meth:`Launcher.environ`)."""
    return launcher().environ(base, **extra)


def wrapped(n, *program):
    """``python -m refsgd.mpilib -n n PROGRAM...``: a job whose SIGINT and SIGTERM reach the ranks
    under any MPI library (for a process that signals the job's process group)."""
    return [sys.executable, "-m", "refsgd.mpilib", "-n", str(n), *map(str, program)]


def run_job(cmd, env=None, timeout=None):
    """Run the job ``cmd`` (an mpiexec command line) to its end, tied to this process; returns
    its CompletedProcess (stdout and stderr captured as text).

    mpiexec gets a session of its own and, on Linux, SIGTERM when this process ends however it
    ends, kill -9 included (:func:`refsgd.mpiranks.tied`: call this from the main thread); mpiexec, so signalled,
    ends its ranks. Any exception here (the ``timeout`` in seconds, a signal's Stopped,
    KeyboardInterrupt) hands SIGTERM to the ranks (:func:`refsgd.mpiranks.forward`), and SIGKILL to what is left
    10 s later, before it propagates: no rank outlives the command that launched it."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, preexec_fn=mpiranks.tied())
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        stop_job(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def stop_job(proc, grace=10.0):
    """End the job that ``proc`` (an mpiexec in a session of its own) runs: SIGTERM to its ranks,
    SIGKILL to what is left after ``grace`` seconds."""
    mpiranks.forward(proc, signal.SIGTERM, launcher().kind)
    try:
        proc.communicate(timeout=grace)
    except subprocess.TimeoutExpired:
        mpiranks.forward(proc, signal.SIGKILL, launcher().kind)
        proc.kill()
        proc.communicate()


def main(argv=None):
    """``python -m refsgd.mpilib -n N PROGRAM ...``: run PROGRAM under this library's mpiexec;
    SIGINT and SIGTERM reach the ranks (:func:`refsgd.mpiranks.forward`), the job ends with this process
    (:func:`refsgd.mpiranks.tied`), and the exit code is the job's.
    ``--show`` prints the launcher."""
    argv = sys.argv[1:] if argv is None else argv
    job, pending = [], []

    def on_signal(sig, _frame):
        # a signal before mpiexec runs is kept and handed to the ranks once they exist
        if job:
            mpiranks.forward(job[0], sig, launcher().kind)
        else:
            pending.append(sig)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    try:
        lau = launcher()
        if argv[:1] == ["--show"]:
            try:
                print(f"{' '.join(lau.argv)}\nkind: {lau.kind}\nversion: {lau.version}\n"
                      f"variables: {' '.join(f'{k}={v}' for k, v in lau.env.items()) or 'none'}", flush=True)
            except BrokenPipeError:  # piped into `head -1` (run.sh): the reader has what it wanted
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit's flush
            return 0
        if len(argv) < 3 or argv[0] != "-n" or not argv[1].isdigit():
            print("usage: python -m refsgd.mpilib -n N PROGRAM [ARGS...] | --show", file=sys.stderr)
            return 2
        # a session of its own: a signal to this process's group reaches mpiexec only through forward();
        # hydra's output passes through here, for its banner of a rank that a signal ended
        hydra = lau.kind == "hydra"
        job.append(subprocess.Popen(lau.command(int(argv[1]), *argv[2:]), env=lau.environ(),
                                    stdout=subprocess.PIPE if hydra else None, start_new_session=True,
                                    preexec_fn=mpiranks.tied()))
    except RefsgdError as exc:
        print(f"refsgd: error: {exc}", file=sys.stderr)
        return 2
    for sig in pending:
        mpiranks.forward(job[0], sig, lau.kind)
    relay, last = mpiranks.relay_output(job[0].stdout) if hydra else (None, [b""])
    # each rank's pid, noted every half second until every rank is known, and which rank ends
    # first: hydra's banner names only a pid, not always that rank's (killed_rank_line), and
    # Open MPI's mpirun --quiet names none (signalled_rank_line)
    ranks, exits, segments = {}, mpiranks.Exits(), mpiranks.Segments()
    while job[0].poll() is None:
        if len(ranks) < int(argv[1]):
            for pid in mpiranks.ranks_below(job[0].pid, ranks):
                exits.watch(pid)
        segments.note(ranks)
        exits.wait(0.5 if len(ranks) < int(argv[1]) else 0.2)
    exits.close()
    if job[0].returncode != 0:
        segments.remove()  # an aborted job's MPICH segments on this node (MPI_Finalize never ran)
    if hydra:
        relay.join(timeout=10)
        line = mpiranks.killed_rank_line(last[0].decode(errors="replace"), ranks, exits.first)
    else:
        line = mpiranks.signalled_rank_line(exit_code(job[0].returncode), ranks, exits.first)
    if line:
        sys.stdout.flush()
        print(line, file=sys.stderr)
    return exit_code(job[0].returncode)


if __name__ == "__main__":
    sys.exit(main())
