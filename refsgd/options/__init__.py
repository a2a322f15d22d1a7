"""Every option of a run, defined once: the table :data:`OPTIONS`, and what is derived from it.

Each :class:`Option` gives its name (``weight_decay``, the flag ``--weight-decay``, the keyword
``weight_decay=``), its :class:`Kind` (a Python type and range: :class:`Int`, :class:`Float`,
:class:`Choice`, :class:`Flag`, :class:`Text`), its default and each method's own default, its help
text, its group on the command line, the methods it applies to (``ALL`` or a tuple) and what a run
records of it (``TRAJECTORY``: recorded and compared by ``refsgd verify``; ``ROUNDING``: recorded and
kept by a resume, but changing only the roundings, so not compared by verify; ``RUN_ONLY``: recorded,
never compared; None: neither). Derived from the table:

* the argparse options of ``refsgd train``, ``golden``, ``bench ...`` and ``reproduce``
  (:mod:`refsgd.cli.cmdoptions`);
* :func:`from_keywords`, the check of ``refsgd.train(**kw)``'s Python values (no argparse);
* :class:`Config`, the frozen configuration of a run (one attribute per option, named as the
  option); :func:`resolve` refuses the options given that do not apply to the method and fills
  the method's defaults; :func:`config` is what every output records (metrics, traces, golden
  files, checkpoints); :func:`trajectory_keys` is what ``refsgd verify`` compares;
* ``COMMON``, ``RUN``, ``APPLIES``, ``DEFAULTS``, ``METHOD_DEFAULTS``.

A new option is one entry of ``OPTIONS`` in refsgd/options/table.py, and its name in a command's
layout in refsgd/cli/cmdoptions.py to show it on that command line.

Defaults come from the papers where the method has its own: LAGA's momentum methods use
gamma = 0.9, DC-S3GD mu = 0.9, and SSGD-NAG, PP-ASGD and ASGD mu = 0.99 with a learning rate
lambda that multiplies a *sum* of gradients over samples, sub-batches and workers (Sato et al.
2017, Algorithms 1 and 4), hence a small default.

The package: :mod:`refsgd.options.kinds` (the types and ranges), :mod:`refsgd.options.table`
(``OPTIONS``), and here what derives from them. No MPI and no argparse here: ``verify``,
``golden`` and the methods use it.
"""

import dataclasses
import typing

from refsgd import registry
from refsgd.errors import RefsgdError, did_you_mean
from refsgd.options.kinds import Choice, Every, Flag, Float, Int, Kind, Text  # noqa: F401 -- the table's words
from refsgd.options.table import (ALL, METHODS, OPTIONS, ROUNDING, RUN_ONLY, SCHEDULE_HELP,  # noqa: F401
                                  TRAJECTORY, Option)

BY_NAME = {o.name: o for o in OPTIONS}
_METHOD_OPTIONS = [o for o in OPTIONS if o.methods is not ALL]

#: options of every method that shape its trajectory
COMMON = tuple(o.name for o in OPTIONS if o.methods is ALL and o.record == TRAJECTORY)

#: options of a run that do not change its trajectory (recorded, never compared by verify)
RUN = tuple(o.name for o in OPTIONS if o.methods is ALL and o.record == RUN_ONLY)

#: method -> the options that apply to it besides COMMON
APPLIES = {m: tuple(o.name for o in _METHOD_OPTIONS if m in o.methods) for m in METHODS}

#: every method option, with its default where the method has none of its own
DEFAULTS = {o.name: o.default for o in _METHOD_OPTIONS}

#: method -> its own defaults (the papers')
METHOD_DEFAULTS = {m: {o.name: o.per_method[m] for o in OPTIONS if m in o.per_method} for m in METHODS}
METHOD_DEFAULTS = {m: d for m, d in METHOD_DEFAULTS.items() if d}

#: the methods whose backward pass has a request in flight, tested between layers unless --no-poll
POLLED = tuple(m.name for m in registry.METHODS.values() if m.polled)


# ---------------------------------------------------------------------------- the configuration of a run
def _as_dict(self):
    return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


#: The configuration of a run: frozen, one typed attribute per option of OPTIONS (``cfg.lr``,
#: ``cfg.momentum``, ...), ``Config()`` being ``refsgd train`` without flags. None means "the
#: method's default" until :func:`resolve` fills it; ``cfg.method_options()`` is the per-method
#: part (the options that apply to ``cfg.algo``). Generated from the table, so that an option is
#: defined once.
Config = dataclasses.make_dataclass(
    "Config", [(o.name, o.kind.type if o.cli_default is not None else typing.Optional[o.kind.type],
                dataclasses.field(default=o.cli_default)) for o in OPTIONS],
    frozen=True,
    namespace={"asdict": _as_dict,
               "method_options": lambda self: {k: getattr(self, k) for k in APPLIES[self.algo]},
               "__doc__": "The frozen configuration of a run: one attribute per option of "
                          "refsgd.options.OPTIONS (see there)."})
Config.__module__ = __name__  # pickle finds it here (make_dataclass would name another module)


def from_keywords(kw):
    """The Config of ``refsgd.train``'s keywords, each Python value checked by its option's kind
    (an int stays an int, ``lr="0.1"`` is refused); unknown keywords get a did-you-mean. A flag
    given False where its default is None (a method flag) counts as not given. No argparse."""
    values = {}
    for key, v in kw.items():
        o = BY_NAME.get(key)
        if o is None:
            raise RefsgdError(f"unknown keyword {key!r}{did_you_mean(key, BY_NAME)}; the keywords are the options "
                              "of `refsgd train --help`, with - written _")
        if v is None or (v is False and o.cli_default is None):
            continue
        if key == "timeline" and v is True:
            v = o.const
        try:
            values[key] = o.kind.check(v)
        except ValueError as e:
            raise RefsgdError(f"{key}={v!r}: {e}") from None
    return Config(**values)


def default(algo, name):
    """The default of option ``name`` for method ``algo`` (its own, else the table's)."""
    o = BY_NAME[name]
    return o.per_method.get(algo, o.default)


def lr_meaning(algo):
    """What --lr multiplies in ``algo`` (shown by the header)."""
    return registry.method(algo).lr_meaning


def resolve(cfg):
    """Refuse the options given that do not apply to ``cfg.algo``, and fill the others' defaults
    (an option counts as given when it is not None; the command line's defaults are None).
    Returns a new Config."""
    algo = cfg.algo
    m = registry.method(algo)
    applies = APPLIES[algo]
    given = [k for k in DEFAULTS if k not in applies and getattr(cfg, k) not in (None, False)]
    if given == ["allreduce"] and m.no_allreduce:
        raise RefsgdError(f"--allreduce does not apply to --algo {algo}: {m.no_allreduce}")
    if given:
        flags = ", ".join(BY_NAME[k].flags for k in given)
        own = ", ".join(BY_NAME[k].flags for k in applies) or "none"
        where = "; ".join(f"{BY_NAME[k].flags} applies to --algo {', '.join(a for a in APPLIES if k in APPLIES[a])}"
                          for k in given)
        raise RefsgdError(f"{flags} {'does' if len(given) == 1 else 'do'} not apply to --algo {algo}"
                          f"{m.hint} ({where}; the options of {algo}: {own})")
    if "dc_ms_decay" in applies and cfg.dc_ms_decay is not None and not cfg.dc_adaptive:
        raise RefsgdError("--dc-ms-decay is the decay of MeanSquare in the adaptive lambda: it needs --dc-adaptive")
    # those that do not apply too, so that no code path meets a None
    filled = {k: default(algo, k) for k in (*DEFAULTS, "lr", "batch") if getattr(cfg, k) is None}
    if "threads" in applies and m.micro_batches == registry.TAU:  # --threads G: the G sub-batches of a step
        # in G threads (Sato Alg. 4), i.e. --tau G
        G, tau = cfg.threads, cfg.tau
        if G is not None and tau not in (1, G):
            raise RefsgdError(f"--threads {G} and --tau {tau}: {algo} computes its --tau sub-batches of a step "
                              "in as many threads (Sato Alg. 4), so --threads is --tau; give one of them")
        filled["threads"] = filled["tau"] = G or tau
    return dataclasses.replace(cfg, **filled)


def config(cfg, extra=None, run=True):
    """The configuration a run records: COMMON, RUN (unless not ``run``: a golden file), the dict
    ``extra`` and the method's own options."""
    run_keys = tuple(k for k in RUN if k != "poll" or cfg.algo in POLLED) if run else ()
    out = {k: getattr(cfg, k) for k in COMMON + run_keys}
    if out.get("iterations"):   # --iterations N ends the run: --epochs' default did not
        out["epochs"] = None
    out.update(extra or {})
    out.update((k, getattr(cfg, k)) for k in APPLIES[cfg.algo])
    return out


def trajectory_keys(algo, config=None):
    """The configuration entries that shape ``algo``'s trajectory (what verify compares); given
    the recorded ``config`` (a dict), less those its other entries make irrelevant (dcasgd's
    MeanSquare decay without the adaptive lambda)."""
    keys = set(COMMON) | {k for k in APPLIES.get(algo, ()) if BY_NAME[k].record == TRAJECTORY}
    m = registry.METHODS.get(algo)
    if m is not None and m.micro_batches == registry.TAU and "threads" in m.options:  # its threads are its tau
        # sub-batches: tau says it (and golden files made before)
        keys.discard("threads")
    if config is not None and not config.get("dc_adaptive"):
        keys.discard("dc_ms_decay")
    return keys


#: the options that change only the roundings of the trajectory (verify does not compare them)
ROUNDING_ONLY = {o.name for o in OPTIONS if o.record == ROUNDING}


def one_worker_note(algo, world):
    """Why a parameter-server method on 2 ranks (a server and one worker) is plain SGD, or None."""
    m = registry.METHODS.get(algo)
    return m.one_worker if m is not None and m.one_worker and world == 2 else None
