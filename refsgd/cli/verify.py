"""``refsgd verify A B``: compare two traces step by step (refsgd.trace.verify)."""

from refsgd.cli.cmdoptions import nonneg_float


def add(sub):
    p = sub.add_parser("verify", help="compare two traces step by step",
                       description="Compare two traces (refsgd train --trace, refsgd golden, or another "
                                   "implementation's file in the same schema): first the configuration, "
                                   "the initial weights and the batches, then every step and worker. "
                                   "Prints the first step and worker where they differ and the size of "
                                   "the difference; exit code 1 on a mismatch.")
    p.add_argument("a", help="trace A")
    p.add_argument("b", help="trace B (the reference: relative differences are taken against it)")
    p.add_argument("--rtol", type=nonneg_float, default=1e-10, help="relative tolerance (default 1e-10)")
    p.add_argument("--atol", type=nonneg_float, default=1e-12, help="absolute tolerance (default 1e-12)")
    p.add_argument("--prefix", action="store_true",
                   help="compare only the steps both traces have (default: a different length is a mismatch)")


def run(args, parser):
    from refsgd import trace  # noqa: PLC0415 start-up: h5py, not needed by --help
    ok, lines = trace.verify(args.a, args.b, rtol=args.rtol, atol=args.atol, prefix=args.prefix)
    print("\n".join(lines))
    return 0 if ok else 1
