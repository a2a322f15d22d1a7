"""`refsgd data download`: the real MNIST / Fashion-MNIST files, and a tarball built from the real
CIFAR-10 subset, served by a local HTTP server (with Range requests) standing in for the canonical
addresses; downloads, resumes, refusals and the conversion compared with `refsgd data convert`.

The files are the data sets kept beside the clone (``../shared/data`` from the repository root, or
the folder in env REFSGD_TEST_DATA); the tests skip without them. refsgd itself never reads them.
"""

import fcntl
import hashlib
import http.server
import io
import os
import re
import socket
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import h5py
import pytest

from refsgd import datasets
from refsgd.datasets import download as dl
from refsgd.errors import RefsgdError

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("REFSGD_TEST_DATA") or ROOT.parent / "shared" / "data")
pytestmark = pytest.mark.skipif(not (DATA / "mnist").is_dir() or not (DATA / "fashion-mnist").is_dir(),
                                reason=f"the real data sets are not in {DATA} (../shared/data beside the clone, "
                                       "or env REFSGD_TEST_DATA)")


class _Handler(http.server.BaseHTTPRequestHandler):
    """GET of ``server.site[path]`` (bytes or a Path), honouring ``Range: bytes=N-`` unless
    ``server.ranges`` is False; ``server.cut[path] = n`` sends n bytes of the body, then hangs up."""

    def do_GET(self):
        srv = self.server
        body = srv.site.get(self.path)
        rng = self.headers.get("Range")
        srv.requests.append((self.path, rng))
        if body is None:
            self.send_error(404)
            return
        data = body.read_bytes() if isinstance(body, Path) else body
        start = 0
        if rng and srv.ranges:
            start = int(re.fullmatch(r"bytes=(\d+)-", rng).group(1))
            if start >= len(data):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        cut = srv.cut.get(self.path)
        self.wfile.write(data[start:] if cut is None else data[start:start + cut])
        self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.site, srv.requests, srv.cut, srv.ranges = {}, [], {}, True
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    for name in ("mnist", "fashion-mnist"):
        for f in (DATA / name).glob("*.gz"):
            srv.site[f"/{name}/{f.name}"] = f
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def quiet(*_):
    pass


def arrays_sha256(path):
    """SHA-256 of each array of a dataset file, and its name, mean and std."""
    with h5py.File(path, "r") as f:
        out = {k: hashlib.sha256(f[k][...].tobytes()).hexdigest()
               for k in ("train/images", "train/labels", "test/images", "test/labels")}
        out.update(name=f.attrs["name"], mean=f.attrs["mean"].tolist(), std=f.attrs["std"].tolist())
    return out


def refsgd(*args, env=None):
    """``refsgd ARGS`` as a user runs it, with ``env`` added to the environment."""
    return subprocess.run([sys.executable, "-m", "refsgd", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})


def one_error_line(r):
    """The one `refsgd: error:` line of a failed command (exit 2), without a traceback."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("refsgd: error: "), r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def mnist_cache(tmp_path_factory):
    """MNIST downloaded once into a cache folder (shared by several tests), from a mirror that is a
    local folder (file:// URLs: a whole file per request, as from a server without Range)."""
    site = tmp_path_factory.mktemp("site")
    (site / "mnist").symlink_to(DATA / "mnist")
    cache = tmp_path_factory.mktemp("cache")
    lines = []
    path = dl.download("mnist", cache_dir=cache, mirror=str(site), log=lines.append)
    assert sum(line.startswith(f"mnist: downloading {site.as_uri()}/mnist/") for line in lines) == 4
    return cache, path


@pytest.mark.parametrize("name", ["mnist", "fashion-mnist"])
def test_download_equals_convert_of_the_same_files(tmp_path, server, name, mnist_cache):
    """MNIST from a folder mirror (the fixture), Fashion-MNIST over HTTP."""
    if name == "mnist":
        cache, path = mnist_cache
    else:
        cache = tmp_path / "cache"
        path = dl.download(name, cache_dir=cache, mirror=server.url, log=quiet)
        assert sorted(p for p, _ in server.requests) == sorted(k for k in server.site if k.startswith("/fashion"))
    assert path == cache / f"{name}.h5" and dl.cached(name, cache) == path
    for fname, size, md5 in dl.files(name):  # the published files, kept under their own names
        kept = cache / name / fname
        assert kept.stat().st_size == size and hashlib.md5(kept.read_bytes()).hexdigest() == md5
        assert not (cache / name / (fname + ".part")).exists()
    r = refsgd("data", "convert", name, str(DATA / name), str(tmp_path / "ref.h5"))
    assert r.returncode == 0, r.stderr
    assert arrays_sha256(path) == arrays_sha256(tmp_path / "ref.h5")
    d = datasets.load(path)
    assert (d.n_train, d.n_test, d.image_shape) == (60000, 10000, (1, 28, 28))


def test_a_second_run_finds_the_file_and_fetches_nothing(mnist_cache):
    cache, path = mnist_cache
    before = path.stat().st_mtime_ns
    r = refsgd("data", "download", "mnist", "--cache-dir", str(cache), "--mirror", "http://127.0.0.1:9")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"mnist: already downloaded and converted, {path}: nothing to do"
    assert path.stat().st_mtime_ns == before


def test_data_by_name_is_the_cached_file(mnist_cache, monkeypatch, tmp_path):
    cache, path = mnist_cache
    monkeypatch.setenv("REFSGD_DATA_DIR", str(cache))
    assert dl.cache_dir() == cache and dl.cached("mnist") == path
    d = datasets.load("mnist")
    assert d.path == str(path) and d.n_test == 10000
    with pytest.raises(RefsgdError, match=r"--data fashion-mnist: fashion-mnist is not downloaded yet .*"
                                          r"`refsgd data download fashion-mnist`"):
        datasets.load("fashion-mnist")


def test_cache_folder_from_option_env_xdg_home(monkeypatch, tmp_path):
    monkeypatch.delenv("REFSGD_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert dl.cache_dir() == tmp_path / "xdg" / "refsgd"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert dl.cache_dir() == tmp_path / "home" / ".cache" / "refsgd"
    monkeypatch.setenv("REFSGD_DATA_DIR", str(tmp_path / "env"))
    assert dl.cache_dir() == tmp_path / "env"
    assert dl.cached("mnist") is None


@pytest.mark.parametrize("ranges", [True, False], ids=["range", "server-without-range"])
def test_a_broken_off_download_resumes(tmp_path, server, ranges):
    server.ranges = ranges
    cache, mirror = tmp_path / "cache", server.url
    server.cut["/mnist/t10k-images-idx3-ubyte.gz"] = 500_000
    with pytest.raises(RefsgdError, match=r"t10k-images-idx3-ubyte.gz broke off after 500,000 of 1,648,877 bytes.*"
                                          r"re-run `refsgd data download mnist` to resume"):
        dl.download("mnist", cache_dir=cache, mirror=mirror, log=quiet)
    part = cache / "mnist" / "t10k-images-idx3-ubyte.gz.part"
    assert part.stat().st_size == 500_000 and not (cache / "mnist.h5").exists()
    server.cut.clear()
    server.requests.clear()
    lines = []
    path = dl.download("mnist", cache_dir=cache, mirror=mirror, log=lines.append)
    # the files already complete are checked, not fetched again; the broken one resumes at its end
    assert server.requests == [("/mnist/t10k-images-idx3-ubyte.gz", "bytes=500000-"),
                               ("/mnist/t10k-labels-idx1-ubyte.gz", None)]
    assert any(("resuming" if ranges else "downloading") + f" {mirror}/mnist/t10k-images" in line for line in lines)
    assert not part.exists() and dl.cached("mnist", cache) == path
    with h5py.File(path, "r") as f:
        assert f["test/images"].shape == (10000, 1, 28, 28)


def test_a_damaged_file_is_refused_with_one_line(tmp_path, server):
    good = (DATA / "mnist" / "t10k-labels-idx1-ubyte.gz").read_bytes()
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0x01
    server.site["/mnist/t10k-labels-idx1-ubyte.gz"] = bytes(bad)
    cache = tmp_path / "cache"
    r = refsgd("data", "download", "mnist", env={"REFSGD_DATA_DIR": str(cache), "REFSGD_DATA_MIRROR": server.url})
    line = one_error_line(r)
    part = cache / "mnist" / "t10k-labels-idx1-ubyte.gz.part"
    assert line == (f"refsgd: error: {part}: MD5 {hashlib.md5(bad).hexdigest()}, expected the published "
                    "ec29112dd5afa0611ce80d1b7f02629c (the file is damaged); delete it and re-run "
                    "`refsgd data download mnist`")
    assert not (cache / "mnist.h5").exists() and not (cache / "mnist" / "t10k-labels-idx1-ubyte.gz").exists()
    # re-run without deleting: refused again, and nothing fetched (the other files are complete)
    server.site["/mnist/t10k-labels-idx1-ubyte.gz"] = good
    server.requests.clear()
    with pytest.raises(RefsgdError, match="the file is damaged"):
        dl.download("mnist", cache_dir=cache, mirror=server.url, log=quiet)
    assert server.requests == []


def test_a_truncated_or_overlong_file_is_refused(tmp_path, server):
    labels = (DATA / "mnist" / "t10k-labels-idx1-ubyte.gz").read_bytes()
    server.site["/mnist/t10k-labels-idx1-ubyte.gz"] = labels[:3000]  # served whole, but short
    cache = tmp_path / "cache"
    part = cache / "mnist" / "t10k-labels-idx1-ubyte.gz.part"
    with pytest.raises(RefsgdError) as e:
        dl.download("mnist", cache_dir=cache, mirror=server.url, log=quiet)
    assert str(e.value) == (f"{part}: 3,000 bytes, expected the published 4,542 (the file is truncated); delete it "
                            "and re-run `refsgd data download mnist`")
    part.write_bytes(labels + b"\0")
    with pytest.raises(RefsgdError, match=r"4,543 bytes, more than the published 4,542: the download is damaged"):
        dl.download("mnist", cache_dir=cache, mirror=server.url, log=quiet)
    assert not (cache / "mnist.h5").exists()


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_mirror_fails_with_one_line(tmp_path, server):
    cache = tmp_path / "cache"
    url = f"http://127.0.0.1:{_closed_port()}"
    line = one_error_line(refsgd("data", "download", "fashion-mnist", "--cache-dir", str(cache), "--mirror", url))
    assert line.startswith(f"refsgd: error: fashion-mnist: could not download train-images-idx3-ubyte.gz "
                           f"({url}/fashion-mnist/train-images-idx3-ubyte.gz: ")
    assert "refused" in line and line.endswith("check the mirror (--mirror URL, env REFSGD_DATA_MIRROR)")
    with pytest.raises(RefsgdError, match=r"cifar10: could not download cifar-10-python.tar.gz \(http://127.*"
                                          r"cifar-10-python.tar.gz: HTTP 404"):
        dl.download("cifar10", cache_dir=cache, mirror=server.url, log=quiet)
    assert not list(cache.glob("*.h5"))


def test_a_second_download_of_the_same_set_waits_its_turn(tmp_path, server):
    (tmp_path / "cache" / "mnist").mkdir(parents=True)
    with open(tmp_path / "cache" / "mnist" / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        with pytest.raises(RefsgdError, match="another `refsgd data download mnist` is writing here"):
            dl.download("mnist", cache_dir=tmp_path / "cache", mirror=server.url, log=quiet)
    assert server.requests == []


def test_a_damaged_converted_file_is_not_replaced(tmp_path, server):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "mnist.h5").write_bytes(b"not hdf5")
    assert dl.cached("mnist", cache) is None
    with pytest.raises(RefsgdError, match=rf"{cache}/mnist.h5: not an HDF5 file .*; delete {cache}/mnist.h5 and "
                                          r"re-run `refsgd data download mnist`"):
        dl.download("mnist", cache_dir=cache, mirror=server.url, log=quiet)
    assert (cache / "mnist.h5").read_bytes() == b"not hdf5" and server.requests == []


# -- CIFAR-10: only a genuine subset is here, so the tarball built from it is not the published one


@pytest.fixture(scope="module")
def cifar_tarball():
    subset = DATA / "cifar10-subset" / "cifar-10-batches-py"
    if not subset.is_dir():
        pytest.skip(f"the CIFAR-10 subset is not in {subset.parent}")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        tar.add(subset, arcname="cifar-10-batches-py")
    return subset, buf.getvalue()


def test_cifar10_tarball_not_the_published_one_is_refused(tmp_path, server, cifar_tarball, monkeypatch):
    subset, tarball = cifar_tarball
    server.site["/cifar10/cifar-10-python.tar.gz"] = tarball
    cache = tmp_path / "cache"
    part = cache / "cifar10" / "cifar-10-python.tar.gz.part"
    line = one_error_line(refsgd("data", "download", "cifar10", "--cache-dir", str(cache), "--mirror", server.url))
    assert line == (f"refsgd: error: {part}: {len(tarball):,} bytes, expected the published 170,498,071 (the file "
                    "is truncated); delete it and re-run `refsgd data download cifar10`")
    # had it the published size, its MD5 still tells it apart
    part.unlink()
    monkeypatch.setattr(dl, "_CIFAR10_TARBALL", ("cifar-10-python.tar.gz", len(tarball),
                                                 "c58f30108f718f92721af3b95e74349a"))
    with pytest.raises(RefsgdError) as e:
        dl.download("cifar10", cache_dir=cache, mirror=server.url, log=quiet)
    assert str(e.value) == (f"{part}: MD5 {hashlib.md5(tarball).hexdigest()}, expected the published "
                            "c58f30108f718f92721af3b95e74349a (the file is damaged); delete it and re-run "
                            "`refsgd data download cifar10`")
    assert not (cache / "cifar10.h5").exists()


def test_cifar10_download_converts_the_tarball_like_convert(tmp_path, server, cifar_tarball, monkeypatch):
    """The conversion path of a tarball that passed its check (here: this tarball's own size and MD5
    put in place of the published ones, which only a complete copy has)."""
    subset, tarball = cifar_tarball
    server.site["/cifar10/cifar-10-python.tar.gz"] = tarball
    monkeypatch.setattr(dl, "_CIFAR10_TARBALL", ("cifar-10-python.tar.gz", len(tarball),
                                                 hashlib.md5(tarball).hexdigest()))
    path = dl.download("cifar10", cache_dir=tmp_path / "cache", mirror=server.url, log=quiet)
    r = refsgd("data", "convert", "cifar10", str(subset), str(tmp_path / "ref.h5"))
    assert r.returncode == 0, r.stderr
    assert arrays_sha256(path) == arrays_sha256(tmp_path / "ref.h5")
    assert dl.cached("cifar10", tmp_path / "cache") is None  # 5,085 + 1,017 images: not the complete set


def test_download_help_names_the_cache_and_the_mirror():
    r = refsgd("data", "download", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    for words in ("--cache-dir DIR", "--mirror URL", "REFSGD_DATA_DIR", "REFSGD_DATA_MIRROR", "~/.cache/refsgd",
                  "published size and MD5", "resumes"):
        assert words in text, words
    from refsgd.cli.data import DOWNLOADABLE
    assert DOWNLOADABLE == dl.DOWNLOADABLE
