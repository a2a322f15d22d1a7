"""``convert(kind, src, out)``: a published distribution into the HDF5 layout, by its kind."""

from __future__ import annotations

from refsgd.errors import RefsgdError

from .sources import KINDS
from .mnist import convert_mnist
from .cifar import convert_cifar


def convert(kind, src, out) -> str:
    """Convert a standard distribution: ``kind`` in ``KINDS``; returns ``out``."""
    if kind in ("mnist", "fashion-mnist"):
        return convert_mnist(src, out, kind)
    if kind in ("cifar10", "cifar100"):
        return convert_cifar(src, out, kind)
    raise RefsgdError(f"unknown dataset kind {kind!r}, expected one of {', '.join(KINDS)}.")
