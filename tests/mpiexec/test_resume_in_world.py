"""Resuming from a checkpoint continues the trajectory bitwise: checked in-process on the world
of 2 ranks (tests.helpers.world), where it was once two ``mpiexec`` launches per method in
tests/mpiexec/test_cli.py. What needs a process (the CLI's refusals of another run's checkpoint,
a signal's checkpoint) stays there and in test_failure.py / test_preemption.py."""

import os

import h5py
import numpy as np
import pytest
from tests.helpers import world

from refsgd import checkpoint


def _options(algo):
    common = ["--algo", algo, "--momentum", "0.9", "--dtype", "float64", "--iterations", "24",
              "--tau", "2", "--no-progress", "--log-every", "5"]
    if algo == "ssgd-nag":
        common += ["--lr", "0.0005"]
    if algo == "dcs3gd":
        common[common.index("--tau") + 1] = "1"
    if algo == "dcasgd":  # no momentum; the deterministic order makes the trajectory reproducible
        common = [a for a in common if a not in ("--momentum", "0.9")]
        common[common.index("--tau") + 1] = "1"
        common += ["--ps-order", "round-robin"]
    return common


def _check_resume(tmp_path, algo):
    """Collective: 24 iterations checkpointed every 7 (and at the last), then a run resumed from
    ckpt-7; rank 0 asserts the same final model, per-iteration losses and evaluations."""
    tmp_path = world.shared_path(tmp_path)
    common, ck = _options(algo), tmp_path / "ck"
    world.train(*common, "--checkpoint", str(ck), "--checkpoint-every", "7", "--keep-checkpoints", "0",
                "--out", str(tmp_path / "a.h5"), log=None)
    lines = []
    world.train(*common, "--resume", str(ck / "ckpt-7"), "--out", str(tmp_path / "b.h5"), log=lines.append)
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    assert sorted(os.listdir(ck)) == ["ckpt-14", "ckpt-21", "ckpt-24", "ckpt-7", "latest"]  # and the last
    assert (ck / "latest").read_text().strip() == "ckpt-24"
    assert any("resumed from" in line and "at iteration 7" in line for line in lines), lines
    with h5py.File(tmp_path / "a.h5") as a, h5py.File(tmp_path / "b.h5") as b:
        np.testing.assert_array_equal(a["model"][...], b["model"][...])
        np.testing.assert_array_equal(a["iterations/loss"][...], b["iterations/loss"][...])
        np.testing.assert_array_equal(a["evals/test_acc"][...], b["evals/test_acc"][...])


@pytest.mark.world(2)
@pytest.mark.parametrize("algo", ["ssgd", "ssgd-opt", "ssgd-nag", "dcs3gd", "dcasgd"])
def test_resume_equals_an_uninterrupted_run(tmp_path, algo):
    _check_resume(tmp_path, algo)


@pytest.mark.world(2)
def test_a_restore_one_ulp_off_fails_the_check(tmp_path, monkeypatch):
    """The null of the check above: a restore that puts back each state array one ulp off."""
    fill = checkpoint.Restorer.fill

    def off_by_one_ulp(self, name, array):
        filled = fill(self, name, array)
        if array.dtype.kind == "f" and array.size:
            array.flat[0] = np.nextafter(array.flat[0], np.inf)
        return filled
    monkeypatch.setattr(checkpoint.Restorer, "fill", off_by_one_ulp)
    failed = None
    try:
        _check_resume(tmp_path, "ssgd")
    except AssertionError as e:
        failed = str(e)
    world.all_ranks(world.comm().Get_rank() != 0 or failed is not None, "the check passed a restore one ulp off")
