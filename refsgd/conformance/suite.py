"""The configurations of the suite, their expected traces, and one backend run through one
configuration.

The configurations are the golden configurations of refsgd's methods (``Method.goldens`` of
:mod:`refsgd.registry`, the files of tests/golden/), each in float64 as checked in, and two kinds
of variants: the same run in float32 (those without a compressed sum: a float32 difference of
one unit in the last place moves a codec's rounding by a whole step of its format), and the
uncompressed runs of the methods that take ``compress`` with each codec that no golden file of
that method and world size has. The expected trace of a configuration is its serial rendering
(:mod:`refsgd.golden`), made on demand: the package needs no file beyond itself.
"""

import copy
import dataclasses
import functools
import os
import re
import time
import traceback

import numpy as np

from refsgd import golden, options, trace
from refsgd.errors import RefsgdError, Stopped, did_you_mean
from refsgd.registry import METHODS
from refsgd.conformance import diagnose
from refsgd.conformance.backend import Setup, declared, instantiate

PASS, FAIL, NOT_DECLARED = "pass", "fail", "not declared"

#: the tolerances of a comparison per dtype (verify's defaults; float32 as docs/implementers.md advises)
TOLERANCES = {"float64": (1e-10, 1e-12), "float32": (1e-4, 1e-6)}


@dataclasses.dataclass(frozen=True)
class Configuration:
    """One run of the suite: ``name`` (e.g. ``ssgd-n2``, ``ssgd-n2-float32``, ``d-sync-t16-n2``),
    the method, world size, steps, dtype and codec (the ``compress`` value, "none" without), the
    options as given (``{"tau": 2, "momentum": 0.9, ...}``, the names of ``refsgd train``'s options
    with - written _) and ``golden``, the checked-in golden file it reproduces (None for a
    variant)."""

    name: str
    method: str
    workers: int
    steps: int
    dtype: str
    codec: str
    options: dict = dataclasses.field(hash=False)
    golden: str = None

    @property
    def tolerances(self):
        """(rtol, atol) of the comparison."""
        return TOLERANCES[self.dtype]


def _goldens():
    """(method, file, workers, options) of every golden configuration: the one place the list is read."""
    return [(m.name, g.file, g.workers, dict(g.options)) for m in METHODS.values() for g in m.goldens]


def _name(method, file, workers, codec=None):
    """A configuration's name: its golden file's stem, or the method's and the codec's before
    ``-nN`` as the golden files name theirs (``d-sync-t16-n2``)."""
    stem = os.path.splitext(file)[0] if file else f"{method}-n{workers}"
    if codec:
        head, sep, tail = stem.rpartition(f"-n{workers}")
        stem = f"{head}-{codec}{sep}{tail}" if sep else f"{stem}-{codec}"
    return stem


#: the configurations beyond the golden files that cover every option that changes a trajectory
#: (refsgd.conformance.coverage checks it): (the golden file it varies, its name, workers, steps,
#: the options changed). Short runs, a world size that is not a power of two where the method's sums
#: allow it, and a schedule that changes the rate within the steps.
VARIANTS = (
    ("ssgd-n2.h5", "ssgd-nesterov-wd-n3", 3, 6, dict(nesterov=True, weight_decay=0.01,
                                                     schedule="warmup-step:warmup_iters=2,milestones=4")),
    ("ssgd-n2.h5", "ssgd-mxnet-wd-n2", 2, 6, dict(momentum_form="mxnet", weight_decay=0.01,
                                                  schedule="warmup-constant:warmup_iters=3")),
    ("ssgd-opt-n2.h5", "ssgd-opt-mxnet-wd-n3", 3, 6, dict(nesterov=False, momentum_form="mxnet", weight_decay=0.01,
                                                          schedule="warmup-constant:warmup_iters=3")),
    ("ssgd-nag-n2.h5", "ssgd-nag-g2-n3", 3, 6, dict(threads=2, tau=None, schedule="warmup-step:warmup_iters=2,milestones=4")),
    ("dcs3gd-n4.h5", "dcs3gd-m05-n3", 3, 6, dict(momentum=0.5, wd_k=1.0, lambda0=0.5, weight_decay=0.01)),
    ("dcasgd-n3.h5", "dcasgd-adaptive-wd-n4", 4, 6, dict(dc_adaptive=True, dc_ms_decay=0.9, dc_lambda=2.0,
                                                         weight_decay=0.01)),
    ("dcasgd-n3.h5", "dcasgd-l01-n4", 4, 6, dict(dc_lambda=0.1, schedule="warmup-step:warmup_iters=2,milestones=4")),
    ("laga-sgd-n2.h5", "laga-sgd-n3", 3, 6, dict(schedule="warmup-step:warmup_iters=2,milestones=4")),
    ("laga-sgdm-n2.h5", "laga-sgdm-m05-wd-n3", 3, 6, dict(momentum=0.5, weight_decay=0.01, schedule="warmup-step:warmup_iters=2,milestones=4")),
    ("laga-sgdn-n4.h5", "laga-sgdn-m05-n3", 3, 6, dict(momentum=0.5, schedule="warmup-constant:warmup_iters=3")),
    ("pipe-sgd-k2-n4.h5", "pipe-sgd-k3-warmup-n3", 3, 8, dict(dependency=3, warmup_epochs=1, batch=128,
                                                                schedule="warmup-step:warmup_iters=2,milestones=4")),
    ("d-sync-n2.h5", "d-sync-n3", 3, 6, dict(schedule="warmup-constant:warmup_iters=3")),
    ("ps-sync-n3.h5", "ps-sync-n4", 4, 6, dict(schedule="warmup-step:warmup_iters=2,milestones=4")),
    ("daso-2x2-n4.h5", "daso-nesterov-wd-3x2-n6", 6, 12, dict(nesterov=True, weight_decay=0.01, warmup_epochs=0,
                                                              cooldown_epochs=1, sync_every=4,
                                                              schedule="warmup-step:warmup_iters=2,milestones=8")),
    ("daso-2x2-n4.h5", "daso-mxnet-3x1-n3", 3, 14, dict(ranks_per_node=1, momentum_form="mxnet", warmup_epochs=1,
                                                        cooldown_epochs=0, sync_every=2)),
    ("pp-asgd-s3-n2.h5", "pp-asgd-g3-s1-n3", 3, 6, dict(threads=3, staleness=1, schedule="warmup-constant:warmup_iters=3")),
    ("asgd-s3-n2.h5", "asgd-g3-s1-n3", 3, 6, dict(threads=3, staleness=1, schedule="warmup-step:warmup_iters=2,milestones=4")),
    ("local-sgd-n2.h5", "local-sgd-nesterov-wd-n3", 3, 8, dict(nesterov=True, weight_decay=0.01, sync_every=2)),
    ("local-sgd-n2.h5", "local-sgd-mxnet-n2", 2, 8, dict(momentum_form="mxnet",
                                                         schedule="warmup-step:warmup_iters=2,milestones=5")),
)


@functools.lru_cache(maxsize=None)
def _all():
    codecs = [c for c in options.BY_NAME["compress"].kind.choices if c != "none"]
    bases = []
    for method, file, workers, opts in _goldens():
        steps = int(opts.pop("steps"))
        opts.setdefault("dtype", "float64")              # refsgd golden's default (refsgd train's is float32)
        bases.append(Configuration(_name(method, file, workers), method, workers, steps, opts["dtype"],
                                   opts.get("compress") or "none", opts, file))
    by_file = {c.golden: c for c in bases}
    variants = []
    for file, name, workers, steps, changes in VARIANTS:
        base = by_file[file]
        opts = {k: v for k, v in dict(base.options, **changes).items() if v is not None}
        variants.append(dataclasses.replace(base, name=name, workers=workers, steps=steps, options=opts, golden=None))
    out = bases + variants
    covered = {(c.method, c.workers, c.codec) for c in bases}
    for c in bases:
        if c.codec == "none" and not trace.compressed(c.method, c.options):
            out.append(dataclasses.replace(c, name=f"{c.name}-float32", dtype="float32",
                                           options=dict(c.options, dtype="float32"), golden=None))
    for c in bases:
        if c.codec == "none" and "compress" in options.APPLIES[c.method]:
            for codec in codecs:
                if (c.method, c.workers, codec) not in covered:
                    out.append(dataclasses.replace(c, name=_name(c.method, c.golden, c.workers, codec), codec=codec,
                                                   options=dict(c.options, compress=codec), golden=None))
    names = [c.name for c in out]
    assert len(set(names)) == len(names), "two configurations of the same name"
    order = {m: k for k, m in enumerate(dict.fromkeys(c.method for c in bases))}   # the table's rows: method x
    return tuple(sorted(out, key=lambda c: (order[c.method], c.workers, c.dtype != "float64", c.codec != "none")))


def configurations(include=(), exclude=(), methods=()):
    """The configurations, those whose name matches a regular expression of ``include`` (all
    when empty) and none of ``exclude`` (``re.search``, as ONNX's backend tests), of the
    ``methods`` given (all when empty)."""
    try:
        inc, exc = [re.compile(p) for p in include], [re.compile(p) for p in exclude]
    except re.error as e:
        raise RefsgdError(f"a pattern of --include/--exclude is not a regular expression ({e})") from None
    known = list(dict.fromkeys(c.method for c in _all()))
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise RefsgdError(f"no configuration of {unknown[0]}{did_you_mean(unknown[0], known)}; the methods: "
                          f"{', '.join(sorted(known))}")
    return [c for c in _all() if (not inc or any(p.search(c.name) for p in inc))
            and not any(p.search(c.name) for p in exc) and (not methods or c.method in methods)]


class References:
    """The expected traces, rendered on demand into ``folder`` (one file per configuration,
    ``<name>.h5``), with the :class:`Setup` each gives a backend."""

    def __init__(self, folder):
        self.folder = folder
        self._setups = {}

    def path(self, configuration):
        return os.path.join(self.folder, f"{configuration.name}.h5")

    def setup(self, configuration):
        """The Setup of ``configuration``, rendering its expected trace first if need be (a fresh
        copy of every array, so that a backend may change what it is given)."""
        if configuration.name not in self._setups:
            given = options.from_keywords(dict(configuration.options, algo=configuration.method))
            g = golden.render(given, configuration.workers, configuration.steps)
            g.write(self.path(configuration))
            f = g.fields
            self._setups[configuration.name] = Setup(
                method=configuration.method, workers=configuration.workers, steps=configuration.steps,
                dtype=g.net.dtype.name, config=g.config, model_spec=g.net.spec,
                layout=[(n, o, tuple(s)) for n, o, s in g.net.layout], w0=f["w0"], lr=f["lr"],
                x_train=g.data.x_train, y_train=g.data.y_train, state_names=list(f["states"]),
                state_shapes={k: v.shape[2:] for k, v in f["states"].items()})
        s = self._setups[configuration.name]
        return dataclasses.replace(s, config=dict(s.config), model_spec=copy.deepcopy(s.model_spec), w0=s.w0.copy(),
                                   lr=s.lr.copy(), x_train=s.x_train.copy(), y_train=s.y_train.copy(),
                                   state_names=list(s.state_names))


@dataclasses.dataclass
class Outcome:
    """One configuration's result: ``status`` (pass, fail, not declared), ``message`` (the first
    difference or the error, one line), ``where`` (the first difference: step, worker, array,
    index, got, expected; None otherwise), ``lines`` (verify's report, or the traceback) and the
    seconds the backend took."""

    configuration: Configuration
    status: str
    message: str = ""
    where: dict = None
    lines: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self):
        return self.status == PASS


def run(backend, configuration, references, out_path, name=None):
    """Run ``backend`` (a class, or any callable returning a backend) through ``configuration``,
    write its trace to ``out_path`` and compare it with the expected one: an :class:`Outcome`."""
    name = name or _name_of(backend)
    instance = instantiate(backend, name)
    if not declared(instance, name, [configuration], METHODS):
        return Outcome(configuration, NOT_DECLARED)
    s = references.setup(configuration)
    start, t = time.perf_counter(), None
    try:
        instance.setup(s)
        with trace.Writer(out_path, like=references.path(configuration), source=name) as w:
            for t in range(s.steps):
                losses = instance.step(t, float(w.lr[t]), w.batches[t].copy())
                w.step(loss=losses, states=_numpy(instance.state()))
    except (Stopped, KeyboardInterrupt):  # Ctrl-C, SIGTERM: the run is interrupted, the backend did not fail
        raise
    except Exception as e:  # the backend's own error, or an array of the wrong shape or dtype
        at = "setup" if t is None else f"step {t}"
        return Outcome(configuration, FAIL, f"{at}: {type(e).__name__}: {e}",
                       lines=traceback.format_exc().splitlines(), seconds=time.perf_counter() - start)
    seconds = time.perf_counter() - start
    rtol, atol = configuration.tolerances
    c = trace.compare(out_path, references.path(configuration), rtol=rtol, atol=atol)
    if c.ok:
        return Outcome(configuration, PASS, lines=c.lines, seconds=seconds)
    return failed(configuration, c, out_path, references.path(configuration), seconds)


def failed(configuration, comparison, mine, expected, seconds=0.0):
    """The Outcome of a failed comparison of the trace ``mine`` with ``expected``: the first
    difference named by layer and element, with what refsgd.conformance.diagnose adds."""
    try:
        summary, extra = diagnose.lines(mine, expected, *configuration.tolerances, comparison.where)
    except (OSError, ValueError, KeyError, TypeError, RefsgdError):  # a trace too damaged to say more of
        summary, extra = None, []
    return Outcome(configuration, FAIL, summary or _first(comparison), comparison.where, extra + comparison.lines,
                   seconds)


def _name_of(backend):
    return getattr(backend, "__qualname__", type(backend).__name__)


def _numpy(states):
    """The backend's states as NumPy arrays (a framework's tensors convert through np.asarray)."""
    if not isinstance(states, dict):
        raise RefsgdError(f"state() returned {type(states).__name__}, expected a dict {{name: (N, ...) array}}")
    return {k: np.asarray(v) for k, v in states.items()}


def _first(c):
    """The first difference in one line: ``step 2, worker 0, x[17]: got ..., expected ...``."""
    w = c.where
    if w is not None:
        index = "" if w["index"] is None else f"[{', '.join(map(str, np.atleast_1d(w['index'])))}]"
        return f"step {w['step']}, worker {w['worker']}, {w['array']}{index}: got {w['a']!r}, expected {w['b']!r}"
    return next((line for line in c.lines if line.startswith("MISMATCH")), c.lines[-1]).replace("MISMATCH", "mismatch")
