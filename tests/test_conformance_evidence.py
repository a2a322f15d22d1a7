"""No green without evidence (refsgd conformance): `check` fails on a missing, empty, foreign or
damaged result and compares at the suite's own tolerances; a backend that declares nothing, names
a method that does not exist or lacks part of the interface gets one line; an interrupt ends the run
as interrupted, not as the backend's failure; the bad inputs of the command line and of the pytest
plugin are one line each."""

import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
from tests.helpers.backend_run import write_result
from tests.helpers.launch import ROOT, cli, mpi_env

from refsgd.conformance import load_backend
from refsgd.conformance.suite import FAIL, PASS, References, configurations, run
from refsgd.errors import Stopped

NUMPY = os.path.join(ROOT, "examples", "conformance", "numpy_backend.py")


def _one_line(r, message, code=2):
    assert r.returncode == code and message in r.stderr, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.count("refsgd: error:") == 1 and "Traceback" not in r.stderr, r.stderr


# ---------------------------------------------------------------------------- check: no green without evidence
def _write_result(folder, backend_text=f"{NUMPY}:Backend"):
    """The NumPy example run from the exported files alone, its states written into result/."""
    meta = json.loads((folder / "config.json").read_text())
    c = next(c for c in configurations() if c.name == meta["name"])
    os.makedirs(folder.parent / ".refs", exist_ok=True)
    s = References(str(folder.parent / ".refs")).setup(c)
    write_result(folder, load_backend(backend_text)(), s, np.load(folder / "batches.npy"))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """ps-sync-n3 and ps-sync-n4 exported, each with the NumPy example's right result."""
    suite = tmp_path_factory.mktemp("suite") / "suite"
    r = cli("conformance", "export", str(suite), "--include", "^ps-sync-n[34]$")
    assert r.returncode == 0, r.stderr
    for name in ("ps-sync-n3", "ps-sync-n4"):
        _write_result(suite / name)
    shutil.rmtree(suite / ".refs")
    return suite


@pytest.fixture
def suite(exported, tmp_path):
    copy = tmp_path / "suite"
    shutil.copytree(exported, copy)
    return copy


def _check(suite):
    return cli("conformance", "check", str(suite), "--out", "-")


def test_check_passes_only_with_every_result_right(suite):
    r = _check(suite)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ps-sync: 2 of 2 declared configurations pass (2 in all)" in r.stdout.replace(str(suite), "ps-sync")


@pytest.mark.parametrize("damage, line", [
    # a result missing, empty, unreadable, or another configuration's
    (lambda s: shutil.rmtree(s / "ps-sync-n4" / "result"), "ps-sync-n4: no result"),
    (lambda s: [os.remove(p) for p in (s / "ps-sync-n4" / "result").iterdir()],
     "ps-sync-n4: fail {s}/ps-sync-n4/result: loss.npy is missing"),
    (lambda s: open(s / "ps-sync-n4" / "result" / "w.npy", "w").close(),
     "ps-sync-n4: fail {s}/ps-sync-n4/result: w.npy is not a NumPy array file"),
    (lambda s: [shutil.rmtree(s / "ps-sync-n4" / "result"), shutil.copytree(s / "ps-sync-n3" / "result",
                                                                            s / "ps-sync-n4" / "result")],
     "ps-sync-n4: fail {s}/ps-sync-n4/result: loss.npy is (10, 3), expected (6, 4)"),
    # a damaged folder: its config.json deleted, or without state_names, or another configuration's
    (lambda s: os.remove(s / "ps-sync-n4" / "config.json"),
     "ps-sync-n4: fail {s}/ps-sync-n4: damaged, config.json is missing"),
    (lambda s: _edit(s / "ps-sync-n4" / "config.json", lambda m: m.pop("state_names")),
     "ps-sync-n4: fail {s}/ps-sync-n4/config.json: damaged, has no 'state_names'"),
    (lambda s: shutil.copyfile(s / "ps-sync-n3" / "config.json", s / "ps-sync-n4" / "config.json"),
     "ps-sync-n4: fail {s}/ps-sync-n4/config.json: damaged, it describes ps-sync-n3"),
])
def test_check_fails_without_evidence(suite, damage, line):
    damage(suite)
    r = _check(suite)
    assert r.returncode == 1, r.stdout + r.stderr
    assert line.format(s=suite) in r.stdout, r.stdout
    assert "ps-sync-n3: pass" in r.stdout and "Traceback" not in r.stdout + r.stderr


def _edit(path, change):
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


def test_check_compares_at_the_suites_tolerances_with_the_suites_expected_states(suite):
    """An implementer's folder can loosen nothing: tolerances and expected states edited there
    change no verdict."""
    w = np.load(suite / "ps-sync-n3" / "result" / "w.npy")
    w[4] += 1.0                                        # off by 1.0 from step 4 on
    np.save(suite / "ps-sync-n3" / "result" / "w.npy", w)
    _edit(suite / "ps-sync-n3" / "config.json", lambda m: m.update(tolerances=dict(rtol=10.0, atol=10.0)))
    os.remove(suite / "ps-sync-n3" / "expected.h5")
    shutil.copytree(suite / "ps-sync-n3" / "result", suite / "ps-sync-n3" / "expected", dirs_exist_ok=True)
    r = _check(suite)
    assert r.returncode == 1 and "ps-sync-n3: fail step 4, worker 0, w[" in r.stdout, r.stdout


def test_check_writes_its_report_where_it_says(suite, tmp_path):
    r = cli("conformance", "check", str(suite), cwd=tmp_path)
    assert r.returncode == 0
    said = [os.path.join(tmp_path, "conformance.json"), os.path.join(tmp_path, "conformance.md")]
    assert f"written: {', '.join(said)}" in r.stdout and all(map(os.path.isfile, said))


def test_export_on_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capfd):
    from refsgd.cli import app  # noqa: PLC0415 -- in-process, so that the disk can be made full
    from refsgd.conformance import export  # noqa: PLC0415

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(export.shutil, "copyfile", full)
    assert app.main(["conformance", "export", str(tmp_path / "suite"), "--include", "^ps-sync-n3$"]) == 2
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "refsgd: error: export" in err and "No space left on device" in err, err
    assert os.listdir(tmp_path / "suite") == []


# ---------------------------------------------------------------------------- backends that are not one
_BACKENDS = {
    "misspelled": "from refsgd.conformance import Backend\nclass B(Backend):\n    methods = ('ps-synk',)\n"
                  "    def setup(self, s): pass\n    def step(self, t, lr, b): pass\n    def state(self): pass\n",
    "duck": "class B:\n    methods = ('ps-sync',)\n    def setup(self, s): pass\n    def step(self, t, lr, b): pass\n"
            "    def state(self): pass\n",
    "empty": "from refsgd.conformance import Backend\nclass B(Backend):\n    methods = ('ps-sync',)\n",
    "none": "def B():\n    return None\n",
    "init": "from refsgd.conformance import Backend\nclass B(Backend):\n    def __init__(self):\n"
            "        raise RuntimeError('no GPU')\n",
    "supports": "from refsgd.conformance import Backend\nclass B(Backend):\n    methods = ('ps-sync',)\n"
                "    def supports(self, c): return c.options['nosuch']\n    def setup(self, s): pass\n"
                "    def step(self, t, lr, b): pass\n    def state(self): pass\n",
    "nothing": "from refsgd.conformance import Backend\nclass B(Backend):\n"
               "    def setup(self, s): pass\n    def step(self, t, lr, b): pass\n    def state(self): pass\n",
}


@pytest.mark.parametrize("kind, message", [
    ("misspelled", "its methods name 'ps-synk', which is no method of refsgd (did you mean ps-sync?)"),
    ("duck", "B has no supports() (subclass refsgd.conformance.Backend, or write them)"),
    ("empty", "B does not implement setup(), step(), state()"),
    ("none", "calling it returned None, not a backend"),
    ("init", "making an instance raised RuntimeError: no GPU"),
    ("supports", "supports(ssgd-n2) raised KeyError: 'nosuch'"),
    ("nothing", "declares none of the 77 configurations chosen"),
])
def test_a_backend_that_is_not_one_is_one_line(tmp_path, kind, message):
    (tmp_path / "b.py").write_text(_BACKENDS[kind])
    _one_line(cli("conformance", "run", f"{tmp_path / 'b.py'}:B", "--out", "-"), message)
    r = _pytest("--pyargs", "refsgd.conformance", "--backend", f"{tmp_path / 'b.py'}:B", cwd=tmp_path)
    assert r.returncode == 4 and message in r.stderr and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr


def _pytest(*args, cwd):
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], capture_output=True,
                          text=True, timeout=600, cwd=cwd, env=mpi_env())


@pytest.mark.parametrize("args, message", [
    (["--conformance-include", "("], "is not a regular expression"),
    (["--conformance-traces", __file__], "--conformance-traces"),
])
def test_the_plugins_bad_input_is_one_line(tmp_path, args, message):
    r = _pytest("--pyargs", "refsgd.conformance", "--backend", f"{NUMPY}:Backend", *args, cwd=tmp_path)
    assert r.returncode == 4 and message in r.stderr, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr and "ERROR collecting" not in r.stdout


# ---------------------------------------------------------------------------- an interrupt is no failure
class _Interrupted:
    """The NumPy example, stopped by a signal at step 2 (refsgd's handler raises Stopped)."""

    def __new__(cls):
        backend = load_backend(f"{NUMPY}:Backend")()
        step = backend.step

        def stopped(t, lr, batches):
            if t == 2:
                raise Stopped(130, "interrupted (SIGINT)")
            return step(t, lr, batches)
        backend.step = stopped
        return backend


def test_an_interrupt_is_not_the_backends_failure(tmp_path):
    c = next(c for c in configurations() if c.name == "ps-sync-n3")
    with pytest.raises(Stopped):
        run(_Interrupted, c, References(str(tmp_path)), str(tmp_path / "out.h5"))
    with pytest.raises(KeyboardInterrupt):
        run(lambda: (_ for _ in ()).throw(KeyboardInterrupt()), c, References(str(tmp_path)), str(tmp_path / "o.h5"))
    assert run(load_backend(f"{NUMPY}:Backend"), c, References(str(tmp_path)), str(tmp_path / "ok.h5")).status == PASS
    assert FAIL != PASS


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_ends_the_command_as_interrupted(tmp_path, sig):
    """A real SIGINT (SIGTERM) at step 2 of the first configuration: exit 130 (143), no `fail`, no
    report."""
    (tmp_path / "slow.py").write_text(
        "import os, signal\nfrom numpy_backend import Backend as Base\n"
        "class Backend(Base):\n    def step(self, t, lr, b):\n        if t == 2:\n"
        f"            os.kill(os.getpid(), {int(sig)})\n        return super().step(t, lr, b)\n")
    shutil.copy(NUMPY, tmp_path / "numpy_backend.py")
    r = cli("conformance", "run", f"{tmp_path / 'slow.py'}:Backend", "--out", str(tmp_path / "report"),
            "--include", "^ps-sync")
    assert r.returncode == 128 + sig, r.stdout + r.stderr
    said = "refsgd: interrupted" if sig == signal.SIGINT else "refsgd: terminated (SIGTERM)"
    assert "fail" not in r.stdout and said in r.stderr and not (tmp_path / "report.json").exists()


# ---------------------------------------------------------------------------- the command line
@pytest.mark.parametrize("args, message", [
    (["run", f"{NUMPY}:Backend", "--out", ""], "--out is empty"),
    (["run", f"{NUMPY}:Backend", "--out-dir", " "], "--out-dir is empty"),
    (["run", ""], "the backend is empty"),
    (["check", ""], "the folder is empty"),
    (["run", f"{NUMPY}:Backend", "--include", ""], "--include is empty"),
    (["export", "x", "--out-dir", "y"], "refsgd conformance export: --out-dir does not apply"),
    (["check", "x", "--algo", "ssgd"], "refsgd conformance check: --algo does not apply"),
    (["export", "x", "--out", "r"], "refsgd conformance export: --out does not apply"),
    (["run", f"{NUMPY}:Backend", "--force"], "refsgd conformance run: --force does not apply"),
    (["run", f"{NUMPY}:Backend", "--algo", "ps-synk"], "no configuration of ps-synk (did you mean ps-sync?)"),
    ([], "give run BACKEND, export DIR or check DIR"),
    (["run"], "refsgd conformance run BACKEND: give the backend"),
])
def test_bad_input_of_the_command_line_is_one_line(tmp_path, args, message):
    _one_line(cli("conformance", *args, cwd=tmp_path), message)


def test_the_old_spelling_still_runs_and_says_the_new_one(tmp_path):
    r = cli("conformance", f"{NUMPY}:Backend", "--include", "^ps-sync-n3$", "--out", "-")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"write `refsgd conformance run {NUMPY}:Backend`" in r.stderr and "1 of 1 declared" in r.stdout
