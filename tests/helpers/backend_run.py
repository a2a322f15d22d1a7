"""An external implementation's side of `refsgd conformance export` / `check`, for the tests: a
backend driven step by step from a configuration's Setup, its loss and states written into the
folder's result/ as NPY files (what docs/implementers.md asks of a program in another language)."""

import numpy as np


def write_result(folder, backend, s, batches):
    """Run ``backend`` (set up with Setup ``s``) for ``s.steps`` steps on ``batches`` and write
    folder/result/loss.npy and one STATE.npy per state (steps stacked)."""
    backend.setup(s)
    loss, states = [], {k: [] for k in s.state_names}
    for t in range(s.steps):
        loss.append(backend.step(t, float(s.lr[t]), batches[t]))
        for k, v in backend.state().items():
            states[k].append(v)
    (folder / "result").mkdir()
    np.save(folder / "result" / "loss.npy", np.array(loss))
    for k, v in states.items():
        np.save(folder / "result" / f"{k}.npy", np.stack(v))
