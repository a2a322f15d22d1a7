"""The ``refsgd`` command line: ``refsgd train | models | data | bench``.

Every user error (a bad flag value, a missing or malformed file, a spec that does not parse)
ends with one line ``refsgd: error: ...`` on stderr and exit code 2, never a traceback.
"""

import argparse
import sys

import numpy as np

from refsgd import RefsgdError, __version__

SCHEDULE_HELP = """\
learning-rate schedule, NAME or NAME:key=value,... (lengths may be given in epochs:
warmup_epochs, total_epochs, warmup_stop_epochs, milestone_epochs; lists with '/').
--lr gives the lr or peak. Examples: constant; warmup-step:warmup_epochs=5,milestone_epochs=30/60/80;
warmup-linear:warmup_epochs=2,total_epochs=20; plateau:factor=0.5,patience=2. Names: """


def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def _nonneg_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not np.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return v


def _value(text):
    if "/" in text:
        return [_value(t) for t in text.split("/")]
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_schedule(text, lr, iters_per_epoch):
    """``NAME[:key=value,...]`` -> a schedule object; ``lr`` fills ``lr`` or ``peak``."""
    from refsgd.optim import make_schedule
    name, _, rest = text.partition(":")
    kwargs = {}
    for item in filter(None, rest.split(",")):
        key, eq, val = item.partition("=")
        if not eq:
            raise RefsgdError(f"--schedule {text}: expected key=value, got {item!r}")
        key, val = key.strip(), _value(val.strip())
        if key in ("milestones", "milestone_epochs") and not isinstance(val, list):
            val = [val]
        kwargs[key] = val
    if name in ("constant", "plateau"):
        kwargs.setdefault("lr", lr)
    else:
        kwargs.setdefault("peak", lr)
    return make_schedule(name, iters_per_epoch=iters_per_epoch, **kwargs)


def _add_training_options(p):
    from refsgd.optim import SCHEDULES
    p.add_argument("--model", default="digits_mlp",
                   help="bundled model name or path of a .toml spec (default: digits_mlp; "
                        "`refsgd models` lists them)")
    p.add_argument("--data", default=None,
                   help="dataset HDF5 file made by `refsgd data convert` "
                        "(default: the embedded 8x8 digits)")
    p.add_argument("--epochs", type=_positive_int, default=10, help="passes over the training set (default 10)")
    p.add_argument("--batch", type=_positive_int, default=32, help="batch size per worker (default 32)")
    p.add_argument("--lr", type=_nonneg_float, default=0.05, help="learning rate, or the schedule's peak (default 0.05)")
    p.add_argument("--schedule", default="constant", help=SCHEDULE_HELP + ", ".join(SCHEDULES))
    p.add_argument("--momentum", type=_nonneg_float, default=0.0, help="momentum mu in [0, 1) (default 0)")
    p.add_argument("--nesterov", action="store_true", help="Nesterov momentum (PyTorch semantics)")
    p.add_argument("--momentum-form", choices=("pytorch", "mxnet"), default="pytorch",
                   help="pytorch: b = mu*b + g, w -= lr*b; mxnet: v = mu*v - lr*g, w += v (default pytorch)")
    p.add_argument("--weight-decay", type=_nonneg_float, default=0.0, help="coupled L2 weight decay (default 0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial weights and the sampler (default 0)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="dtype of weights, activations and gradients (default float32)")
    p.add_argument("--eval-every", type=_positive_int, default=1,
                   help="evaluate on the test set every this many epochs (default 1)")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="refsgd",
        description="Reference implementations of distributed SGD methods (MPI, NumPy, Numba).")
    parser.add_argument("--version", action="version", version=f"refsgd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("train", help="train a model (single process until the MPI runtime lands)",
                       description="Train a model with minibatch SGD on one process and print the "
                                   "per-epoch loss and test accuracy. Defaults train the embedded "
                                   "digits dataset in seconds.")
    _add_training_options(p)

    p = sub.add_parser("models", help="list the bundled models, or describe one",
                       description="Without NAME, list the bundled model specs; with NAME (or a "
                                   ".toml path), print its layers and parameter counts.")
    p.add_argument("name", nargs="?", help="model name or spec path")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")

    p = sub.add_parser("data", help="convert datasets to refsgd's HDF5 layout, or describe one")
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION")
    c = dsub.add_parser("convert", help="convert a standard distribution to HDF5",
                        description="Convert MNIST / Fashion-MNIST (IDX files, .gz or not) or "
                                    "CIFAR-10 / CIFAR-100 (python pickle batches, folder or .tar.gz) "
                                    "to one HDF5 file in refsgd's layout (data/README.md).")
    c.add_argument("kind", choices=("mnist", "fashion-mnist", "cifar10", "cifar100"))
    c.add_argument("src", help="folder with the distribution's files (or the CIFAR .tar.gz)")
    c.add_argument("out", help="output .h5 file (written atomically)")
    i = dsub.add_parser("info", help="describe a dataset file")
    i.add_argument("file", nargs="?", default=None, help="HDF5 dataset (default: the embedded digits)")

    p = sub.add_parser("bench", help="measure speed (ratios against PyTorch and the BLAS peak)")
    bsub = p.add_subparsers(dest="bench_command", metavar="WHAT")
    s = bsub.add_parser("step", help="forward+backward time of a model against PyTorch on the same CPU",
                        description="Median time of one loss_and_grad of MODEL at BATCH, the same "
                                    "network in PyTorch if installed (same CPU, torch's default "
                                    "threads), and the ratio.")
    s.add_argument("--model", default="mnist_mlp", help="model name or spec path (default mnist_mlp)")
    s.add_argument("--batch", type=_positive_int, default=100, help="batch size (default 100)")
    s.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    s.add_argument("--repeat", type=_positive_int, default=20, help="timed repetitions (default 20)")
    s.add_argument("--no-torch", action="store_true", help="do not time PyTorch even if installed")
    return parser


def cmd_train(args):
    from refsgd import datasets, local
    from refsgd.nn import load_model
    from refsgd.optim import SGD

    dtype = np.dtype(args.dtype)
    net = load_model(args.model, dtype=dtype)
    data = datasets.load(args.data, dtype=dtype)
    datasets.check_fits(data, net.input_shape, net.num_classes, model=net.name)
    ipe = len(data.y_train) // args.batch
    if ipe == 0:
        raise RefsgdError(f"--batch {args.batch} is larger than the training set ({len(data.y_train)} samples)")
    schedule = parse_schedule(args.schedule, args.lr, ipe)
    opt = SGD(net.num_params, dtype, momentum=args.momentum, nesterov=args.nesterov,
              weight_decay=args.weight_decay, form=args.momentum_form,
              decay_mask=None if net.trainable.all() else net.trainable)
    print(f"refsgd {__version__}: serial training of {net.name} ({net.num_params:,d} parameters, {dtype.name}) "
          f"on {data.name} ({len(data.y_train)} train / {len(data.y_test)} test)")
    print(f"  {opt!r}, schedule {schedule.describe()}, batch {args.batch}, {args.epochs} epochs, seed {args.seed}")
    w, hist = local.train(net, data, opt, schedule, epochs=args.epochs, batch=args.batch, seed=args.seed,
                          eval_every=args.eval_every)
    last = hist[-1]
    print(f"done: {last['iteration']} iterations in {last['seconds']:.1f} s; final train loss "
          f"{last['train_loss']:.4f}, test loss {last['test_loss']:.4f}, test accuracy {100 * last['test_acc']:.2f}%")
    return 0


def cmd_models(args):
    from refsgd.nn import available_models, load_model, read_spec
    if args.name is None:
        for name in available_models():
            spec, _ = read_spec(name)
            print(f"{name:<18} {spec.get('description', '')}")
        return 0
    net = load_model(args.name, dtype=np.dtype(args.dtype))
    print(net.summary())
    for key in ("source", "notes"):
        if net.spec.get(key):
            print(f"{key}: {net.spec[key]}")
    return 0


def cmd_data(args, parser):
    from refsgd import datasets
    if args.data_command == "convert":
        out = datasets.convert(args.kind, args.src, args.out)
        print(datasets.info(out))
        return 0
    if args.data_command == "info":
        print(datasets.info(args.file if args.file else datasets._embedded_path()))
        return 0
    parser.parse_args(["data", "--help"])
    return 2


def cmd_bench(args, parser):
    from refsgd import bench
    if args.bench_command == "step":
        print(bench.format_step(bench.step(args.model, args.batch, np.dtype(args.dtype), args.repeat,
                                           use_torch=not args.no_torch)))
        return 0
    parser.parse_args(["bench", "--help"])
    return 2


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "train":
            return cmd_train(args)
        if args.command == "models":
            return cmd_models(args)
        if args.command == "data":
            return cmd_data(args, parser)
        if args.command == "bench":
            return cmd_bench(args, parser)
        parser.print_help()
        return 2
    except RefsgdError as e:
        print(f"refsgd: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("refsgd: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
