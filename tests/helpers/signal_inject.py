"""Run `refsgd ARGS` and raise a signal in every rank (or RANKS) at a named moment of its life
(tests only): the deterministic form of "a signal at any moment from the first instruction to
the last".

    mpiexec -n 2 python tests/helpers/signal_inject.py PHASE SIGNAL[:RANKS] train --iterations 30 ...

PHASE is one of PHASES: the moment the process sends SIGNAL (SIGINT or SIGTERM) to itself, as
scancel or a Ctrl-C would; or BEFORE, before refsgd's first instruction, where SIGNAL may also be
EXIT (the rank ends with exit code 1, as an import that fails on one node). Nothing of refsgd is imported before the command's entry point
(refsgd.entry), as with the `refsgd` console script; the hooks are import hooks and wrappers
around refsgd's functions, installed as the modules load.
"""

import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this checkout's refsgd

#: the moments, in the order a run meets them
PHASES = ("start", "imports", "mpi-import", "mpi-up", "data", "collective", "loop", "write", "exit")
#: before refsgd's first instruction (the interpreter's start-up): Python's default handlers apply
BEFORE = "interpreter"
#: the moments of any command (tests/test_signals_commands.py): ``after@S`` S seconds after the
#: handlers are installed (from a thread, as a signal from outside lands); ``gc@K`` inside the
#: garbage collector's K-th collection after that (a callback whose exceptions Python only prints:
#: the stop that was lost), ``gc@+S`` inside its first collection S seconds after it (most
#: collections come with the imports: a count reaches the command's work only by chance); ``file``
#: when the command's first atomic write (refsgd.files.atomic_path)
#: has written its temporary file and not yet renamed it. A moment the command never reaches is
#: replaced by its end ("inject: at exit" on stderr): the signal still comes, after the command's work.
COMMAND_PHASES = ("after", "gc", "file")


def main():
    phase, spec = sys.argv[1], sys.argv[2]
    phase, _, arg = phase.partition("@")
    name, _, ranks = spec.partition(":")
    sig = None if name == "EXIT" else getattr(signal, name)
    # the launcher's rank: hydra's PMI_RANK, Open MPI's OMPI_COMM_WORLD_RANK (refsgd not imported yet)
    rank = int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    if phase not in PHASES + COMMAND_PHASES + (BEFORE,):
        raise SystemExit(f"unknown phase {phase!r}")
    armed = ranks == "" or str(rank) in ranks.split(",")
    if phase == BEFORE and armed:
        if sig is None:  # EXIT: the rank ends with exit code 1 before MPI_Init, as a failed import on one node
            os._exit(1)
        os.kill(os.getpid(), sig)

    fired = []

    def fire(where):
        if armed and not fired:
            fired.append(where)
            os.kill(os.getpid(), sig)  # the handler runs at the next bytecode, here

    sys.argv = ["refsgd"] + sys.argv[3:]
    import refsgd
    from refsgd import failure
    if os.path.exists(os.path.join(os.path.dirname(refsgd.__file__), "entry.py")):
        from refsgd.entry import main as command
    else:  # refsgd before its entry module (the tests' "before" runs)
        from refsgd.cli import main as command
    if phase in COMMAND_PHASES:
        install = failure.install

        def install_then_arm(*a, **kw):
            install(*a, **kw)
            _arm(phase, arg, fire, fired)
        failure.install = install_then_arm
    if phase == "file":
        sys.meta_path.insert(0, _Patcher(phase, fire))
    if phase == "start":
        install = failure.install

        def install_then_fire(*a, **kw):
            install(*a, **kw)
            fire("start")
        failure.install = install_then_fire
    if phase in ("imports", "mpi-import", "mpi-up"):
        sys.meta_path.insert(0, _Finder(phase, fire))
    if phase in ("data", "collective", "loop", "write"):
        sys.meta_path.insert(0, _Patcher(phase, fire))
    code = command(sys.argv[1:])
    if phase == "exit":
        fire("exit")
    if phase in COMMAND_PHASES and not fired:
        os.write(2, b"inject: at exit\n")
        fire("exit")
        import time
        time.sleep(5)  # the handler ends the process (its command has returned)
    return code


def _arm(phase, arg, fire, fired):
    """Start the moment ``after@S`` or ``gc@K`` (COMMAND_PHASES), once the handlers are in place."""
    import gc
    import threading
    if phase == "after":
        threading.Timer(float(arg), fire, ("after",)).start()
    elif phase == "gc":
        seen = [0]
        count = 0 if arg.startswith("+") else int(arg)

        def inside_collection(stage, info):
            if stage == "start":
                seen[0] += 1
                if seen[0] > count:
                    gc.callbacks.remove(inside_collection)
                    fire("gc")
                    sum(range(100))  # the handler runs here, inside the collector's callback
        if arg.startswith("+"):   # the first collection S seconds from now
            threading.Timer(float(arg[1:]), gc.callbacks.append, (inside_collection,)).start()
        else:
            gc.callbacks.append(inside_collection)


def _mpi_state():
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None:
        return None
    if not hasattr(mpi, "COMM_WORLD"):
        return "importing"
    return "up" if mpi.Is_initialized() and not mpi.Is_finalized() else None


class _Finder:
    """An import hook that fires at the first import of the phase (it finds nothing itself)."""

    def __init__(self, phase, fire):
        self.phase, self.fire, self.done = phase, fire, False

    def find_spec(self, name, path, target=None):
        if self.done:
            return None
        if self.phase == "mpi-import" and name == "mpi4py.MPI":
            return self.inside(name, path)
        state = _mpi_state()
        if (self.phase == "imports" and name == "numpy") or \
                (self.phase == "mpi-import" and state == "importing") or (self.phase == "mpi-up" and state == "up"):
            self.done = True
            self.fire(self.phase)
        return None

    def inside(self, name, path):
        """mpi4py.MPI's spec, whose module fires once it is in sys.modules, before its body runs
        (a signal handler then meets a partially initialised module, as a Ctrl-C during the import)."""
        import importlib.util
        self.done = True  # the finders after this one (mpi4py has its own) find the module
        spec = importlib.util.find_spec(name)
        run_body, fire = spec.loader.exec_module, self.fire

        def fire_then_run(module):
            assert sys.modules.get(name) is module and not hasattr(module, "COMM_WORLD")
            fire("mpi-import")
            run_body(module)
        spec.loader.exec_module = fire_then_run
        return spec


class _Patcher:
    """An import hook that wraps a refsgd function as soon as its module is loaded."""

    TARGETS = {"data": ("refsgd.datasets", "load", "before"), "collective": ("refsgd.api", "prepare", "after"),
               "loop": ("refsgd.run", None, None), "write": ("refsgd.metrics", "gather", "after"),
               "file": ("refsgd.files", "atomic_path", "written")}

    def __init__(self, phase, fire):
        self.phase, self.fire = phase, fire
        self.module, self.func, self.when = self.TARGETS[phase]

    def find_spec(self, name, path, target=None):
        if name != self.module:
            return None
        sys.meta_path.remove(self)
        from importlib.machinery import PathFinder
        spec = PathFinder.find_spec(name, path)
        load = spec.loader.exec_module

        def load_then_patch(module):
            load(module)
            self.patch(module)
        spec.loader.exec_module = load_then_patch
        return spec

    def patch(self, module):
        fire, phase, when = self.fire, self.phase, self.when
        if phase == "loop":
            record = module.Run._record  # the end of every iteration, in the main thread of every method

            def fire_then_record(run, *a, **kw):
                if run.t == 3:
                    fire(phase)
                return record(run, *a, **kw)
            module.Run._record = fire_then_record
            return
        original = getattr(module, self.func)
        if when == "written":
            import contextlib

            @contextlib.contextmanager
            def written_then_fire(*a, **kw):
                with original(*a, **kw) as tmp:
                    yield tmp
                    fire(phase)  # the temporary file is written, not yet renamed into place
            setattr(module, self.func, written_then_fire)
            return

        def wrapped(*a, **kw):
            if when == "before":
                fire(phase)
            out = original(*a, **kw)
            if when == "after":
                fire(phase)
            return out
        setattr(module, self.func, wrapped)

if __name__ == "__main__":
    sys.exit(main())
