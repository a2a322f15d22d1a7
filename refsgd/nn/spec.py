"""Model specs: small TOML files that describe a network, and :func:`load_model`.

A spec (see ``models/README.md``, installed as ``refsgd/models/README.md``, for the full format)::

    name = "mnist_mlp"
    description = "..."
    source = "Li et al. 2018 (Pipe-SGD), section 4"
    input = [1, 28, 28]     # per-sample (C, H, W)
    classes = 10
    layers = [
      { type = "flatten" },
      { type = "dense", units = 500 },
      { type = "relu" },
      { type = "dense", units = 10 },
    ]

Layer types and their keys: ``dense`` (units), ``conv`` (filters, kernel = 3), ``maxpool``
(size = 2), ``relu``, ``leaky_relu`` (slope = 0.01), ``flatten``. Every layer also takes an
optional ``name`` (default: type prefix and a counter, e.g. ``conv2``, ``fc1``) and
``frozen = true`` (parameters kept at their initial values: zero gradient).
"""

import os
from importlib.resources import files
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import numpy as np

from refsgd.errors import RefsgdError
from refsgd.nn.layers import LAYER_TYPES, _is_int
from refsgd.nn.network import Network

_PREFIX = {"dense": "fc", "conv": "conv", "maxpool": "pool", "relu": "relu",
           "leaky_relu": "lrelu", "flatten": "flatten"}
_LAYER_KEYS = {"dense": {"units"}, "conv": {"filters", "kernel"}, "maxpool": {"size"},
               "relu": set(), "leaky_relu": {"slope"}, "flatten": set()}
_TOP_KEYS = {"name", "description", "source", "notes", "input", "classes", "layers"}


def _models_dir():
    """The folder of the bundled specs (repo's models/, installed as the package refsgd.models)."""
    try:
        return files("refsgd.models")
    except ModuleNotFoundError:  # running from a source tree without installing
        return Path(__file__).resolve().parents[2] / "models"


def available_models():
    """Names of the bundled model specs."""
    d = _models_dir()
    return sorted(p.name[:-5] for p in d.iterdir() if p.name.endswith(".toml"))


def read_spec(name_or_path):
    """Parse a spec given by bundled name or by path; returns (spec dict, source string)."""
    path = None
    if name_or_path.endswith(".toml") or os.sep in name_or_path or os.path.exists(name_or_path):
        path = name_or_path
        if not os.path.isfile(path):
            raise RefsgdError(f"model spec {path}: no such file")
        with open(path, "rb") as f:
            text = f.read()
        source = os.path.abspath(path)
    else:
        res = _models_dir() / f"{name_or_path}.toml"
        if not res.is_file():
            raise RefsgdError(
                f"unknown model {name_or_path!r}; bundled models: {', '.join(available_models())} "
                "(or give the path of a .toml spec)")
        text = res.read_bytes()
        source = f"refsgd bundled model {name_or_path}"
    try:
        spec = tomllib.loads(text.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise RefsgdError(f"model spec {path or name_or_path}: not valid TOML: {e}") from None
    return spec, source


def build(spec, dtype=np.float32, where="model spec"):
    """Build a :class:`Network` from a parsed spec dict, validating every field."""
    unknown = set(spec) - _TOP_KEYS
    if unknown:
        raise RefsgdError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; "
                          f"allowed: {', '.join(sorted(_TOP_KEYS))}")
    for key in ("input", "classes", "layers"):
        if key not in spec:
            raise RefsgdError(f"{where}: missing '{key}'")
    name = spec.get("name", "model")
    inp = spec["input"]
    if (not isinstance(inp, list) or len(inp) not in (1, 3)
            or not all(_is_int(v) and v > 0 for v in inp)):
        raise RefsgdError(f"{where}: 'input' must be [C, H, W] or [D] of positive integers, got {inp!r}")
    classes = spec["classes"]
    if not _is_int(classes) or classes < 2:
        raise RefsgdError(f"{where}: 'classes' must be an integer >= 2, got {classes!r}")
    if not isinstance(spec["layers"], list) or not spec["layers"]:
        raise RefsgdError(f"{where}: 'layers' must be a non-empty list of tables")

    counters = {}
    layers = []
    names = set()
    for i, entry in enumerate(spec["layers"]):
        if not isinstance(entry, dict) or "type" not in entry:
            raise RefsgdError(f"{where}: layer {i + 1} must be a table with a 'type'")
        kind = entry["type"]
        if kind not in LAYER_TYPES:
            raise RefsgdError(f"{where}: layer {i + 1} has unknown type {kind!r}; "
                              f"known types: {', '.join(LAYER_TYPES)}")
        extra = set(entry) - _LAYER_KEYS[kind] - {"type", "name", "frozen"}
        if extra:
            raise RefsgdError(f"{where}: layer {i + 1} ({kind}) has unknown key(s) "
                              f"{', '.join(sorted(extra))}; allowed: "
                              f"{', '.join(sorted(_LAYER_KEYS[kind] | {'name', 'frozen'}))}")
        counters[kind] = counters.get(kind, 0) + 1
        lname = entry.get("name", f"{_PREFIX[kind]}{counters[kind]}")
        if lname in names:
            raise RefsgdError(f"{where}: two layers are named {lname!r}")
        names.add(lname)
        kwargs = {k: v for k, v in entry.items() if k in _LAYER_KEYS[kind]}
        layer = LAYER_TYPES[kind](lname, **kwargs)
        frozen = entry.get("frozen", False)
        if not isinstance(frozen, bool):
            raise RefsgdError(f"{where}: layer {lname}: 'frozen' must be true or false")
        layer.frozen = frozen
        layers.append(layer)
    return Network(name, tuple(inp), classes, layers, dtype=dtype, spec=spec)


def load_model(name_or_path, dtype=np.float32):
    """A :class:`Network` from a bundled spec name (``mnist_mlp``) or the path of a .toml file.

    ``dtype`` (float32 or float64) is the dtype of the weights, activations and gradients.
    Raises :class:`refsgd.RefsgdError` with a clear message for an unknown name, a file that
    does not parse, or a spec whose layers do not fit together.
    """
    spec, source = read_spec(name_or_path)
    try:
        net = build(spec, dtype=dtype, where=f"model {spec.get('name', name_or_path)}")
    except RefsgdError:
        raise
    net.source = source
    return net
