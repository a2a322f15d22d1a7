"""Regenerate data/digits.h5, the small data set embedded in refsgd.

The source is the UCI "Optical Recognition of Handwritten Digits" data set
(E. Alpaydin, C. Kaynak, 1998, DOI 10.24432/C50P49, CC BY 4.0) in the 8x8
form shipped with scikit-learn (1797 images, values 0..16, 10 classes).

scikit-learn is needed only to run this script, never to use refsgd; install
it in a separate environment, then from the repository root:

    PYTHONPATH=. python data/prepare_digits.py

Split (deterministic): the 1797 images are shuffled with
``np.random.Generator(np.random.PCG64(0)).permutation(1797)``; the first 1500
of the shuffled order are the training set and the last 297 the test set.
Images are stored as uint8 (N, 1, 8, 8) with their original values 0..16.
"""

import os

import numpy as np
import sklearn
from sklearn.datasets import load_digits

from refsgd import datasets  # refsgd installed, or PYTHONPATH=. as above

HERE = os.path.dirname(os.path.abspath(__file__))
N_TEST = 297


def main(out=os.path.join(HERE, "digits.h5")):  # noqa: B008 a constant path, computed once
    bunch = load_digits()
    images = np.asarray(bunch.images)
    labels = np.asarray(bunch.target, dtype=np.int64)
    if images.shape != (1797, 8, 8) or labels.shape != (1797,):
        raise SystemExit(f"unexpected digits data: images {images.shape}, labels {labels.shape}")
    if not np.array_equal(images, np.round(images)) or images.min() < 0 or images.max() > 16:
        raise SystemExit("unexpected digits data: pixel values are not integers in 0..16")
    images = images.astype(np.uint8)[:, None, :, :]

    perm = np.random.Generator(np.random.PCG64(0)).permutation(images.shape[0])
    train, test = perm[:-N_TEST], perm[-N_TEST:]

    provenance = (
        'UCI Machine Learning Repository, "Optical Recognition of Handwritten Digits" '
        "(8x8 version, 1797 images with values 0..16), as shipped by scikit-learn "
        f"{sklearn.__version__} (sklearn.datasets.load_digits, file digits.csv.gz); split by "
        "data/prepare_digits.py: permutation np.random.Generator(np.random.PCG64(0))"
        f".permutation(1797), first {images.shape[0] - N_TEST} train, last {N_TEST} test."
    )
    licence = "CC BY 4.0 (Creative Commons Attribution 4.0 International)."
    citation = (
        'E. Alpaydin, C. Kaynak, "Optical Recognition of Handwritten Digits", UCI Machine '
        "Learning Repository, 1998, https://doi.org/10.24432/C50P49"
    )
    datasets.write(out, "digits", images[train], labels[train], images[test], labels[test],
                   10, provenance, licence, citation)
    print(datasets.info(out))


if __name__ == "__main__":
    main()
