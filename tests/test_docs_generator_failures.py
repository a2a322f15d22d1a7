"""The documentation's generator (docs/_ext/refsgd_docs.py) fails as refsgd does: each failure is
one line (``refsgd_docs: error: ...``) and a non-zero exit, never a traceback, and it never leaves
a half-written page (every file through refsgd.files' write-then-rename): a listing mark naming a
missing file, a method source that does not parse, docs/algorithms.md missing or not UTF-8, a
read-only file system, a full disk."""

import errno
import importlib.util
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers.launch import ROOT

from refsgd import files

DOCS = Path(ROOT) / "docs"


@pytest.fixture
def gen(tmp_path, monkeypatch):
    """The generator with a copy of docs/algorithms.md, docs/implementers.md and
    docs/contributing.md (its checklist rewritten by the build) in a temporary docs/ folder (its
    pages written there too)."""
    spec = importlib.util.spec_from_file_location("refsgd_docs_f", DOCS / "_ext" / "refsgd_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("algorithms.md", "implementers.md", "contributing.md"):
        shutil.copy(DOCS / name, docs / name)
    monkeypatch.setattr(mod.docs_io, "DOCS", docs)      # its folders are its part refsgd_docs_io's
    monkeypatch.setattr(mod.docs_io, "OUT", docs)
    monkeypatch.setattr(mod.refsgd_pictures, "draw", lambda methods: None)   # no MPI runs here
    return mod


def _fails_in_one_line(gen, capsys, *match):
    with pytest.raises(SystemExit) as e:
        gen._on_init(None)
    assert e.value.code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("refsgd_docs: error: "), err
    assert "Traceback" not in err
    for m in match:
        assert m in lines[0], lines[0]
    return lines[0]


def test_a_mark_naming_a_missing_file(gen, capsys):
    p = gen.docs_io.DOCS / "algorithms.md"
    p.write_text(p.read_text().replace("refsgd/algorithms/laga.py #1", "refsgd/algorithms/nosuch.py #1", 1))
    _fails_in_one_line(gen, capsys, "refsgd/algorithms/nosuch.py: no such file", "named by a mark")


def test_a_source_that_does_not_parse(gen, capsys, tmp_path, monkeypatch):
    root = tmp_path / "root"
    shutil.copytree(Path(ROOT) / "refsgd" / "algorithms", root / "refsgd" / "algorithms")
    bad = root / "refsgd" / "algorithms" / "laga.py"
    bad.write_text(bad.read_text() + "\ndef broken(:\n")
    monkeypatch.setattr(gen.docs_io, "ROOT", root)
    _fails_in_one_line(gen, capsys, "refsgd/algorithms/laga.py, line", "does not parse")


def test_algorithms_md_missing(gen, capsys):
    (gen.docs_io.DOCS / "algorithms.md").unlink()
    _fails_in_one_line(gen, capsys, "algorithms.md: no such file")


def test_algorithms_md_not_utf8(gen, capsys):
    p = gen.docs_io.DOCS / "algorithms.md"
    p.write_bytes(p.read_bytes()[:100] + b"\xff\xfe latin-1 \xe9\n")
    _fails_in_one_line(gen, capsys, "algorithms.md: not UTF-8 text")


def test_a_read_only_file_system(gen, capsys, monkeypatch):
    """The temporary file of a page cannot be made (EROFS; as root, chmod cannot show it)."""
    def read_only(*a, **k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))
    monkeypatch.setattr(files, "_create", read_only)
    line = _fails_in_one_line(gen, capsys, "Read-only file system")
    assert "could not write" in line


def test_a_full_disk_leaves_no_half_written_page(gen, capsys, monkeypatch):
    gen.generate()   # every page once, whole
    page = gen.docs_io.OUT / "methods" / "index.md"
    before = page.read_text()
    page.write_text(before + "\nan edit the build must replace\n")
    edited = page.read_text()

    def full(path, data):
        Path(path).write_bytes(bytes(data)[:10])   # a part, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
    monkeypatch.setattr(files, "write_bytes", full)
    _fails_in_one_line(gen, capsys, "No space left on device", "the previous file is unchanged")
    assert page.read_text() == edited                       # the old page, whole
    assert not [p for p in page.parent.iterdir() if p.name.endswith(".tmp")]   # no temporary left


def test_the_pages_are_written_whole_when_all_is_well(gen):
    """The null of the tests above: the same generator, nothing injected, writes its pages."""
    gen._on_init(None)
    assert (gen.docs_io.OUT / "methods" / "index.md").read_text().startswith(gen.GENERATED)
