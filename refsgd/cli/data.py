"""``refsgd data convert | info``: datasets to refsgd's HDF5 layout, or a dataset described."""


def add(sub):
    p = sub.add_parser("data", help="convert datasets to refsgd's HDF5 layout, or describe one")
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION")
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


def run(args, parser):
    from refsgd import datasets  # noqa: PLC0415 start-up: h5py, which `refsgd --help` does without
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

