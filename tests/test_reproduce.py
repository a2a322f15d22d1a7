"""refsgd reproduce: the list of claims, the verdict logic on synthetic numbers, one quick claim
end to end (it launches mpiexec itself, as a user runs it), and bad input."""

import json
import os

import pytest
from conftest import cli

from refsgd.reproduce import Setup, claims, fmt, warnings_for
from refsgd.reproduce.runner import cores
from refsgd.reproduce.verdict import (FAILS, HOLDS, MISSING, NOT_REPRODUCED, PARTLY, PARTLY_REPRODUCED,
                                      REPRODUCED, Check, spread, verdict)


def test_list_names_every_claim_of_the_five_papers():
    r = cli("reproduce", "--list")
    assert r.returncode == 0, r.stderr
    names = [line for line in r.stdout.splitlines() if line and not line.startswith(" ")]
    assert len(names) >= 10 and len(set(names)) == len(names)
    assert names == [c.name for c in claims.CLAIMS]
    for paper in ("Rigazzi", "Hakimi", "Sato", "Coquelin", "Li et al."):
        assert paper in r.stdout, paper
    # the papers' numbers the issue names
    for number in ("5.24x", "2.96x", "42 %", "1.9x", "34 %", "2.0-3.2x", "4.0-5.4x", "S = 3, 9, 27", "76.28 %",
                   "eq. 14"):
        assert number in r.stdout, number
    assert r.stdout.count("    claim: ") == len(names) and r.stdout.count("    paper: ") == len(names)


def test_every_claim_checks_numbers_it_measures_and_shares_its_hyperparameters():
    for c in claims.CLAIMS:
        assert c.checks, c.name
        hp = c.hyper(Setup(quick=True))
        assert "model" in hp, c.name
        assert set(c.paper_values) <= {k.key for k in c.checks} | set(c.paper_values), c.name


def test_results_index_has_a_row_per_claim():
    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "results.md")) as f:
        rows = [line.split("|")[1].strip() for line in f if line.startswith("| ") and not line.startswith("| claim")]
    assert [r.strip("[]").split("]")[0] for r in rows] == [c.name for c in claims.CLAIMS]


def test_check_status_thresholds():
    c = Check("x", ">=", 2.0, 1.0)
    assert [c.status(v) for v in (2.5, 2.0, 1.5, 1.0, 0.5)] == [HOLDS, HOLDS, PARTLY, PARTLY, FAILS]
    assert c.status(float("nan")) == MISSING and c.status(None) == MISSING
    d = Check("y", "<=", 0.42, 0.8)
    assert [d.status(v) for v in (0.1, 0.42, 0.6, 0.9)] == [HOLDS, HOLDS, PARTLY, FAILS]
    assert Check("z", ">=", 1.0).status(0.99) == FAILS  # no partial threshold
    with pytest.raises(ValueError):
        Check("w", ">=", 1.0, 2.0)  # a "partial" threshold stronger than the full one


def test_verdict_from_synthetic_numbers():
    checks = (Check("a", ">=", 2.0, 1.0, "speed-up"), Check("b", "<=", 1.0, 3.0, "spread"))
    assert verdict(checks, {"a": 2.1, "b": 0.5})[0] == REPRODUCED
    assert verdict(checks, {"a": 1.5, "b": 0.5})[0] == PARTLY_REPRODUCED
    assert verdict(checks, {"a": 0.5, "b": 2.0})[0] == PARTLY_REPRODUCED
    assert verdict(checks, {"a": 0.5, "b": 5.0})[0] == NOT_REPRODUCED
    assert verdict(checks, {"a": float("nan"), "b": 5.0})[0] == NOT_REPRODUCED
    word, why, statuses = verdict(checks, {"a": 1.5, "b": 0.5})
    assert statuses == [PARTLY, HOLDS]
    assert "speed-up = 1.5 (partly: needs >= 2, partly >= 1)" in why and "spread = 0.5 (holds" in why
    with pytest.raises(ValueError):
        verdict((), {})


def test_spread_over_seeds():
    s = spread([{"a": 1.0, "b": 2.0}, {"a": 3.0, "b": float("nan")}, {"a": 2.0}])
    assert s["a"] == {"mean": 2.0, "min": 1.0, "max": 3.0, "seeds": [1.0, 3.0, 2.0]}
    assert s["b"] == {"mean": 2.0, "min": 2.0, "max": 2.0, "seeds": [2.0, None, None]}


def test_more_ranks_than_cores_or_a_busy_machine_say_timing_is_meaningless(monkeypatch):
    import refsgd.reproduce as rep
    monkeypatch.setattr(rep, "load_average", lambda: [0.0, 0.0, 0.0])
    assert warnings_for(Setup(ranks=1)) == []
    assert any("meaningless" in w for w in warnings_for(Setup(ranks=cores() + 1)))
    monkeypatch.setattr(rep, "load_average", lambda: [cores() + 0.5, 1.0, 1.0])
    assert any("the machine is busy" in w for w in warnings_for(Setup(ranks=1)))
    assert any("meaningless" in w for w in warnings_for(Setup(ranks=cores() + 1)))


def test_first_reach_interpolates():
    assert claims.first_reach([0, 10, 20], [50, 70, 90], 80) == 15.0
    assert claims.first_reach([0, 10], [5.0, 3.0], 4.0, higher=False) == 5.0
    assert claims.first_reach([0, 10], [50, 60], 99) != claims.first_reach([0, 10], [50, 60], 99)  # nan


def test_quick_claim_end_to_end(tmp_path):
    """A real claim under mpiexec (3 runs of a few seconds): the three files, a verdict, and the
    markdown's numbers equal to the JSON's."""
    out = tmp_path / "res"
    r = cli("reproduce", "dcs3gd-accuracy", "--quick", "--out-dir", str(out), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    for ext in ("md", "json", "png"):
        assert (out / f"dcs3gd-accuracy.{ext}").stat().st_size > 0, ext
    data = json.loads((out / "dcs3gd-accuracy.json").read_text())
    md = (out / "dcs3gd-accuracy.md").read_text()
    assert data["verdict"] in (REPRODUCED, PARTLY_REPRODUCED, NOT_REPRODUCED)
    assert f"**Verdict: {data['verdict']}.**" in md and data["verdict"] in r.stdout
    assert data["seeds"] == 1 and data["quick"] and len(data["runs"]) == 3
    assert all(run["command"].startswith("mpiexec -n ") and len(run["load_before"]) == 3 for run in data["runs"])
    assert data["hyperparameters"]["momentum"] == 0.9 and "- momentum: 0.9" in md
    for key, v in data["numbers"].items():
        row = next(line for line in md.splitlines() if line.startswith(f"| {key} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[2:5] == [fmt(v["mean"]), fmt(v["min"]), fmt(v["max"])], key
        assert 0 <= v["mean"] <= 100 if key.startswith("acc_") else True
    assert {k.key for k in claims.BY_NAME["dcs3gd-accuracy"].checks} | set(data["paper_values"]) <= set(data["numbers"])
    # the verdict is the one the numbers give
    c = claims.BY_NAME["dcs3gd-accuracy"]
    assert verdict(c.checks, {k: v["mean"] for k, v in data["numbers"].items()})[0] == data["verdict"]
    # a second run refuses to replace the files without --force
    again = cli("reproduce", "dcs3gd-accuracy", "--quick", "--out-dir", str(out))
    assert again.returncode == 2 and "--force" in again.stderr and "running" not in again.stderr


@pytest.mark.parametrize("args, message", [
    (["nope"], "no claim 'nope'"),
    (["laga-idel"], "did you mean 'laga-idle'"),
    ([], "give a claim's NAME"),
    (["laga-idle", "--link", "fast"], "--link"),
    (["laga-idle", "--out-dir", "setup.cfg"], "is a file, not a folder"),
    (["laga-idle", "--data", "no/such.h5"], "no/such.h5"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    r = cli("reproduce", *args, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr and "running" not in r.stderr


def test_not_under_mpiexec_text():
    assert os.path.exists(claims._bundled("ppasgd_mnist_cnn.toml"))


def test_ctrl_c_stops_every_run_and_writes_nothing(tmp_path):
    """SIGINT to the command's process group (Ctrl-C) while a run is in flight: exit 130 within
    seconds, no mpiexec or rank left, no half-written result."""
    import signal
    import subprocess
    import sys
    import time
    out = tmp_path / "res"
    p = subprocess.Popen([sys.executable, "-m", "refsgd", "reproduce", "daso", "--quick", "--out-dir", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not list(tmp_path.glob("res")):
            time.sleep(0.2)
        time.sleep(3)  # a run is in flight
        os.killpg(p.pid, signal.SIGINT)
        text, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, text
    assert "running mpiexec" in text and "interrupted" in text
    ps = subprocess.run(["ps", "-eo", "pgid="], capture_output=True, text=True).stdout.split()
    assert str(p.pid) not in ps  # nothing of the job is left
    assert not any(out.iterdir()) if out.exists() else True


def test_data_picks_the_claims_models(tmp_path):
    """--data: a 1x28x28 set trains mnist_mlp, a 3x32x32 one with 10 classes cifar10_cnn, the
    embedded digits digits_mlp (accuracy) and digits_cnn (timing); another shape is refused."""
    import numpy as np

    from refsgd import RefsgdError
    from refsgd.datasets import write

    def data(shape, classes=10):
        rng = np.random.default_rng(0)
        path = str(tmp_path / f"d{'x'.join(map(str, shape))}.h5")
        x = rng.integers(0, 255, (20,) + shape, dtype=np.uint8)
        y = np.arange(20) % classes
        return write(path, "t", x, y, x[:10], y[:10], classes, "test", "none", "none")

    assert (Setup().model("accuracy"), Setup().model("timing")) == ("digits_mlp", "digits_cnn")
    mnist = Setup(data=data((1, 28, 28)))
    assert mnist.kind == "mnist" and mnist.model("accuracy") == mnist.model("timing") == "mnist_mlp"
    assert Setup(data=data((3, 32, 32))).model("timing") == "cifar10_cnn"
    with pytest.raises(RefsgdError, match="1x28x28"):
        Setup(data=data((1, 16, 16))).kind
