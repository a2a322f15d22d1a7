"""``refsgd data download NAME``: a published distribution fetched from its canonical address into
the cache folder, checked against its published size and MD5, and converted to ``<cache>/<name>.h5``.

The files go to ``<cache>/<name>/`` (kept, as torchvision keeps them: a later conversion needs no
new download). Each is written to ``<file>.part`` and renamed only once its size and MD5 are the
published ones; a second run resumes a ``.part`` with an HTTP Range request. A mirror
(``--mirror URL``, env ``REFSGD_DATA_MIRROR``) serves ``URL/<name>/<file>``; a local folder laid
out the same way works too. The standard library's urllib does it all: one GET per file, with a
Range header, is all a download needs.

Python API (what ``refsgd reproduce`` calls): :func:`cache_dir`, :func:`cached`, :func:`download`.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import os
import urllib.error
import urllib.request
from pathlib import Path

from refsgd.errors import RefsgdError
from refsgd.files import check_folder, open_h5
from refsgd.version import __version__

from . import cache as _cache
from .cache import DOWNLOADABLE, cache_dir, h5_path
from .kinds import convert
from .layout import _read_header, info
from .mnist import _MNIST_FILES, _md5
from .sources import _ADDRESSES, _CIFAR10_TARBALL, _PUBLISHED_MD5, _PUBLISHED_SIZE, _SPLITS

__all__ = ["DOWNLOADABLE", "cache_dir", "cached", "download", "files"]

_CHUNK = 1 << 20
_TIMEOUT = 60  # seconds a connection may stay silent before the download counts as failed


def files(name) -> list[tuple[str, int, str]]:
    """The published files of ``name``: [(file name, size in bytes, MD5)]."""
    _check_name(name)
    if name == "cifar10":
        return [_CIFAR10_TARBALL]
    return [(_MNIST_FILES[k] + ".gz", _PUBLISHED_SIZE[name][k], _PUBLISHED_MD5[name][k]) for k in _MNIST_FILES]


def cached(name, cache_dir=None) -> Path | None:
    """``<cache>/<name>.h5`` if it holds the complete data set ``name`` in refsgd's layout, else None."""
    _check_name(name)
    path = h5_path(name, cache_dir)
    if not path.is_file():
        return None
    try:
        _check_h5(name, path)
    except RefsgdError:
        return None
    return path


def download(name, cache_dir=None, mirror=None, log=print) -> Path:
    """Fetch, check and convert the data set ``name`` (one of :data:`DOWNLOADABLE`); return the
    path of ``<cache>/<name>.h5``.

    ``cache_dir``: the cache folder (default :func:`cache_dir`). ``mirror``: a base URL (or a
    local folder) serving ``<mirror>/<name>/<file>``, tried instead of the canonical addresses
    (default: env ``REFSGD_DATA_MIRROR``). ``log``: called with each line of progress. Already
    converted and complete: nothing is done. Every failure (the network, a damaged or truncated
    file, a folder that cannot be written) is one :class:`RefsgdError` naming the file and what
    to do; a broken-off download keeps its bytes, and the next call resumes it.
    """
    _check_name(name)
    for flag, value in (("--cache-dir", cache_dir), ("--mirror", mirror)):
        if value is not None and not str(value).strip():
            raise RefsgdError(f"{flag} '': give a folder{' or URL' if flag == '--mirror' else ''}, or leave "
                              f"{flag} out")
    root = Path(cache_dir).expanduser() if cache_dir is not None else _cache.cache_dir()
    out = h5_path(name, root)
    if os.path.lexists(out):
        try:
            _check_h5(name, out)
        except RefsgdError as e:
            raise RefsgdError(f"{e}; delete {out} and re-run `refsgd data download {name}`") from None
        log(f"{name}: already downloaded and converted, {out}: nothing to do")
        return out
    mirror = mirror or os.environ.get("REFSGD_DATA_MIRROR") or None
    bases = [_mirror_url(mirror) + f"{name}/"] if mirror else list(_ADDRESSES[name])
    raw = root / name
    _make_folder(raw)
    with _locked(raw, name):
        for fname, size, md5 in files(name):
            _fetch(name, raw / fname, size, md5, [base + fname for base in bases], log,
                   hint=("check the mirror (--mirror URL, env REFSGD_DATA_MIRROR)" if mirror else
                         "check the network, or give a mirror with --mirror URL (env REFSGD_DATA_MIRROR)"))
        log(f"{name}: converting to {out}")
        convert(name, str(raw / _CIFAR10_TARBALL[0] if name == "cifar10" else raw), str(out))
    log(info(str(out)))
    return out


def _check_name(name):
    if name not in DOWNLOADABLE:
        raise RefsgdError(f"unknown dataset {name!r}: refsgd downloads {', '.join(DOWNLOADABLE)}")


def _check_h5(name, path):
    """A RefsgdError unless ``path`` holds the complete data set ``name`` in refsgd's layout."""
    with open_h5(str(path), "a refsgd dataset") as f:
        h = _read_header(f, str(path))
    want = _SPLITS[name]
    if h.name != name or (h.n_train, h.n_test) != want:
        raise RefsgdError(f"{path}: holds {h.name!r} with {h.n_train} training and {h.n_test} test images, not "
                          f"the complete {name} ({want[0]} and {want[1]})")


def _mirror_url(mirror):
    """A base URL ending in "/": a URL as given, a local folder as its file:// URL."""
    url = mirror if "://" in mirror else Path(mirror).expanduser().resolve().as_uri()
    return url.rstrip("/") + "/"


def _make_folder(folder):
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RefsgdError(f"cannot create the cache folder {folder} ({e.strerror or e}); choose another with "
                          "--cache-dir DIR or env REFSGD_DATA_DIR") from None
    check_folder(str(folder), "the cache folder")


@contextlib.contextmanager
def _locked(folder, name):
    """Hold ``folder/.lock``: two downloads appending to the same ``.part`` would damage it."""
    with open(folder / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise RefsgdError(f"{folder}: another `refsgd data download {name}` is writing here; wait for it "
                              "to end, then re-run") from None
        yield


def _fetch(name, dest, size, md5, urls, log, hint):
    """``dest``: checked if present, else downloaded (resuming ``dest.part``), checked, renamed."""
    redo = f"delete it and re-run `refsgd data download {name}`"
    if dest.exists():
        _verify(dest, size, md5, redo)
        log(f"{name}: {dest.name} is here already (size and MD5 checked)")
        return
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    if have > size:
        raise RefsgdError(f"{part}: {have:,} bytes, more than the published {size:,}: the download is damaged; "
                          f"{redo}")
    if have < size:
        failed = []
        for url in urls:
            try:
                _get(name, url, part, have, size, log)
                break
            except _Unreachable as e:
                failed.append(f"{url}: {e}")
        else:
            raise RefsgdError(f"{name}: could not download {dest.name} ({'; '.join(failed)}); {hint}")
    _verify(part, size, md5, redo)
    os.replace(part, dest)


def _verify(path, size, md5, redo):
    """A RefsgdError unless ``path`` has the published size and MD5."""
    found = path.stat().st_size
    if found != size:
        raise RefsgdError(f"{path}: {found:,} bytes, expected the published {size:,} (the file is "
                          f"{'truncated' if found < size else 'too long'}); {redo}")
    digest = _md5(str(path))
    if digest != md5:
        raise RefsgdError(f"{path}: MD5 {digest}, expected the published {md5} (the file is damaged); {redo}")


class _Unreachable(Exception):
    """No byte came from this address (the next one may answer)."""


def _get(name, url, part, have, size, log):
    """Append ``url``'s bytes from ``have`` on to ``part`` (from 0 when the server ignores Range)."""
    headers = {"User-Agent": f"refsgd/{__version__}"}
    if have:
        headers["Range"] = f"bytes={have}-"
    try:
        resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=_TIMEOUT)
    except urllib.error.HTTPError as e:
        if e.code == 416:
            raise _Unreachable(f"HTTP 416: the server's file is shorter than the {have:,} bytes of {part}, so it "
                               f"is not the published one") from None
        raise _Unreachable(f"HTTP {e.code} {_one_line(e.reason)}") from None  # a redirect loop: 3 lines
    except urllib.error.URLError as e:
        raise _Unreachable(_one_line(e.reason)) from None
    except (OSError, ValueError, http.client.HTTPException) as e:
        raise _Unreachable(_one_line(e) or type(e).__name__) from None
    with resp:
        resumed = bool(have) and getattr(resp, "status", None) == 206
        if resumed and not resp.headers.get("Content-Range", "").startswith(f"bytes {have}-"):
            raise _Unreachable(f"answered the request for bytes {have:,}- with {resp.headers['Content-Range']}")
        if not resumed:
            have = 0  # a whole file (a server without Range, a file:// URL): start again
        length = resp.headers.get("Content-Length")
        expect = have + int(length) if length and length.isdigit() else None
        log(f"{name}: " + (f"resuming {url} at byte {have:,}" if resumed else f"downloading {url}") +
            f" ({size:,} bytes)")
        got, shown = have, have * 4 // size
        try:
            fh = open(part, "ab" if resumed else "wb")
        except OSError as e:
            raise RefsgdError(f"{part}: cannot write ({e.strerror or e})") from None
        with fh:
            while got <= size:  # a server sending more than the published size is stopped there
                try:
                    chunk = resp.read(_CHUNK)
                except (OSError, http.client.HTTPException) as e:
                    _broke_off(name, url, part, got, size, str(e) or type(e).__name__)
                if not chunk:
                    break
                try:
                    fh.write(chunk)
                except OSError as e:
                    raise RefsgdError(f"{part}: cannot write ({e.strerror or e}); the {got:,} bytes before are kept: "
                                      f"re-run `refsgd data download {name}` to resume") from None
                got += len(chunk)
                if size >= 8 << 20 and got * 4 // size > shown:  # a quarter more of a big file
                    shown = got * 4 // size
                    log(f"{name}: {min(got, size) * 100 // size} % of {part.name[:-len('.part')]}")
    if expect is not None and got < min(expect, size + 1):
        _broke_off(name, url, part, got, size, f"the server announced {expect:,}")


def _one_line(text):
    """A library's message (urllib's redirect loop spans three lines) as one line."""
    return " ".join(str(text).split())


def _broke_off(name, url, part, got, size, why):
    raise RefsgdError(f"{name}: the download of {url} broke off after {got:,} of {size:,} bytes ({why}); they are "
                      f"kept in {part}: re-run `refsgd data download {name}` to resume")
