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


def main():
    phase, spec = sys.argv[1], sys.argv[2]
    name, _, ranks = spec.partition(":")
    sig = None if name == "EXIT" else getattr(signal, name)
    # the launcher's rank: hydra's PMI_RANK, Open MPI's OMPI_COMM_WORLD_RANK (refsgd not imported yet)
    rank = int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    if phase not in PHASES + (BEFORE,):
        raise SystemExit(f"unknown phase {phase!r}")
    armed = ranks == "" or str(rank) in ranks.split(",")
    if phase == BEFORE and armed:
        if sig is None:  # EXIT: the rank ends with exit code 1 before MPI_Init, as a failed import on one node
            os._exit(1)
        os.kill(os.getpid(), sig)

    def fire(where):
        if armed:
            os.kill(os.getpid(), sig)  # the handler runs at the next bytecode, here

    sys.argv = ["refsgd"] + sys.argv[3:]
    import refsgd
    from refsgd import failure
    if os.path.exists(os.path.join(os.path.dirname(refsgd.__file__), "entry.py")):
        from refsgd.entry import main as command
    else:  # refsgd before its entry module (the tests' "before" runs)
        from refsgd.cli import main as command
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
    return code


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
               "loop": ("refsgd.run", None, None), "write": ("refsgd.metrics", "gather", "after")}

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
