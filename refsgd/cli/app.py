"""The ``refsgd`` command line: the parser of every command and the handling of every error.

Each command is a module of this package (``add(sub)`` adds its parser, ``run(args, parser)``
runs it); their options come from the table of refsgd.options through refsgd.cli.cmdoptions.
Every user error (a bad flag value, a missing or malformed file, a spec that does not parse)
ends with one line ``refsgd: error: ...`` on stderr and exit code 2, never a traceback.
"""

import argparse
import os
import re
import sys
import traceback
import warnings

import numpy as np

from refsgd import failure, launchenv
from refsgd.errors import RankFailure, RefsgdError, Stopped, did_you_mean
from refsgd.version import __version__
from refsgd.cli import bench, check, compile, conformance, data, golden, models, report, reproduce, train, verify
from refsgd.cli.words import is_mpi_command

#: command -> its module, in the order of `refsgd --help`
COMMANDS = {"train": train, "golden": golden, "verify": verify, "conformance": conformance, "report": report,
            "models": models, "data": data, "bench": bench, "reproduce": reproduce, "check": check, "compile": compile}


def build_parser():
    parser = _Parser(
        prog="refsgd",
        description="Reference implementations of distributed SGD methods (MPI, NumPy, Numba).",
        epilog=exit_codes_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"refsgd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS.values():
        command.add(sub)
    return parser


def exit_codes_epilog():
    """``refsgd --help``'s table of exit codes (failure.EXIT_CODES)."""
    return "exit codes:\n" + "\n".join(f"  {code:<8}{what}" for code, what in failure.EXIT_CODES)


def main(argv=None):
    try:  # whole lines reach a pipe (mpiexec, a file) as they are printed
        sys.stdout.reconfigure(line_buffering=True)
    except (AttributeError, ValueError):
        pass
    parser = build_parser()
    args = parser.parse_args(argv)
    # SIGINT/SIGTERM: stop together at the loss check, or end every rank (refsgd.entry installs
    # the handlers as its first instruction; a caller of main() without it gets them here)
    failure.install(mpi_command=_is_mpi_command(args))
    np.seterr(all="ignore")  # non-finite values are detected and reported by refsgd itself, once
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    try:
        return _dispatch(args, parser)
    except Stopped as e:
        failure.STOP.unwound()
        if e.collective:  # every rank stops at the same boundary
            if _rank() == 0:
                failure.say(f"refsgd: {e}")
            return e.code
        return failure.abort_world(e.code, f"refsgd: {e}")
    except RefsgdError as e:
        if e.collective or failure.world_size() == 1:
            if _rank() == 0 and not e.quiet:  # an argparse error of another rank is already a whole line
                failure.say(str(e) if _ARGPARSE_ERROR.match(str(e)) else f"refsgd: error: {e}")
            return failure.EXIT_USER
        # this rank alone: the others may be waiting in a collective, so end them all
        return failure.abort_world(failure.EXIT_USER, f"refsgd: error: {e} (rank {_rank()})")
    except RankFailure as e:
        return failure.abort_world(failure.EXIT_RANK, f"refsgd: error: {e}")
    except KeyboardInterrupt:  # a command without MPI (golden, verify, ...)
        failure.say("refsgd: interrupted")
        return failure.EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except SystemExit as e:  # a rank leaving on its own while the others may wait for it
        if failure.world_size() > 1:
            code = e.code if isinstance(e.code, int) and e.code else failure.EXIT_RANK
            return failure.abort_world(code, f"refsgd: error: rank {_rank()} exited on its own (code {e.code})")
        raise
    except Exception as e:
        lost = failure.STOP.swallowed_stop()
        if lost is not None:  # the stop, replaced by C code with an error of its own (see refsgd.entry)
            failure.STOP.unwound()
            return failure.abort_world(failure.exit_code(lost), "refsgd: {} ({})".format(*failure.describe(lost)))
        line = _peer_failure(e)
        if line:  # not a bug of refsgd's: one line, and the world ends (no traceback wall)
            return failure.abort_world(failure.EXIT_RANK, line)
        # a bug on one rank must not leave the others waiting in a collective forever
        traceback.print_exc()
        return failure.abort_world(failure.EXIT_INTERNAL, f"refsgd: internal error on rank {_rank()} (traceback above)"
                                   if failure.world_size() > 1 else None)


#: MPI error classes of a failed peer or link (MPICH's "Communication error with rank 1" is class
#: ERR_OTHER; ULFM-style libraries name the dead process): not a bug of the caller's
_PEER_FAILURE_CLASSES = ("ERR_OTHER", "ERR_INTERN", "ERR_UNKNOWN", "ERR_PROC_FAILED", "ERR_PROC_FAILED_PENDING",
                         "ERR_REVOKED", "ERR_PROC_ABORTED")


def _peer_failure(exc):
    """The line for an MPI call of this rank that failed because a peer rank died (kill -9, the OOM
    killer) or its link failed, or None for any other exception: a surviving rank that sees the
    death first must not print a traceback as if refsgd had a bug."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not isinstance(exc, mpi.Exception):
        return None
    classes = {getattr(mpi, name) for name in _PEER_FAILURE_CLASSES if hasattr(mpi, name)}
    if exc.Get_error_class() not in classes:
        return None
    lines = [line.strip() for line in exc.Get_error_string().splitlines() if line.strip()]
    said = lines[0].removesuffix(", error stack:") if lines else "MPI error"
    if len(lines) > 1:  # MPICH's stack ends in the cause: "...(...): Communication error with rank 1"
        said += ": " + lines[-1].rsplit("): ", 1)[-1]
    where = [f for f in traceback.extract_tb(exc.__traceback__) if f"{os.sep}refsgd{os.sep}" in f.filename]
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # above refsgd/
    at = f" in {os.path.relpath(where[-1].filename, top)} line {where[-1].lineno}" if where else ""
    return (f"refsgd: error: rank {_rank()}: an MPI call failed{at} ({said}): another rank most likely ended "
            "(killed, out of memory) or the link to it failed; every rank is ended")


def _dispatch(args, parser):
    command = COMMANDS.get(args.command)
    if command is None:
        parser.print_help()
        return 2
    return command.run(args, parser)


def _is_mpi_command(args):
    """Commands whose ranks communicate (their first collective is :func:`refsgd.api.on_every_rank`)."""
    return (args.command == "train" and not args.list) or args.command == "check" or \
        (args.command == "bench" and getattr(args, "bench_command", None) in ("overlap", "codec"))


def _rank():
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        return mpi.COMM_WORLD.Get_rank()
    return launchenv.launcher_rank() or 0


#: an error argparse has already written out whole (``refsgd train: error: ...``)
_ARGPARSE_ERROR = re.compile(r"^refsgd( [a-z]+)*: error: ")


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors printed once under mpiexec instead of once per rank.

    An MPI command (train, bench overlap) takes part in the ranks' first collective with its
    error, so that rank 0 prints it once, naming the ranks it came from (an MPMD launch may
    give one rank a bad flag), and every rank exits 2. Any other command prints on the
    launcher's rank 0 only. An unknown flag is reported by the command it was given to, with
    that command's usage, except an unrecognized one: one line naming the option it resembles
    ("did you mean --epochs?"). A flag is never taken for a longer one it abbreviates (``--epoch``
    is not ``--epochs``), so that a typo cannot silently mean another option."""

    def __init__(self, *a, **kw):
        kw.setdefault("allow_abbrev", False)
        super().__init__(*a, **kw)

    def parse_args(self, args=None, namespace=None):
        args = _negative_link_values(sys.argv[1:] if args is None else list(args))
        ns, extra = self.parse_known_args(args, namespace)
        if extra:
            p = self._innermost(ns)
            p._usage = False  # one line: the usage of ~40 options would hide the suggestion
            p.error("unrecognized arguments: " + " ".join(extra) + p._suggestion(extra))
        return ns

    def _suggestion(self, extra):
        """" (did you mean --epochs?)" for the first unknown option that resembles one of this
        command's options (difflib, as refsgd.train's keywords), and where the options are listed."""
        flags = [s for a in self._actions for s in a.option_strings if s.startswith("--")]
        for word in extra:
            if word.startswith("--") and len(word) > 2:
                close = did_you_mean(word.split("=", 1)[0], flags, cutoff=0.75)
                if close:
                    return close
        return f"; `{self.prog} --help` lists the options"

    def _innermost(self, ns):
        """The (sub)command parser that ``ns`` was parsed by: refsgd, refsgd bench, refsgd bench overlap, ..."""
        p = self
        for key in ("command", "bench_command", "data_command"):
            subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
            name = getattr(ns, key, None)
            if subs and name in subs[0].choices:
                p = subs[0].choices[name]
        return p

    _usage = True  # print the usage line(s) before an error

    def error(self, message):
        text = f"{self.prog}: error: {message}"
        if launchenv.launcher_size() not in (None, 1) and is_mpi_command(sys.argv[1:]):
            from mpi4py import MPI  # noqa: PLC0415 mpi4py
            errors = MPI.COMM_WORLD.allgather(text)
            if MPI.COMM_WORLD.Get_rank() == 0:
                from refsgd.api import agreed_message  # noqa: PLC0415 start-up: api loads h5py and the models, --help needs neither
                if self._usage:
                    self.print_usage(sys.stderr)
                failure.say(agreed_message(errors))
            sys.exit(failure.EXIT_USER)
        if launchenv.launcher_rank() in (None, 0):
            if self._usage:
                self.print_usage(sys.stderr)
            failure.say(text)
        sys.exit(failure.EXIT_USER)


def _negative_link_values(argv):
    """``--link -5,1`` as ``--link=-5,1``: argparse takes "-5,1" for a flag ("expected one
    argument"); written with "=", the value reaches Link.parse, which names the negative latency."""
    out = []
    for a in argv:
        if out and out[-1] in ("--link", "--local-link") and re.match(r"^-[\d.]", a):
            out[-1] = f"{out[-1]}={a}"
        else:
            out.append(a)
    return out

