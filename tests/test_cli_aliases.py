"""The old spellings of the one CLI vocabulary, kept one release as deprecated aliases: each
still works (the same value as its new spelling) and says the new spelling, once, on stderr."""

import pytest

from tests.test_exit_codes import _own_signal_handlers  # noqa: F401 app.main's handlers go after each test

from refsgd.cli import app, cmdoptions, golden
from refsgd.cli.app import build_parser

#: (old command line, new command line, the option's dest, the new spelling the note names)
ALIASES = [
    (["bench", "overlap", "--algos", "ssgd,dcs3gd+nopoll"], ["bench", "overlap", "--algo", "ssgd,dcs3gd+nopoll"],
     "algo", "--algo"),
    (["bench", "all", "--out", "b"], ["bench", "all", "--out-dir", "b"], "out_dir", "--out-dir"),
    (["conformance", "run", "m:B", "--report", "r"], ["conformance", "run", "m:B", "--out", "r"], "out", "--out"),
    (["conformance", "run", "m:B", "--traces", "t"], ["conformance", "run", "m:B", "--out-dir", "t"], "out_dir",
     "--out-dir"),
]


@pytest.mark.parametrize("old, new, dest, spelling", ALIASES)
def test_an_old_spelling_works_and_names_the_new_one(old, new, dest, spelling, capfd):
    parser = build_parser()
    assert getattr(parser.parse_args(new), dest) == getattr(parser.parse_args(old), dest)
    err = capfd.readouterr().err
    assert err.count("is deprecated") == 1 and f"write `{spelling}`" in err and f"`{old[-2]}`" in err, err


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


def _regenerate_called(monkeypatch, argv):
    """The (DIR, --algo) that ``refsgd ARGV`` hands to golden's regenerate, which is not run."""
    seen = []
    monkeypatch.setattr(golden, "regenerate", lambda args, parser: seen.append((args.dir, args.algo)) or 0)
    assert app.main(argv) == 0
    return seen


def test_golden_regenerate_is_a_subcommand_and_the_old_flag_still_works(monkeypatch, tmp_path, capfd):
    d = str(tmp_path)
    assert _regenerate_called(monkeypatch, ["golden", "regenerate", d, "--algo", "ssgd,laga-sgd"]) == \
        [(d, ["ssgd,laga-sgd"])]
    assert capfd.readouterr().err == ""
    assert _regenerate_called(monkeypatch, ["golden", "--regenerate", d, "--only", "ssgd,laga-sgd"]) == \
        [(d, ["ssgd,laga-sgd"])]
    err = capfd.readouterr().err
    assert "`--regenerate` is deprecated" in err and "write `refsgd golden regenerate DIR`" in err, err
    assert "`--only` is deprecated" in err and err.count("deprecated") == 2, err


def test_golden_regenerate_refuses_an_option_of_golden(tmp_path, capfd):
    assert app.main(["golden", "--steps", "3", "regenerate", str(tmp_path)]) == 2
    assert "golden regenerate takes no option of golden (given: --steps)" in capfd.readouterr().err
    assert app.main(["golden", "--steps", "3", "--regenerate", str(tmp_path)]) == 2
    assert "--regenerate takes no other option (given: --steps)" in capfd.readouterr().err
    assert app.main(["golden", "regenerate", str(tmp_path), "--algo", "nosuch"]) == 2
    assert "--algo: unknown method 'nosuch'" in capfd.readouterr().err


def test_conformance_algo_takes_the_one_spelling_and_the_old_list_says_it(capfd):
    def chosen(*argv):
        return cmdoptions.algos(build_parser().parse_args(["conformance", "export", "d", *argv]).algo)
    assert chosen("--algo", "ssgd,dcs3gd") == chosen("--algo", "ssgd", "--algo", "dcs3gd") == ["ssgd", "dcs3gd"]
    assert capfd.readouterr().err == ""
    assert chosen("--algo", "ssgd", "dcs3gd") == ["ssgd", "dcs3gd"]
    err = capfd.readouterr().err
    assert err.strip() == ("refsgd: note: `--algo ssgd dcs3gd` is deprecated (it goes in the next release); "
                           "write `--algo ssgd,dcs3gd`"), err
