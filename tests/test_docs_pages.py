"""The documentation's generated pages (docs/_ext/refsgd_docs.py) without Sphinx: every method of
the registry has its row and its family's page with its listing, timeline and code; every link of
the generated pages reaches a page; every golden file has its row; a link to a section that no
page holds is refused. CI builds the site itself with -W (./run.sh docs)."""

import importlib.util
import re
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
    mod.OUT = tmp_path_factory.mktemp("site")
    mod.generate()
    return mod


def _page(gen, docname):
    return (gen.OUT / f"{docname}.md").read_text()


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
    for page in gen.OUT.rglob("*.md"):
        for target in re.findall(r"\]\((/[^)#\s]+)", page.read_text()):
            where = [gen.OUT / target[1:], DOCS / target[1:]]
            assert any(w.exists() for w in where), f"{page.relative_to(gen.OUT)}: {target}"


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
