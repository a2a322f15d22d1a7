"""DASO and SSGD with compression: MPI against the serial renderings over every phase, the phase
record, traffic, resume with a global sync in flight, frozen layers, bad input."""

import json

import h5py
import numpy as np
import pytest
from tests.helpers import world
from tests.helpers.launch import FROZEN_SPEC, verify_mpi_against_serial
from tests.helpers.launch import cli as refsgd

D = 4810                     # digits_mlp's parameters
# digits at batch 64 x 4 ranks (or 32 x 8): 5 iterations per epoch. B_max 2 and a threshold no epoch
# meets: cycling starts at 5 with B 2, W 1, halves at 15 (B = W = 1), resets at 20, halves at 25
PHASES = ["--algo", "daso", "--model", "digits_mlp", "--seed", "3", "--momentum", "0.9", "--lr", "0.05",
          "--warmup-epochs", "1", "--cooldown-epochs", "1", "--sync-every", "2", "--plateau-patience", "1",
          "--plateau-threshold", "0.9"]


@pytest.mark.world(2, 4)
def test_mpi_equals_serial_rendering_through_every_phase(tmp_path):
    """2 nodes x 1 and 2 x 2: bitwise (every sum has two terms)."""
    G, batch = {2: (1, 128), 4: (2, 64)}[world.comm().Get_size()]
    world.mpi_equals_serial(tmp_path, PHASES + ["--ranks-per-node", str(G), "--batch", str(batch)], 35, rtol=0)


def test_mpi_equals_serial_rendering_through_every_phase_on_4_nodes_x_2(tmp_path):
    """4 nodes x 2 (8 ranks, beyond the world sessions' sizes: a job of its own): to rounding."""
    verify_mpi_against_serial(tmp_path, PHASES + ["--ranks-per-node", "2", "--batch", "32"], 8, 35, rtol="1e-10")


def test_phase_changes_are_logged_and_recorded(tmp_path):
    r = refsgd("train", *PHASES, "--ranks-per-node", "2", "--batch", "64", "--iterations", "35",
               "--no-progress", "--out", str(tmp_path / "m.h5"), n=4)
    assert r.returncode == 0, r.stderr
    with h5py.File(tmp_path / "m.h5") as f:
        events = json.loads(f.attrs["events"])
    seen = [(e["iteration"], e["what"], e.get("B"), e.get("W")) for e in events]
    assert seen == [(0, "warm-up", None, None), (5, "cycling", 2, 1), (15, "plateau: B and W halved", 1, 1),
                    (20, "plateau: B and W reset", 2, 1), (25, "plateau: B and W halved", 1, 1),
                    (30, "cool-down", None, None)]
    assert "iter     20  epoch   4.00  plateau: B and W reset: B 2, W 1" in r.stdout


def _per_iteration_bytes(path):
    with h5py.File(path) as f:
        return f["iterations/global_bytes"][...].sum(axis=0), f["iterations/local_bytes"][...].sum(axis=0)


@pytest.mark.world(4)
def test_global_traffic_daso_against_ssgd_and_fp16(tmp_path):
    """Payload between nodes per iteration at 2 nodes x 2 ranks (float32): SSGD puts every rank's
    gradient into the all-reduce (4 x 4D bytes), fp16 half of that; DASO one rank per node, in
    bf16 while blocking (2 x 2D) and float32 every B batches while cycling (2 x 4D)."""
    tmp_path = world.shared_path(tmp_path)
    common = ["--model", "digits_mlp", "--batch", "64", "--iterations", "20", "--no-progress"]
    runs = {"ssgd": ["--algo", "ssgd"], "fp16": ["--algo", "ssgd", "--compress", "fp16"],
            "daso": ["--algo", "daso", "--ranks-per-node", "2", "--sync-every", "4"]}
    for name, extra in runs.items():
        world.train(*common, *extra, "--out", str(tmp_path / f"{name}.h5"), log=None)
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    out = {name: _per_iteration_bytes(tmp_path / f"{name}.h5") for name in runs}
    assert (out["ssgd"][0] == 4 * 4 * D).all() and (out["ssgd"][1] == 0).all()
    assert (out["fp16"][0] == 4 * 2 * D).all()
    glob, local = out["daso"]
    warm, cycle, cool = glob[:5], glob[5:15], glob[15:]
    assert (warm == 2 * 2 * D).all() and (cool == 2 * 2 * D).all()
    assert list(cycle) == [2 * 4 * D, 0, 0, 0] * 2 + [2 * 4 * D, 0]          # B = 4 from iteration 5
    # within the nodes: every rank's gradient, and one Bcast root per node when a global sync is
    # received: at once while blocking, W = 1 batch after the send while cycling
    bcasts = (local - 4 * 4 * D) / (2 * 4 * D)
    assert list(bcasts) == [1] * 5 + [0, 1, 0, 0, 0, 1, 0, 0, 0, 1] + [1] * 5


@pytest.mark.world(4)
def test_resume_with_a_global_sync_in_flight_equals_an_uninterrupted_run(tmp_path):
    """The checkpoint after iteration 5 holds the sync sent at 5 (due at 6); plateaus follow."""
    tmp_path = world.shared_path(tmp_path)
    common = [*PHASES, "--ranks-per-node", "2", "--batch", "64", "--dtype", "float64",
              "--iterations", "33", "--no-progress", "--checkpoint-every", "6",
              "--keep-checkpoints", "0"]
    world.train(*common, "--checkpoint", str(tmp_path / "a"), "--out", str(tmp_path / "a.h5"), log=None)
    world.train(*common, "--checkpoint", str(tmp_path / "b"), "--resume", str(tmp_path / "a" / "ckpt-6"),
                "--out", str(tmp_path / "b.h5"), log=None)
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    # five blocking syncs rotated k to 1: local rank 1 (rank 1 of node 0) sent at 5
    with h5py.File(tmp_path / "a" / "ckpt-6" / "rank1.h5") as f:
        assert list(f["state/daso"][6:9]) == [6, 1, 1]      # slot 0: due at 6, group 1, S = 1
        assert np.abs(f["state/sync_sum"][0]).sum() > 0     # ... its sum received before the save
    with h5py.File(tmp_path / "a.h5") as a, h5py.File(tmp_path / "b.h5") as b:
        np.testing.assert_array_equal(a["model"][...], b["model"][...])
        np.testing.assert_array_equal(a["iterations/loss"][...], b["iterations/loss"][...])
        assert a.attrs["events"] == b.attrs["events"]
    for rank in range(4):
        with h5py.File(tmp_path / "a" / "ckpt-30" / f"rank{rank}.h5") as a, \
                h5py.File(tmp_path / "b" / "ckpt-30" / f"rank{rank}.h5") as b:
            for k in a["state"]:
                np.testing.assert_array_equal(a["state"][k][...], b["state"][k][...])


@pytest.mark.world(4)
def test_global_syncs_never_move_a_frozen_layer(tmp_path):
    tmp_path = world.shared_path(tmp_path)
    spec = tmp_path / "frozen.toml"
    if world.comm().Get_rank() == 0:
        spec.write_text(FROZEN_SPEC)
    world.comm().Barrier()
    options = [o if o != "digits_mlp" else str(spec) for o in PHASES] + ["--ranks-per-node", "2", "--batch", "64"]
    world.mpi_equals_serial(tmp_path, options, 35, rtol=0)
    with h5py.File(tmp_path / "mpi.h5") as f:
        w0, x = f["w0"][...], f["state/x"][...]
    frozen = slice(0, 64 * 16 + 16)
    assert (x[:, :, frozen] == w0[frozen]).all()
    assert not (x[-1, :, frozen.stop:] == w0[frozen.stop:]).all()


@pytest.mark.world(2)
def test_one_node_is_ssgd_with_the_mean_gradient(tmp_path):
    """Without --ranks-per-node all ranks share this machine's memory: one node, no global sync,
    and the node sync is SSGD's all-reduce: the same trajectory, bit for bit."""
    tmp_path = world.shared_path(tmp_path)
    common = ["--model", "digits_mlp", "--batch", "16", "--momentum", "0.9", "--dtype", "float64",
              "--iterations", "12", "--no-progress"]
    lines = []
    world.train("--algo", "daso", *common, "--trace", str(tmp_path / "d.h5"), log=lines.append)
    world.train("--algo", "ssgd", *common, "--trace", str(tmp_path / "s.h5"), log=None)
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    assert any("1 node of 2 ranks; one node: no global syncs" in line for line in lines), lines
    with h5py.File(tmp_path / "d.h5") as d, h5py.File(tmp_path / "s.h5") as s:
        np.testing.assert_array_equal(d["state/x"][...], s["state/x"][...])
        np.testing.assert_array_equal(d["state/U.momentum_buffer"][...], s["state/U.momentum_buffer"][...])


@pytest.mark.world(2, 4)
@pytest.mark.parametrize("algo,codec", [("ssgd", "fp16"), ("ssgd", "q8"), ("ssgd-nag", "bf16")])
def test_compressed_ssgd_equals_serial_bit_for_bit(tmp_path, algo, codec):
    extra = ["--momentum", "0.9"] + (["--lr", "0.001"] if algo == "ssgd-nag" else [])
    world.mpi_equals_serial(tmp_path, ["--algo", algo, "--compress", codec, "--model", "digits_mlp",
                                       "--batch", "8", "--seed", "2", *extra], 10, rtol=0)


@pytest.mark.parametrize("args,message", [
    (["--algo", "daso", "--ranks-per-node", "3"], "--ranks-per-node 3 does not divide the 4 ranks"),
    (["--algo", "daso", "--compress", "fp16"], "--compress does not apply to --algo daso: its blocking global syncs carry bf16"),
    (["--algo", "daso", "--tau", "2"], "--algo daso takes one batch per iteration"),
    (["--algo", "ssgd", "--local-link", "1,1"], "--local-link does not apply to --algo ssgd (--local-link applies to --algo daso;"),
    (["--algo", "ssgd", "--sync-every", "2"], "--sync-every does not apply to --algo ssgd (--sync-every applies to "
                                               "--algo daso"),
    (["--algo", "dcs3gd", "--compress", "fp16"], "--compress applies to --algo ssgd, ssgd-nag, pipe-sgd, d-sync;"),
    (["--algo", "daso", "--local-link", "1"], "--local-link expects LATENCY_US,GBIT_S"),
    (["--algo", "daso", "--plateau-threshold", "1"], "--plateau-threshold must be in [0, 1)"),
])
def test_bad_options_end_with_one_message(args, message):
    r = refsgd("train", *args, "--iterations", "2", "--no-progress", n=4)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("refsgd: error:") == 1 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_merge_is_equation_1_in_place_bit_for_bit(dtype):
    """Eq. 1 in one pass equals the NumPy passes x*(2S), + sum, / (2S + P); a mask keeps the
    frozen entries of x."""
    from refsgd.algorithms.daso import merge
    rng = np.random.default_rng(0)
    x, s = rng.standard_normal(1001).astype(dtype), rng.standard_normal(1001).astype(dtype)
    ref = x * (2 * 3)
    ref += s
    ref /= 2 * 3 + 4
    y = x.copy()
    merge(y, s, 3, 4)
    np.testing.assert_array_equal(y, ref)
    keep = np.arange(1001) % 3 != 0
    y = x.copy()
    merge(y, s, 3, 4, keep)
    np.testing.assert_array_equal(y[keep], ref[keep])
    np.testing.assert_array_equal(y[~keep], x[~keep])
