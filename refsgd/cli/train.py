"""``refsgd train``: train a model with a distributed method (refsgd.api.run)."""

from refsgd import docs
from refsgd.cli import cmdoptions
from refsgd.registry import METHODS


def add(sub):
    p = sub.add_parser("train", help="train a model with a distributed method (mpiexec -n N refsgd train ...)",
                       description="Train a model with a distributed SGD method, one worker per MPI "
                                   "rank: `mpiexec -n 4 refsgd train --algo ssgd`. Rank 0 shows "
                                   "progress, the evaluations and a summary with each rank's split of "
                                   "time into compute, idle (blocked on communication), update (the "
                                   "method's step) and other, beside the time with communication in "
                                   "flight. "
                                   "Defaults train the embedded digits dataset in seconds.")
    cmdoptions.add_training_options(p)


def run(args, parser):
    if args.list:
        print(f"listings, equations and readings: {docs.path('algorithms.md')}\n"
              f"each method's exact step: {docs.path('implementers.md')}")
        for m in METHODS.values():
            print(f"{m.name:<10} {m.summary}; algorithms.md, section '{m.section}'")
        return 0
    from refsgd import api  # noqa: PLC0415 start-up: api loads h5py and the models; `refsgd train --help` needs neither
    api.run(cmdoptions.config_of(args))  # the Namespace stops here: below it, a frozen refsgd.options.Config
    return 0

