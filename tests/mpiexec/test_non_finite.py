"""A run that becomes non-finite stops every rank with one message and writes nothing: the loss
check catches a non-finite loss, and the state itself is checked where no gradient follows (after
the last iteration), so that a last update gone wrong is caught too."""

import pytest
from tests.helpers.launch import cli


@pytest.mark.parametrize("iterations, bad", [(1, 0), (3, 1)])
def test_a_run_that_becomes_non_finite_stops_and_writes_nothing(tmp_path, iterations, bad):
    """lr 1e300 is infinite in float32: the first update makes the weights non-finite. With one
    iteration only the state check after the last iteration can see it (iteration 0); with three,
    the loss of iteration 1 is non-finite already."""
    out = tmp_path / "m.h5"
    r = cli("train", "--iterations", str(iterations), "--lr", "1e300", "--dtype", "float32", "--no-progress",
            "--out", str(out), n=2, timeout=300)
    assert r.returncode != 0
    assert f"the loss or the weights became non-finite at iteration {bad}; lower the learning rate" in r.stderr
    assert not out.exists()
