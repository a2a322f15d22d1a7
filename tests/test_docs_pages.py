"""The documentation's generated pages (docs/_ext/refsgd_docs.py) without Sphinx: every method of
the registry has its row and its family's page with its listing, timeline and code; every link of
the generated pages reaches a page; every golden file has its row; a link to a section that no
page holds is refused; each listing has one source, its method's module docstring, which
docs/algorithms.md and the method's page show unchanged; the method pages pick up the claims run
into docs/results. CI builds the site itself with -W (./run.sh docs)."""

import importlib
import importlib.util
import json
import pydoc
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.helpers.launch import ROOT

from refsgd.registry import METHODS

DOCS = Path(ROOT) / "docs"


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("refsgd_docs", DOCS / "_ext" / "refsgd_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.MonkeyPatch.context() as mp:     # its folders are its part refsgd_docs_io's
        mp.setattr(mod.docs_io, "OUT", tmp_path_factory.mktemp("site"))
        mod.generate()
        yield mod


def _page(gen, docname):
    return (gen.docs_io.OUT / f"{docname}.md").read_text()


def test_every_method_has_its_row_and_its_page(gen):
    index = _page(gen, "methods/index")
    for m in METHODS.values():
        assert f"| `{m.name}` |" in index, m.name
        page = _page(gen, f"methods/{gen.family_slug(m.section)}")
        assert "<!-- generated" in page and f"# {m.section}\n" in page
        assert re.search(r"^L1 ", page, flags=re.M) or "L1" in page, m.section   # the listing's lines
        assert f"{{image}} /timelines/{m.name}.png" in page and (DOCS / "timelines" / f"{m.name}.png").exists()
        assert f":pyobject: {m.train.split(':')[1]}" in page
        for g in m.goldens:
            assert f"`{g.file}`" in page, (m.name, g.file)


def test_every_link_reaches_a_page(gen):
    for page in gen.docs_io.OUT.rglob("*.md"):
        for target in re.findall(r"\]\((/[^)#\s]+)", page.read_text()):
            where = [gen.docs_io.OUT / target[1:], DOCS / target[1:]]
            assert any(w.exists() for w in where), f"{page.relative_to(gen.docs_io.OUT)}: {target}"


def test_golden_table_from_the_files(gen):
    text = _page(gen, "reference/golden-files")
    for f in (Path(ROOT) / "tests" / "golden").glob("*.h5"):
        assert f"| `{f.name}`<br>" in text


def test_a_link_to_a_missing_section_is_refused(gen):
    splits = {"implementers.md": gen.Split("implementers.md")}
    splits["implementers.md"].pages = {"": "implementers/index", "workflow": "implementers/index"}
    assert gen.relink("[w](implementers.md#workflow)", "algorithms.md", splits) == \
        "[w](/implementers/index.md#workflow)"
    with pytest.raises(gen.SphinxError, match="no generated page holds"):
        gen.relink("[x](implementers.md#no-such-section)", "algorithms.md", splits)


# --- the listings: one source each, the method's module docstring ---------------------------


def _labels(listing):
    return {m.group(1) for m in re.finditer(r"^ *([A-Z]\d+) ", listing, flags=re.M)}


def test_every_listing_of_algorithms_md_is_its_docstrings(gen):
    """docs/algorithms.md (installed with refsgd as refsgd.docs) holds, at each marked place, the
    listing of the docstring it names, and no listing without a mark: a copy that drifted or one
    written by hand fails here (``./run.sh docs`` or ``python docs/_ext/refsgd_docs.py listings``
    rewrites them)."""
    text = (DOCS / "algorithms.md").read_text()
    assert gen.with_listings(text) == text, "docs/algorithms.md's listings differ from the docstrings: " \
        "python docs/_ext/refsgd_docs.py listings rewrites them"
    marked = len(re.findall(r"^<!-- listing: ", text, flags=re.M))
    assert marked == sum(len(gen.docstring_listings(f)) for f in gen.listing_sources()) >= len(gen.listing_sources())


def test_a_drifted_or_second_copy_is_refused(gen):
    text = (DOCS / "algorithms.md").read_text()
    listing = gen.docstring_listings("refsgd/algorithms/laga.py")[0]
    drifted = text.replace(listing.splitlines()[1], listing.splitlines()[1] + "  (edited here)", 1)
    assert drifted != text and gen.with_listings(drifted) == text   # the docstring wins
    by_hand = text + "\nLAGA-SGD again:\n\n" + textwrap.indent(listing, "    ") + "\n"
    with pytest.raises(gen.SphinxError, match="a listing written here by hand"):
        gen.with_listings(by_hand)
    mark = "<!-- listing: refsgd/algorithms/laga.py #1 "
    line = next(x for x in text.splitlines() if x.startswith(mark))
    twice = text + "\n" + line + "\n\n    L1  x\n"
    with pytest.raises(gen.SphinxError, match="marked on lines"):
        gen.with_listings(twice)
    unmarked = text.replace(line, "")
    with pytest.raises(gen.SphinxError):
        gen.with_listings(unmarked)
    with pytest.raises(gen.SphinxError, match="not #9"):
        gen.with_listings(text.replace(line, line.replace("#1 ", "#9 ")))


def test_no_other_file_copies_a_listing(gen):
    """A listing line (``L5  ...`` as a docstring has it) appears in no tracked file but its method's
    module and docs/algorithms.md: README, the guide, the implementers' notes and the serial renderings
    link to a listing instead of copying it."""
    lines = set()
    for path in gen.listing_sources():
        for listing in gen.docstring_listings(path):
            lines |= {x.strip() for x in listing.splitlines() if gen.LABEL.match(x)}
    git = shutil.which("git")
    if git is None or not (Path(ROOT) / ".git").exists():
        pytest.skip("needs a git checkout (the tracked files)")
    files = subprocess.run([git, "ls-files", "*.md", "*.py", "*.rst", "*.txt", "*.toml", "*.sh"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    assert "docs/algorithms.md" in files
    for f in files:
        if f == "docs/algorithms.md" or f in gen.listing_sources():
            continue
        text = (Path(ROOT) / f).read_text(errors="replace").splitlines()
        copied = [i + 1 for i, x in enumerate(text) if x.strip() in lines]
        assert not copied, f"{f}, lines {copied}: a listing's line copied (its source is the method's docstring)"


def test_help_shows_each_methods_listing_and_its_page_too(gen):
    """help(refsgd.algorithms.NAME) shows the listing (the module's own docstring, no file read:
    so also from a wheel), the method's page shows the same lines, and every line the code cites
    (``# L5``, ``# C2``, ``# S1``, ``# L6-L8``) is a line of the module's listings."""
    pages = {}   # a method's file -> the pages of its methods (D-Sync's file is Pipe-SGD's)
    for m in METHODS.values():
        pages.setdefault(m.train.split(":")[0], set()).add(f"methods/{gen.family_slug(m.section)}")
    for name, docnames in pages.items():
        module = importlib.import_module(name)
        path = name.replace(".", "/") + ".py"
        listings = gen.docstring_listings(path)
        assert listings, f"{path}: its docstring has no listing"
        shown = pydoc.render_doc(module, renderer=pydoc.plaintext)
        on_pages = "".join(_page(gen, d) for d in docnames)
        labels = set()
        for listing in listings:
            assert textwrap.indent(listing, "    ") in on_pages, (path, listing)
            for line in listing.splitlines():
                assert line.strip() in shown, (path, line)
            labels |= _labels(listing)
        code = Path(module.__file__).read_text().split('"""', 2)[2]   # below the module docstring
        cited = set()
        for comment in re.findall(r"#\s*((?:[A-Z]\d+)(?:\s*[-,]\s*[A-Z]\d+)*)", code):
            cited |= set(re.findall(r"[A-Z]\d+", comment))
        assert cited and cited <= labels, (path, sorted(cited - labels))


# --- the reproduced claims on the method pages ------------------------------------------------


def _generate(tmp_path, results, monkeypatch):
    spec = importlib.util.spec_from_file_location("refsgd_docs_results", DOCS / "_ext" / "refsgd_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod.docs_io, "OUT", tmp_path / "site")
    monkeypatch.setattr(mod.docs_io, "RESULTS", results)
    mod.generate()
    return mod


def test_method_pages_show_the_claims_run_into_docs_results(tmp_path, monkeypatch):
    """Before ``refsgd reproduce --out-dir docs/results`` each claim says "not run yet"; after it,
    the method whose runs the claim's JSON names shows its verdict, its page and its figure."""
    results = tmp_path / "results"
    results.mkdir()
    mod = _generate(tmp_path, results, monkeypatch)
    laga = _page(mod, "methods/laga")
    assert "### laga-table1: " in laga and "**Verdict: not run yet.** `refsgd reproduce laga-table1" in laga
    assert "Verdict: reproduced" not in laga
    (results / "laga-table1.json").write_text(json.dumps(
        {"verdict": "reproduced", "why": "every check inside its band", "quick": False,
         "runs": [{"algo": "ssgd"}, {"algo": "laga-sgdm"}, {"algo": "laga-sgdn"}]}))
    (results / "laga-table1.md").write_text("# laga-table1\n")
    (results / "laga-table1.png").write_bytes(b"\x89PNG")
    mod = _generate(tmp_path, results, monkeypatch)
    laga = _page(mod, "methods/laga")
    assert "### [laga-table1](/results/laga-table1.md): " in laga
    assert "**Verdict: reproduced** (every check inside its band)." in laga
    assert "{image} /results/laga-table1.png" in laga
    assert laga.count("Verdict: not run yet") == len(
        [c for c in mod.claims(METHODS).values() if c["algos"] & {"laga-sgd", "laga-sgdm", "laga-sgdn"}]) - 1
    ssgd = _page(mod, f"methods/{mod.family_slug(METHODS['ssgd'].section)}")
    assert "[laga-table1](/results/laga-table1.md)" in ssgd      # its JSON's runs name ssgd too


# --- the listing beside the code (issue 46) --------------------------------------------------


def test_each_method_page_opens_with_the_listing_beside_the_code(gen):
    for section in {m.section for m in METHODS.values()}:
        page = _page(gen, f"methods/{gen.family_slug(section)}")
        first = page.index("## The listing beside the code")
        assert first < page.index("## The code") < page.index("## Timelines") < page.index("## Golden files")
        assert '<table class="listing-code">' in page, section
    laga = _page(gen, "methods/laga")
    # one loop shown once, naming its three methods
    assert laga.count(":pyobject: train\n") == 1, laga.count(":pyobject: train")
    assert "`laga-sgd` and `laga-sgdm` and `laga-sgdn`: `train`" in laga
    # listing line L2 of Algorithm 3 beside the code lines that cite L2 (its MPI_Wait span)
    row = re.search(r'<tr id="laga-1-l2">(.*?)</tr>', laga, flags=re.S).group(1)
    assert "x^{t+1} &lt;- x^t - eta * g^{t-1}(tau)" in row and "L2 MPI_Wait" in row, row
    # Pipe-SGD's page does not pair its listing with D-Sync's loop in the same file
    assert "train_d_sync" not in _page(gen, "methods/pipe-sgd")


def test_the_pairing_follows_the_listings_own_labels(gen, tmp_path):
    """Generic over the labels: a listing numbered A1, A2 pairs with the code citing A1, A2; a
    listing line no code cites says so (the null)."""
    import sys
    sys.path.insert(0, str(DOCS / "_ext"))
    import refsgd_sidebyside as sbs
    (tmp_path / "m.py").write_text(textwrap.dedent('''\
        """A method.

            A1  g <- grad
            A2  x <- x - eta g
            A3  never cited
        """


        def train(run):
            # A1: the gradient
            g = run.grad()
            x = run.step(g, "A2 x <- x - eta g")
            return x
        '''))
    html = sbs.table("Algorithm A", "A1  g <- grad\nA2  x <- x - eta g\nA3  never cited", "m.py", tmp_path, "m-1")
    a1 = re.search(r'<tr id="m-1-a1">(.*?)</tr>', html, flags=re.S).group(1)
    assert "# A1: the gradient" in a1 and "g = run.grad()" in a1 and "  10  " in a1, a1
    a2 = re.search(r'<tr id="m-1-a2">(.*?)</tr>', html, flags=re.S).group(1)
    assert "A2 x &lt;- x - eta g" in a2 and "# A1" not in a2, a2
    a3 = re.search(r'<tr id="m-1-a3">(.*?)</tr>', html, flags=re.S).group(1)
    assert "no line cites it" in a3


# --- the pictures: drawn by the build from the commands the pages show (issue 46) ----------------


def test_every_picture_is_drawn_by_the_commands_its_page_shows(gen, monkeypatch):
    pictures = gen.refsgd_pictures
    tracked = subprocess.run(["git", "ls-files", "docs"], cwd=ROOT, capture_output=True, text=True,
                             timeout=60).stdout.split()
    pngs = {p[len("docs/"):] for p in tracked if p.endswith(".png") and not p.startswith("docs/results/")}
    assert pngs == set(pictures.pictures(METHODS)), pngs ^ set(pictures.pictures(METHODS))
    assert pictures.stale(METHODS) == [], "run ./run.sh docs (it redraws them) and commit docs/pictures.json"
    # each method page shows the commands that drew its timeline
    for m in METHODS.values():
        train, plot = pictures.timeline_commands(m)
        page = _page(gen, f"methods/{gen.family_slug(m.section)}")
        assert plot in page and " ".join(train.split()[:8]) in page, m.name
    # the null: a changed command makes its picture stale (the build redraws it)
    monkeypatch.setattr(pictures, "TIMELINE_RUN", pictures.TIMELINE_RUN + ("--seed", "1"))
    assert f"timelines/{next(iter(METHODS))}.png" in pictures.stale(METHODS)
