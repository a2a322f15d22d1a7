"""``refsgd compile``: warm the Numba cache once before a job (refsgd.launch.warm), so that its
ranks load refsgd's kernels instead of compiling them all at once on first use."""

from refsgd.registry import METHODS


def add(sub):
    p = sub.add_parser("compile", help="warm the Numba cache before a job (once, not under mpiexec)",
                       description="Warm the Numba cache once before a job: trains every method for a few "
                                   "iterations in this process (nothing written), so that the job's ranks "
                                   "load refsgd's kernels instead of compiling them on first use. Run it on a "
                                   "login node when the cache (beside the package, or NUMBA_CACHE_DIR) is on a "
                                   "shared file system, else once on each node.")
    p.add_argument("--model", action="append", default=None, metavar="MODEL",
                   help="a model the job trains (repeatable; default digits_tiny; `refsgd models` lists them)")
    p.add_argument("--dtype", action="append", choices=("float32", "float64"), default=None,
                   help="a dtype the job trains in (repeatable; default both)")


def run(args, parser):
    from refsgd import launch  # noqa: PLC0415 start-up: NumPy, Numba and mpi4py, which --help does without
    models = args.model or ["digits_tiny"]
    dtypes = args.dtype or ["float32", "float64"]
    seconds, left, folder, cached, total = launch.warm(models, dtypes)
    print(f"refsgd compile: {len(METHODS) - len(left)} methods x {', '.join(models)} x {', '.join(dtypes)} in "
          f"{seconds:.1f} s; the Numba cache {folder} holds {cached} of {total} kernels"
          + (f" ({', '.join(left)} need 2 ranks: their kernels are the others')" if left else ""))
    return 0
