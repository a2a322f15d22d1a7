"""refsgd bench: the timing models against hand-computed values of their formulas, bench overlap's
JSON for the methods it times, bench scale and bench all end to end, and bad input (exit 2, one line).
bench overlap runs on every rank of the world session of 2 (tests.helpers.world) and bench scale
in this process (refsgd.cli.main: tests.helpers.in_process); bench all, which launches runs of its
own, and the refusals are processes."""

import csv
import json
import math
import os

import pytest

from tests.helpers import world
from tests.helpers.in_process import refsgd
from tests.helpers.launch import ROOT, cli
from refsgd.bench import models
from refsgd.comm.link import Link

LINK, LOCAL = Link(50, 10), Link(5, 100)   # alpha 50 us, beta 0.8 ns/byte; 5 us, 0.08 ns/byte
N = 2_592_040                              # mnist_mlp's gradient in bytes
GAMMA = 3e-11
T_C = 4e-3
UP = dict(ssgd=4e-4, **{"ssgd-opt": 3e-4, "dcs3gd": 9e-4, "laga-sgdm": 5e-4, "pipe-sgd": 2e-4, "daso": 6e-4,
                        "ps-sync": 1e-4, "dcasgd": 7e-4, "d-sync": 1.5e-4})


def hand_allreduce(p, alpha=50e-6, beta=8 / 10e9, n=N, gamma=GAMMA):
    """Pipe-SGD eq. 5 with S = 0, written out: (transfer X, reduction R)."""
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta, (p - 1) / p * n * gamma


@pytest.mark.parametrize("p", [8, 64, 4096])
def test_scale_models_against_hand_computed_formulas(p):
    net = models.Network(N, "model", link=LINK, local_link=LOCAL, gamma=GAMMA)
    c = models.Costs(t_c=T_C, tau=1, t_up=UP, G=4, B=4, W=1)
    X, R = hand_allreduce(p)
    assert net.transfer(p) == pytest.approx(LINK.time(N, p), rel=1e-12)  # the emulated link's formula
    assert net.transfer(p) == pytest.approx(X, rel=1e-12)
    got = {a: models.iteration_time(a, c, net, p) for a in UP}
    assert got["ssgd"] == pytest.approx(T_C + X + R + UP["ssgd"], rel=1e-9)
    assert got["d-sync"] == pytest.approx(T_C + X + R + UP["d-sync"], rel=1e-9)
    assert got["ssgd-opt"] == pytest.approx(T_C + max(R, X + R - 2 * T_C / 3) + UP["ssgd-opt"], rel=1e-9)
    assert got["dcs3gd"] == pytest.approx(max(T_C + R, X + R) + UP["dcs3gd"], rel=1e-9)
    assert got["laga-sgdm"] == pytest.approx(max(T_C + R, X + R) + UP["laga-sgdm"], rel=1e-9)
    assert got["pipe-sgd"] == pytest.approx(max(UP["pipe-sgd"] + T_C, X + R), rel=1e-9)
    # DASO: P = p/4 nodes of 4; local all-reduce and Bcast through the local link, the global
    # sync every B = 4 batches hidden by W = 1 batch
    P = p // 4
    Xl, Rl = hand_allreduce(4, 5e-6, 8 / 100e9)
    base = T_C + Xl + Rl + UP["daso"]
    bcast = 3 * (5e-6 + N * 8 / 100e9)
    Xg, Rg = hand_allreduce(P)
    assert got["daso"] == pytest.approx(base + (bcast + max(Rg, Xg + Rg - base)) / 4, rel=1e-9)
    # parameter servers: every message through the server's link
    ps = (p - 1) * (50e-6 + N * 8 / 10e9)
    assert got["ps-sync"] == pytest.approx(T_C + 2 * ps + (p - 2) * N * GAMMA + UP["ps-sync"], rel=1e-9)
    rtt = 2 * (50e-6 + N * 8 / 10e9) + UP["dcasgd"]
    assert got["dcasgd"] == pytest.approx(max(T_C + rtt, (p - 1) * rtt), rel=1e-9)
    # speed-up in samples per second: a server's rank computes none
    assert models.speedup("pipe-sgd", c, net, p, 64) == pytest.approx(got["ssgd"] / got["pipe-sgd"], rel=1e-9)
    assert models.speedup("ps-sync", c, net, p, 64) == pytest.approx(
        (p - 1) / p * got["ssgd"] / got["ps-sync"], rel=1e-9)


def test_known_numbers_at_8_ranks():
    """One case computed by hand, digits and all: mnist_mlp's gradient over 8 ranks, 50 us, 10 Gbit/s."""
    net = models.Network(N, "model", link=LINK, local_link=LOCAL, gamma=0.0)
    c = models.Costs(t_c=5e-3, t_up={"ssgd": 0.0, "laga-sgd": 0.0, "pipe-sgd": 0.0})
    # X = 2*7*50e-6 + 2*(7/8)*2592040*0.8e-9 = 0.7 ms + 3.6288560 ms
    assert 1e3 * net.transfer(8) == pytest.approx(4.328856, abs=1e-6)
    assert 1e3 * models.iteration_time("ssgd", c, net, 8) == pytest.approx(9.328856, abs=1e-6)
    assert 1e3 * models.iteration_time("laga-sgd", c, net, 8) == pytest.approx(5.0, abs=1e-9)
    assert models.speedup("pipe-sgd", c, net, 8, 64) == pytest.approx(9.328856 / 5.0, rel=1e-6)


def test_emulated_network_is_what_the_link_does():
    """On this machine the real collective runs first and the link holds it until X + R after
    its start (R: eq. 5's gamma term timed here): a blocking all-reduce is max(X + R, C);
    overlapped methods pay C (the real all-reduce's CPU work) beside compute. A compressed
    all-reduce's R is its operator's measured seconds (reduce_s)."""
    net = models.Network(N, "emulated", link=LINK, gamma=GAMMA, cpu_real=1e-3, p2p_real=2e-4)
    X, R = hand_allreduce(2)
    assert net.allreduce(2) == pytest.approx(max(X + R, 1e-3))
    assert models.Network(N, "emulated", link=LINK, gamma=GAMMA, cpu_real=1.0).allreduce(2) == 1.0  # C wins
    q8 = models.Network(N // 4, "emulated", link=LINK, gamma=GAMMA, reduce_s=2.5e-3, cpu_real=3e-3)
    assert q8.allreduce(2) == pytest.approx(LINK.time(N // 4, 2) + 2.5e-3)                         # X + R_op
    c = models.Costs(t_c=T_C, t_up={"laga-sgd": 1e-4, "ps-sync": 0.0, "dcasgd": 0.0})
    assert models.iteration_time("laga-sgd", c, net, 2) == pytest.approx(max(T_C + 1e-3, X + R) + 1e-4)
    assert net.message() == pytest.approx(max(LINK.message_time(N), 2e-4))   # Send/Recv through the link
    assert models.Network(N, "emulated", p2p_real=2e-4).message() == 2e-4    # no link: the measured one
    assert net.ps(2) == pytest.approx(max(LINK.ps_time(N, 2), 2e-4))
    assert models.iteration_time("daso", models.Costs(t_c=T_C), net, 2) == pytest.approx(
        T_C + max(1e-3, X + R - T_C) / 4)                 # G = 1: 2 nodes, no local tier


def test_update_seconds_every_method():
    for algo in models.MODELS:
        t = models.update_seconds(algo, 10_000, repeat=3)
        assert 0 < t < 0.5, (algo, t)


def _overlap(capfd, *args):
    """Collective: `refsgd bench overlap ARGS` on every rank of the world, in this process (as under
    mpiexec); its CompletedProcess, every rank having asserted exit code 0 (rank 0 prints)."""
    r = refsgd(capfd, "bench", "overlap", *args)
    world.all_ranks(r.returncode == 0, r.stderr)
    return r


@pytest.mark.world(2)
def test_overlap_json_rows_for_the_new_methods(tmp_path, capfd):
    out = world.shared_path(tmp_path) / "o.json"
    algos = ["ssgd", "d-sync", "pipe-sgd", "daso", "ps-sync", "dcasgd"]
    r = _overlap(capfd, "--model", "digits_mlp", "--batch", "16", "--iterations", "10", "--skip", "2",
                 "--ratio", "0,1", "--ranks-per-node", "1", "--algo", ",".join(algos), "--json", str(out))
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    assert "EMULATED" in r.stdout and "pipe-sgd" in r.stdout
    res = json.loads(out.read_text())
    assert res["world"] == 2 and res["G"] == 1 and res["B"] == 4 and res["W"] == 1
    assert [run["ratio"] for run in res["runs"]] == [0.0, 1.0]
    assert res["runs"][0]["link"] is None and res["runs"][1]["link_spec"]
    link = Link.parse(res["runs"][1]["link_spec"])
    n, t_c, C, up = res["nbytes"], res["t_c"], res["cpu_real"], res["t_up"]
    X = link.time(n, 2)
    assert res["runs"][1]["transfer"] == pytest.approx(X)
    assert X == pytest.approx(t_c, rel=1e-3)  # --ratio 1: the link's all-reduce takes t_C
    rows = {row["method"]: row for row in res["runs"][1]["rows"]}
    assert list(rows) == algos
    for row in rows.values():
        assert row["compute"] > 0 and row["idle"] >= 0 and row["wall"] > 0
        assert row["other"] == pytest.approx(row["wall"] - row["compute"] - row["idle"])
    R = (2 - 1) / 2 * n * res["gamma"]               # eq. 5's reduction: (p-1)/p n gamma
    T_AR = max(X + R, C)                              # the link holds transfer plus reduction
    T_msg = max(link.message_time(n), res["p2p"])     # a Send/Recv through the link

    def pipe(compute, update=up["pipe-sgd"]):  # eq. 4; one core per rank: the reduction takes compute's time
        if res["cores_per_rank"] < 2:
            return max(update + compute + C, T_AR)
        return max(update + compute, T_AR)
    expect = {"ssgd": t_c + T_AR + up["ssgd"], "d-sync": t_c + T_AR + up["d-sync"],
              "pipe-sgd": pipe(t_c),
              "daso": t_c + up["daso"] + max(C, T_AR - (t_c + up["daso"])) / 4,
              "ps-sync": t_c + 2 * max(link.ps_time(n, 2), res["p2p"]) + up["ps-sync"],
              "dcasgd": max(t_c + 2 * T_msg + up["dcasgd"], 2 * T_msg + up["dcasgd"])}
    for name, value in expect.items():
        assert rows[name]["model_at_t_c"] == pytest.approx(value, rel=1e-9), name
    # the model at the run's own compute and update: per worker (ps-sync's server computes none,
    # and its update per iteration stays t_up)
    own = rows["pipe-sgd"]["compute"]
    assert 0 < rows["pipe-sgd"]["update_run"] < rows["pipe-sgd"]["other"]
    assert rows["pipe-sgd"]["model"] == pytest.approx(pipe(own, rows["pipe-sgd"]["update_run"]), rel=1e-9)
    own = rows["ps-sync"]["compute"]  # the worker's: the server's zero is not averaged in
    assert rows["ps-sync"]["t_c_own"] == pytest.approx(own)
    assert r.stdout.count("daso: 1 rank(s) per node") == 1  # daso's parameters, as it is among --algo
    assert rows["ps-sync"]["model"] == pytest.approx(own + expect["ps-sync"] - t_c, rel=1e-9)
    assert rows["ps-sync"]["samples"] == 16 and rows["pipe-sgd"]["samples"] == 32


@pytest.mark.world(2)
def test_overlap_without_daso_prints_no_daso_line(capfd):
    r = _overlap(capfd, "--model", "digits_tiny", "--batch", "16", "--iterations", "8", "--skip", "2",
                 "--algo", "ssgd,ps-sync")
    if world.comm().Get_rank() != 0:
        return  # rank 0 prints
    assert "ps-sync" in r.stdout and "daso" not in r.stdout, r.stdout


@pytest.mark.in_process
def test_scale_prints_the_table_and_plots(tmp_path, capfd):
    png = tmp_path / "s.png"
    r = refsgd(capfd, "bench", "scale", "--model", "digits_mlp", "--batch", "16", "--t-c", "0.002", "--ranks", "8,64,4096",
            "--plot", str(png))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "t_C = 2.000 ms (given)" in r.stdout and "MODELLED" in r.stdout
    i = lines.index("ms per iteration")
    assert lines[i + 1].split() == ["method", "8", "64", "4096"]
    rows = [line.split() for line in lines[i + 2:i + 2 + len(models.MODELS)]]  # one row per timing model
    assert [row[0] for row in rows] == list(models.MODELS)
    speed = [line.split() for line in lines if line.startswith("  ssgd ")][1]
    assert speed[1:] == ["1.00", "1.00", "1.00"]
    assert png.stat().st_size > 10000


def test_bench_all_quick_writes_the_table(tmp_path):
    out = tmp_path / "b"
    r = cli("bench", "all", "--quick", "--out-dir", str(out), timeout=600)
    assert r.returncode == 0, r.stderr
    md = (out / "bench.md").read_text()
    assert r.stdout == md
    for section in ("## Step", "## Iterations against the timing models", "## Codecs", "## Framework overhead"):
        assert section in md
    for key in ("machine", "OS", "Python", "numpy / numba / mpi4py", "MPI library", "torch", "BLAS", "threads"):
        assert f"- **{key}**:" in md
    assert "MPICH" in md or "Open MPI" in md
    with open(out / "bench.csv") as f:
        rows = list(csv.DictReader(f))
    it = {(row["name"], float(row["ratio"])) for row in rows if row["section"] == "iteration"}
    from refsgd.bench.suite import METHODS_2   # every method with a timing model, and two +nopoll
    assert it == {(m, r) for m in METHODS_2 for r in (0.5, 1.0, 2.0)}
    ratio = [row for row in rows if row["section"] == "iteration" and row["metric"] == "measured_over_model"]
    assert all(math.isfinite(float(row["value"])) and float(row["value"]) > 0 for row in ratio)
    assert {row["name"] for row in rows if row["section"] == "codec"} == {"plain f32", "t16", "q8", "q8v", "bf16", "fp16"}
    over = {(row["name"], row["ranks"]) for row in rows if row["section"] == "overhead"}
    assert ("ssgd", "1") in over and ("ssgd", "2") in over and ("dcasgd", "2") in over
    assert {row["name"] for row in rows if row["section"] == "step"} == {"mnist_mlp batch 64"}
    assert (out / "bench.png").stat().st_size > 20000
    assert not [p for p in os.listdir(out) if p.startswith(".")]  # no temporary file left
    again = cli("bench", "all", "--quick", "--out-dir", str(out))
    assert again.returncode == 2 and "the file exists" in again.stderr and "--force" in again.stderr
    assert again.stderr.count("refsgd: error:") == 1


@pytest.mark.parametrize("args,msg", [
    (["scale", "--link", "50"], "--link expects LATENCY_US,GBIT_S"),
    (["scale", "--local-link", "x,y"], "--local-link expects LATENCY_US,GBIT_S"),
    (["scale", "--ranks", "8,6"], "a multiple of --ranks-per-node 4, got 6"),
    (["scale", "--ranks", "8,a"], "--ranks expects integers"),
    (["scale", "--t-c", "-1"], "--t-c expects seconds > 0"),
    (["scale", "--model", "nope"], "unknown model 'nope'"),
    (["scale", "--plot", "no/such/dir/s.png"], "does not exist"),
    (["all", "--out-dir", "setup.cfg"], "is a file, not a folder"),
    (["all", "--out-dir", "no/such/dir"], "does not exist"),
])
def test_bench_bad_input_one_line(args, msg):
    r = cli("bench", *args, cwd=ROOT)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert msg in r.stderr and r.stderr.count("refsgd: error:") == 1 and "Traceback" not in r.stderr


@pytest.mark.parametrize("args,msg", [
    (["--algo", "ssgd,pp-asgd"], "--algo: 'pp-asgd' is not one of"),
    (["--ratio", "1,x"], "--ratio expects numbers >= 0"),
    (["--algo", "daso", "--ranks-per-node", "3"], "does not divide the 2 ranks"),
    (["--local-link", "1"], "--local-link expects LATENCY_US,GBIT_S"),
    (["--json", "no/such/dir/o.json"], "does not exist"),
])
def test_bench_overlap_bad_input_one_line(args, msg):
    r = cli("bench", "overlap", *args, n=2, timeout=120)
    assert r.returncode == 2 and msg in r.stderr and r.stderr.count("refsgd: error:") == 1, r.stderr


def test_ratio_link_lowers_a_latency_that_alone_takes_the_time():
    from refsgd.bench.measure import _ratio_link
    fast = _ratio_link(0.06e-3, 19240, 2, 50.0)      # a tiny model on a fast machine
    assert fast.latency_us == pytest.approx(7.5)
    assert fast.time(19240, 2) == pytest.approx(0.06e-3, rel=1e-3)
    slow = _ratio_link(6e-3, 2_600_000, 2, 50.0)
    assert slow.latency_us == 50.0 and slow.time(2_600_000, 2) == pytest.approx(6e-3, rel=1e-3)


def test_pipe_sgd_model_puts_the_reduction_on_the_compute_side_without_a_spare_core():
    """Pipe-SGD eq. 4 with a core for the communication thread; without one (2 ranks on 2
    cores) the all-reduce's CPU work (on this machine C) delays the computation:
    max(t_up + t_C + C, X + R); the all-reduce is held X + R either way (eq. 5)."""
    link = Link(50.0, 10.0)
    net = models.Network(4_000_000, "emulated", link=link, cpu_real=2e-3, gamma=GAMMA)
    X, R = link.time(4_000_000, 2), 0.5 * 4_000_000 * GAMMA
    spare = models.Costs(t_c=3e-3, t_up={"pipe-sgd": 0.5e-3}, cores_per_rank=8)
    shared = models.Costs(t_c=3e-3, t_up={"pipe-sgd": 0.5e-3}, cores_per_rank=1)
    assert models.iteration_time("pipe-sgd", spare, net, 2) == pytest.approx(max(3.5e-3, max(X + R, 2e-3)))
    assert models.iteration_time("pipe-sgd", shared, net, 2) == pytest.approx(max(5.5e-3, X + R))
    cluster = models.Network(4_000_000, "model", link=link, gamma=GAMMA)       # a cluster: R on both sides
    assert models.iteration_time("pipe-sgd", shared, cluster, 2) == pytest.approx(max(3.5e-3 + R, X + R))


@pytest.mark.world(2)
def test_overlap_times_the_cost_of_a_timeline(tmp_path, capfd):
    """bench overlap --timeline-cost: runs without and with --timeline, the spans per iteration
    and the cost of one span (the figure of issue 27; its values depend on the machine)."""
    out = world.shared_path(tmp_path) / "o.json"
    r = _overlap(capfd, "--model", "digits_mlp", "--batch", "16", "--iterations", "12", "--skip", "2",
                 "--algo", "ssgd,dcs3gd", "--timeline-cost", "1", "--json", str(out))
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    assert "cost of train --timeline" in r.stdout
    res = json.loads(out.read_text())
    assert 0 < res["span_seconds"] < 1e-3
    rows = {row["method"]: row for row in res["runs"][0]["rows"]}
    off, on, spans = rows["dcs3gd"]["timeline_cost"]
    assert off > 0 and on > 0
    # dcs3gd with --poll: its iteration, the Iallreduce, each layer and each poll, the wait, the update
    assert spans > rows["ssgd"]["timeline_cost"][2] >= 4
