"""``refsgd conformance``: check another implementation against the golden trajectories
(refsgd.conformance), or export the suite as plain files and check what comes back."""

import argparse
import os
import tempfile
import time

from refsgd import failure
from refsgd.errors import RefsgdError

EPILOG = """examples:
  refsgd conformance mypkg.mymodule:MyBackend          the table; conformance.json and conformance.md
  refsgd conformance my_backend.py:Backend --include '^ssgd' --traces traces/
  refsgd conformance export suite/ --algo dcs3gd       inputs and expected states, HDF5 and NPY
  refsgd conformance check suite/                      compare suite/*/result/ with the expected states

The same suite runs under pytest: pytest --pyargs refsgd.conformance --backend mypkg.mymodule:MyBackend
(docs/conformance.md)."""


def add(sub):
    p = sub.add_parser("conformance", help="check another implementation against the golden trajectories",
                       description="Run an implementation (a refsgd.conformance.Backend) through every configuration\n"
                                   "of refsgd's conformance suite, as ONNX's backend tests do for runtimes, and print\n"
                                   "the table method x world size x dtype x codec -> pass / fail (the first step,\n"
                                   "worker, array and index that differ) / not declared. Or export the suite's inputs\n"
                                   "and expected states as files for an implementation in another language, and check\n"
                                   "the states it writes back.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="BACKEND | export DIR | check DIR",
                   help="module.path:Class or path/to/file.py:Class; or export DIR; or check DIR")
    p.add_argument("folder", nargs="?", help=argparse.SUPPRESS)
    p.add_argument("--algo", nargs="+", default=[], metavar="METHOD", help="only these methods (default: all)")
    p.add_argument("--include", action="append", default=[], metavar="REGEX",
                   help="only the configurations whose name matches (re.search; repeatable)")
    p.add_argument("--exclude", action="append", default=[], metavar="REGEX",
                   help="leave out the configurations whose name matches (repeatable)")
    p.add_argument("--report", default="conformance", metavar="NAME",
                   help="write the table to NAME.json and NAME.md (default conformance; '-': no files)")
    p.add_argument("--traces", metavar="DIR", help="keep the backend's traces in DIR (DIR/<name>.h5) and the "
                                                  "expected ones in DIR/expected/, for refsgd verify")
    p.add_argument("--force", action="store_true", help="export: replace configuration folders already in DIR")


def run(args, parser):
    failure.one_process("conformance")  # every rank would run the whole suite, writing the same files
    if args.target in ("export", "check"):
        if not args.folder:
            raise RefsgdError(f"refsgd conformance {args.target} DIR: give the folder")
        return _export(args) if args.target == "export" else _check(args)
    if args.folder:
        raise RefsgdError(f"refsgd conformance {args.target} {args.folder}: one backend (module:Class), or "
                          "export DIR, or check DIR")
    return _suite(args)


def _suite(args):
    # here, not above: NumPy, h5py and the renderings, which `refsgd --help` does without
    from refsgd.conformance.backend import load_backend  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    from refsgd.conformance.suite import FAIL, NOT_DECLARED, References, configurations, run  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    from refsgd.files import check_folder, check_output  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    chosen = configurations(args.include, args.exclude, args.algo)
    if not chosen:
        raise RefsgdError("no configuration matches --include/--exclude/--algo")
    outputs = [] if args.report == "-" else [f"{args.report}.json", f"{args.report}.md"]
    for path in outputs:
        check_output(path, "--report", force=True)
    if args.traces:
        check_folder(args.traces, "--traces")
    backend = load_backend(args.target)
    declared = [c for c in chosen if backend().supports(c)]
    if not declared:
        raise RefsgdError(f"{args.target} declares none of the {len(chosen)} configurations chosen (its methods, "
                          "dtypes, codecs and world_sizes, or supports())")
    print(f"{args.target}: {len(declared)} of {len(chosen)} configurations declared", flush=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="refsgd-conformance-") as tmp:
        folder = args.traces or tmp
        references = References(os.path.join(folder, "expected"))
        os.makedirs(references.folder, exist_ok=True)
        outcomes = []
        for c in chosen:
            o = run(backend, c, references, os.path.join(folder, f"{c.name}.h5"), name=args.target)
            if o.status != NOT_DECLARED:
                print(f"  {c.name}: {o.status}" + (f" {o.message}" if o.status == FAIL else ""), flush=True)
            if o.status == FAIL:                     # verify's report, or the backend's traceback
                print("\n".join("      " + line for line in o.lines), flush=True)
            outcomes.append(o)
    seconds = time.perf_counter() - start
    return _show(outcomes, args.target, seconds, outputs)


def _show(outcomes, name, seconds, outputs):
    from refsgd.conformance import report  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    from refsgd.conformance.suite import FAIL  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    from refsgd.files import atomic_path, write_bytes  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    print()
    print(report.text(outcomes))
    print()
    print(report.summary(outcomes, name, seconds))
    for path, render in zip(outputs, (report.as_json, report.markdown)):
        with atomic_path(path, "the report") as tmp:
            write_bytes(tmp, render(outcomes, name, seconds).encode())
    if outputs:
        print(f"written: {', '.join(outputs)}")
    return 1 if any(o.status == FAIL for o in outcomes) else 0


def _export(args):
    from refsgd.conformance.export import export  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    from refsgd.conformance.suite import configurations  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    from refsgd.files import check_folder  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    chosen = configurations(args.include, args.exclude, args.algo)
    if not chosen:
        raise RefsgdError("no configuration matches --include/--exclude/--algo")
    check_folder(args.folder, "export")
    export(args.folder, chosen, force=args.force)
    print(f"{len(chosen)} configurations exported to {args.folder}; write each one's result/ "
          f"(its README.md says what), then: refsgd conformance check {args.folder}")
    return 0


def _check(args):
    from refsgd.conformance.export import check  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    outcomes = check(args.folder)
    outputs = [] if args.report == "-" else [f"{args.report}.json", f"{args.report}.md"]
    return _show(outcomes, args.folder, None, outputs)
