"""Image-classification data sets: one HDF5 layout, converters, and the sampler.

Modules: :mod:`.layout` (read, write, describe the HDF5 layout), :mod:`.sources`, :mod:`.mnist`,
:mod:`.cifar` and :mod:`.kinds` (the converters), :mod:`.cache` and :mod:`.download` (``refsgd data
download``: the cache folder, the download), :mod:`.sampler`. This package re-exports them.

HDF5 layout
-----------
Every data set refsgd reads is a single HDF5 file with this layout::

    /train/images   uint8, shape (N, C, H, W)
    /train/labels   int64, shape (N,)
    /test/images    uint8, shape (M, C, H, W)
    /test/labels    int64, shape (M,)

    root attributes
      format          str    "refsgd-dataset"
      format_version  int    1
      name            str    e.g. "mnist", "cifar10", "digits"
      num_classes     int    labels lie in [0, num_classes)
      image_shape     int array [C, H, W]
      mean            float64 array of length C, per-channel mean of the
                      training images, in pixel units
      std             float64 array of length C, per-channel (population,
                      ddof=0) standard deviation of the training images, in
                      pixel units; a channel with zero variance stores 1.0
      provenance      str    where the data came from (source file names)
      licence         str
      citation        str

MNIST and Fashion-MNIST have C=1 and 28x28 images, CIFAR-10/100 C=3 and 32x32,
the embedded ``digits`` set 1x8x8 (values 0..16).  Files written by
:func:`write` store the image and label arrays gzip-compressed; any layout
choice h5py can read (chunked or not, compressed or not) is accepted by
:func:`load`.  Label arrays of another integer dtype are accepted and
converted to int64.  ``provenance``, ``licence`` and ``citation`` are
descriptive; when a file written by another tool lacks them they read as "".

Normalisation
-------------
:func:`load` returns ``x = (img - mean[c]) / std[c]`` for every pixel of
channel ``c``, using the ``mean``/``std`` attributes (i.e. statistics of the
training images, computed when the file was written).  The expression is
evaluated in float64 and then rounded once to the requested dtype, so it is
bit-reproducible.

Sampler
-------
Two pure functions (no hidden state: a resumed run reproduces the same
batches from ``seed`` and the position alone):

* :func:`epoch_batches` -- sampling without replacement, one permutation per
  epoch shared by all ranks, split into equal contiguous shards.
* :func:`randpick` -- sampling with replacement (the ``randpick`` of PP-ASGD),
  an independent stream per (seed, rank, step).

The exact formulas are given in their docstrings.

Converters
----------
:func:`convert` turns the standard distributions of MNIST, Fashion-MNIST
(IDX files, gzip-compressed or not), CIFAR-10 and CIFAR-100 (python pickle
batches, a directory or the original ``.tar.gz``) into the layout above.
Pickle files can run arbitrary code when loaded: only convert CIFAR files
that come from a trusted source.

Downloads
---------
:func:`download.download` (``refsgd data download NAME``) fetches MNIST, Fashion-MNIST or
CIFAR-10 from its canonical address (or a mirror) into the cache folder
(:func:`download.cache_dir`), checks the published sizes and MD5s, and converts the files
with :func:`convert` to ``<cache>/<name>.h5``, which :func:`load` (``--data mnist``) finds by
name; :func:`download.cached` says whether it is there.

All errors caused by the user's input raise :class:`refsgd.RefsgdError` with a
one-sentence message naming the file and what is wrong.
"""

from .layout import (  # noqa: F401
    FORMAT,
    FORMAT_VERSION,
    Dataset,
    _embedded_path,
    load,
    check_fits,
    write,
    info,
)
from .sources import (  # noqa: F401
    KINDS,
    _PUBLISHED_MD5,
)
from .mnist import (  # noqa: F401
    read_idx,
    _md5,
    convert_mnist,
)
from .cifar import (  # noqa: F401
    convert_cifar,
)
from .kinds import (  # noqa: F401
    convert,
)
# the module, not its function of the same name: datasets.download.download(...), .cached(...)
from . import download  # noqa: F401
from .sampler import (  # noqa: F401
    epoch_batches,
    randpick,
)

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "KINDS",
    "Dataset",
    "load",
    "check_fits",
    "write",
    "read_idx",
    "convert_mnist",
    "convert_cifar",
    "convert",
    "info",
    "download",
    "epoch_batches",
    "randpick",
]
