"""The published data sets :func:`refsgd.datasets.convert` understands: their kinds, titles,
licences and citations, and the MD5s of the published MNIST and Fashion-MNIST files."""

from __future__ import annotations

#: The kinds :func:`convert` understands.
KINDS = ("mnist", "fashion-mnist", "cifar10", "cifar100")

#: the MD5s of the published gzipped IDX files (their sites, and torchvision's checks), to tell
#: MNIST's files from Fashion-MNIST's, which have the same names and shapes
_PUBLISHED_MD5 = {
    "mnist": {"train_images": "f68b3c2dcbeaaa9fbdd348bbdeb94873", "train_labels": "d53e105ee54ea40749a09fcbcd1e9432",
              "test_images": "9fb629c4189551a2d022fa330f9573f3", "test_labels": "ec29112dd5afa0611ce80d1b7f02629c"},
    "fashion-mnist": {"train_images": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                      "train_labels": "25c81989df183df01b3e8a0aad5dffbe",
                      "test_images": "bef4ecab320f06d8554ea6380940ec79",
                      "test_labels": "bb300cfdad3c16e7a12a480ee83cd310"},
}

#: the published sizes in bytes of the same files (a download that ends short, or runs on, is told
#: from one that is damaged before its MD5 is computed)
_PUBLISHED_SIZE = {
    "mnist": {"train_images": 9912422, "train_labels": 28881, "test_images": 1648877, "test_labels": 4542},
    "fashion-mnist": {"train_images": 26421880, "train_labels": 29515, "test_images": 4422102,
                      "test_labels": 5148},
}

#: CIFAR-10's python tarball: its name, published size and MD5 (the CIFAR page's, torchvision's check)
_CIFAR10_TARBALL = ("cifar-10-python.tar.gz", 170498071, "c58f30108f718f92721af3b95e74349a")

#: where `refsgd data download` fetches each distribution, in the order tried: torchvision's addresses
#: (MNIST: the PyTorch project's S3 copy first, as torchvision tries it: LeCun's page is often unreachable)
_ADDRESSES = {
    "mnist": ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"),
    "fashion-mnist": ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",),
    "cifar10": ("https://www.cs.toronto.edu/~kriz/",),
}

#: the number of training and test images of each complete distribution
_SPLITS = {"mnist": (60000, 10000), "fashion-mnist": (60000, 10000), "cifar10": (50000, 10000)}

_META = {
    "mnist": {
        "title": "MNIST",
        "url": "http://yann.lecun.com/exdb/mnist/",
        "licence": (
            "No explicit licence is stated by the authors; widely redistributed for "
            "research use (commonly listed as CC BY-SA 3.0)."
        ),
        "citation": (
            'Y. LeCun, C. Cortes, C. J. C. Burges, "The MNIST database of handwritten '
            'digits", http://yann.lecun.com/exdb/mnist/'
        ),
    },
    "fashion-mnist": {
        "title": "Fashion-MNIST",
        "url": "https://github.com/zalandoresearch/fashion-mnist",
        "licence": "MIT (Copyright 2017 Zalando SE).",
        "citation": (
            'H. Xiao, K. Rasul, R. Vollgraf, "Fashion-MNIST: a Novel Image Dataset for '
            'Benchmarking Machine Learning Algorithms", arXiv:1708.07747, 2017.'
        ),
    },
    "cifar10": {
        "title": "CIFAR-10",
        "url": "https://www.cs.toronto.edu/~kriz/cifar.html",
        "licence": (
            "No explicit licence is stated by the author; distributed for research use "
            "(cite the technical report)."
        ),
        "citation": (
            'A. Krizhevsky, "Learning Multiple Layers of Features from Tiny Images", '
            "Technical Report, University of Toronto, 2009."
        ),
    },
    "cifar100": {
        "title": "CIFAR-100",
        "url": "https://www.cs.toronto.edu/~kriz/cifar.html",
        "licence": (
            "No explicit licence is stated by the author; distributed for research use "
            "(cite the technical report)."
        ),
        "citation": (
            'A. Krizhevsky, "Learning Multiple Layers of Features from Tiny Images", '
            "Technical Report, University of Toronto, 2009."
        ),
    },
}
