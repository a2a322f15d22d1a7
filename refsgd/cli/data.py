"""``refsgd data download | convert | info``: datasets fetched or converted to refsgd's HDF5 layout, or
a dataset described."""

from refsgd import launchenv


def add(sub):
    p = sub.add_parser("data", help="download or convert datasets to refsgd's HDF5 layout, or describe one")
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION")
    d = dsub.add_parser(
        "download", help="download a standard dataset into the cache folder and convert it",
        description="Download MNIST's or Fashion-MNIST's four IDX .gz files, or CIFAR-10's python tarball "
                    "cifar-10-python.tar.gz, from their canonical addresses (torchvision's), check each file "
                    "against its published size and MD5, and convert them to CACHE/NAME.h5, which `--data NAME` "
                    "then finds. The files are kept in CACHE/NAME/. A download that breaks off keeps its bytes "
                    "(FILE.part) and resumes when the command is run again; a damaged file is refused, never "
                    "converted. Already converted: nothing is done. The cache folder: --cache-dir, else env "
                    "REFSGD_DATA_DIR, else $XDG_CACHE_HOME/refsgd, else ~/.cache/refsgd.")
    d.add_argument("name", choices=DOWNLOADABLE, metavar="NAME", help=f"one of {', '.join(DOWNLOADABLE)}")
    d.add_argument("--cache-dir", metavar="DIR", help="the cache folder (default: env REFSGD_DATA_DIR, else "
                   "$XDG_CACHE_HOME/refsgd, else ~/.cache/refsgd)")
    d.add_argument("--mirror", metavar="URL",
                   help="fetch URL/NAME/FILE instead of the canonical addresses, e.g. a local copy for a cluster "
                        "without internet (http://, https://, file:// or a folder; default: env "
                        "REFSGD_DATA_MIRROR)")
    c = dsub.add_parser("convert", help="convert a standard distribution to HDF5",
                        description="Convert MNIST / Fashion-MNIST (IDX files, .gz or not) or "
                                    "CIFAR-10 / CIFAR-100 (python pickle batches, folder or .tar.gz) "
                                    "to one HDF5 file in refsgd's layout (the README.md of the "
                                    "package refsgd.data, installed with refsgd).")
    c.add_argument("kind", choices=("mnist", "fashion-mnist", "cifar10", "cifar100"))
    c.add_argument("src", help="folder with the distribution's files (or the CIFAR .tar.gz)")
    c.add_argument("out", help="output .h5 file (written atomically)")
    c.add_argument("--force", action="store_true", help="replace an existing output file")
    i = dsub.add_parser("info", help="describe a dataset file")
    i.add_argument("file", nargs="?", default=None, help="HDF5 dataset (default: the embedded digits)")


#: what `data download` fetches (refsgd.datasets.cache.DOWNLOADABLE, spelled out: importing it would
#: import h5py and NumPy, which `refsgd --help` does without)
DOWNLOADABLE = ("mnist", "fashion-mnist", "cifar10")


def run(args, parser):
    if args.data_command in ("download", "convert"):
        launchenv.one_process(f"data {args.data_command}")  # every rank would write the same files
    from refsgd import datasets  # noqa: PLC0415 start-up: h5py, which `refsgd --help` does without
    if args.data_command == "download":
        datasets.download.download(args.name, cache_dir=args.cache_dir, mirror=args.mirror)
        return 0
    if args.data_command == "convert":
        from refsgd.files import check_distinct, check_output  # noqa: PLC0415 start-up: h5py
        check_distinct([("SRC", args.src)], [("OUT", args.out)])
        check_output(args.out, "OUT", args.force)
        out = datasets.convert(args.kind, args.src, args.out)
        print(datasets.info(out))
        return 0
    if args.data_command == "info":
        print(datasets.info(args.file if args.file else datasets._embedded_path()))
        return 0
    parser.parse_args(["data", "--help"])
    return 2

