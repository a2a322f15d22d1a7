"""The argparse options of every command, derived from the table of refsgd.options.

:func:`add` turns one :class:`refsgd.options.Option` into an argparse argument (its flag, its
parser from the option's kind, its default, help, metavar and group), with a command's own
default or help where it has one (``bench overlap --batch`` defaults to 64). :func:`add_method_options`
and :func:`add_training_options` are the layouts of ``golden`` and ``train``: the options in the
order ``--help`` shows them. A command-only option (``bench overlap --skip``) is written in its
command's module with the parsers below (``positive_int``, ...), which are the table's kinds.
"""

import argparse

from refsgd import failure, launchenv
from refsgd.optim import SCHEDULES
from refsgd.options import BY_NAME, Choice, Config, Float, Int, Text

#: the argparse groups of the table's option groups (train and golden)
GROUPS = {"U": "local optimizer U (the methods that have one; others refuse these)",
          "method": "method-specific options (refused by the other methods)"}


def parser_of(kind):
    """An argparse ``type``: the command line's text through the kind's parse (its message after
    ``argument --flag:``)."""
    def parse(text):
        try:
            return kind.parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return parse


positive_int = parser_of(Int(1))
nonneg_int = parser_of(Int(0))
nonneg_float = parser_of(Float())


def add(p, name, *, groups=None, **override):
    """Add option ``name`` of the table to parser ``p`` (into its group's argument group, created
    once per parser in ``groups``); ``override`` replaces any of argparse's keywords (help,
    default, metavar, required)."""
    o = BY_NAME[name]
    kw = dict(help=o.help, default=o.cli_default)
    if o.kind.type is bool:  # a flag
        kw["action"] = argparse.BooleanOptionalAction if o.kind.negatable else \
            "store_false" if o.flag and o.flag.startswith("--no-") else "store_true"
    else:
        if isinstance(o.kind, Choice):
            kw["choices"] = o.kind.choices
        elif type(o.kind) is not Text or o.kind.path:  # a plain string needs no parser; a path is never empty
            kw["type"] = parser_of(o.kind)
        if o.metavar:
            kw["metavar"] = o.metavar
        if o.const is not None:
            kw.update(nargs="?", const=o.const)
    if o.flag:
        kw["dest"] = o.name
    if name == "schedule":  # the names from refsgd.optim (refsgd.options, below the methods, does not import it)
        kw["help"] = o.help + ", ".join(SCHEDULES)
    kw.update(override)
    target = p
    if o.group and groups is not None:
        if o.group not in groups:
            groups[o.group] = p.add_argument_group(GROUPS[o.group])
        target = groups[o.group]
    return target.add_argument(o.flags, **kw)


def add_method_options(p, dtype, groups):
    """The options that shape a trajectory (train and golden), in --help's order."""
    for name in ("model", "data", "batch", "tau", "lr", "schedule", "momentum", "nesterov", "momentum_form",
                 "weight_decay", "seed", "lambda0", "lambda_norm", "wd_k", "dc_lambda", "dc_adaptive", "dc_ms_decay",
                 "ps_order", "dependency", "warmup_epochs", "cooldown_epochs", "sync_every", "plateau_patience",
                 "plateau_threshold", "ranks_per_node", "threads", "staleness", "compress", "allreduce"):
        add(p, name, groups=groups)
    add(p, "dtype", default=dtype)


def add_training_options(p):
    """The options of `refsgd train`: the method's (shared with golden) and the run's."""
    add(p, "algo")
    p.add_argument("--list", action="store_true", help="list the methods with their paper and listing, and exit")
    add_method_options(p, "float32", {})
    for name in ("epochs", "iterations", "eval_every", "log_every", "progress", "blas_threads", "poll", "link",
                 "local_link", "checkpoint", "checkpoint_every", "keep_checkpoints", "resume", "out", "force",
                 "trace", "timeline"):
        add(p, name)


def config_of(args, leave=()):
    """The frozen configuration of a run from a command's Namespace: its options of the table
    (less those named in ``leave``). The Namespace goes no further than the command line."""
    return Config(**{k: v for k, v in vars(args).items() if k in BY_NAME and k not in leave})


def add_algos(p, help, default=None, several=False):
    """``--algo NAME[,NAME...]``, repeatable: the methods a command runs (one spelling wherever
    several are chosen); :func:`algos` reads it. ``several``: ``--algo A B`` (the spelling of the
    release before, where a command has no positional argument after it) still works and says the
    new one."""
    p.add_argument("--algo", dest="algo", action=_Algos, nargs="+" if several else None, default=default,
                   metavar="NAME[,NAME...]", help=f"{help} (repeatable or comma-separated)")


class _Algos(argparse.Action):
    def __call__(self, parser, ns, values, option_string=None):
        values = values if isinstance(values, list) else [values]
        if len(values) > 1:
            _note(f"`{option_string} {' '.join(values)}`", f"{option_string} {','.join(values)}")
        setattr(ns, self.dest, list(getattr(ns, self.dest) or []) + values)


def _note(old, new):
    """Say, once (on the launcher's rank 0 only), that the spelling ``old`` goes: write ``new``."""
    if launchenv.launcher_rank() in (None, 0):
        failure.say(f"refsgd: note: {old} is deprecated (it goes in the next release); write `{new}`")


def add_out_dir(p, help, default=None):
    """``--out-dir DIR``: the folder a command writes (``--out`` names a file)."""
    p.add_argument("--out-dir", default=default, metavar="DIR", help=help)


def algos(values, default=()):
    """The method names of ``--algo`` (a list of comma-separated texts, or None), in order."""
    return [a.strip() for v in (values or default) for a in v.split(",") if a.strip()]


class _Deprecated(argparse.Action):
    """An old spelling kept for one release: it sets what its new one sets (appending where that
    one is repeatable) and says the new spelling, once (on the launcher's rank 0 only)."""

    def __init__(self, option_strings, dest, new, append=False, **kw):
        super().__init__(option_strings, dest, **kw)
        self.new, self.append = new, append

    def __call__(self, parser, ns, values, option_string=None):
        _note(f"`{option_string}`", self.new)
        setattr(ns, self.dest, (getattr(ns, self.dest) or []) + [values] if self.append else values)


def deprecated(p, old, new, dest, append=False):
    """Parser ``p`` takes ``old`` (hidden from --help) as the option ``new`` whose value is ``dest``."""
    p.add_argument(old, dest=dest, action=_Deprecated, new=new, append=append, default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS)
