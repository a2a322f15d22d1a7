"""The old spellings of the one CLI vocabulary, kept one release as deprecated aliases: each
still works (the same value as its new spelling) and says the new spelling, once, on stderr."""

import pytest

from refsgd.cli import cmdoptions
from refsgd.cli.app import build_parser

#: (old command line, new command line, the option's dest, the new spelling the note names)
ALIASES = [
    (["bench", "overlap", "--algos", "ssgd,dcs3gd+nopoll"], ["bench", "overlap", "--algo", "ssgd,dcs3gd+nopoll"],
     "algo", "--algo"),
    (["bench", "all", "--out", "b"], ["bench", "all", "--out-dir", "b"], "out_dir", "--out-dir"),
]


@pytest.mark.parametrize("old, new, dest, spelling", ALIASES)
def test_an_old_spelling_works_and_names_the_new_one(old, new, dest, spelling, capfd):
    parser = build_parser()
    assert getattr(parser.parse_args(new), dest) == getattr(parser.parse_args(old), dest)
    err = capfd.readouterr().err
    assert err.count("is deprecated") == 1 and f"write `{spelling}`" in err and f"`{old[2]}`" in err, err


@pytest.mark.parametrize("old, new, dest, spelling", ALIASES)
def test_the_new_spelling_says_nothing(old, new, dest, spelling, capfd):
    build_parser().parse_args(new)
    assert capfd.readouterr().err == ""


def test_algo_is_repeatable_and_comma_separated():
    args = build_parser().parse_args(["bench", "overlap", "--algo", "ssgd,dcs3gd+nopoll", "--algo", " laga-sgd",
                                      "--algos", "d-sync+q8"])
    assert cmdoptions.algos(args.algo) == ["ssgd", "dcs3gd+nopoll", "laga-sgd", "d-sync+q8"]
    assert cmdoptions.algos(build_parser().parse_args(["bench", "overlap"]).algo, ["a,b"]) == ["a", "b"]
    assert "algos" not in build_parser().parse_args(["bench", "overlap"]).__dict__
