"""The table of options (refsgd.options.OPTIONS) and what derives from it: the argparse options of
every command, refsgd.train's checks of Python values, the frozen Config, the recorded
configuration and verify's keys. No MPI."""

import argparse
import dataclasses
import pathlib
import subprocess
import sys

import pytest
from tests.helpers.launch import scaled

from refsgd import RefsgdError, options
from refsgd.cli import build_parser, cmdoptions
from refsgd.options import APPLIES, BY_NAME, Config, from_keywords


def _sub(*path):
    """The parser of `refsgd PATH...` (train, bench overlap, ...)."""
    p = build_parser()
    for name in path:
        p = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    return p


def _action(parser, flag):
    return next(a for a in parser._actions if flag in a.option_strings)


# ---------------------------------------------------------------------------- table -> parser
def test_train_options_are_the_table_entries():
    p = _sub("train")
    batch = _action(p, "--batch")
    assert batch.dest == "batch" and batch.default is None  # the method decides (32, or 8 for pp-asgd)
    assert batch.type("7") == 7 and batch.help == BY_NAME["batch"].help
    with pytest.raises(argparse.ArgumentTypeError, match=r"^expected a positive integer, got '0'$"):
        batch.type("0")
    assert _action(p, "--tau").default == 1 and _action(p, "--epochs").default == 10
    assert _action(p, "--seed").type("0") == 0
    with pytest.raises(argparse.ArgumentTypeError, match=r"^expected an integer >= 0, got '-1'$"):
        _action(p, "--seed").type("-1")
    lr = _action(p, "--lr")
    assert lr.type("1e-3") == 0.001 and lr.default is None
    with pytest.raises(argparse.ArgumentTypeError, match=r"^expected a finite number >= 0, got 'inf'$"):
        lr.type("inf")
    assert _action(p, "--compress").choices == ("none", "t16", "bf16", "fp16", "q8", "q8v")
    assert _action(p, "--compress").default is None  # a method option: not given unless given
    assert _action(p, "--dtype").default == "float32" and _action(p, "--dtype").choices == ("float32", "float64")
    assert _action(p, "--eval-every").type("3it") == "3it" and _action(p, "--eval-every").default == "1"
    no_progress = _action(p, "--no-progress")
    assert no_progress.dest == "progress" and no_progress.default is True and no_progress.const is False
    assert _action(p, "--timeline").const == "default" and _action(p, "--timeline").nargs == "?"
    assert _action(p, "--poll").option_strings == ["--poll", "--no-poll"]
    assert _action(p, "--dependency").metavar == "K"
    # every option of the table is an option of train, and every flag of train is one of the table's but --list
    flags = {s for a in p._actions for s in a.option_strings if s.startswith("--")}
    assert {o.flags for o in options.OPTIONS} <= flags
    assert flags - {o.flags for o in options.OPTIONS} == {"--list", "--help", "--no-poll"}


def test_groups_of_the_table_are_the_help_groups():
    p = _sub("train")
    titles = {g.title: [a.dest for a in g._group_actions] for g in p._action_groups}
    assert titles[cmdoptions.GROUPS["U"]] == ["momentum", "nesterov", "momentum_form", "weight_decay"]
    assert titles[cmdoptions.GROUPS["method"]][:3] == ["lambda0", "lambda_norm", "wd_k"]
    assert "local_link" not in titles[cmdoptions.GROUPS["method"]]  # train shows it with --link


def test_other_commands_reuse_the_table_with_their_own_defaults():
    golden = _sub("golden")
    assert _action(golden, "--dtype").default == "float64"
    assert _action(golden, "--algo").help == "the method (default %(default)s)" and _action(golden, "--algo").default == "ssgd"
    overlap = _sub("bench", "overlap")
    assert _action(overlap, "--batch").default == 64 and _action(overlap, "--lr").default == 0.001
    with pytest.raises(argparse.ArgumentTypeError, match="expected a positive integer"):
        _action(overlap, "--sync-every").type("0")
    scale = _sub("bench", "scale")
    assert _action(scale, "--ranks-per-node").default == 4 and _action(scale, "--ranks-per-node").metavar == "G"
    assert _action(_sub("models"), "--dtype").help is None


def test_a_new_option_needs_one_entry():
    """An entry added to the table is an argparse option and a Config attribute at once."""
    o = options.Option("fancy", options.Int(2), 5, "a fancy option (default 5)", "method", ("ssgd",),
                       options.TRAJECTORY, metavar="F")
    p = argparse.ArgumentParser()
    groups = {}
    options.BY_NAME["fancy"] = o
    try:
        a = cmdoptions.add(p, "fancy", groups=groups)
    finally:
        del options.BY_NAME["fancy"]
    assert a.option_strings == ["--fancy"] and a.default is None and a.metavar == "F" and a.type("2") == 2
    assert list(groups) == ["method"]
    with pytest.raises(argparse.ArgumentTypeError, match="expected an integer >= 2, got '1'"):
        a.type("1")


# ---------------------------------------------------------------------------- table -> derived tables
def test_the_derived_tables():
    assert options.COMMON == ("algo", "model", "data", "batch", "tau", "lr", "schedule", "seed", "dtype")
    assert set(options.RUN) == {"epochs", "iterations", "eval_every", "log_every", "link", "poll"}
    assert APPLIES["dcs3gd"] == ("momentum", "weight_decay", "wd_k", "lambda0", "lambda_norm", "allreduce")
    assert "allreduce" not in APPLIES["dcasgd"] and "allreduce" not in APPLIES["ps-sync"]
    # the order of the sums over ranks is recorded but not compared by verify (it changes only roundings)
    assert "allreduce" not in options.trajectory_keys("ssgd") and options.ROUNDING_ONLY == {"allreduce"}
    assert APPLIES["daso"][-3:] == ("ranks_per_node", "local_link", "allreduce") and APPLIES["ps-sync"] == ()
    assert list(APPLIES) == list(options.METHODS)
    assert options.METHOD_DEFAULTS["pp-asgd"] == {"batch": 8, "lr": 3e-6, "momentum": 0.99}
    assert options.default("daso", "warmup_epochs") == 1 and options.default("pipe-sgd", "warmup_epochs") == 0
    assert options.default("ssgd", "lr") == 0.05 and options.default("ssgd-nag", "lr") == 2e-5
    # verify compares the method's options that shape the trajectory, not DASO's node-local link
    assert "local_link" not in options.trajectory_keys("daso") and "sync_every" in options.trajectory_keys("daso")
    assert "epochs" not in options.trajectory_keys("ssgd") and "compress" in options.trajectory_keys("ssgd")


# ---------------------------------------------------------------------------- Config
def test_config_is_frozen_typed_and_resolved_into_a_new_one():
    cfg = Config(algo="pp-asgd")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.lr = 1.0
    assert cfg.lr is None and cfg.epochs == 10 and cfg.progress is True  # the command line's defaults
    r = options.resolve(cfg)
    assert (r.lr, r.batch, r.momentum, r.threads, r.staleness) == (3e-6, 8, 0.99, 2, None)
    assert cfg.lr is None  # unchanged
    assert r.method_options() == {"momentum": 0.99, "threads": 2, "staleness": None, "allreduce": "mpi"}
    assert options.config(r) == {"algo": "pp-asgd", "model": "digits_mlp", "data": None, "batch": 8, "tau": 1,
                                 "lr": 3e-6, "schedule": "constant", "seed": 0, "dtype": "float32", "epochs": 10,
                                 "iterations": None, "eval_every": "1", "log_every": 10, "link": None,
                                 "momentum": 0.99, "threads": 2, "staleness": None,
                                 "allreduce": "mpi"}
    golden = options.config(options.resolve(Config(algo="laga-sgd")), run=False, extra=dict(workers=2, steps=3))
    assert golden == {"algo": "laga-sgd", "model": "digits_mlp", "data": None, "batch": 32, "tau": 1, "lr": 0.05,
                      "schedule": "constant", "seed": 0, "dtype": "float32", "workers": 2, "steps": 3,
                      "weight_decay": 0.0, "allreduce": "mpi"}
    with pytest.raises(RefsgdError, match=r"^--lambda0 does not apply to --algo ssgd \(--lambda0 applies to --algo "
                                          r"dcs3gd; the options of ssgd: --momentum, "):
        options.resolve(Config(algo="ssgd", lambda0=0.1))


def test_the_command_line_namespace_stops_at_the_command_line():
    args = build_parser().parse_args(["train", "--algo", "dcs3gd", "--lambda0", "0.3", "--epochs", "2"])
    cfg = cmdoptions.config_of(args)
    assert isinstance(cfg, Config) and (cfg.algo, cfg.lambda0, cfg.epochs, cfg.momentum) == ("dcs3gd", 0.3, 2, None)
    assert not hasattr(cfg, "command") and not hasattr(cfg, "list")


# ---------------------------------------------------------------------------- refsgd.train's keywords
@pytest.mark.parametrize("kw,message", [
    (dict(epochs=0), "epochs=0: expected a positive integer"),
    (dict(epochs=2.0), "epochs=2.0: expected a positive integer"),
    (dict(epochs=True), "epochs=True: expected a positive integer"),
    (dict(lr="0.1"), "lr='0.1': expected a number"),
    (dict(lr=-1), "lr=-1: expected a finite number >= 0"),
    (dict(lr=float("nan")), "lr=nan: expected a finite number >= 0"),
    (dict(seed=-1), "seed=-1: expected an integer >= 0"),
    (dict(nesterov="yes"), "nesterov='yes': expected True or False (a flag)"),
    (dict(compress="q9"), "compress='q9': expected one of none, t16, bf16, fp16, q8, q8v"),
    (dict(eval_every="2x"), "eval_every='2x': expected E (epochs) or Nit (iterations), a positive integer, got '2x'"),
    (dict(out=3), "out=3: expected a path (str or os.PathLike)"),
    (dict(schedule=1), "schedule=1: expected a string"),
    (dict(lamda0=1), "unknown keyword 'lamda0' (did you mean lambda0?); the keywords are the options of "
                     "`refsgd train --help`, with - written _"),
    (dict(epoch=2), "unknown keyword 'epoch' (did you mean epochs?)"),
])
def test_train_keywords_are_checked_as_python_values(kw, message):
    with pytest.raises(RefsgdError) as e:
        from_keywords(kw)
    assert str(e.value).startswith(message), str(e.value)


def test_train_keywords_keep_their_python_types():
    cfg = from_keywords(dict(epochs=3, lr=1, momentum=0.5, eval_every=2, out=pathlib.Path("r.h5"), nesterov=False,
                             poll=False, timeline=True))
    assert cfg.epochs == 3 and type(cfg.epochs) is int
    assert cfg.lr == 1.0 and type(cfg.lr) is float
    assert cfg.eval_every == "2" and cfg.out == "r.h5" and cfg.timeline == "default"
    assert cfg.nesterov is None  # False for a method flag is "not given": ssgd-opt's own default applies
    assert cfg.poll is False


def test_refsgd_train_builds_no_argparse_parser():
    """refsgd.train's keywords are checked without argparse, and without MPI before the run."""
    code = ("import sys, refsgd\n"
            "try:\n    refsgd.train('ssgd', epochs=0)\nexcept refsgd.RefsgdError as e:\n    print(e)\n"
            "print('argparse' in sys.modules, 'refsgd.cli.app' in sys.modules, 'mpi4py.MPI' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(120))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["epochs=0: expected a positive integer", "False False False"], r.stdout


def test_import_refsgd_loads_neither_mpi_nor_the_parser():
    code = ("import sys, refsgd\n"
            "print(sorted(m for m in ('mpi4py.MPI', 'numpy', 'argparse', 'matplotlib') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(60))
    assert r.stdout.strip() == "[]", r.stdout + r.stderr
