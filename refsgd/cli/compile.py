"""``refsgd compile``: warm the Numba cache once before a job (refsgd.launch.warm), so that its
ranks load refsgd's kernels instead of compiling them all at once on first use."""

import os

from refsgd import launchenv
from refsgd.errors import RefsgdError
from refsgd.registry import METHODS


def add(sub):
    p = sub.add_parser("compile", help="warm the Numba cache before a job (once, not under mpiexec)",
                       description="Warm the Numba cache once before a job: trains every method for a few "
                                   "iterations in this process (nothing written), so that the job's ranks "
                                   "load refsgd's kernels instead of compiling them on first use. Run it on a "
                                   "login node when the cache (beside the package, or NUMBA_CACHE_DIR) is on a "
                                   "shared file system, else once on each node. Refused under mpiexec (it runs in one "
                                   "process); a NUMBA_CACHE_DIR that is not a folder, or no kernel cached at the "
                                   "end, is an error (exit code 2).")
    p.add_argument("--model", action="append", default=None, metavar="MODEL",
                   help="a model the job trains (repeatable; default digits_tiny; `refsgd models` lists them)")
    p.add_argument("--dtype", action="append", choices=("float32", "float64"), default=None,
                   help="a dtype the job trains in (repeatable; default both)")


def run(args, parser):
    launchenv.one_process("compile")  # each rank would compile the same kernels into the same cache
    given = os.environ.get("NUMBA_CACHE_DIR")
    if given is not None and (not given.strip() or (os.path.exists(given) and not os.path.isdir(given))):
        raise RefsgdError(f"NUMBA_CACHE_DIR={given!r} is not a folder: Numba cannot cache the kernels there (set it "
                          "to a folder, or unset it for the cache beside refsgd's modules)")
    from refsgd import launch  # noqa: PLC0415 start-up: NumPy, Numba and mpi4py, which --help does without
    models = args.model or ["digits_tiny"]
    dtypes = args.dtype or ["float32", "float64"]
    seconds, left, folder, cached, total = launch.warm(models, dtypes)
    if cached == 0:  # the command's one purpose failed
        raise RefsgdError(f"no kernel was cached in {folder} (0 of {total}) after {seconds:.1f} s of compiling: "
                          "Numba could not write there (a read-only folder? NUMBA_CACHE_DIR sets where)")
    print(f"refsgd compile: {len(METHODS) - len(left)} methods x {', '.join(models)} x {', '.join(dtypes)} in "
          f"{seconds:.1f} s; the Numba cache {folder} holds {cached} of {total} kernels"
          + (f" ({', '.join(left)} need 2 ranks: their kernels are the others')" if left else ""))
    return 0
