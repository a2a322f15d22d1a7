"""``refsgd conformance``: check another implementation against the golden trajectories
(refsgd.conformance), or export the suite as plain files and check what comes back.

``run BACKEND``, ``export DIR`` and ``check DIR`` are its subcommands; ``--list`` prints the
configurations. ``refsgd conformance BACKEND`` (without ``run``) still works, for one release, and
says the new spelling."""

import argparse
import os
import sys
import tempfile
import time

from refsgd import launchenv
from refsgd.cli import cmdoptions
from refsgd.errors import RefsgdError

EPILOG = """examples:
  refsgd conformance run mypkg.mymodule:MyBackend      the table; conformance.json and conformance.md
  refsgd conformance run my_backend.py:Backend --include '^ssgd' --out-dir traces/
  refsgd conformance export suite/ --algo dcs3gd       inputs and expected states, HDF5 and NPY
  refsgd conformance check suite/                      compare suite/*/result/ with the expected states
  refsgd conformance --list                            the configurations and their options

The same suite runs under pytest: pytest --pyargs refsgd.conformance --backend mypkg.mymodule:MyBackend
(docs/conformance.md)."""

#: subcommand -> the options it takes (besides --list); any other given is refused
TAKES = {"run": ("algo", "include", "exclude", "out", "out_dir"),
         "export": ("algo", "include", "exclude", "force"),
         "check": ("out",)}

#: option -> (its flag, its value when not given)
FLAGS = {"algo": ("--algo", []), "include": ("--include", []), "exclude": ("--exclude", []),
         "out": ("--out", None), "out_dir": ("--out-dir", None), "force": ("--force", False)}


def add(sub):
    p = sub.add_parser("conformance", help="check another implementation against the golden trajectories",
                       description="Run an implementation (a refsgd.conformance.Backend) through every configuration\n"
                                   "of refsgd's conformance suite, as ONNX's backend tests do for runtimes, and print\n"
                                   "the table method x world size x dtype x codec -> pass / fail (the first step,\n"
                                   "worker, array and element that differ) / not declared. Or export the suite's\n"
                                   "inputs and expected states as files for an implementation in another language, and\n"
                                   "check the states it writes back.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", nargs="?", metavar="run BACKEND | export DIR | check DIR",
                   help="run module.path:Class (or path/to/file.py:Class); export DIR; check DIR")
    p.add_argument("folder", nargs="?", help=argparse.SUPPRESS)
    p.add_argument("--list", action="store_true", help="print the configurations and their options, and exit")
    cmdoptions.add_algos(p, "only these methods (default: all)", default=[], several=True)
    p.add_argument("--include", action="append", default=[], metavar="REGEX",
                   help="only the configurations whose name matches (re.search; repeatable)")
    p.add_argument("--exclude", action="append", default=[], metavar="REGEX",
                   help="leave out the configurations whose name matches (repeatable)")
    p.add_argument("--out", default=None, metavar="NAME",
                   help="run, check: write the table to NAME.json and NAME.md (default conformance, in the "
                        "current folder; '-': no files)")
    cmdoptions.add_out_dir(p, "run: keep the backend's traces in DIR (DIR/<name>.h5) and the expected ones in "
                              "DIR/expected/, for refsgd verify")
    cmdoptions.deprecated(p, "--report", "--out", "out")
    cmdoptions.deprecated(p, "--traces", "--out-dir", "out_dir")
    p.add_argument("--force", action="store_true", help="export: replace configuration folders already in DIR")


def run(args, parser):
    launchenv.one_process("conformance")  # every rank would run the whole suite, writing the same files
    for key in ("action", "folder", "out", "out_dir", *[k for k in ("include", "exclude", "algo")]):
        values = getattr(args, key)
        for v in values if isinstance(values, list) else [values]:
            if v is not None and not v.strip():
                backend = key == "action" or args.action == "run"          # the positional a backend is given in
                flag = FLAGS[key][0] if key in FLAGS else ("the backend" if backend else "the folder")
                raise RefsgdError(f"refsgd conformance: {flag} is empty ({v!r}); give a value")
    args.algo = cmdoptions.algos(args.algo)
    if args.list:
        return _list(args)
    command, target = args.action, args.folder
    if command is None:
        raise RefsgdError("refsgd conformance: give run BACKEND, export DIR or check DIR (or --list)")
    if command not in TAKES:                           # the spelling of the release before: BACKEND alone
        if target:
            raise RefsgdError(f"refsgd conformance {command} {target}: run BACKEND, or export DIR, or check DIR")
        print(f"refsgd: note: `refsgd conformance BACKEND` is deprecated (it goes in the next release); "
              f"write `refsgd conformance run {command}`", file=sys.stderr, flush=True)
        command, target = "run", command
    if not target:
        raise RefsgdError(f"refsgd conformance {command} {'BACKEND' if command == 'run' else 'DIR'}: give the "
                          f"{'backend (module:Class)' if command == 'run' else 'folder'}")
    given = [FLAGS[k][0] for k in FLAGS if getattr(args, k) != FLAGS[k][1] and k not in TAKES[command]]
    if given:
        raise RefsgdError(f"refsgd conformance {command}: {', '.join(given)} "
                          f"{'does' if len(given) == 1 else 'do'} not apply (its options: "
                          f"{', '.join(FLAGS[k][0] for k in TAKES[command])})")
    return {"run": _suite, "export": _export, "check": _check}[command](args, target)


def _outputs(args):
    report = "conformance" if args.out is None else args.out
    return [] if report == "-" else [os.path.abspath(f"{report}.json"), os.path.abspath(f"{report}.md")]


def _list(args):
    from refsgd.conformance import listing  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    from refsgd.conformance.suite import configurations  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    if args.action or args.folder:
        raise RefsgdError("refsgd conformance --list takes no subcommand (only --algo, --include, --exclude)")
    print(listing.text(configurations(args.include, args.exclude, args.algo)))
    return 0


def _suite(args, target):
    # here, not above: NumPy, h5py and the renderings, which `refsgd --help` does without
    from refsgd.conformance.backend import declared, instantiate, load_backend  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    from refsgd.conformance.suite import FAIL, NOT_DECLARED, References, configurations, run  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    from refsgd.files import check_folder, check_output  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    from refsgd.registry import METHODS  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    chosen = configurations(args.include, args.exclude, args.algo)
    if not chosen:
        raise RefsgdError("no configuration matches --include/--exclude/--algo")
    outputs = _outputs(args)
    for path in outputs:
        check_output(path, "--out", force=True)
    if args.out_dir:
        check_folder(args.out_dir, "--out-dir")
    backend = load_backend(target)
    ours = declared(instantiate(backend, target), target, chosen, METHODS)
    if not ours:
        raise RefsgdError(f"{target} declares none of the {len(chosen)} configurations chosen (its methods, "
                          "dtypes, codecs and world_sizes, or supports())")
    print(f"{target}: {len(ours)} of {len(chosen)} configurations declared", flush=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="refsgd-conformance-") as tmp:
        folder = args.out_dir or tmp
        references = References(os.path.join(folder, "expected"))
        os.makedirs(references.folder, exist_ok=True)
        outcomes = []
        for c in chosen:
            o = run(backend, c, references, os.path.join(folder, f"{c.name}.h5"), name=target)
            if o.status != NOT_DECLARED:
                print(f"  {c.name}: {o.status}" + (f" {o.message}" if o.status == FAIL else ""), flush=True)
            if o.status == FAIL:                     # the diagnosis, verify's report, or the traceback
                kept = o.lines if args.out_dir else [line.replace(folder + os.sep, "") for line in o.lines]
                print("\n".join("      " + line for line in kept), flush=True)
            outcomes.append(o)
    seconds = time.perf_counter() - start
    if any(o.status == FAIL for o in outcomes):
        print("the traces were " + (f"kept in {args.out_dir} (refsgd verify A B compares two)" if args.out_dir else
                                    "removed: give --out-dir DIR to keep them for refsgd verify"), flush=True)
    return _show(outcomes, target, seconds, outputs)


def _show(outcomes, name, seconds, outputs):
    from refsgd.conformance import report  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    from refsgd.conformance.suite import NOT_DECLARED, PASS  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
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
    # no green without evidence: a failure, a missing result or a damaged folder fails the run
    return 1 if any(o.status not in (PASS, NOT_DECLARED) for o in outcomes) else 0


def _export(args, folder):
    from refsgd.conformance.export import export  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    from refsgd.conformance.suite import configurations  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    from refsgd.files import check_folder  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    chosen = configurations(args.include, args.exclude, args.algo)
    if not chosen:
        raise RefsgdError("no configuration matches --include/--exclude/--algo")
    check_folder(folder, "export")
    try:
        export(folder, chosen, force=args.force)
    except OSError as e:  # a full disk, a folder made read-only meanwhile: nothing half-written is left
        raise RefsgdError(f"export {folder}: {e.strerror or e}{f' ({e.filename})' if e.filename else ''}") from None
    print(f"{len(chosen)} configurations exported to {folder}; write each one's result/ "
          f"(its README.md says what), then: refsgd conformance check {folder}")
    return 0


def _check(args, folder):
    from refsgd.conformance.export import check  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    from refsgd.files import check_output  # noqa: PLC0415 start-up: NumPy, h5py and the renderings, which `refsgd --help` does without
    outputs = _outputs(args)
    for path in outputs:
        check_output(path, "--out", force=True)
    outcomes = check(folder)
    return _show(outcomes, folder, None, outputs)
