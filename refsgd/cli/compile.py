"""``refsgd compile``: warm the Numba cache once before a job, so that its ranks load refsgd's
kernels instead of compiling them all at once on first use (tens of seconds on every rank, and
64 ranks writing the same cache files).

It trains every method for a few iterations in this one process (an MPI world of its own,
``MPI_COMM_SELF``; nothing is written) with the model and dtypes given: the kernels that a run
compiles are those of the model's layers, the method's step and codecs, and the checks, for
the dtype. The methods that need two ranks or more (a parameter server) are left out: their
kernels are those of the others."""

import os
import time


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
    from mpi4py import MPI

    import refsgd
    from refsgd import api
    from refsgd.algorithms import ALGORITHMS
    from refsgd.cli.check import kernels_in_source, numba_cache
    from refsgd.errors import AgreedError
    models = args.model or ["digits_tiny"]
    dtypes = args.dtype or ["float32", "float64"]
    t0 = time.perf_counter()
    skipped = []
    for model in models:
        for dtype in dtypes:
            for algo in ALGORITHMS:
                try:
                    api.train(algo, comm=MPI.COMM_SELF, log=None, model=model, dtype=dtype, iterations=3,
                              eval_every="1it")
                except AgreedError as e:
                    if "needs a server" not in str(e):
                        raise
                    skipped.append(algo)
    package = os.path.dirname(os.path.abspath(refsgd.__file__))
    folder, cached = numba_cache(package)
    left = sorted(set(skipped))
    print(f"refsgd compile: {len(ALGORITHMS) - len(left)} methods x {', '.join(models)} x {', '.join(dtypes)} in "
          f"{time.perf_counter() - t0:.1f} s; the Numba cache {folder} holds {cached} of "
          f"{kernels_in_source(package)} kernels" + (f" ({', '.join(left)} need 2 ranks: their kernels are the "
                                                     "others')" if left else ""))
    return 0
