"""The conformance suite (refsgd.conformance): its expected traces are the golden files, the two
example backends pass it, a deliberate bug in either is caught and located, the pytest plugin
and the export/check pair, and refsgd.trace.Writer."""

import json
import os
import re
import subprocess
import sys
import types

import h5py
import numpy as np
import pytest
from tests.helpers.backend_run import write_result
from tests.helpers.launch import ROOT, cli, mpi_env

from refsgd import trace
from refsgd.conformance import load_backend
from refsgd.conformance.suite import FAIL, NOT_DECLARED, PASS, References, configurations, run
from refsgd.errors import RefsgdError
from refsgd.registry import METHODS

GOLDEN = os.path.join(ROOT, "tests", "golden")
EXAMPLES = os.path.join(ROOT, "examples", "conformance")
NUMPY = os.path.join(EXAMPLES, "numpy_backend.py")
TORCH = os.path.join(EXAMPLES, "torch_backend.py")


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    return References(str(tmp_path_factory.mktemp("expected")))


def _config(name):
    return next(c for c in configurations() if c.name == name)


def test_the_expected_traces_are_the_checked_in_golden_files(references):
    """The suite makes its expected traces with the serial renderings (the installed package has
    no tests/golden): every configuration that names a golden file makes that file again."""
    named = [c for c in configurations() if c.golden]
    assert {c.golden for c in named} == {f for f in os.listdir(GOLDEN) if f.endswith(".h5")}
    for c in named:
        references.setup(c)
        got = trace.compare(references.path(c), os.path.join(GOLDEN, c.golden), rtol=1e-12)
        assert got.ok, (c.name, got.lines)


def test_the_configurations_cover_methods_dtypes_and_codecs():
    cs = configurations()
    assert len({c.name for c in cs}) == len(cs)
    assert {c.method for c in cs} == set(METHODS)           # every method of the registry
    assert {c.dtype for c in cs} == {"float64", "float32"}
    assert {c.codec for c in cs} == {"none", "t16", "bf16", "fp16", "q8", "q8v"}
    # include/exclude as ONNX's: regular expressions searched in the name
    assert [c.name for c in configurations(include=["^d-sync"], exclude=["float32", "q8"])] == \
        ["d-sync-n2", "d-sync-t16-n2", "d-sync-bf16-n2", "d-sync-fp16-n2", "d-sync-n3"]
    assert {c.method for c in configurations(methods=["dcasgd"])} == {"dcasgd"}
    with pytest.raises(RefsgdError, match="no configuration of nosuch"):
        configurations(methods=["nosuch"])


# ---------------------------------------------------------------------------- the examples, right and wrong
def _bugged(tmp_path, source, old, new):
    """A copy of an example with one deliberate bug (the text ``old`` replaced by ``new``)."""
    text = open(source).read()
    assert text.count(old) == 1, old
    path = tmp_path / f"bugged_{os.path.basename(source)}"
    path.write_text(text.replace(old, new))
    return load_backend(f"{path}:Backend")


@pytest.mark.parametrize("name, old, new, where", [
    # a sign: DC-ASGD's compensation towards the worker's stale copy instead of away from it; the
    # first push (worker 1) is at the server's own w, the second (worker 2) is the first it changes
    ("dcasgd-n3", "(self.w - self.backup[m])", "(self.backup[m] - self.w)", (0, 0, "w")),
    # a missing momentum term: M = -lr * D_A; the same at step 0 (M = 0), wrong from step 1
    ("pp-asgd-s3-n2", "self.M = mu * self.M - lr * D_A", "self.M = - lr * D_A", (1, 0, "w")),
    # the prediction of eq. 2 left out: w and M right, w^ wrong at step 0
    ("pp-asgd-s3-n2", "self.w + self.h * self.M if", "self.w if", (0, 0, "w_hat")),
])
def test_a_bug_in_the_numpy_example_is_caught_and_located(tmp_path, references, name, old, new, where):
    c = _config(name)
    assert run(load_backend(f"{NUMPY}:Backend"), c, references, str(tmp_path / "good.h5")).status == PASS
    o = run(_bugged(tmp_path, NUMPY, old, new), c, references, str(tmp_path / "bad.h5"))
    assert o.status == FAIL
    assert (o.where["step"], o.where["worker"], o.where["array"]) == where, o.message
    with h5py.File(tmp_path / "bad.h5") as f, h5py.File(references.path(c)) as g:   # both values, as read
        t, i, j = o.where["step"], o.where["worker"], o.where["index"]
        assert (o.where["a"], o.where["b"]) == (f[f"state/{where[2]}"][t, i, j], g[f"state/{where[2]}"][t, i, j])
    assert o.message.startswith(f"step {where[0]}, worker {where[1]}, {where[2]}[{j}] (fc")
    assert f": got {o.where['a']!r}, expected {o.where['b']!r}" in o.message


def test_the_numpy_example_passes_with_one_command(tmp_path):
    r = cli("conformance", "run", f"{NUMPY}:Backend", "--out", str(tmp_path / "report"), timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    n = len(configurations())
    declared = {c.name for c in configurations() if c.codec == "none" and c.method in (
        "ssgd", "ssgd-opt", "d-sync", "local-sgd", "ps-sync", "dcasgd", "pp-asgd", "asgd")}
    assert len(declared) == 29 and {"dcasgd-adaptive-wd-n4", "local-sgd-nesterov-wd-n3", "ssgd-mxnet-wd-n2"} < declared
    assert f"numpy_backend.py:Backend: 29 of 29 declared configurations pass; {n - 29} not declared ({n} in all)" \
        in r.stdout
    assert _row(r.stdout, "dcasgd-n3") == ["dcasgd-n3", "dcasgd", "3", "float64", "none", "pass"]
    assert _row(r.stdout, "ssgd-t16-n2") == ["ssgd-t16-n2", "ssgd", "2", "float64", "t16", "not", "declared"]
    report = json.loads((tmp_path / "report.json").read_text())
    status = {c["name"]: c["status"] for c in report["configurations"]}
    assert {k for k, v in status.items() if v == PASS} == declared
    assert set(status.values()) == {PASS, NOT_DECLARED}
    md = (tmp_path / "report.md").read_text()
    assert "refsgd%20conformance-29/29-brightgreen" in md and "| pp-asgd-s3-n2 | pp-asgd | 2 | float64 | none | pass |" in md


def test_the_torch_example_passes_with_one_command(tmp_path):
    pytest.importorskip("torch")
    r = cli("conformance", f"{TORCH}:Backend", "--out", "-", timeout=1800)
    assert r.returncode == 0, r.stdout + r.stderr
    n, k = len(configurations()), sum(map(load_backend(f"{TORCH}:Backend")().supports, configurations()))
    assert k >= 27
    assert f"torch_backend.py:Backend: {k} of {k} declared configurations pass; {n - k} not declared ({n} in all)" \
        in r.stdout
    for name in ("ssgd-n2", "ssgd-opt-n2", "laga-sgd-n2", "laga-sgdm-n2", "laga-sgdn-n4", "dcs3gd-tensor-n4",
                 "d-sync-t16-n2", "ssgd-fp16-n4", "ssgd-n4-float32"):
        assert _row(r.stdout, name)[-1] == "pass", name


def _row(table, name):
    """The row of configuration ``name`` in the printed table, as its words."""
    return next(line.split() for line in table.splitlines() if line.split()[:1] == [name])


@pytest.mark.parametrize("name, old, new, where", [
    # a sign: DC-S3GD's eq. 9 as dw_i - dbar; step 0 (the prologue) has no correction, step 1 is wrong
    ("dcs3gd-n4", "D = dbar - self.DW[i]", "D = self.DW[i] - dbar", (1, 0, "w_i")),
    # a missing momentum term: LAGA-SGDN's look-ahead gamma * m left out of y's update
    ("laga-sgdn-n4", 'nesterov=c.get("nesterov", False) or s.method == "laga-sgdn"', 'nesterov=c.get("nesterov", False)',
     (0, 0, "y")),
    # a codec's rounding: bf16 by truncation instead of to nearest even
    ("d-sync-bf16-n2", '"bf16": (lambda v: v.to(torch.bfloat16), lambda v: v.to(torch.float32))',
     '"bf16": (lambda v: (v.view(torch.int32) & -65536).view(torch.float32), lambda v: v)', (0, 0, "w")),
])
def test_a_bug_in_the_torch_example_is_caught_and_located(tmp_path, references, name, old, new, where):
    pytest.importorskip("torch")
    c = _config(name)
    assert run(load_backend(f"{TORCH}:Backend"), c, references, str(tmp_path / "good.h5")).status == PASS
    o = run(_bugged(tmp_path, TORCH, old, new), c, references, str(tmp_path / "bad.h5"))
    assert o.status == FAIL and (o.where["step"], o.where["worker"], o.where["array"]) == where, o.message


# ---------------------------------------------------------------------------- the pytest plugin
def _pytest(*args, cwd):
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], capture_output=True,
                          text=True, timeout=1200, cwd=cwd, env=mpi_env())


def test_the_pytest_plugin_generates_one_test_per_configuration(tmp_path):
    r = _pytest("--pyargs", "refsgd.conformance", "--backend", f"{NUMPY}:Backend", "--conformance-include", "^pp-asgd-s3",
                "--conformance-exclude", "float32", "-rs", "-v", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "test_conformance[pp-asgd-s3-n2] PASSED" in r.stdout and "1 passed" in r.stdout
    # a bug: the failure names the step, the worker, the array, the index and both values
    bugged = tmp_path / "bugged.py"
    bugged.write_text(open(NUMPY).read().replace("self.M = mu * self.M - lr * D_A", "self.M = - lr * D_A"))
    r = _pytest("--pyargs", "refsgd.conformance", "--backend", f"{bugged}:Backend", "--conformance-include",
                "^pp-asgd-s3-n2$", "--conformance-include", "^ssgd-t16-n2$", "-rs", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 1 skipped" in r.stdout and "not declared by" in r.stdout
    assert "pp-asgd-s3-n2: step 1, worker 0, w[" in r.stdout and ": got " in r.stdout and ", expected " in r.stdout
    # without --backend: one skipped test, and no NumPy loaded by the plugin
    r = _pytest("--pyargs", "refsgd.conformance", "-rs", cwd=tmp_path)
    assert r.returncode == 0 and "1 skipped" in r.stdout and "give the backend to check: --backend" in r.stdout
    r = _pytest("--backend", "nosuch.module:Backend", "--pyargs", "refsgd.conformance", cwd=tmp_path)
    assert r.returncode == 4
    assert "backend 'nosuch.module:Backend': importing nosuch.module raised ModuleNotFoundError" in r.stderr


def test_the_plugin_stays_out_of_other_test_runs():
    """Loaded by every pytest run where refsgd is installed: it must not import NumPy or refsgd's
    heavy modules, and adds no test to another suite."""
    code = ("import sys, refsgd.conformance.plugin; heavy = [m for m in ('numpy', 'h5py', 'numba', 'mpi4py') "
            "if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    r = _pytest("--co", "-q", os.path.join(ROOT, "tests", "test_options.py"), cwd=ROOT)
    assert r.returncode == 0 and "conformance" not in r.stdout, r.stdout


# ---------------------------------------------------------------------------- export and check
def _read_folder(path):
    """What an implementation in another language reads: JSON and NPY files, nothing of refsgd."""
    meta = json.loads((path / "config.json").read_text())
    arrays = {k: np.load(path / f"{k}.npy") for k in ("x_train", "y_train", "w0", "batches", "lr")}
    return meta, types.SimpleNamespace(method=meta["method"], workers=meta["workers"], steps=meta["steps"],
                                       dtype=meta["dtype"], config=meta["hyperparameters"],
                                       model_spec=meta["model_spec"], layout=meta["layout"],
                                       state_names=meta["state_names"], **arrays)


def test_export_and_check_round_trip(tmp_path):
    suite = tmp_path / "suite"
    r = cli("conformance", "export", str(suite), "--include", "^pp-asgd-s3-n2$", "--include", "^dcasgd-n3$",
            timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(os.listdir(suite)) == ["dcasgd-n3", "pp-asgd-s3-n2"]
    folder = suite / "pp-asgd-s3-n2"
    assert {"README.md", "config.json", "inputs.h5", "x_train.npy", "y_train.npy", "w0.npy", "batches.npy", "lr.npy",
            "expected.h5", "expected"} == set(os.listdir(folder))
    with h5py.File(folder / "inputs.h5") as f:
        assert np.array_equal(f["batches"][...], np.load(folder / "batches.npy"))
    assert f"refsgd conformance check {suite}\n" in (folder / "README.md").read_text()
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(folder).st_mode & 0o777 == 0o777 & ~umask     # not mkdtemp's 0o700
    # the NumPy example driven from the files alone, its states written back as NPY
    meta, s = _read_folder(folder)
    write_result(folder, load_backend(f"{NUMPY}:Backend")(), s, s.batches)
    r = cli("conformance", "check", str(suite), "--out", "-")
    assert r.returncode == 1, r.stdout + r.stderr                 # dcasgd-n3 has no result: no green
    assert _row(r.stdout, "pp-asgd-s3-n2") == ["pp-asgd-s3-n2", "pp-asgd", "2", "float64", "none", "pass"]
    assert _row(r.stdout, "dcasgd-n3") == ["dcasgd-n3", "dcasgd", "3", "float64", "none", "no", "result"]
    assert "1 of 1 declared configurations pass; 1 no result (2 in all)" in r.stdout
    # a perturbed state: the first difference, located
    w = np.load(folder / "result" / "M.npy")
    w[7, 1, 300] *= 1 + 1e-6
    np.save(folder / "result" / "M.npy", w)
    r = cli("conformance", "check", str(suite), "--out", "-")
    assert r.returncode == 1
    assert f"FAIL step 7, worker 1, M[300] (fc1.weight[4, 44]): got {float(w[7, 1, 300])!r}, expected " in r.stdout, \
        r.stdout
    os.remove(folder / "result" / "M.npy")
    r = cli("conformance", "check", str(suite), "--out", "-")
    assert r.returncode == 1 and "result: M.npy is missing" in r.stdout
    # export refuses to replace a folder without --force
    r = cli("conformance", "export", str(suite), "--include", "^dcasgd-n3$")
    assert r.returncode == 2 and "dcasgd-n3 exists; give --force to replace it" in r.stderr


@pytest.mark.parametrize("args, message", [
    (["nosuch.module:Backend"], "backend 'nosuch.module:Backend': importing nosuch.module raised ModuleNotFoundError"),
    (["Backend"], "expected module:Class or path/to/file.py:Class"),
    ([f"{NUMPY}:Nothing"], "numpy_backend.py has no Nothing"),
    (["export"], "refsgd conformance export DIR: give the folder"),
    (["check", "/nonexistent/suite"], "/nonexistent/suite: no such folder"),
    ([f"{NUMPY}:Backend", "--include", "^ssgd-t16-n2$"], "declares none of the 1 configurations chosen"),
    ([f"{NUMPY}:Backend", "--include", "("], "is not a regular expression"),
])
def test_bad_input_is_one_line(args, message):
    r = cli("conformance", *args)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert r.stderr.count("refsgd: error:") == 1 and "Traceback" not in r.stderr


# ---------------------------------------------------------------------------- refsgd.trace.Writer
def test_the_writer_writes_what_verify_reads(tmp_path):
    ref = trace.Trace(os.path.join(GOLDEN, "ssgd-n2.h5"))
    mine = tmp_path / "mine.h5"
    with trace.Writer(mine, like=ref.path, source="test") as w:
        for t in range(w.steps):
            w.step(loss=ref.loss[t], states={k: ref.state[k][t] for k in ref.state_names})
    ok, lines = trace.verify(str(mine), ref.path, rtol=0, atol=0)
    assert ok, lines
    # everything given by hand (no like=): the same file
    spec = json.loads(ref.attrs["model_spec"])
    by_hand = tmp_path / "by_hand.h5"
    with trace.Writer(by_hand, method="ssgd", world_size=2, dtype="float64", config=ref.config, model="digits_tiny",
                      model_spec=spec, layout=json.loads(ref.attrs["layout"]), dataset="digits",
                      dataset_sha256=ref.attrs["dataset_sha256"], state_names=ref.state_names, w0=ref.w0) as w:
        for t in range(10):
            w.step(loss=ref.loss[t], states={k: ref.state[k][t] for k in ref.state_names}, batches=ref.batches[t],
                   lr=ref.lr[t])
    assert trace.verify(str(by_hand), ref.path, rtol=0, atol=0)[0]
    # a wrong array is refused where it is given, and nothing is written
    bad = tmp_path / "bad.h5"
    with pytest.raises(RefsgdError, match=r"step 1: state x must be float64 of shape \(2, \.\.\., 1210\), got float32"):
        with trace.Writer(bad, like=ref.path) as w:
            w.step(loss=ref.loss[0], states={k: ref.state[k][0] for k in ref.state_names})
            w.step(loss=ref.loss[1], states={"x": ref.state["x"][1].astype(np.float32),
                                             "U.momentum_buffer": ref.state["U.momentum_buffer"][1]})
    assert not bad.exists()
    with pytest.raises(RefsgdError, match="missing method, world_size"):
        trace.Writer(bad, w0=ref.w0)


def test_the_writer_needs_no_mpi_and_no_numba():
    code = ("import sys, refsgd.trace; heavy = [m for m in ('mpi4py', 'numba') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_page_check_your_implementation_is_right(tmp_path):
    """docs/conformance.md: its backend, saved as the page says, passes with the page's command."""
    pytest.importorskip("torch")
    text = open(os.path.join(ROOT, "docs", "conformance.md")).read()
    (tmp_path / "my_backend.py").write_text(re.findall(r"```python\n(.*?)```", text, re.S)[0])
    assert "refsgd conformance run my_backend.py:MyBackend\n" in text
    r = cli("conformance", "run", "my_backend.py:MyBackend", cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    n = len(configurations())
    assert f"my_backend.py:MyBackend: 2 of 2 declared configurations pass; {n - 2} not declared ({n} in all)" \
        in r.stdout
    assert _row(r.stdout, "d-sync-n2")[-1] == "pass" and _row(r.stdout, "d-sync-n3")[-1] == "pass"
    assert (tmp_path / "conformance.json").exists() and (tmp_path / "conformance.md").exists()
