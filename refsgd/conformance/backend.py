"""The interface an implementation under test writes: :class:`Backend`, and the :class:`Setup`
it is given. No NumPy here: the pytest plugin imports this package at every pytest start."""

import dataclasses
import importlib
import importlib.util
import os
import sys

from refsgd.errors import RefsgdError, Stopped, did_you_mean


@dataclasses.dataclass(frozen=True)
class Setup:
    """Everything a backend needs to set up one configuration (arrays are NumPy arrays, in the
    configuration's dtype unless said otherwise; docs/implementers.md defines each)."""

    method: str         # the --algo name, e.g. "ssgd"
    workers: int        # N, the world size (parameter servers included: dcasgd's and ps-sync's rank 0)
    steps: int          # T, the number of steps the suite will ask for
    dtype: str          # "float64" or "float32": of every array and every computation
    config: dict        # the hyperparameters: lr, momentum, tau, batch, weight_decay, compress, ... as a trace records them
    model_spec: dict    # the network: {"input": [C, H, W], "classes": K, "layers": [...]}
    layout: list        # [(tensor name, offset, shape), ...]: where each tensor lies in the flat vector
    w0: object          # (d,) the initial weights, the same on every worker
    lr: object          # (T,) float64: the rate of every step (dcs3gd's weight decay needs its maximum)
    x_train: object     # (n, C, H, W) the normalised training images
    y_train: object     # (n,) int64 the training labels
    state_names: list   # the arrays state() returns, in the trace's order
    state_shapes: dict  # name -> the shape of one worker's array: (d,), or pipe-sgd's g_sum (K, d)


class Backend:
    """Subclass this (or write a class with the same methods) to check an implementation with
    ``refsgd conformance run module:Class`` or ``pytest --pyargs refsgd.conformance --backend
    module:Class``. The suite makes one instance per configuration and calls, in this order::

        setup(s)                       s: a Setup
        for t in range(s.steps):
            losses = step(t, lr, batches)      batches: (N, tau, b) int64 training-set indices of
                                               every worker's micro-batches of step t (a row of -1:
                                               a parameter server, no batch); lr: s.lr[t]
            state()                    -> {name: (N, ...) array} for every name of s.state_names,
                                          each worker's array after step t

    ``step`` returns each worker's loss at step t (N numbers; NaN on a parameter server), the mean
    over its micro-batches of their mean cross-entropy, at the weights its gradient was taken at.
    How the step gets there (threads, messages, a real cluster) is the backend's business: only
    the numbers are compared, with the reference's at rtol/atol (float64: 1e-10/1e-12).

    Declare what you implement: ``methods`` (the --algo names), ``dtypes``, ``codecs`` (the
    ``compress`` values; "none" is no compression) and ``world_sizes`` (None: any). Override
    :meth:`supports` for a finer choice (it sees the configuration's options).
    """

    methods = ()
    dtypes = ("float64",)
    codecs = ("none",)
    world_sizes = None

    def supports(self, configuration):
        """Whether this backend declares ``configuration`` (a refsgd.conformance.Configuration)."""
        return (configuration.method in self.methods and configuration.dtype in self.dtypes
                and configuration.codec in self.codecs
                and (self.world_sizes is None or configuration.workers in self.world_sizes))

    def setup(self, s):
        raise NotImplementedError

    def step(self, t, lr, batches):
        raise NotImplementedError

    def state(self):
        raise NotImplementedError


def load_backend(text):
    """The backend class named by ``module.path:Class`` (importable) or ``path/to/file.py:Class``
    (a file, imported with its folder first on sys.path, as Python runs a script); RefsgdError
    naming what is wrong otherwise."""
    where, sep, name = text.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise RefsgdError(f"backend {text!r}: expected module:Class or path/to/file.py:Class")
    try:
        if where.endswith(".py") or os.sep in where:
            if not os.path.isfile(where):
                raise RefsgdError(f"backend {text!r}: no such file {where}")
            folder = os.path.dirname(os.path.abspath(where))
            if folder not in sys.path:
                sys.path.insert(0, folder)
            spec = importlib.util.spec_from_file_location(
                f"refsgd_backend_{os.path.splitext(os.path.basename(where))[0]}", where)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except RefsgdError:
        raise
    except Exception as e:  # anything the user's module raises on import, in one line
        raise RefsgdError(f"backend {text!r}: importing {where} raised {type(e).__name__}: {e}") from None
    cls = getattr(module, name, None)
    if cls is None:
        raise RefsgdError(f"backend {text!r}: {where} has no {name}")
    if not callable(cls):
        raise RefsgdError(f"backend {text!r}: {name} is not a class")
    return cls


#: what a backend must have: the suite calls them in this order
INTERFACE = ("supports", "setup", "step", "state")


def instantiate(backend, name):
    """One instance of ``backend`` (a class, or any callable returning a backend), checked for the
    interface: RefsgdError naming what is wrong (its constructor raised, it returned None, a method
    of :data:`INTERFACE` is missing or is Backend's own, which raises NotImplementedError)."""
    try:
        instance = backend()
    except (Stopped, KeyboardInterrupt, SystemExit):  # an interrupt is the run's end, not the backend's failure
        raise
    except Exception as e:  # the implementer's constructor
        raise RefsgdError(f"backend {name}: making an instance raised {type(e).__name__}: {e}") from None
    if instance is None:
        raise RefsgdError(f"backend {name}: calling it returned None, not a backend (a class with "
                          f"{', '.join(INTERFACE)})")
    missing = [m for m in INTERFACE if not callable(getattr(instance, m, None))]
    if missing:
        raise RefsgdError(f"backend {name}: {type(instance).__name__} has no {', '.join(f'{m}()' for m in missing)} "
                          "(subclass refsgd.conformance.Backend, or write them)")
    inherited = [m for m in ("setup", "step", "state") if getattr(type(instance), m, None) is getattr(Backend, m)]
    if inherited:
        raise RefsgdError(f"backend {name}: {type(instance).__name__} does not implement "
                          f"{', '.join(f'{m}()' for m in inherited)} (Backend's own raise NotImplementedError)")
    return instance


def declared(instance, name, configurations, methods):
    """The configurations of ``configurations`` that ``instance`` declares (its ``supports()``);
    RefsgdError when its ``methods`` names a method that does not exist (with a did-you-mean) or
    ``supports()`` raises. ``methods``: the names of every method."""
    own = getattr(instance, "methods", ())
    if isinstance(own, str):
        raise RefsgdError(f"backend {name}: methods = {own!r} is a string; give a tuple of --algo names, "
                          f"e.g. ({own!r},)")
    for m in own or ():
        if m not in methods:
            raise RefsgdError(f"backend {name}: its methods name {m!r}, which is no method of refsgd"
                              f"{did_you_mean(str(m), methods)}; the methods: {', '.join(methods)}")
    out = []
    for c in configurations:
        try:
            if instance.supports(c):
                out.append(c)
        except (Stopped, KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # the implementer's supports()
            raise RefsgdError(f"backend {name}: supports({c.name}) raised {type(e).__name__}: {e}") from None
    return out
