"""``refsgd models [NAME]``: the bundled models, or one model's layers."""

import numpy as np

from refsgd.cli import cmdoptions


def add(sub):
    p = sub.add_parser("models", help="list the bundled models, or describe one",
                       description="Without NAME, list the bundled model specs; with NAME (or a "
                                   ".toml path), print its layers and parameter counts.")
    p.add_argument("name", nargs="?", help="model name or spec path")
    cmdoptions.add(p, "dtype", help=None)


def run(args, parser):
    from refsgd.nn import available_models, load_model, read_spec  # noqa: PLC0415 start-up: the models
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

