"""A metrics file as the report reads it (:class:`Run`, :func:`load`), and the figures derived
from its records: the means over ranks, the moving mean, the smoothing window."""

import dataclasses
import json
import math

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.files import open_h5, read_array
from refsgd import trace

from .metrics_file import read

#: the time split, in the order drawn and tabled
PARTS = ("compute", "idle", "update", "other", "comm")

CSV_COLUMNS = ("run", "file", "algo", "ranks", "iteration", "epoch", "train_loss", "test_loss", "test_acc",
               "seconds")

EVAL_FIELDS = ("iteration", "epoch", "train_loss", "test_loss", "test_acc", "seconds")

#: version-2 attributes shown in the text header when present, with their names there
EXTRA_ATTRS = (("model_spec", "model spec"), ("layout", "layout"), ("dataset", "dataset"),
               ("dataset_sha256", "dataset sha256"), ("threads_per_rank", "threads per rank"),
               ("load_average_before", "load average before (1, 5, 15 min)"),
               ("load_average_after", "load average after (1, 5, 15 min)"))


@dataclasses.dataclass
class Run:
    """One metrics file, read."""
    index: int  # 1-based position on the command line
    path: str
    evals: list
    rec: dict
    attrs: dict
    config: dict
    lr: object = None  # (T,) float64 array, or None (metrics format version 1)

    @property
    def algo(self):
        return str(self.config.get("algo", "?"))

    @property
    def world(self):
        return self.rec["wall"].shape[0]

    @property
    def iterations(self):
        return self.rec["wall"].shape[1]

    @property
    def model(self):
        return _text(self.attrs["model"]) if "model" in self.attrs else self.config.get("model")

    @property
    def format_version(self):
        v = self.attrs.get("format_version", 1)
        try:
            return int(v)
        except (TypeError, ValueError):
            return v

    @property
    def varying(self):
        """Whether its iterations consumed varying numbers of gradients (PP-ASGD's threads)."""
        g = self.rec.get("gradients")
        return g is not None and g.shape[1] > 0 and g[0].min() != g[0].max()

    def epochs_at(self, iterations):
        """The epoch after each of ``iterations`` (1-based): iteration / iterations_per_epoch, or,
        when the iterations consumed varying numbers of gradients, the gradients consumed so far
        over an epoch's (which the last evaluation tells)."""
        it = np.asarray(iterations, dtype=np.float64)
        if not self.varying:
            return it / self.iterations_per_epoch
        consumed = np.concatenate([[0.0], np.cumsum(self.rec["gradients"][0])])
        last = next(e for e in reversed(self.evals) if e["epoch"] > 0 and e["iteration"] > 0)
        per_epoch = consumed[int(last["iteration"])] / last["epoch"]
        return np.interp(it, np.arange(len(consumed), dtype=np.float64), consumed) / per_epoch

    @property
    def segments(self):
        """The processes that made the run ([{"iterations": [first, end], "wall_seconds"}]; files
        of format version 3), or None."""
        try:
            seg = json.loads(_text(self.attrs["segments"]))
        except (KeyError, ValueError):
            return None
        return seg if isinstance(seg, list) and all(isinstance(x, dict) for x in seg) else None

    @property
    def iterations_per_epoch(self):
        """iteration / epoch of the last evaluation past epoch 0, or None."""
        for e in reversed(self.evals):
            if e["epoch"] > 0 and e["iteration"] > 0 and math.isfinite(e["epoch"]):
                return e["iteration"] / e["epoch"]
        return None

    @property
    def events(self):
        """The method's regime changes (DASO's phases): [{iteration, epoch, what, ...}], [] if none."""
        try:
            events = json.loads(_text(self.attrs.get("events", "[]")))
        except ValueError:
            return []
        ok = isinstance(events, list) and all(isinstance(e, dict) and {"iteration", "epoch", "what"} <= set(e)
                                              for e in events)
        return events if ok else []

    def train_loss(self):
        """(iterations, loss): the per-iteration loss, mean over the ranks that have one;
        iterations where no rank has a value are left out. Iterations count from 1."""
        y = rank_nanmean(self.rec["loss"])
        x = np.arange(1, len(y) + 1, dtype=np.float64)
        keep = ~np.isnan(y)
        return x[keep], y[keep]

    def time_totals(self):
        """{part: (world,) total seconds}; other = wall - compute - idle - update."""
        c, i, w = (self.rec[k].sum(axis=1) for k in ("compute", "idle", "wall"))
        m = self.rec["comm"].sum(axis=1) if "comm" in self.rec else np.zeros_like(w)
        u = self.rec["update"].sum(axis=1) if "update" in self.rec else np.zeros_like(w)
        return {"compute": c, "idle": i, "update": u, "other": w - c - i - u, "comm": m}

    def time_ms(self):
        """{part: (world,) mean ms per iteration}."""
        n = max(self.iterations, 1)
        return {k: 1e3 * v / n for k, v in self.time_totals().items()}

    def time_quartiles_ms(self):
        """{part: (25th, 75th percentile)} of the per-iteration ms, each iteration the mean over
        the ranks: the spread beside a mean (one slow stretch of a loaded machine moves a mean)."""
        c, i, w = (self.rec[k] for k in ("compute", "idle", "wall"))
        zero = np.zeros_like(w)
        u = self.rec.get("update", zero)
        parts = {"compute": c, "idle": i, "update": u, "other": w - c - i - u, "comm": self.rec.get("comm", zero)}
        out = {}
        for k, v in parts.items():
            per_iteration = 1e3 * np.asarray(v, dtype=np.float64).mean(axis=0)
            out[k] = tuple(np.percentile(per_iteration, (25, 75))) if per_iteration.size else (0.0, 0.0)
        return out


def rank_nanmean(a):
    """Mean over axis 0 of the values that are not NaN (NaN where there is none), without the
    warning of ``np.nanmean``."""
    a = np.asarray(a, dtype=np.float64)
    have = ~np.isnan(a)
    count = have.sum(axis=0)
    total = np.where(have, a, 0.0).sum(axis=0)
    return np.divide(total, count, out=np.full(total.shape, np.nan), where=count > 0)


def moving_mean(y, window):
    """Centred moving mean of ``y`` over ``window`` points, the window shrinking at the ends."""
    y = np.asarray(y, dtype=np.float64)
    n = len(y)
    if n == 0 or window <= 1:
        return y.copy()
    half = int(window) // 2
    c = np.concatenate([[0.0], np.cumsum(y)])
    idx = np.arange(n)
    lo = np.maximum(idx - half, 0)
    hi = np.minimum(idx - half + int(window), n)
    return (c[hi] - c[lo]) / (hi - lo)


def smoothing_window(run):
    """The moving mean's window: one epoch, at most a tenth of the run; T/50 without an epoch."""
    return _window(run)[0]


def _window(run):
    """(the moving mean's window, what it spans: "epoch", "tenth" of a run shorter than 10
    epochs, "fiftieth" of a run without epochs)."""
    t = run.iterations
    ipe = run.iterations_per_epoch
    if ipe is not None:
        epoch = max(1, int(round(ipe)))
        return (epoch, "epoch") if epoch <= t // 10 else (max(1, t // 10), "tenth")
    return max(1, t // 50), "fiftieth"


def smoothing_text(runs):
    """What the moving mean of ``runs``' training losses spans, in words that are true for every
    run: "an epoch (23 iterations)", "a tenth of the run (4 iterations; the run is shorter than
    10 epochs)", ... and, when a window is a single iteration, that there is no moving mean."""
    ws = [_window(r) for r in runs]
    lo, hi = min(w for w, _ in ws), max(w for w, _ in ws)
    if hi <= 1:
        return "no moving mean: the run is too short (it would span a single iteration)"
    n = f"{lo} iteration{'s' if hi > 1 else ''}" if lo == hi else f"{lo}-{hi} iterations"
    kinds = {k for _, k in ws}
    if kinds == {"epoch"}:
        return f"moving mean over about an epoch ({n})"
    if kinds == {"tenth"}:
        return f"moving mean over a tenth of the run ({n}; the run is shorter than 10 epochs)"
    if kinds == {"fiftieth"}:
        return f"moving mean over a fiftieth of the run ({n})"
    return f"moving mean over about an epoch, or a tenth of a run shorter than 10 epochs ({n})"


def load(path, index=1):
    """A :class:`Run` from a metrics file; RefsgdError naming what is wrong."""
    with open_h5(path, "a metrics file from refsgd train --out") as f:
        if f.attrs.get("format") == trace.FORMAT:
            raise RefsgdError(f"{path} is a trace (refsgd train --trace, refsgd golden), not a metrics file "
                              f"(refsgd train --out): compare traces with `refsgd verify A.h5 B.h5`")
    evals, rec, attrs = read(path)
    config = json.loads(attrs.get("config", "{}"))  # read checked that it is a JSON object
    if "wall" not in rec:
        raise RefsgdError(f"{path}: malformed metrics file, missing /iterations/wall")
    t = rec["wall"].shape[1]
    lr = None
    with open_h5(path, "a metrics file from refsgd train --out") as f:
        if "lr" in f:
            d = f["lr"]
            shape = getattr(d, "shape", None)
            if shape != (t,) or getattr(d, "dtype", np.dtype(object)).kind not in "fiu":
                raise RefsgdError(f"{path}: malformed metrics file: /lr must be numbers of shape ({t},) "
                                  f"(one per iteration), got {shape if shape is not None else 'a group'}")
            lr = np.asarray(read_array(f, "lr"), dtype=np.float64)
    return Run(index, path, evals, rec, attrs, config, lr)


def _text(v):
    """An attribute as text (bytes decoded, NumPy scalars as Python)."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.generic):
        return str(v.item())
    return str(v)


def _one_line(text, limit=100):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _attr_text(key, value):
    """A version-2 attribute in the text header: the layout as its tensor and parameter counts,
    threads_per_rank -1 as unknown, the others on one line (shortened)."""
    text = _text(value)
    if key == "model_spec":
        try:
            spec = json.loads(text)
            layers = spec["layers"]
            kinds = ", ".join(str(x.get("type", "?")) for x in layers)
            return (f"input {spec.get('input')}, {spec.get('classes')} classes, {len(layers)} layers: "
                    + _one_line(kinds, 80))
        except (ValueError, TypeError, KeyError, AttributeError):
            pass
    if key == "layout":
        try:
            layout = json.loads(text)
            size = sum(int(np.prod(shape)) for _, _, shape in layout)
            return f"{len(layout)} tensors ({size:,} parameters)"
        except (ValueError, TypeError):
            pass
    if key == "threads_per_rank" and text == "-1":
        return "unknown"
    return _one_line(text)
