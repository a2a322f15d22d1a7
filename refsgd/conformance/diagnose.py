"""What a failing configuration tells an implementer, beyond verify's first difference: the
element by layer (``fc2.weight[3, 17]`` as well as the flat index), every array that differs at
that step and the first step each differs at, a value that equals the initial weights or the
previous step's (an update skipped or a step late), and where a value first became NaN or inf
(step, worker, array, element)."""

import json

import numpy as np

from refsgd import trace


def element(layout, shape, index):
    """``fc2.weight[3, 17]`` for flat position ``index`` of one worker's array of ``shape``, (d,)
    or pipe-sgd's (K, d) g_sum (``g_sum`` row first: ``[1] fc1.bias[4]``), laid out as ``layout``
    [(tensor, offset, shape), ...]; None for a scalar or a position in no tensor."""
    if index is None or not shape:
        return None
    d = shape[-1]
    lead, j = divmod(int(index), d)
    for name, offset, size_shape in layout:
        size = int(np.prod(size_shape))
        if offset <= j < offset + size:
            at = ", ".join(str(int(v)) for v in np.unravel_index(j - offset, tuple(size_shape)))
            return (f"[{lead}] " if len(shape) > 1 else "") + f"{name}[{at}]"
    return None


def _bad(x, y, rtol, atol):
    """Where x differs from y beyond the tolerances (NaN in both is agreement: a server's loss)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    both_nan = np.isnan(x) & np.isnan(y)
    with np.errstate(invalid="ignore"):
        return ~both_nan & ~(np.abs(x - y) <= atol + rtol * np.abs(y))


def lines(mine_path, expected_path, rtol, atol, where):
    """The diagnosis of a failed comparison, as (one-line summary or None, extra lines): the
    summary replaces verify's first difference when there is something to add."""
    a, b = trace.Trace(mine_path), trace.Trace(expected_path)
    layout = [(n, o, tuple(s)) for n, o, s in json.loads(b.attrs["layout"])]
    d = len(b.w0)
    names = ["loss"] + [k for k in b.state_names if k in a.state]
    if a.loss.shape != b.loss.shape or any(a.state[k].shape != b.state[k].shape for k in names[1:]):
        return None, []
    arrays = {k: (a.loss, b.loss) if k == "loss" else (a.state[k], b.state[k]) for k in names}
    out, summary = [], None
    nonfinite = [(k, np.argwhere(~np.isfinite(x) & np.isfinite(y))) for k, (x, y) in arrays.items()]
    nonfinite = [(k, w[0]) for k, w in nonfinite if len(w)]
    if nonfinite:   # the earliest step at which the backend's value became NaN or inf
        k, (t, i, *rest) = min(nonfinite, key=lambda e: tuple(e[1][:2]))
        j = int(np.ravel_multi_index(rest, arrays[k][0].shape[2:])) if rest else None
        got = arrays[k][0][(t, i, *rest)]
        summary = (f"step {t}, worker {i}, {k}" + (f"[{j}] ({element(layout, arrays[k][0].shape[2:], j)})"
                                                   if j is not None else "")
                   + f": got {float(got)!r} (the first non-finite value), expected {float(arrays[k][1][(t, i, *rest)])!r}")
        out.append(f"non-finite from step {t}: worker {i}, {k}" + (f"[{j}]" if j is not None else ""))
    firsts = []
    for k, (x, y) in arrays.items():
        bad = _bad(x, y, rtol, atol).reshape(x.shape[0], -1).any(axis=1)
        if bad.any():
            firsts.append((k, int(np.argmax(bad))))
    if firsts:
        out.append("first step each array differs at: " + ", ".join(f"{k} {t}" for k, t in firsts))
    if where is None or where.get("array") in (None, "batches"):
        return summary, out
    t, i, k, j = where["step"], where["worker"], where["array"], where["index"]
    at_step = [name for name, (x, y) in arrays.items() if _bad(x[t], y[t], rtol, atol).any()]
    out.append(f"differ at step {t}: {', '.join(at_step)}")
    if summary is None:
        name = element(layout, arrays[k][0].shape[2:], j) if k != "loss" else None
        got = where["a"]
        hint = ""
        if k != "loss" and arrays[k][0].shape[-1] == d and j is not None and j < d and got == b.w0[j] and \
                got != where["b"]:
            hint = " (equals the initial value w0: the update was skipped?)"
        elif t > 0 and j is not None and got == float(np.ravel(arrays[k][1][t - 1, i])[j]):
            hint = f" (equals the expected value of step {t - 1}: the update was skipped, or is a step late?)"
        elif t > 0 and j is None and got == float(arrays[k][1][t - 1, i]):
            hint = f" (equals the expected value of step {t - 1})"
        index = "" if j is None else f"[{j}]" + (f" ({name})" if name else "")
        summary = f"step {t}, worker {i}, {k}{index}: got {got!r}, expected {where['b']!r}{hint}"
    return summary, out
