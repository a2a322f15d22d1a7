"""refsgd reproduce: the list of claims, the verdict logic on synthetic numbers, every claim's
measurement on synthetic runs (the options each variant gets), the outputs and the index, one
quick claim end to end (it launches mpiexec itself, as a user runs it), and bad input. The list
and --rejudge, which launch nothing, run in this process (refsgd.cli.main: tests.helpers.in_process)."""

import json
import os

import pytest
from tests.helpers.in_process import refsgd
from tests.helpers.launch import ROOT, cli, scaled

from refsgd.reproduce import Setup, claims, fmt, outputs, warnings_for
from refsgd.reproduce.runner import cores
from refsgd.reproduce.verdict import NOT_REPRODUCED, NOT_TESTABLE, OUTCOMES, PARTLY_REPRODUCED, REPRODUCED, spread


@pytest.mark.in_process
def test_list_names_every_claim_of_the_five_papers(capfd):
    r = refsgd(capfd, "reproduce", "--list")
    assert r.returncode == 0, r.stderr
    names = [line for line in r.stdout.splitlines() if line and not line.startswith((" ", "all: "))]
    assert len(names) >= 10 and len(set(names)) == len(names)
    assert names == [c.name for c in claims.CLAIMS]
    for paper in ("Rigazzi", "Hakimi", "Sato", "Coquelin", "Li et al."):
        assert paper in r.stdout, paper
    # the papers' numbers the issue names
    for number in ("5.24x", "2.96x", "42 %", "1.8-1.9x", "25 %", "35 %", "2.0-3.2x", "4.0-5.4x", "S = 3, 9, 27",
                   "76.28 %", "eq. 14"):
        assert number in r.stdout, number
    assert r.stdout.count("    claim: ") == len(names) and r.stdout.count("    paper: ") == len(names)
    # how the paper chose each claim's hyperparameters, and each claim's time budget
    assert r.stdout.count("    hyperparameters: ") == len(names)
    assert "the paper tunes per method" in r.stdout  # PP-ASGD against SSGD (Sato 3.2)
    budgets = [line for line in r.stdout.splitlines() if line.startswith("    budget: ")]
    assert len(budgets) == len(names)
    # `all` runs the claims that need root (the real-link ones) only where root is available, and
    # its --list line says so
    total = sum(int(b.split()[1]) for b in budgets if "in `all` where root" not in b)
    # the default seeds: 5 for a claim under a minute per seed (its spread shown beside its band), else 3
    in_all = [b for b in budgets if "in `all` where root" not in b]
    seeds = [int(b.split(", ")[1].split()[0]) for b in in_all]
    assert [s for b, s in zip(in_all, seeds) if int(b.split()[1]) < 60] == [5] * seeds.count(5)
    assert [s for b, s in zip(in_all, seeds) if int(b.split()[1]) >= 60] == [3] * seeds.count(3)
    assert sorted(set(seeds)) == [3, 5]
    real = ["dcs3gd-iteration-cluster", "laga-idle-cluster", "laga-speedup-cluster", "pipesgd-speedup-cluster"]
    assert [c.name for c in claims.CLAIMS if c not in claims.IN_ALL] == real == [c.name for c in claims.REAL_LINK]
    assert f"every claim but {', '.join(real)} (the real link, root), which `all` runs too where root" in r.stdout
    assert claims.budget(False, real_link=True) <= 60 * 60   # with them too, within the hour
    assert total == claims.budget(False, 1)
    at_default = sum(int(b.split()[1]) * s for b, s in zip(in_all, seeds))
    assert at_default == claims.budget(False) <= 60 * 60  # `all` at the default seeds: at most an hour
    assert claims.budget(True, 1) <= 5 * 60  # --quick under 5 minutes
    assert f"all: at most {at_default / 60:.0f} min at the default seeds on 2 idle cores at one rank per core" in r.stdout
    assert r.stdout.count("    regime: ") == len(names)


def test_every_claim_checks_numbers_it_measures_and_shares_its_hyperparameters():
    for c in claims.CLAIMS:
        assert c.checks, c.name
        hp = c.hyper(Setup(quick=True))
        assert "model" in hp, c.name
        assert set(c.paper_values) <= {k.key for k in c.checks} | set(c.paper_values), c.name


def test_results_index_is_the_one_reproduce_writes():
    """docs/results.md is what `refsgd reproduce ... --out-dir docs/results` writes (its first line
    lets a run update it without --force): a row per claim, linking docs/results/NAME.md."""
    with open(os.path.join(ROOT, "docs", "results.md")) as f:
        text = f.read()
    assert text.splitlines()[0] == outputs.INDEX_TITLE
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| claim |")]
    assert [r[2:].split(" |")[0].strip("[").split("]")[0] for r in rows] == [c.name for c in claims.CLAIMS]
    assert all(f"](results/{c.name}.md)" in r for c, r in zip(claims.CLAIMS, rows) if "not run yet" not in r)
    folder = os.path.join(ROOT, "docs", "results")
    assert outputs.beside_path(folder).endswith(os.path.join("docs", "results.md"))  # the next run updates it


def test_spread_over_seeds():
    s = spread([{"a": 1.0, "b": 2.0}, {"a": 3.0, "b": float("nan")}, {"a": 2.0}])
    assert s["a"] == {"mean": 2.0, "min": 1.0, "max": 3.0, "seeds": [1.0, 3.0, 2.0]}
    assert s["b"] == {"mean": 2.0, "min": 2.0, "max": 2.0, "seeds": [2.0, None, None]}


def test_more_ranks_than_cores_or_a_busy_machine_say_timing_is_meaningless(monkeypatch):
    import refsgd.reproduce as rep
    monkeypatch.setattr(rep, "load_average", lambda: [0.0, 0.0, 0.0])
    assert warnings_for(Setup(ranks=1)) == []
    assert any("not testable" in w for w in warnings_for(Setup(ranks=cores() + 1)))
    monkeypatch.setattr(rep, "load_average", lambda: [cores() + 0.5, 1.0, 1.0])
    assert any("the machine is busy" in w for w in warnings_for(Setup(ranks=1)))
    assert not any("busy" in w for w in warnings_for(Setup(ranks=1), timing=False))  # an accuracy claim
    assert any("not testable" in w for w in warnings_for(Setup(ranks=cores() + 1)))
    # within `reproduce all` the load is the one at the command's start, not the one its own earlier
    # claims left behind
    assert warnings_for(Setup(ranks=1, load_at_start=[0.1, 0.1, 0.1])) == []
    assert any("the machine is busy" in w for w in warnings_for(Setup(ranks=1, load_at_start=[cores() + 1, 1, 1])))


def test_first_reach_interpolates():
    assert claims.first_reach([0, 10, 20], [50, 70, 90], 80) == 15.0
    assert claims.first_reach([0, 10], [5.0, 3.0], 4.0, higher=False) == 5.0
    assert claims.first_reach([0, 10], [50, 60], 99) != claims.first_reach([0, 10], [50, 60], 99)  # nan


def test_quick_claim_end_to_end(tmp_path):
    """A real claim under mpiexec (a timing claim: it needs no download): the three files, a
    verdict, and the markdown's numbers equal to the JSON's."""
    out = tmp_path / "res"
    r = cli("reproduce", "dcs3gd-iteration", "--quick", "--out-dir", str(out), timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    for ext in ("md", "json", "png"):
        assert (out / f"dcs3gd-iteration.{ext}").stat().st_size > 0, ext
    data = json.loads((out / "dcs3gd-iteration.json").read_text())
    md = (out / "dcs3gd-iteration.md").read_text()
    assert data["verdict"] in OUTCOMES
    assert f"**Verdict (--quick: a smoke test of the claim's path, not a result): {data['verdict']}.**" in md
    assert data["verdict"] in r.stdout and "--quick smoke test, not a result" in (out / "index.md").read_text()
    assert data["seeds"] == 1 and data["quick"] and len({run["command"] for run in data["runs"]}) == 7
    assert all(run["command"].startswith("mpiexec -n ") and len(run["load_before"]) == 3 for run in data["runs"])
    assert data["hyperparameters"]["momentum"] == 0.9 and "- momentum: 0.9" in md
    for key, v in data["numbers"].items():
        row = next(line for line in md.splitlines() if line.startswith(f"| {key} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[2:4] == [fmt(v["seeds"][0]), fmt(v["mean"])], key
    assert {k.key for k in claims.BY_NAME["dcs3gd-iteration"].checks} <= set(data["numbers"])
    # the verdict is the one the numbers give, seed by seed (re-judged from the JSON alone)
    from refsgd.reproduce import rejudge
    assert rejudge(data)["verdict"] == data["verdict"]
    assert "> " in md and "Rigazzi" in md and "(13)" in md  # the paper quoted
    assert (out / "index.md").read_text().startswith(outputs.INDEX_TITLE)
    assert not (tmp_path / "res.md").exists()  # nothing written beside the folder
    # a second run refuses to replace the files without --force
    again = cli("reproduce", "dcs3gd-iteration", "--quick", "--out-dir", str(out))
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
    p = subprocess.Popen([sys.executable, "-m", "refsgd", "reproduce", "laga-idle", "--quick", "--out-dir", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.time() + scaled(120)
        while time.time() < deadline and not list(tmp_path.glob("res")):
            time.sleep(0.2)
        time.sleep(3)  # a run is in flight
        os.killpg(p.pid, signal.SIGINT)
        text, _ = p.communicate(timeout=scaled(60))
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


# ------------------------------------------------------------------ every claim on synthetic runs
#: the methods that have a momentum (refsgd's option table): a claim must give it, never rely on the
#: method's default (0.9 for dcs3gd and laga-sgdm/-sgdn, 0 for ssgd)
WITH_MOMENTUM = {"ssgd", "ssgd-opt", "ssgd-nag", "dcs3gd", "laga-sgdm", "laga-sgdn", "daso", "pp-asgd", "asgd"}


class _FakeRun:
    """What a claim reads of a run (report.Run): evaluations, per-iteration records, a trace."""

    def __init__(self, algo, world, trace_path=None, T=40):
        import numpy as np
        self.algo, self.world, self.iterations, self.format_version = algo, world, T, 3
        self.evals = [{"iteration": 10 * (i + 1), "epoch": i + 1.0, "test_acc": 0.5 + 0.1 * i} for i in range(4)]
        self.rec = {k: np.full((world, T), 1e-3) for k in ("wall", "compute", "idle", "update", "codec")}
        self.rec["global_bytes"] = np.full((world, T), 1000.0)
        self.rec["S_bar"] = np.full((world, T), 3.4)
        self.trace_path = trace_path


class _FakeRuns:
    def __init__(self, tmp_path):
        self.calls, self.tmp, self.records = [], tmp_path, []

    def start_claim(self):
        self.records = []

    def train(self, algo, seed, ranks=None, trace=False, variant=None, **options):
        self.calls.append((algo, variant, options))
        self.records.append({"command": f"mpiexec -n {ranks or 2} refsgd train --algo {algo}", "ranks": ranks or 2,
                             "seconds": 0.5, "load_before": [0, 0, 0], "load_after": [0, 0, 0],
                             "variant": variant or algo, "algo": algo, "options": options})
        path = None
        if trace:
            import h5py
            import numpy as np
            path = str(self.tmp / f"t{len(self.calls)}.h5")
            rng = np.random.default_rng(0)
            with h5py.File(path, "w") as f:
                f.create_dataset("state/w", data=np.cumsum(rng.standard_normal((60, 1, 5)), axis=0))
                f.create_dataset("state/M", data=rng.standard_normal((60, 1, 5)))
        return _FakeRun(algo, ranks or 2, path)


@pytest.mark.parametrize("name", [c.name for c in claims.CLAIMS if not c.untestable])
def test_every_claim_gives_its_variants_one_shared_set_explicitly(tmp_path, name):
    """Each claim's measurement on synthetic runs: every method with a momentum is given the claim's
    momentum explicitly; every run but a calibration has the shared model, batch, schedule and run
    length of the claim's set; the numbers hold every check's key."""
    c = claims.BY_NAME[name]
    hp = c.hyper(Setup())
    runs = _FakeRuns(tmp_path)
    numbers, series = c.measure(runs, Setup(), hp, 0)
    assert {k.key for k in c.checks} <= set(numbers), name
    assert series and c.tuning and c.budget[0] < c.budget[1], name
    measured = [(a, o) for a, v, o in runs.calls if not (v or "").startswith("calibration")]
    assert measured, name
    for algo, options in measured:
        if algo in WITH_MOMENTUM:
            assert options.get("momentum") == hp["momentum"], (name, algo, options)
        else:
            assert "momentum" not in options, (name, algo)
        for key in ("model", "batch", "epochs", "iterations", "schedule", "weight_decay"):
            if key in hp:
                assert str(options.get(key)) == str(hp[key]), (name, algo, key, options)
    for algo, _, options in runs.calls:  # calibrations too: a momentum given, never a default
        assert algo not in WITH_MOMENTUM or "momentum" in options, (name, algo)
    # on runs whose every part takes 1 ms per iteration, the timing claims' ratios are 1
    expect = {"dcs3gd-iteration": {"speedup_r1": 1.0, "dcs3gd_over_eq14_r1": None},
              "laga-idle": {"idle_ratio_vgg16": 1.0, "idle_ssgd_ms_wrn": 1.0, "idle_laga_ms_resnet50": 1.0},
              "laga-speedup": {"speedup_tau1": 1.0, "speedup_tau4": 4.0},
              "pipesgd-speedup": {"speedup_pipeT_T": 1.0, "K1_over_K2_Q": 1.0},
              "pipesgd-fig4": {"pipeT_minus_dsync_acc": 0.0, "speedup_pipeQ_vs_dsync": 1.0},
              "daso": {"daso_minus_fp16_acc": 0.0, "traffic_ratio_vs_fp16": 1.0}}.get(name, {})
    for key, value in expect.items():
        assert key in numbers, (name, key)
        assert value is None or numbers[key] == pytest.approx(value), (name, key, numbers[key])


def _result(**over):
    r = {"name": "laga-idle", "paper": "P", "where": "W", "claim": "C", "paper_number": "5.24x", "verdict": "partly",
         "why": "because", "quotes": [["section 5.1", "VGG-16, ImageNet", "LAGA has 5.24x\nless idle"]],
         "regime": "a sweep. More", "ours": "the band", "untestable": None, "diverged": [],
         "checks": [{"number": "idle_ratio", "what": "w", "lo": 4.0, "hi": 6.5, "partial": [1.5, 9.0],
                     "source": "the paper's 5.24", "timing": True, "status": "partly", "seeds": ["holds", "partly"],
                     "kind": "the paper's number", "powered": True, "null": 1.0, "paper_value": 5.24,
                     "values": [5.0, 2.0], "passing": [0]}],
         "hyperparameters": {"model": "digits_cnn", "batch": 32, "momentum": 0.0, "lr": 0.01},
         "same_for_all": {"link": "50,0.2"}, "tuning": "shared, as the paper",
         "variants": [("ssgd", 2, "tau=4"), ("laga-sgd", 2, "tau=4")], "discussion": "since X",
         "budget_s": 25, "ranks": 2, "seeds": 2, "quick": False, "data": "embedded digits", "link": None,
         "warnings": ["w1"], "at_scale": "needs 8 GPUs", "scale_prediction": [["at 8 ranks", 1.9, "5.24"]],
         "numbers": {"idle_ratio": {"mean": 3.5, "min": 2.0, "max": 5.0, "seeds": [5.0, 2.0]}},
         "paper_values": {"idle_ratio": "5.24"},
         "series": [{"split": {"a": {"compute": 1.0, "codec": 0.0, "update": 0.1, "communication": 2.0,
                                     "measured": 3.1, "model": 3.0}}}],
         "runs": [{"command": "mpiexec -n 2 refsgd train", "seconds": 1.0, "load_before": [0, 0, 0],
                   "load_after": [0, 0, 0]}], "seconds": 12.0, "machine": {}, "date": "today"}
    r.update(over)
    return r


def test_markdown_prints_the_quote_the_regime_every_check_and_the_paper_beside_the_prediction():
    md = outputs.markdown(_result())
    assert "section 5.1 (VGG-16, ImageNet):\n\n> LAGA has 5.24x\n> less idle" in md  # verbatim, with where and what
    assert "**Regime.** a sweep. More" in md and "**Ours (derived, not the paper's).** the band" in md
    # the check with both bounds, where they come from, each seed and the seeds inside
    assert ("| w (idle_ratio, timing) | the paper's number | [4, 6.5] ([1.5, 9]) | the paper's 5.24 | 1 | 5, 2 | "
            "0 of 2 | partly |") in md  # its kind and its null too
    assert "Hyperparameters shared by every variant:\n\n- model: digits_cnn\n- batch: 32\n- momentum: 0.0\n" in md
    assert "- set at run time, the same for every variant: link=50,0.2" in md
    assert "How the paper chose them: shared, as the paper." in md
    assert "| ssgd | 2 | tau=4 |" in md and "| laga-sgd | 2 | tau=4 |" in md
    assert "| idle_ratio | 5.24 | 5 | 2 | 3.5 |" in md  # every seed, then the mean
    assert "| at 8 ranks | 1.9 | 5.24 |" in md  # bench scale's prediction beside the paper's number
    assert "**Why the numbers are what they are.** since X" in md and "> w1" in md
    assert "| a | 1 | 0 | 0.1 | 2 | 3.1 | 3 |" in md  # a time split as a table
    assert "the claim's budget is 25 s per seed" in md
    diverged = outputs.markdown(_result(diverged=[{"variant": "laga-sgdm tau=4", "command": "mpiexec x",
                                                   "diverged": "non-finite at iteration 94"}]))
    assert "- laga-sgdm tau=4: non-finite at iteration 94 (`mpiexec x`)" in diverged


def test_variants_keep_only_what_differs_from_the_shared_set():
    hp = {"model": "m", "batch": 32, "momentum": 0.9}
    records = [{"variant": "calibration (t_C, no link)", "ranks": 2, "command": "c",
                "options": {"model": "m", "batch": 32, "momentum": 0.0}},
               {"variant": "ssgd", "ranks": 2, "command": "a", "options": {"model": "m", "batch": 32, "momentum": 0.9,
                                                                          "link": "1,2", "tau": 1}},
               {"variant": "dcasgd", "ranks": 3, "command": "b", "options": {"model": "m", "batch": 32, "link": "1,2",
                                                                            "tau": 4}},
               {"variant": "ssgd", "ranks": 2, "command": "a", "options": {"model": "m", "batch": 32, "momentum": 0.9,
                                                                          "link": "1,2", "tau": 1}}]
    rows, common = outputs.variants(hp, records)
    assert common == {"link": "1,2"}
    assert rows == [("calibration (t_C, no link)", 2, "momentum=0.0"), ("ssgd", 2, "tau=1"), ("dcasgd", 3, "tau=4")]


def test_index_rows_from_the_folder_and_not_run_yet(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    r = _result(name="daso", verdict="partly reproduced",
                warnings=["the machine is busy (1-minute load average 5) ..."])
    (out / "daso.json").write_text(json.dumps(r))
    (out / "other.json").write_text("not json")
    text = outputs.index_text(str(out))
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| claim")]
    assert len(rows) == len(claims.CLAIMS)
    daso = next(row for row in rows if row.startswith("| [daso](daso.md)"))
    assert daso.endswith("| 5.24x | a sweep. More | idle_ratio: 5, 2 in [4, 6.5]? partly | partly reproduced: rests on "
                         "the paper's 5.24 (idle_ratio) | 2 |")
    # a claim not run has no link (its page does not exist)
    assert sum("not run yet" in row for row in rows) == len(claims.CLAIMS) - 1
    assert all("](" not in row for row in rows if "not run yet" in row)
    assert "the machine was busy (load average at least its cores) before daso" in text
    # the index goes inside the folder; beside it only where an index reproduce wrote is there already
    assert outputs.index_paths(str(out)) == [str(out / "index.md")]
    (tmp_path / "results.md").write_text(text)
    assert outputs.index_paths(str(out)) == [str(out / "index.md"), str(tmp_path / "results.md")]
    assert "| [daso](results/daso.md)" in outputs.index_text(str(out), str(tmp_path / "results.md"))
    (tmp_path / "results.md").write_text("# my notes\n")
    assert outputs.index_paths(str(out)) == [str(out / "index.md")]
    # an index.md that reproduce did not write is replaced only with --force
    outputs.check_index(str(out), force=False)
    (out / "index.md").write_text("# my notes\n")
    from refsgd import RefsgdError
    with pytest.raises(RefsgdError, match="--force"):
        outputs.check_index(str(out), force=False)
    outputs.check_index(str(out), force=True)


def test_a_run_on_more_processes_than_cores_is_named(monkeypatch):
    """Within --ranks <= cores, a run that needs more processes (a parameter server) is named."""
    import refsgd.reproduce as rep
    monkeypatch.setattr(rep, "load_average", lambda: [0.0, 0.0, 0.0])
    monkeypatch.setattr(rep, "cores", lambda: 2)
    records = [{"variant": "ps-sync", "ranks": 3}, {"variant": "d-sync", "ranks": 2}]
    w = warnings_for(Setup(ranks=2), records)
    assert w == ["more processes than cores in ps-sync (3 processes) on 2 cores: its times include time-slicing "
                 "(a parameter server's busy-waiting MPI takes a core; DASO's 2 nodes x 2 ranks), so the timing "
                 "checks leave it out"]
    w = warnings_for(Setup(ranks=3), records)  # the general warning covers every run
    assert len(w) == 1 and w[0].startswith("3 ranks on 2 cores") and "not testable" in w[0]
    # a run of a timing claim on more processes than cores makes its timing checks not testable, an
    # untimed one (ps-sync's accuracy beside Pipe-SGD) does not
    assert rep.oversubscribed(Setup(ranks=2), [{"ranks": 3, "timed": True}])
    assert not rep.oversubscribed(Setup(ranks=2), [{"ranks": 3, "timed": False}, {"ranks": 2, "timed": True}])


def test_more_ranks_than_cores_is_said_before_the_runs_and_in_every_output(tmp_path, monkeypatch):
    """The whole command in this process on synthetic runs: asked for more ranks than cores, it
    says before any run that the timing checks are not testable, and the markdown, the JSON and
    the index say it again; the timing checks are "not testable here"; the shared set is in the
    markdown and the JSON."""
    import refsgd.reproduce as rep
    monkeypatch.setattr(rep, "load_average", lambda: [0.0, 0.0, 0.0])
    monkeypatch.setattr(rep, "Runs", lambda setup: _FakeRuns(tmp_path))
    out, said = tmp_path / "res", []
    setup = Setup(ranks=cores() + 1, quick=True, seeds=2)
    rep.reproduce("dcs3gd-iteration", setup, str(out), log=said.append)
    warning = f"{cores() + 1} ranks on {cores()} cores: the ranks share cores, so the timing checks"
    assert said[0].startswith(f"warning: {warning}") and "not testable" in said[0]
    md = (out / "dcs3gd-iteration.md").read_text()
    data = json.loads((out / "dcs3gd-iteration.json").read_text())
    assert f"> {warning}" in md and any(w.startswith(warning) for w in data["warnings"])
    assert data["verdict"] == NOT_TESTABLE and all(c["status"] == NOT_TESTABLE for c in data["checks"])
    hp = claims.BY_NAME["dcs3gd-iteration"].hyper(setup)
    assert data["hyperparameters"] == json.loads(json.dumps(hp)) and data["seeds"] == 2
    for k, v in hp.items():
        assert f"- {k}: {v}\n" in md, k
    assert "How the paper chose them: a timing model" in md
    index = (out / "index.md").read_text()
    assert warning in index and "| [dcs3gd-iteration](dcs3gd-iteration.md) |" in index


def test_an_accuracy_claim_without_its_data_is_not_testable_and_runs_nothing(tmp_path, monkeypatch):
    """Without MNIST in the download cache (CI), an accuracy claim runs nothing and says how to get
    the data; its page, JSON and figure are written."""
    import refsgd.reproduce as rep
    from refsgd.reproduce import runner
    monkeypatch.setattr(rep, "load_average", lambda: [0.0, 0.0, 0.0])
    monkeypatch.setattr(runner, "cached_data", lambda name: None)
    fake = _FakeRuns(tmp_path)
    monkeypatch.setattr(rep, "Runs", lambda setup: fake)
    out = tmp_path / "res"
    rep.reproduce("laga-table1", Setup(quick=True, seeds=1), str(out))
    data = json.loads((out / "laga-table1.json").read_text())
    assert fake.calls == [] and data["verdict"] == NOT_TESTABLE
    assert "refsgd data download mnist" in data["untestable"] and "refsgd data download mnist" in \
        (out / "laga-table1.md").read_text()
    assert (out / "laga-table1.png").stat().st_size > 0


def test_index_of_the_current_folder_is_inside_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert outputs.index_path(".") == str(tmp_path / "index.md")
    assert outputs.index_path("res") == str(tmp_path / "res" / "index.md")
    assert "| daso |" in outputs.index_text(".")  # not run: no link


@pytest.mark.in_process
def test_rejudge_runs_nothing_and_rewrites_only_with_force(tmp_path, capfd):
    """--rejudge: the committed pipesgd-k result judged again from its JSON, no run: without --force
    one line and exit 2, nothing written; with it the page says it was re-judged and the verdict is
    the one the numbers give; a folder without the result is one line too."""
    out = tmp_path / "res"
    out.mkdir()
    with open(os.path.join(ROOT, "docs", "results", "pipesgd-k.json")) as f:
        r = json.load(f)
    committed = r["verdict"]  # the verdict this code gives its numbers (test_reproduce_checks holds it)
    assert committed != "reproduced"
    r["verdict"] = "reproduced"  # as the code before issue 42 had it
    (out / "pipesgd-k.json").write_text(json.dumps(r))
    refused = refsgd(capfd, "reproduce", "pipesgd-k", "--rejudge", "--out-dir", str(out))
    assert refused.returncode == 2 and "--force" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert not (out / "pipesgd-k.md").exists()
    done = refsgd(capfd, "reproduce", "pipesgd-k", "--rejudge", "--force", "--out-dir", str(out))
    assert done.returncode == 0, done.stderr
    data = json.loads((out / "pipesgd-k.json").read_text())
    assert data["verdict"] == committed and "running" not in done.stderr  # nothing launched
    assert "re-judged" in (out / "pipesgd-k.md").read_text() and (out / "index.md").exists()
    empty = refsgd(capfd, "reproduce", "laga-idle", "--rejudge", "--force", "--out-dir", str(out))
    assert empty.returncode == 2 and "no result of laga-idle" in empty.stderr
    assert "Traceback" not in empty.stderr and len(empty.stderr.splitlines()) == 1
