"""DC-ASGD's fused server step S2 (refsgd.algorithms.dcasgd.compensated_step) is bit for bit the
NumPy expression of the serial rendering (refsgd.serial.dc.dcasgd), so that an MPI trace is
bitwise its golden file at any number of workers.

The correction lambda g g (w - w_bak) is far smaller than g in a real run, so a product taken in
another order only rarely moves the sum by an ulp (one weight in one run at 8 ranks); here the two
terms are of one size, so that any other order of the products or the sums shows on many elements.
"""

import numpy as np
import pytest

from refsgd.algorithms.dcasgd import compensated_step


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("decay", ["none", "scalar", "frozen"])
@pytest.mark.parametrize("adaptive", [False, True])
def test_compensated_step_is_the_serial_renderings_expression(dtype, decay, adaptive):
    rng = np.random.default_rng(7)
    d = 10_000
    w = rng.standard_normal(d).astype(dtype)
    w_bak = (w + rng.standard_normal(d)).astype(dtype)
    g = rng.standard_normal(d).astype(dtype)
    lam = (rng.random(d) + 0.5).astype(dtype) if adaptive else 0.7
    decayed = np.ones(d, dtype)
    decayed[: d // 3] = 0                                    # a frozen layer: no decay there
    wd = {"none": 0.0, "scalar": 0.3, "frozen": 0.3 * decayed}[decay]
    eta = 0.1
    # refsgd.serial.dc.dcasgd's line, with its `decayed * weight_decay`
    decay_w = (decayed if decay == "frozen" else 1) * (wd if decay != "frozen" else 0.3)
    want = w - eta * (g + decay_w * w + lam * g * g * (w - w_bak))
    compensated_step(w, g, w_bak, eta, lam, wd)
    assert w.dtype == dtype
    np.testing.assert_array_equal(w, want)
