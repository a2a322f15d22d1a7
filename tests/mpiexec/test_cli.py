"""The command line as a user runs it: a subprocess, its output, its exit code (with timeouts),
where the process is the subject (one-line errors, under mpiexec too, the parser's refusals, an
install, run.sh). What a command computes, prints or writes runs in-process: `refsgd train` in the
world sessions (tests.helpers.world; one rank: plain pytest's singleton), the other commands by
refsgd.cli.main (tests.helpers.in_process), without a process per command."""

import gzip
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import world
from tests.helpers.in_process import refsgd as in_process
from tests.helpers.launch import ROOT, cli, scaled


def refsgd(*args, timeout=120, cwd=None):
    return cli(*args, timeout=timeout, cwd=cwd)


def _train(*argv):
    """Collective: `refsgd train ARGV` on every rank of the world, in this process; what it prints
    on rank 0 (refsgd.api's log: header, evaluations, summary) as one text, "" on the others. With
    --no-progress: a progress bar (pytest -s in a terminal) would take the evaluation lines."""
    lines = []
    world.train(*argv, log=lines.append)
    return "\n".join(lines)


@pytest.mark.world(1)
def test_train_default_learns_the_embedded_digits():
    stdout = _train("--epochs", "4", "--no-progress")
    assert "ssgd on 1 rank(s), digits_mlp" in stdout
    final = [line for line in stdout.splitlines() if line.startswith("final:")][0]
    acc = float(final.split("test accuracy", 1)[1].split("%")[0])
    assert acc > 85.0, stdout
    assert "after 184 iterations" in final  # 4 epochs x 1500 // 32 batches


@pytest.mark.world(1)
def test_train_is_deterministic():
    a = _train("--epochs", "2", "--seed", "3", "--model", "digits_cnn", "--dtype", "float64", "--no-progress")
    b = _train("--epochs", "2", "--seed", "3", "--model", "digits_cnn", "--dtype", "float64", "--no-progress")
    # the evaluations (status lines come when time says so: a first run also compiles kernels)
    strip = lambda out: [l.split("(")[0] for l in out.splitlines() if l.startswith("iter ") and "test acc" in l]  # noqa: E731
    assert strip(a) == strip(b) and strip(a)


@pytest.mark.parametrize("args,msg", [
    (["train", "--batch", "0"], "--batch: expected a positive integer, got '0'"),
    (["train", "--lr", "-1"], "--lr: expected a finite number >= 0"),
    (["train", "--model", "nope"], "unknown model 'nope'"),
    (["train", "--model", "cifar10_cnn"], "dataset digits has images of shape (1, 8, 8) but model cifar10_cnn expects (3, 32, 32)"),
    (["train", "--schedule", "bogus"], "unknown learning-rate schedule 'bogus'"),
    (["train", "--schedule", "warmup-step:warmup_epochs"], "expected key=value"),
    (["train", "--momentum", "1.5"], "momentum"),
    (["train", "--batch", "5000"], "too few for 1 workers x batch 5000"),
    (["train", "--lr", "1e38", "--epochs", "1"], "became non-finite at iteration"),
    (["train", "--algo", "nope"], "unknown method --algo 'nope'"),
    (["train", "--out", "no/such/dir/r.h5"], "does not exist"),
    (["train", "--data", "setup.cfg"], "not an HDF5 file"),
    (["train", "--data", "missing.h5"], "missing.h5"),
    (["data", "convert", "mnist", "no-such-dir", "out.h5"], "no-such-dir"),
    (["data", "info", "setup.cfg"], "not an HDF5 file"),
    (["bench", "step", "--model", "x.toml"], "x.toml: no such file"),
])
def test_bad_input_one_clear_message(args, msg):
    r = refsgd(*args, cwd=ROOT)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert msg in r.stderr
    assert "Traceback" not in r.stderr
    assert not os.path.exists(os.path.join(ROOT, "out.h5"))


def test_bad_spec_file(tmp_path):
    spec = tmp_path / "m.toml"
    spec.write_text('input = [1, 8, 8]\nclasses = 10\nlayers = [{type = "dense", units = 10}]\n')
    r = refsgd("train", "--model", str(spec))
    assert r.returncode == 2 and "put a flatten layer before it" in r.stderr


def _idx(path, arr, magic):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in arr.shape) + arr.tobytes())


@pytest.mark.world(1)
def test_data_convert_info_and_train_on_it(tmp_path, capfd):
    rng = np.random.default_rng(0)
    src = tmp_path / "mnist"
    src.mkdir()
    for split, n in (("train", 60), ("t10k", 20)):
        _idx(src / f"{split}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), 0x803)
        _idx(src / f"{split}-labels-idx1-ubyte.gz", (np.arange(n) % 10).astype(np.uint8), 0x801)
    out = tmp_path / "m.h5"
    r = in_process(capfd, "data", "convert", "mnist", str(src), str(out))
    assert r.returncode == 0, r.stderr
    assert "train:        60 images" in r.stdout and out.exists()
    r = in_process(capfd, "data", "info", str(out))
    assert "1 x 28 x 28" in r.stdout
    stdout = _train("--data", str(out), "--model", "mnist_mlp", "--epochs", "1", "--batch", "20", "--no-progress")
    assert "after 3 iterations" in stdout


@pytest.mark.in_process
def test_models_and_help(capfd):
    r = in_process(capfd, "models")
    assert r.returncode == 0 and "cifar10_cnn" in r.stdout and "CCPCPCPFFF" in r.stdout
    r = in_process(capfd, "models", "cifar100_convex")
    assert "51,300 trainable" in r.stdout and "(frozen)" in r.stdout
    r = in_process(capfd, "train", "--help")
    assert r.returncode == 0 and "--momentum-form" in r.stdout and "warmup-step" in r.stdout


@pytest.mark.in_process
def test_bench_step_prints_times(capfd):
    r = in_process(capfd, "bench", "step", "--model", "digits_mlp", "--batch", "16", "--repeat", "3", "--no-torch")
    assert r.returncode == 0, r.stderr
    assert "refsgd" in r.stdout and " ms " in r.stdout and "GFLOP/s" in r.stdout


@pytest.mark.xdist_group("builds-the-checkout")   # pip builds in this checkout: tests/test_docs_setup_quiet.py
def test_normal_install_finds_models_and_data(tmp_path):
    """A non-editable install carries the specs (models/) and the embedded dataset (data/)."""
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), ROOT],
                       capture_output=True, text=True, timeout=scaled(300))
    assert r.returncode == 0, r.stderr
    code = ("import refsgd.nn, refsgd.datasets as d, refsgd.cli.app, refsgd.options.table; "
            "assert refsgd.nn.__file__.startswith(%r); "
            "print(refsgd.nn.available_models(), d.load().x_train.shape)" % str(target))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(120),
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(target)})
    assert r.returncode == 0, r.stderr
    assert "mnist_mlp" in r.stdout and "(1500, 1, 8, 8)" in r.stdout


# ---------------------------------------------------------------------- under mpiexec
def mpirun(n, *args, timeout=180):
    return cli(*args, n=n, timeout=timeout)


@pytest.mark.world(2)
def test_mpi_train_writes_metrics(tmp_path):
    import h5py
    tmp_path = world.shared_path(tmp_path)
    out = tmp_path / "run.h5"
    stdout = _train("--algo", "ssgd-opt", "--epochs", "2", "--no-progress", "--out", str(out))
    world.all_ranks(world.comm().Get_rank() == 0 or stdout == "", f"a rank other than 0 spoke: {stdout!r}")
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    assert "ssgd-opt on 2 rank(s)" in stdout and "time per rank" in stdout
    assert stdout.count("final:") == 1  # rank 0 speaks
    with h5py.File(out) as f:
        assert f["iterations/compute"].shape == (2, 46)  # 2 epochs x 1500 // (2 x 32)
        assert np.all(f["iterations/compute"][...] > 0)
        assert np.all(f["iterations/wall"][...] >= f["iterations/compute"][...])
        assert f.attrs["world_size"] == 2 and f.attrs["link"] == "none" and not f.attrs["link_emulated"]
        # the library's own text, cleaned (Open MPI's ends in a NUL, which crashed the write)
        assert f.attrs["mpi_library"].startswith(("MPICH", "Open MPI")) and "\x00" not in f.attrs["mpi_library"]
        assert list(f["evals/epoch"][...]) == [1.0, 2.0]
        assert 0.5 < f["evals/test_acc"][-1] <= 1.0
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp")]


@pytest.mark.parametrize("args,msg", [
    (["train", "--batch", "abc"], "--batch: expected a positive integer"),
    (["train", "--model", "nope"], "unknown model 'nope'"),
    (["train", "--batch", "400"], "too few for 4 workers x batch 400"),
    (["train", "--lr", "1e38", "--epochs", "1", "--no-progress"], "became non-finite at iteration"),
])
def test_mpi_bad_input_ends_every_rank(args, msg):
    r = mpirun(4, *args, timeout=120)  # a hang fails through the timeout
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert msg in r.stderr and "Traceback" not in r.stderr
    if not args[1].startswith("--batch") or args[2] != "abc":
        assert r.stderr.count("refsgd: error:") == 1  # once, from rank 0


# (--poll changes timing, not numbers: in-process, tests/mpiexec/test_training_runs.py)


@pytest.mark.world(3)
def test_bench_codec_times_the_ring_against_the_mpi_operator(capfd):
    """bench codec on every rank of the world of 3 (in-process, as under mpiexec): a row per codec
    and one uncompressed, the ring's p - 1 reduction steps per call."""
    n = world.comm().Get_size()
    r = in_process(capfd, "bench", "codec", "--values", "1000", "--repeat", "3")
    world.all_ranks(r.returncode == 0, r.stderr)
    if world.comm().Get_rank() != 0:
        return  # rank 0 prints the table
    assert f"1,000 float32 values on {n} rank(s)" in r.stdout
    rows = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines()
            if line.strip().split(" ")[0] in ("plain", "t16", "q8", "q8v", "bf16", "fp16")}
    assert set(rows) == {"plain", "t16", "q8", "q8v", "bf16", "fp16"}
    for name in ("t16", "bf16", "fp16", "q8v"):
        assert float(rows[name][2]) == n - 1
    for name in ("t16", "bf16", "fp16"):
        assert rows[name][0] == "2,000"
    assert rows["q8"][0] == "1,040"       # 4 blocks of 256 values: a 4-byte scale and 256 int8 each
    assert rows["q8v"][0] == "1,004"      # one 4-byte scale for the vector, then 1000 int8
    # the uncompressed ring of --allreduce ring (float32, p - 1 steps) against MPI_Allreduce, and their ratio
    assert rows["plain"][0] == "4,000" and float(rows["plain"][2]) == n - 1
    assert float(rows["plain"][1]) > 0 and float(rows["plain"][5]) > 0 and float(rows["plain"][8]) > 0


@pytest.mark.world(2)
def test_bench_overlap_table_and_models(tmp_path, capfd):
    """bench overlap on every rank of the world of 2 (in-process, as under mpiexec): one row per
    method, and each model column is its formula of the printed t_C, C, T_AR, X and update (the
    timings themselves are not asserted): exactly in the JSON, to the printed rounding (3 decimals)
    in the text. The text's 'update' is the t_up of its 'model' column (the run's own); 'at t_C'
    takes the update timed apart (JSON update_apart)."""
    tmp_path = world.shared_path(tmp_path)
    r = in_process(capfd, "bench", "overlap", "--model", "digits_mlp", "--batch", "16", "--iterations", "8", "--skip", "2",
               "--ratio", "1", "--latency-us", "0", "--algo", "ssgd,ssgd-opt,dcs3gd+nopoll,laga-sgdm,d-sync+q8",
               "--json", str(tmp_path / "o.json"))
    world.all_ranks(r.returncode == 0, r.stderr)
    if world.comm().Get_rank() != 0:
        return  # rank 0 prints the table and writes the JSON
    out = r.stdout
    js = json.loads((tmp_path / "o.json").read_text())
    run = js["runs"][0]
    half = 0.0005 + 1e-9  # half a unit of the printed milliseconds' last digit
    assert out.count("digits_mlp") == 1 and "EMULATED" in out and "data synthetic" in out
    t_c = float(out.split("t_C     = ")[1].split()[0])
    C = float(out.split("C       = ")[1].split()[0])
    t_ar = float(out.split("(model ")[1].split(":")[0])
    X = float(out.split("transfer X ")[1].split()[0])
    R = float(out.split("reduction R ")[1].split(",")[0])
    for printed, exact in ((t_c, js["t_c"]), (C, js["cpu_real"]), (t_ar, run["t_ar_model"]), (X, run["transfer"])):
        assert abs(printed - 1e3 * exact) <= half, (printed, exact)
    # --ratio 1: the link's transfer takes t_C; it holds an all-reduce for X + R (eq. 5), or the real C
    assert run["t_ar_model"] == pytest.approx(max(run["transfer"] + run["reduce"], js["cpu_real"]), rel=1e-12)
    # (the link is made with its rate rounded to 4 digits: its transfer is t_C to 1e-3)
    assert abs(t_ar - max(X + R, C)) <= 3 * half and run["transfer"] == pytest.approx(js["t_c"], rel=1e-3)
    # q8's compressed ring: held for its transfer plus its operator's measured seconds
    q8 = out.split("model max(X + R_op, C_ring) = max(")[1].split(";")[0]
    Xq, Rq, Cq, Tq = (float(v) for v in q8.replace("+", ",").replace(") =", ",").split(","))
    assert abs(max(Xq + Rq, Cq) - Tq) <= 3 * half and Rq > 0 and Xq < X      # 4940 wire bytes against 19240
    rows = {line.split()[0]: [float(v) for v in line.split()[1:9]] for line in out.splitlines()
            if line.strip().split(" ")[0] in ("ssgd", "ssgd-opt", "dcs3gd+nopoll", "laga-sgdm", "d-sync+q8")}
    assert set(rows) == {"ssgd", "ssgd-opt", "dcs3gd+nopoll", "laga-sgdm", "d-sync+q8"}
    exact_rows = {row["method"]: row for row in run["rows"]}
    T_q8 = run["holds"]["q8"]["model"]

    def model(name, tc, ar, c, tq, up):
        return {"ssgd": tc + ar + up, "ssgd-opt": tc + max(c, ar - 2 * tc / 3) + up,
                "d-sync+q8": tc + tq + up}.get(name, max(tc + c, ar) + up)
    for name, (compute, idle, other, wall, mod, ratio, up, at_t_c) in rows.items():
        e = exact_rows[name]
        assert compute > 0 and idle >= 0 and wall > 0 and up > 0
        for printed, key in ((compute, "compute"), (idle, "idle"), (other, "other"), (wall, "wall"),
                             (mod, "model"), (up, "update"), (at_t_c, "model_at_t_c")):
            assert abs(printed - 1e3 * e[key]) <= half, (name, key, printed, e[key])
        assert abs(compute + idle + other - wall) <= 4 * half
        # the model at this run's own compute and update, and at t_C with the update timed apart
        assert e["update"] == e["update_run"]
        assert e["model"] == pytest.approx(model(name, e["compute"], run["t_ar_model"], js["cpu_real"], T_q8,
                                                 e["update_run"]), rel=1e-9), name
        assert e["model_at_t_c"] == pytest.approx(model(name, js["t_c"], run["t_ar_model"], js["cpu_real"], T_q8,
                                                        e["update_apart"]), rel=1e-9), name
        # as a reader checks the text: the printed terms, each rounded (ssgd-opt: t_C twice)
        assert abs(mod - model(name, compute, t_ar, C, Tq, up)) <= 5 * half, (name, mod)


@pytest.mark.parametrize("args,msg", [
    (["--algo", "ssgd,pp-asgd"], "--algo: 'pp-asgd' is not one of"),
    (["--algo", "dcs3gd+fast"], "--algo: 'dcs3gd+fast' is not one of"),
    (["--algo", "dcs3gd+q8"], "--algo: 'dcs3gd+q8': --compress does not apply to dcs3gd"),
    (["--algo", "dcs3gd", "--tau", "2"], "dcs3gd takes one micro-batch per iteration"),
    (["--link", "50,1", "--ratio", "1"], "give --link or --ratio, not both"),
    (["--skip", "60"], "--skip 60 leaves no iteration"),
    (["--model", "digits_mlp", "--data", "setup.cfg"], "not an HDF5 file"),
])
def test_bench_overlap_bad_input(args, msg):
    r = mpirun(2, "bench", "overlap", *args, timeout=120)
    assert r.returncode == 2 and msg in r.stderr and r.stderr.count("refsgd: error:") == 1, r.stderr


@pytest.mark.in_process
def test_train_list(capfd):
    r = in_process(capfd, "train", "--list")
    assert r.returncode == 0 and "ssgd-nag" in r.stdout and "Algorithm 4" in r.stdout
    # the documents it points to are installed with the package, and the sections it names exist
    paths = [line.split(": ", 1)[1] for line in r.stdout.splitlines()[:2]]
    assert [os.path.basename(p) for p in paths] == ["algorithms.md", "implementers.md"], r.stdout
    with open(paths[0]) as f:
        headings = {line[3:].strip() for line in f if line.startswith("## ")}
    named = {line.split("section '")[1].rstrip("'") for line in r.stdout.splitlines() if "section '" in line}
    assert len(named) >= 5 and named <= headings, (named, headings)


# ---------------------------------------------------------------------- checkpoints and report
# (resume equals an uninterrupted run: in-process, tests/mpiexec/test_resume_in_world.py)
def test_resume_refuses_another_run(tmp_path):
    ck = tmp_path / "ck"
    base = ["train", "--iterations", "6", "--no-progress"]
    r = mpirun(2, *base, "--checkpoint", str(ck), "--checkpoint-every", "3")
    assert r.returncode == 0, r.stderr
    for args, msg in [
        (["--algo", "ssgd-opt"], "the checkpoint is of method 'ssgd', this run is 'ssgd-opt'"),
        (["--model", "digits_cnn"], "the checkpoint is of model 'digits_mlp'"),
        (["--lr", "0.5"], "these options differ from the checkpointed run: lr (0.05 -> 0.5)"),
    ]:
        r = mpirun(2, *base, "--resume", str(ck), *args)
        assert r.returncode == 2 and msg in r.stderr, r.stderr
    r = mpirun(4, *base, "--resume", str(ck))
    assert r.returncode == 2 and "written by 2 ranks, this run has 4" in r.stderr
    r = refsgd("train", "--resume", str(tmp_path / "nothing"))
    assert r.returncode == 2 and "no such checkpoint folder" in r.stderr
    r = refsgd("train", "--checkpoint-every", "3")
    assert r.returncode == 2 and "--checkpoint-every needs --checkpoint DIR" in r.stderr


@pytest.mark.world(2)
def test_report_prints_and_plots(tmp_path, capfd):
    tmp_path = world.shared_path(tmp_path)
    out = tmp_path / "run.h5"
    stdout = _train("--epochs", "1", "--no-progress", "--out", str(out))
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    rep = in_process(capfd, "report", str(out))
    assert rep.returncode == 0, rep.stderr
    final = [l for l in stdout.splitlines() if l.startswith("final:")][0]
    assert final in rep.stdout and "ssgd on 2 rank(s)" in rep.stdout and "thread level" in rep.stdout
    pytest.importorskip("matplotlib")
    png = tmp_path / "run.png"
    rep = in_process(capfd, "report", str(out), "--plot", str(png))
    assert rep.returncode == 0 and png.stat().st_size > 10000
    rep = in_process(capfd, "report", str(tmp_path / "missing.h5"))
    assert rep.returncode == 2 and "no such file" in rep.stderr


def test_an_unknown_flag_is_reported_by_its_command_and_abbreviations_are_refused():
    r = refsgd("train", "--bogus-flag")
    assert r.returncode == 2 and r.stderr == ("refsgd train: error: unrecognized arguments: --bogus-flag; "
                                              "`refsgd train --help` lists the options\n"), r.stderr
    r = refsgd("train", "--epoch", "1", "--no-progress")      # --epochs abbreviated: not taken for it
    assert r.returncode == 2 and "unrecognized arguments: --epoch 1" in r.stderr, r.stderr
    r = refsgd("bench", "overlap", "--zz")
    assert r.returncode == 2 and "refsgd bench overlap: error: unrecognized arguments: --zz" in r.stderr
    assert r.stderr.count("error:") == 1, r.stderr


@pytest.mark.parametrize("typo,meant", [(["--epcohs", "2"], "--epochs"), (["--epoch", "1"], "--epochs"),
                                        (["--bacth", "8"], "--batch"), (["--epcohs=2"], "--epochs")])
def test_a_mistyped_option_is_one_line_with_a_suggestion(typo, meant):
    r = refsgd("train", *typo)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "usage:" not in r.stderr, r.stderr  # not ~21 lines of usage
    assert f"(did you mean {meant}?)" in r.stderr, r.stderr


def test_a_mistyped_option_under_mpiexec_is_one_line():
    r = cli("train", "--epcohs", "2", n=2, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip() == "refsgd train: error: unrecognized arguments: --epcohs 2 (did you mean --epochs?)", \
        r.stderr


def test_messages_name_what_was_meant(tmp_path):
    r = refsgd("train", "--algo", "laga")
    assert r.returncode == 2 and "(did you mean laga-sgd, laga-sgdm or laga-sgdn?)" in r.stderr, r.stderr
    r = refsgd("train", "--schedule", "warmup-step:warmup=5")
    assert r.returncode == 2 and "warmup_iters (or warmup_epochs)" in r.stderr, r.stderr
    assert "milestones (or milestone_epochs)" in r.stderr and "did you mean warmup_iters or warmup_epochs?" in r.stderr
    src = tmp_path / "mnist"
    src.mkdir()
    rng = np.random.default_rng(0)
    for split, n in (("train", 60), ("t10k", 20)):
        _idx(src / f"{split}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), 0x803)
        _idx(src / f"{split}-labels-idx1-ubyte.gz", (np.arange(n) % 10).astype(np.uint8), 0x801)
    assert refsgd("data", "convert", "mnist", str(src), str(tmp_path / "mnist.h5")).returncode == 0
    r = refsgd("train", "--data", str(tmp_path / "mnist.h5"))
    assert r.returncode == 2 and "model digits_mlp expects (1, 8, 8)" in r.stderr, r.stderr
    assert "the bundled models that fit it: --model mnist_mlp." in r.stderr, r.stderr


@pytest.mark.parametrize("flag,once", [("--help", "usage: refsgd train"), ("--list", "ssgd-opt ")])
def test_run_sh_prints_help_and_list_once(flag, once):
    venv = os.path.dirname(os.path.dirname(sys.executable))
    r = subprocess.run(["./run.sh", flag], cwd=ROOT, capture_output=True, text=True, timeout=scaled(300),
                       env={**os.environ, "REFSGD_VENV": venv, "REFSGD_NP": "3"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(once) == 1, r.stdout  # not once per rank
