"""Messages that point at the bug: a failing configuration names the element by layer, every array
that differs at that step and the first step each differs at, says when a value is the initial or
the previous step's, locates the first NaN (worker, element), and does not cite removed traces."""

import os

import pytest
from tests.helpers.launch import ROOT, cli

from refsgd.conformance import References, configurations, load_backend, run
from refsgd.conformance.diagnose import element

NUMPY = os.path.join(ROOT, "examples", "conformance", "numpy_backend.py")
LAYOUT = [("fc1.weight", 0, (16, 64)), ("fc1.bias", 1024, (16,)), ("fc2.weight", 1040, (10, 16)),
          ("fc2.bias", 1200, (10,))]                  # digits_tiny's, as every configuration lays it out


def test_a_flat_position_is_named_by_layer_and_element():
    assert element(LAYOUT, (1210,), 986) == "fc1.weight[15, 26]"
    assert element(LAYOUT, (1210,), 1100) == "fc2.weight[3, 12]"
    assert element(LAYOUT, (1210,), 1209) == "fc2.bias[9]"
    assert element(LAYOUT, (2, 1210), 1210 + 1030) == "[1] fc1.bias[6]"      # pipe-sgd's g_sum (K, d)
    assert element(LAYOUT, (), None) is None


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    return References(str(tmp_path_factory.mktemp("expected")))


def _mutant(tmp_path, old, new):
    text = open(NUMPY).read()
    assert text.count(old) == 1
    (tmp_path / "bugged.py").write_text(text.replace(old, new))
    return load_backend(f"{tmp_path / 'bugged.py'}:Backend")


def _outcome(tmp_path, references, name, old, new):
    c = next(c for c in configurations() if c.name == name)
    o = run(_mutant(tmp_path, old, new), c, references, str(tmp_path / "out.h5"))
    assert not o.ok
    return o


def test_a_mismatch_names_the_element_every_array_and_the_first_step_of_each(tmp_path, references):
    o = _outcome(tmp_path, references, "pp-asgd-s3-n2", "self.M = mu * self.M - lr * D_A", "self.M = - lr * D_A")
    assert o.message.startswith("step 1, worker 0, w[986] (fc1.weight[15, 26]): got 0.156459692015")
    assert "differ at step 1: w, M, w_hat" in o.lines
    assert "first step each array differs at: loss 5, w 1, M 1, w_hat 1" in o.lines


def test_a_skipped_update_is_pointed_out(tmp_path, references):
    o = _outcome(tmp_path, references, "ps-sync-n3", "        self.w = self.w - lr * total",
                 "        self.w = self.w - lr * total if t != 3 else self.w")
    assert o.message.startswith("step 3, worker 0, w[") and o.message.endswith(
        "(equals the expected value of step 2: the update was skipped, or is a step late?)"), o.message
    o = _outcome(tmp_path, references, "ps-sync-n3", "        self.w = self.w - lr * total", "        pass")
    assert o.message.startswith("step 0, worker 0, w[") and o.message.endswith(
        "(equals the initial value w0: the update was skipped?)"), o.message


def test_a_nan_is_located_by_worker_and_element(tmp_path, references):
    o = _outcome(tmp_path, references, "ps-sync-n3", "        self.w = self.w - lr * total",
                 "        self.w = self.w - lr * total\n        if t == 2:\n            self.w[1100] = float('nan')")
    assert o.message.startswith("step 2, worker 0, w[1100] (fc2.weight[3, 12]): got nan (the first non-finite value), "
                                "expected "), o.message
    assert "non-finite from step 2: worker 0, w[1100]" in o.lines


def test_removed_traces_are_not_cited_and_kept_ones_are(tmp_path):
    text = open(NUMPY).read().replace("self.M = mu * self.M - lr * D_A", "self.M = - lr * D_A")
    (tmp_path / "bugged.py").write_text(text)
    r = cli("conformance", "run", f"{tmp_path / 'bugged.py'}:Backend", "--include", "^pp-asgd-s3-n2$", "--out", "-")
    assert r.returncode == 1 and "refsgd-conformance-" not in r.stdout, r.stdout
    assert "A: pp-asgd-s3-n2.h5 (" in r.stdout and "give --out-dir DIR to keep them for refsgd verify" in r.stdout
    r = cli("conformance", "run", f"{tmp_path / 'bugged.py'}:Backend", "--include", "^pp-asgd-s3-n2$", "--out", "-",
            "--out-dir", str(tmp_path / "traces"))
    assert r.returncode == 1 and f"A: {tmp_path / 'traces' / 'pp-asgd-s3-n2.h5'} (" in r.stdout
    assert f"kept in {tmp_path / 'traces'}" in r.stdout and (tmp_path / "traces" / "pp-asgd-s3-n2.h5").is_file()


def test_the_page_documents_every_field_of_setup():
    import dataclasses  # noqa: PLC0415
    import re  # noqa: PLC0415

    from refsgd.conformance import Setup  # noqa: PLC0415
    page = open(os.path.join(ROOT, "docs", "conformance.md")).read()
    table = page.split("`Setup`, field by field")[1].split("\n\n")[1]
    assert re.findall(r"^\| `(\w+)` \|", table, re.M) == [f.name for f in dataclasses.fields(Setup)]
