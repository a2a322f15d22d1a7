"""``refsgd reproduce NAME | all | --list``: the papers' claims at small scale (refsgd.reproduce)."""

from refsgd import failure
from refsgd.cli import cmdoptions
from refsgd.cli.cmdoptions import positive_int
from refsgd.comm.link import Link
from refsgd.errors import RefsgdError


def add(sub):
    r = sub.add_parser("reproduce", help="the papers' claims, run at small scale: the paper's number beside ours",
                       description="Run a claim of one of the five papers (or all of them) at small scale: its "
                                   "variants with one shared set of hyperparameters, once per seed, as `mpiexec -n "
                                   "RANKS refsgd train` runs (launched here: run it without mpiexec). Writes "
                                   "OUT_DIR/NAME.md (the paper quoted verbatim, the regime, every check's "
                                   "two-sided band with each seed's number, a verdict: reproduced, partly, not "
                                   "reproduced or not testable here), NAME.json (every number, the commands, "
                                   "versions, machine and load) and NAME.png, and rewrites OUT_DIR/index.md (and "
                                   "OUT_DIR.md beside the folder where that already is such an index): one line per "
                                   "claim. The accuracy claims need MNIST (`refsgd data download mnist`, or --data). "
                                   "--list shows the claims.",
                       epilog="example: refsgd reproduce laga-table1 --seeds 3 --out-dir results")
    r.add_argument("name", nargs="?", metavar="NAME", help="a claim (--list) or all")
    r.add_argument("--list", action="store_true", help="list the claims: name, paper, figure, claim, the paper's number")
    r.add_argument("--seeds", type=positive_int, default=None,
                   help="seeds of every claim, at most 20 (default: each claim's own, as --list says: 3, or 5 for a claim "
                        "that takes under a minute per seed, so that its spread shows; 1 with --quick)")
    r.add_argument("--quick", action="store_true",
                   help="one seed, each run at most 40 iterations (or its shorter epochs): a smoke test of every "
                        "claim (all in under 5 minutes), not a result")
    cmdoptions.add(r, "data", help="MNIST or CIFAR-10 from `refsgd data convert`, for every claim (default: MNIST "
                                   "from `refsgd data download mnist`'s cache for the accuracy claims, the embedded "
                                   "digits for the timing claims)")
    r.add_argument("--ranks", type=positive_int, default=2,
                   help="MPI ranks of each run, at most 4 per core (default 2; one per core, or the timing checks "
                        "are not testable)")
    cmdoptions.add(r, "link", default=None,
                   help="the emulated link of the timing claims (default: chosen from the measured compute, "
                        "as each claim says); the real-link claims (-cluster) limit their link to this bandwidth")
    cmdoptions.add_out_dir(r, "output folder (default ./reproduce)", default="reproduce")
    r.add_argument("--force", action="store_true", help="replace existing outputs in --out-dir")
    r.add_argument("--rejudge", action="store_true",
                   help="run nothing: judge the results already in --out-dir (NAME.json, or every claim's with all) "
                        "again with this version's checks and verdict, and rewrite their pages, figures and the "
                        "index (needs --force: it replaces them)")




def run(args, parser):
    from refsgd import reproduce  # noqa: PLC0415 start-up: the claims' modules, not needed by --help
    if args.list:
        print(reproduce.list_text())
        return 0
    if not args.name:
        parser._innermost(args).error("give a claim's NAME, all, or --list")
    chosen = reproduce.names(args.name)  # an unknown name before anything runs
    if args.rejudge:
        for r in reproduce.rejudge_folder(args.name, args.out_dir, args.force,
                                          log=lambda line: failure.say(f"reproduce: {line}")):
            print(f"{r['name']:<18} {r['verdict']:<18} {r['why']}")
        return 0
    if args.link is not None:
        if not args.link.strip():
            raise RefsgdError("--link '': give the link as LATENCY_US,GBIT_S (e.g. 50,10), or leave --link out")
        Link.parse(args.link)
        untimed = [c.name for c in chosen if not any(check.timing for check in c.checks)]
        if len(untimed) == len(chosen):  # `all` has timing claims, which take it
            raise RefsgdError(f"--link does not apply to {', '.join(untimed)}: it sets the link of the timing "
                              "claims, and no check of this claim measures time")
    setup = reproduce.Setup(ranks=args.ranks, data=args.data, link=args.link, quick=args.quick,
                            seeds=args.seeds)
    setup.kind  # noqa: B018 reading it refuses a dataset reproduce cannot use, before anything runs
    results = reproduce.reproduce(args.name, setup, args.out_dir, force=args.force,
                                  log=lambda line: failure.say(f"reproduce: {line}"))
    for r in results:
        print(f"{r['name']:<18} {r['verdict']:<18} {r['why']}")
    return 0

