"""The documented exit codes, one test per code: 0 ok, 1 a check or comparison failed, 2 bad usage
or input, 3 an internal error, 4 a rank or peer failed, 128+N a signal (refsgd.failure.EXIT_CODES,
the table of `refsgd --help` and of the CLI reference). The codes are written as numbers here, not
read from refsgd.failure: a user's script compares numbers. Before this table, an internal error and
a failed rank ended with 1, as a mismatch does (the tests of 3 and 4 fail on that code)."""

import os
import shutil
import signal
import subprocess
import sys

import h5py
import pytest
from tests.helpers.launch import ROOT

from refsgd import failure
from refsgd.cli import app, models
from refsgd.errors import RankFailure

GOLDEN = os.path.join(ROOT, "tests", "golden", "ssgd-n4.h5")


@pytest.fixture(autouse=True)
def _own_signal_handlers():
    """app.main installs refsgd's signal handlers in this process: pytest's come back after each test
    (failure.say writes to fd 2, so the tests read it with capfd)."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, failure.WARNING)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def test_0_ok(capfd):
    assert app.main(["verify", GOLDEN, GOLDEN]) == 0
    assert "MISMATCH" not in capfd.readouterr().out


def test_1_a_comparison_failed(tmp_path, capfd):
    bad = tmp_path / "a.h5"
    shutil.copy(GOLDEN, bad)
    with h5py.File(bad, "r+") as f:
        f["state/x"][2, 1, 10] += 1e-3
    assert app.main(["verify", str(bad), GOLDEN]) == 1
    assert "MISMATCH at step 2, worker 1, x[10]" in capfd.readouterr().out


def test_2_bad_input(tmp_path, capfd):
    assert app.main(["verify", str(tmp_path / "missing.h5"), GOLDEN]) == 2
    assert capfd.readouterr().err.startswith("refsgd: error: ")


def test_2_bad_usage(capfd):
    with pytest.raises(SystemExit) as e:
        app.main(["verify", "--no-such-flag", GOLDEN, GOLDEN])
    assert e.value.code == 2 and "error:" in capfd.readouterr().err


def test_3_an_internal_error(monkeypatch, capfd):
    def bug(args, parser):
        raise ZeroDivisionError("injected bug")
    monkeypatch.setattr(models, "run", bug)
    assert app.main(["models"]) == 3
    err = capfd.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError: injected bug" in err


def test_4_a_rank_failed(monkeypatch, capfd):
    def rank_fails(args, parser):
        raise RankFailure("rank 0: a gradient thread failed: injected")
    monkeypatch.setattr(models, "run", rank_fails)
    assert app.main(["models"]) == 4
    assert "refsgd: error: rank 0: a gradient thread failed: injected" in capfd.readouterr().err


SIGNAL_ITSELF = """
import os, signal, sys, time
from refsgd import entry
from refsgd.cli import models
def stopped(args, parser):
    os.kill(os.getpid(), signal.{name})
    time.sleep(30)  # the handler ends the command before this
    return 0
models.run = stopped
sys.exit(entry.main(["models"]))
"""


@pytest.mark.parametrize("name, code, word", [("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated")])
def test_128_plus_n_a_signal(name, code, word):
    r = subprocess.run([sys.executable, "-c", SIGNAL_ITSELF.format(name=name)], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == code == 128 + int(getattr(signal, name)), r.stderr
    assert r.stderr.strip() == f"refsgd: {word} ({name})", r.stderr


def test_the_table_is_in_the_help():
    text = app.build_parser().format_help()
    assert "exit codes:" in text
    for code, what in failure.EXIT_CODES:
        assert f"  {code!s:<8}{what}" in text
    assert [c for c, _ in failure.EXIT_CODES] == [0, 1, 2, 3, 4, "128+N"]
