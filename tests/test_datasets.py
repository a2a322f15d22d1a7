"""Tests of refsgd.datasets: the HDF5 layout, converters, loading and the sampler."""

import gzip
import os
import pickle
import tarfile

import h5py
import numpy as np
import pytest

from refsgd import RefsgdError
from refsgd import datasets as ds

# ---------------------------------------------------------------------------
# helpers: synthetic files in the standard distribution formats
# ---------------------------------------------------------------------------


def idx_bytes(arr, magic=None):
    arr = np.asarray(arr, dtype=np.uint8)
    if magic is None:
        magic = 0x0800 + arr.ndim
    head = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in arr.shape)
    return head + arr.tobytes()


def write_file(path, data, gz):
    if gz:
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def make_mnist(dirpath, n_train=12, n_test=5, hw=(4, 3), gz=True, seed=1):
    rng = np.random.default_rng(seed)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, *hw), dtype=np.uint8),
        "train-labels-idx1-ubyte": rng.integers(0, 10, n_train, dtype=np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, *hw), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, n_test, dtype=np.uint8),
    }
    dirpath.mkdir(exist_ok=True)
    for i, (name, arr) in enumerate(arrays.items()):
        # gz may be a bool or a list of four bools (mixed compression)
        z = gz[i] if isinstance(gz, (list, tuple)) else gz
        write_file(dirpath / (name + (".gz" if z else "")), idx_bytes(arr), z)
    return arrays


def cifar_batch(rng, n, label_key=b"labels", num_classes=10):
    return {
        b"batch_label": b"synthetic",
        label_key: [int(v) for v in rng.integers(0, num_classes, n)],
        b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
    }


def make_cifar10(dirpath, sizes=(3, 2, 4, 1, 2), n_test=3, seed=2):
    rng = np.random.default_rng(seed)
    dirpath.mkdir(parents=True, exist_ok=True)
    batches = {}
    for i, n in enumerate(sizes, start=1):
        batches[f"data_batch_{i}"] = cifar_batch(rng, n)
    batches["test_batch"] = cifar_batch(rng, n_test)
    for name, b in batches.items():
        (dirpath / name).write_bytes(pickle.dumps(b, protocol=2))
    return batches


def make_cifar100(dirpath, n_train=7, n_test=4, seed=3):
    rng = np.random.default_rng(seed)
    dirpath.mkdir(parents=True, exist_ok=True)
    batches = {}
    for name, n in (("train", n_train), ("test", n_test)):
        b = cifar_batch(rng, n, label_key=b"fine_labels", num_classes=100)
        b[b"coarse_labels"] = [0] * n
        batches[name] = b
        (dirpath / name).write_bytes(pickle.dumps(b, protocol=2))
    return batches


def write_tiny(path, **over):
    """A valid refsgd file with 6 train / 2 test images of shape (2, 3, 2)."""
    rng = np.random.default_rng(4)
    kw = dict(
        name="tiny",
        train_images=rng.integers(0, 256, (6, 2, 3, 2), dtype=np.uint8),
        train_labels=np.array([0, 1, 2, 0, 1, 2]),
        test_images=rng.integers(0, 256, (2, 2, 3, 2), dtype=np.uint8),
        test_labels=np.array([2, 0]),
        num_classes=3,
        provenance="synthetic",
        licence="none",
        citation="none",
    )
    kw.update(over)
    ds.write(path, **kw)
    return kw


# ---------------------------------------------------------------------------
# IDX / MNIST
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [True, False, [True, False, False, True]])
def test_mnist_round_trip(tmp_path, gz):
    src = tmp_path / "src"
    arrays = make_mnist(src, gz=gz)
    out = tmp_path / "m.h5"
    assert ds.convert("mnist", src, out) == str(out)
    d = ds.load(out)
    assert d.name == "mnist" and d.num_classes == 10 and d.image_shape == (1, 4, 3)
    tr = arrays["train-images-idx3-ubyte"].astype(np.float64)
    te = arrays["t10k-images-idx3-ubyte"].astype(np.float64)
    mean, std = tr.mean(), tr.std()
    assert d.x_train.shape == (12, 1, 4, 3) and d.x_test.shape == (5, 1, 4, 3)
    assert d.x_train.dtype == np.float32 and d.x_train.flags.c_contiguous
    np.testing.assert_allclose(d.x_train[:, 0], (tr - mean) / std, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(d.x_test[:, 0], (te - mean) / std, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(d.y_train, arrays["train-labels-idx1-ubyte"])
    np.testing.assert_array_equal(d.y_test, arrays["t10k-labels-idx1-ubyte"])
    assert d.y_train.dtype == np.int64
    assert abs(float(d.x_train.mean())) < 1e-5
    assert abs(float(d.x_train.std()) - 1.0) < 1e-5
    with h5py.File(out, "r") as f:
        assert f["train/images"].dtype == np.uint8
        assert f["train/images"].shape == (12, 1, 4, 3)
        assert f["train/labels"].dtype == np.int64
        assert f.attrs["format"] == "refsgd-dataset"
        assert int(f.attrs["format_version"]) == 1
        np.testing.assert_array_equal(f.attrs["image_shape"], [1, 4, 3])
        np.testing.assert_allclose(f.attrs["mean"], [mean])
        np.testing.assert_allclose(f.attrs["std"], [std])
        assert "train-images-idx3-ubyte" in f.attrs["provenance"]
        assert "LeCun" in f.attrs["citation"]


def test_fashion_mnist_metadata(tmp_path):
    make_mnist(tmp_path / "src")
    out = tmp_path / "f.h5"
    ds.convert("fashion-mnist", tmp_path / "src", out)
    d = ds.load(out, dtype=np.float64)
    assert d.name == "fashion-mnist" and d.x_train.dtype == np.float64
    assert "1708.07747" in d.citation and "MIT" in d.licence
    text = ds.info(out)
    assert "fashion-mnist" in text and "Xiao" in text


def test_read_idx_plain_and_gz_identical(tmp_path):
    arr = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    # a name without .gz holding gzip data: detection is by content, not by name
    a = ds.read_idx(write_file(tmp_path / "a", idx_bytes(arr), gz=True))
    b = ds.read_idx(write_file(tmp_path / "b.gz", idx_bytes(arr), gz=False))
    np.testing.assert_array_equal(a, arr)
    np.testing.assert_array_equal(b, arr)
    assert a.dtype == np.uint8


def test_read_idx_wrong_magic(tmp_path):
    p = write_file(tmp_path / "train-images-idx3-ubyte.gz", idx_bytes(np.zeros(5)), gz=True)
    with pytest.raises(RefsgdError, match=r"train-images-idx3-ubyte\.gz: not an IDX image "
                       r"file \(magic 0x00000801, expected 0x00000803\)"):
        ds.read_idx(p, ndim=3)
    q = write_file(tmp_path / "junk", b"hello world, not idx", gz=False)
    with pytest.raises(RefsgdError, match=r"junk: not an IDX .*magic 0x68656c6c"):
        ds.read_idx(q)
    r = write_file(tmp_path / "floats", idx_bytes(np.zeros(3), magic=0x0D01), gz=False)
    with pytest.raises(RefsgdError, match=r"magic 0x00000d01"):
        ds.read_idx(r)


def test_read_idx_truncated_and_trailing(tmp_path):
    good = idx_bytes(np.ones((3, 4, 4)))
    p = write_file(tmp_path / "t.idx", good[:-5], gz=False)
    with pytest.raises(RefsgdError, match=r"t\.idx: truncated IDX file \(the header announces "
                       r"3x4x4 = 48 data bytes, only 43 present\)"):
        ds.read_idx(p)
    p = write_file(tmp_path / "h.idx", good[:9], gz=False)
    with pytest.raises(RefsgdError, match=r"h\.idx: truncated IDX file \(the header needs 16"):
        ds.read_idx(p)
    p = write_file(tmp_path / "g.idx", good + b"xyz", gz=True)
    with pytest.raises(RefsgdError, match=r"g\.idx: 3 unexpected bytes after the IDX data"):
        ds.read_idx(p)


def test_read_idx_truncated_gzip(tmp_path):
    data = gzip.compress(idx_bytes(np.arange(200).reshape(200, 1, 1) % 256))
    p = tmp_path / "cut.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(RefsgdError, match=r"cut\.gz: truncated gzip stream"):
        ds.read_idx(p)


def test_read_idx_missing(tmp_path):
    with pytest.raises(RefsgdError, match=r"nothere: no such file"):
        ds.read_idx(tmp_path / "nothere")


def test_mnist_count_mismatch(tmp_path):
    src = tmp_path / "src"
    make_mnist(src, n_train=12)
    write_file(src / "train-labels-idx1-ubyte.gz", idx_bytes(np.zeros(11)), gz=True)
    out = tmp_path / "m.h5"
    with pytest.raises(RefsgdError, match=r"train-images-idx3-ubyte\.gz: 12 images but 11 "
                       r"labels"):
        ds.convert("mnist", src, out)
    assert not out.exists()
    assert os.listdir(tmp_path) == ["src"]


def test_mnist_missing_file_and_bad_label(tmp_path):
    src = tmp_path / "src"
    make_mnist(src)
    (src / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(RefsgdError, match=r"no t10k-labels-idx1-ubyte or "
                       r"t10k-labels-idx1-ubyte\.gz found"):
        ds.convert_mnist(src, tmp_path / "m.h5")
    write_file(src / "t10k-labels-idx1-ubyte", idx_bytes([1, 2, 3, 10, 0]), gz=False)
    with pytest.raises(RefsgdError, match=r"t10k-labels-idx1-ubyte: label 10 is outside "
                       r"\[0, 10\)"):
        ds.convert_mnist(src, tmp_path / "m.h5")


def test_convert_unknown_kind(tmp_path):
    with pytest.raises(RefsgdError, match=r"unknown dataset kind 'svhn'"):
        ds.convert("svhn", tmp_path, tmp_path / "x.h5")


# ---------------------------------------------------------------------------
# CIFAR
# ---------------------------------------------------------------------------


def test_cifar10_round_trip(tmp_path):
    src = tmp_path / "cifar-10-batches-py"
    batches = make_cifar10(src)
    out = tmp_path / "c.h5"
    ds.convert("cifar10", src, out)
    with h5py.File(out, "r") as f:
        img = f["train/images"][()]
        lab = f["train/labels"][()]
        timg = f["test/images"][()]
    names = [f"data_batch_{i}" for i in range(1, 6)]
    raw = np.concatenate([batches[k][b"data"] for k in names])
    assert img.shape == (12, 3, 32, 32)
    np.testing.assert_array_equal(lab, np.concatenate([batches[k][b"labels"] for k in names]))
    # row layout: 1024 R, 1024 G, 1024 B, each a row-major 32x32 plane
    assert img[0, 0, 0, 0] == raw[0, 0] and img[0, 0, 0, 1] == raw[0, 1]
    assert img[0, 0, 1, 0] == raw[0, 32]
    assert img[4, 1, 2, 5] == raw[4, 1024 + 2 * 32 + 5]
    assert img[11, 2, 31, 31] == raw[11, 3071]
    np.testing.assert_array_equal(timg.reshape(3, -1), batches["test_batch"][b"data"])

    d = ds.load(out)
    assert d.name == "cifar10" and d.num_classes == 10 and d.image_shape == (3, 32, 32)
    np.testing.assert_allclose(d.x_train.mean(axis=(0, 2, 3)), 0.0, atol=1e-5)
    np.testing.assert_allclose(d.x_train.std(axis=(0, 2, 3)), 1.0, atol=1e-5)
    mean = img.reshape(12, 3, -1).transpose(1, 0, 2).reshape(3, -1).mean(axis=1)
    np.testing.assert_allclose(d.mean, mean)
    assert "Krizhevsky" in d.citation

    # the parent directory and a .tar.gz of it give the same file content
    out2 = tmp_path / "c2.h5"
    ds.convert_cifar(tmp_path, out2, "cifar10")
    tgz = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(src, arcname="cifar-10-batches-py")
    out3 = tmp_path / "c3.h5"
    ds.convert("cifar10", tgz, out3)
    for other in (out2, out3):
        e = ds.load(other)
        np.testing.assert_array_equal(e.x_train, d.x_train)
        np.testing.assert_array_equal(e.y_test, d.y_test)


def test_cifar100_round_trip(tmp_path):
    src = tmp_path / "cifar-100-python"
    batches = make_cifar100(src)
    out = tmp_path / "c100.h5"
    ds.convert("cifar100", tmp_path, out)
    d = ds.load(out)
    assert d.name == "cifar100" and d.num_classes == 100
    assert d.x_train.shape == (7, 3, 32, 32) and d.x_test.shape == (4, 3, 32, 32)
    np.testing.assert_array_equal(d.y_train, batches["train"][b"fine_labels"])
    np.testing.assert_array_equal(d.y_test, batches["test"][b"fine_labels"])
    text = ds.info(out)
    assert "classes:      100" in text
    assert "99:" in text  # the histogram lists all 100 classes


def test_cifar_rows_labels_mismatch(tmp_path):
    src = tmp_path / "cifar-10-batches-py"
    batches = make_cifar10(src)
    b = batches["data_batch_3"]
    b[b"labels"] = b[b"labels"][:-1]
    (src / "data_batch_3").write_bytes(pickle.dumps(b))
    out = tmp_path / "c.h5"
    with pytest.raises(RefsgdError, match=r"data_batch_3: 4 data rows but 3 labels"):
        ds.convert("cifar10", src, out)
    assert not out.exists()


def test_cifar_bad_row_length_and_missing_batch(tmp_path):
    src = tmp_path / "cifar-10-batches-py"
    batches = make_cifar10(src)
    b = batches["test_batch"]
    b[b"data"] = b[b"data"][:, :3000]
    (src / "test_batch").write_bytes(pickle.dumps(b))
    with pytest.raises(RefsgdError, match=r"test_batch: b'data' has shape \(3, 3000\), "
                       r"expected \(n, 3072\)"):
        ds.convert("cifar10", src, tmp_path / "c.h5")
    (src / "data_batch_5").unlink()
    with pytest.raises(RefsgdError, match=r"no data_batch_5 found"):
        ds.convert("cifar10", src, tmp_path / "c.h5")
    (src / "data_batch_1").write_bytes(b"not a pickle")
    with pytest.raises(RefsgdError, match=r"data_batch_1: not a readable python pickle"):
        ds.convert("cifar10", src, tmp_path / "c.h5")


# ---------------------------------------------------------------------------
# write / load / check_fits
# ---------------------------------------------------------------------------


def test_write_stats_and_load_values(tmp_path):
    p = tmp_path / "t.h5"
    kw = write_tiny(p)
    tr = kw["train_images"].astype(np.float64)
    mean = tr.mean(axis=(0, 2, 3))
    std = tr.std(axis=(0, 2, 3))
    d64 = ds.load(p, dtype=np.float64)
    np.testing.assert_allclose(d64.mean, mean, rtol=1e-15)
    np.testing.assert_allclose(d64.std, std, rtol=1e-14)
    expect = (kw["test_images"] - mean[None, :, None, None]) / std[None, :, None, None]
    np.testing.assert_allclose(d64.x_test, expect, rtol=1e-14)
    d32 = ds.load(p)
    assert d32.x_test.dtype == np.float32
    np.testing.assert_array_equal(d32.x_test, expect.astype(np.float32))
    assert d32.path == str(p) and d32.provenance == "synthetic"


def test_write_constant_channel_std_one(tmp_path):
    p = tmp_path / "c.h5"
    write_tiny(p, train_images=np.full((6, 2, 3, 2), 7, dtype=np.uint8))
    d = ds.load(p, dtype=np.float64)
    np.testing.assert_array_equal(d.std, [1.0, 1.0])
    np.testing.assert_array_equal(d.x_train, 0.0)


def test_write_is_atomic(tmp_path, monkeypatch):
    p = tmp_path / "t.h5"
    write_tiny(p)
    before = p.read_bytes()

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(RefsgdError, match=r"could not write .*t\.h5 \(disk full\); the previous file is unchanged"):
        write_tiny(p, name="other")
    assert p.read_bytes() == before
    assert os.listdir(tmp_path) == ["t.h5"]


def test_write_rejects_bad_input(tmp_path):
    p = tmp_path / "t.h5"
    with pytest.raises(RefsgdError, match=r"t\.h5: train label 3 is outside \[0, 3\)"):
        write_tiny(p, train_labels=np.array([0, 1, 2, 3, 1, 2]))
    with pytest.raises(RefsgdError, match=r"t\.h5: 6 train images but 5 train labels"):
        write_tiny(p, train_labels=np.array([0, 1, 2, 0, 1]))
    with pytest.raises(RefsgdError, match=r"dtype float64, expected uint8"):
        write_tiny(p, test_images=np.zeros((2, 2, 3, 2)))
    assert not p.exists()


def test_load_missing_and_not_hdf5(tmp_path):
    with pytest.raises(RefsgdError, match=r"nope\.h5: no such file"):
        ds.load(tmp_path / "nope.h5")
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"this is plain text\n" * 10)
    with pytest.raises(RefsgdError, match=r"bad\.h5: not an HDF5 file"):
        ds.load(bad)


def test_load_missing_labels(tmp_path):
    p = tmp_path / "t.h5"
    write_tiny(p)
    with h5py.File(p, "a") as f:
        del f["train/labels"]
    with pytest.raises(RefsgdError, match=r"t\.h5: not a refsgd dataset: missing "
                       r"/train/labels"):
        ds.load(p)
    with pytest.raises(RefsgdError, match=r"missing /train/labels"):
        ds.info(p)


def test_load_missing_attr_and_wrong_format(tmp_path):
    p = tmp_path / "t.h5"
    write_tiny(p)
    with h5py.File(p, "a") as f:
        del f.attrs["std"]
    with pytest.raises(RefsgdError, match=r"missing root attribute 'std'"):
        ds.load(p)
    write_tiny(p)
    with h5py.File(p, "a") as f:
        f.attrs["format"] = "something-else"
    with pytest.raises(RefsgdError, match=r"attribute format is 'something-else'"):
        ds.load(p)


def test_load_labels_out_of_range(tmp_path):
    p = tmp_path / "t.h5"
    write_tiny(p)
    with h5py.File(p, "a") as f:
        f["test/labels"][1] = 3
    with pytest.raises(RefsgdError, match=r"t\.h5: /test/labels contains 3, outside \[0, 3\)"):
        ds.load(p)
    with h5py.File(p, "a") as f:
        f["test/labels"][1] = -1
    with pytest.raises(RefsgdError, match=r"/test/labels contains -1"):
        ds.load(p)


def test_load_count_and_shape_mismatch(tmp_path):
    p = tmp_path / "t.h5"
    write_tiny(p)
    with h5py.File(p, "a") as f:
        del f["test/labels"]
        f["test/labels"] = np.array([0, 1, 2], dtype=np.int64)
    with pytest.raises(RefsgdError, match=r"/test has 2 images but 3 labels"):
        ds.load(p)
    write_tiny(p)
    with h5py.File(p, "a") as f:
        f.attrs["image_shape"] = np.array([2, 2, 3])
    with pytest.raises(RefsgdError, match=r"/train/images has shape \(6, 2, 3, 2\), expected "
                       r"\(N, 2, 2, 3\)"):
        ds.load(p)


def test_check_fits():
    d = ds.load()
    ds.check_fits(d, (1, 8, 8), 10)
    ds.check_fits(d, [1, 8, 8], 12)
    with pytest.raises(RefsgdError, match=r"^dataset digits has images of shape \(1, 8, 8\) "
                       r"but model cifar10_cnn expects \(3, 32, 32\); the bundled models that fit it: "
                       r"--model digits_cnn, --model digits_mlp, --model digits_tiny\.$"):
        ds.check_fits(d, (3, 32, 32), 10, model="cifar10_cnn")
    with pytest.raises(RefsgdError, match=r"^dataset digits has 10 classes but the model has "
                       r"only 2 outputs; the bundled models that fit it: --model digits_cnn, --model digits_mlp, "
                       r"--model digits_tiny\.$"):
        ds.check_fits(d, (1, 8, 8), 2)


# ---------------------------------------------------------------------------
# embedded dataset
# ---------------------------------------------------------------------------


def test_embedded_digits():
    d = ds.load()
    assert d.name == "digits" and d.num_classes == 10 and d.image_shape == (1, 8, 8)
    assert d.x_train.shape == (1500, 1, 8, 8) and d.x_test.shape == (297, 1, 8, 8)
    assert d.x_train.dtype == np.float32 and d.x_train.flags.c_contiguous
    assert d.y_train.dtype == np.int64 and d.y_test.dtype == np.int64
    assert set(np.unique(d.y_train)) == set(range(10))
    assert set(np.unique(d.y_test)) == set(range(10))
    assert abs(float(d.x_train.mean())) < 1e-5 and abs(float(d.x_train.std()) - 1) < 1e-5
    # raw pixel values are the integers 0..16
    raw = d.x_train.astype(np.float64) * d.std[0] + d.mean[0]
    np.testing.assert_allclose(raw, np.round(raw), atol=1e-4)
    assert raw.min() > -0.5 and raw.max() < 16.5
    assert "C50P49" in d.citation and "CC BY 4.0" in d.licence
    assert os.path.getsize(d.path) < 200_000

    d64 = ds.load("digits", dtype=np.float64)
    assert d64.x_train.dtype == np.float64 and d64.x_test.dtype == np.float64
    np.testing.assert_allclose(d64.x_train, d.x_train, atol=1e-6)
    np.testing.assert_array_equal(d64.y_test, d.y_test)


def test_info_text():
    d = ds.load()
    text = ds.info(d.path)
    for piece in ("name:         digits", "train:        1500 images",
                  "test:         297 images", "image shape:  1 x 8 x 8", "classes:      10",
                  "train labels", "test labels", "mean:", "std:", "provenance:", "licence:",
                  "CC BY 4.0"):
        assert piece in text, piece
    counts = np.bincount(d.y_train, minlength=10)
    assert f"0:{counts[0]}" in text and f"9:{counts[9]}" in text


# ---------------------------------------------------------------------------
# sampler
# ---------------------------------------------------------------------------


def test_epoch_batches_shards():
    seed, epoch, world, batch, n = 5, 3, 3, 4, 50
    shards = [ds.epoch_batches(seed, epoch, r, world, batch, n) for r in range(world)]
    num_batches = n // (world * batch)
    assert num_batches == 4
    for s in shards:
        assert s.shape == (num_batches, batch) and s.dtype == np.int64
        assert s.min() >= 0 and s.max() < n
    allidx = np.concatenate([s.ravel() for s in shards])
    assert len(np.unique(allidx)) == num_batches * world * batch == allidx.size


def test_epoch_batches_formula_and_determinism():
    seed, epoch, world, batch, n = 11, 2, 2, 5, 33
    perm = np.random.Generator(np.random.PCG64([seed, epoch])).permutation(n)
    nb = n // (world * batch)
    for r in range(world):
        got = ds.epoch_batches(seed, epoch, r, world, batch, n)
        np.testing.assert_array_equal(got, perm[r * nb * batch:(r + 1) * nb * batch]
                                      .reshape(nb, batch))
        np.testing.assert_array_equal(got, ds.epoch_batches(seed, epoch, r, world, batch, n))
    a = ds.epoch_batches(seed, 0, 0, 1, 10, 1000)
    b = ds.epoch_batches(seed, 1, 0, 1, 10, 1000)
    c = ds.epoch_batches(seed + 1, 0, 0, 1, 10, 1000)
    assert not np.array_equal(a, b) and not np.array_equal(a, c)
    # a fixed value, so that a change of numpy's PCG64/permutation would be noticed
    np.testing.assert_array_equal(ds.epoch_batches(0, 0, 0, 1, 4, 8),
                                  [[2, 4, 3, 6], [5, 0, 1, 7]])
    np.testing.assert_array_equal(ds.epoch_batches(0, 0, 1, 2, 2, 9), [[3, 8], [7, 0]])


def test_epoch_batches_too_few():
    with pytest.raises(RefsgdError, match=r"^the training set has 7 samples, too few for "
                       r"world\*batch = 2\*4 = 8\.$"):
        ds.epoch_batches(0, 0, 0, 2, 4, 7)
    with pytest.raises(RefsgdError, match=r"rank 2 is outside \[0, 2\)"):
        ds.epoch_batches(0, 0, 2, 2, 4, 100)


def test_randpick():
    got = ds.randpick(7, 1, 42, 16, 10)
    assert got.shape == (16,) and got.dtype == np.int64
    assert got.min() >= 0 and got.max() < 10
    np.testing.assert_array_equal(
        got, np.random.Generator(np.random.PCG64([7, 1, 42])).integers(0, 10, size=16))
    np.testing.assert_array_equal(got, ds.randpick(7, 1, 42, 16, 10))
    np.testing.assert_array_equal(got, [0, 1, 8, 5, 9, 6, 7, 5, 3, 3, 3, 7, 3, 5, 0, 8])
    big = [ds.randpick(7, r, s, 64, 10**6) for r, s in ((0, 0), (1, 0), (0, 1))]
    assert not np.array_equal(big[0], big[1]) and not np.array_equal(big[0], big[2])
    assert np.all(ds.randpick(0, 0, 0, 100, 1) == 0)
    with pytest.raises(RefsgdError, match=r"0 samples"):
        ds.randpick(0, 0, 0, 4, 0)


def test_mnist_and_fashion_mnist_files_are_told_apart(tmp_path, monkeypatch):
    """The two sets share file names and shapes; the published MD5s tell them apart (here a
    synthetic set stands in for Fashion-MNIST by taking its training images' MD5)."""
    src = tmp_path / "src"
    make_mnist(src)
    md5 = ds._md5(str(src / "train-images-idx3-ubyte.gz"))
    known = {k: dict(v) for k, v in ds._PUBLISHED_MD5.items()}
    known["fashion-mnist"]["train_images"] = md5
    monkeypatch.setattr(ds.mnist, "_PUBLISHED_MD5", known)  # where convert_mnist reads it
    out = tmp_path / "m.h5"
    with pytest.raises(RefsgdError, match=r"this is Fashion-MNIST's file .*data convert fashion-mnist"):
        ds.convert("mnist", src, out)
    assert not out.exists()
    ds.convert("fashion-mnist", src, out)
    assert out.exists()
