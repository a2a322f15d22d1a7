"""Every link of the documentation's sources (README.md and the Markdown files of docs/ in the
repository) works where a reader opens the file: on a forge, in an editor, and on the built site.
So a link is relative to its file (never site-absolute, ``/methods/index.md``, which only the site
resolves), reaches a file of the repository, and its ``#anchor`` is a heading of that file (MyST's
slug, as docs/_ext/refsgd_docs.py computes it) or a label it declares. The site maps the links to
its pages at build time (refsgd_docs._relink_source); this test reads the sources, fast, no Sphinx.
Also refused: a quoted reference to a section (``see "Overlap"``) that no heading of the file has."""

import importlib.util
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers.launch import ROOT

#: a Markdown link or image: [text](target) (text may span lines)
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
#: the pages the build generates: not in a clone, so a source may not link them (the site's own
#: links to them are the generator's, checked by tests/test_docs_pages.py)
GENERATED_PREFIXES = ("docs/methods/", "docs/reference/cli.md", "docs/reference/golden-files.md")


def _gen():
    spec = importlib.util.spec_from_file_location("refsgd_docs", Path(ROOT) / "docs" / "_ext" / "refsgd_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _gen()


def sources():
    r = subprocess.run(["git", "ls-files", "README.md", "docs/*.md", "docs/**/*.md"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        pytest.skip("not a git checkout")
    return sorted(set(r.stdout.split()))


def prose(text):
    """``text`` without its fenced code blocks and inline code (their brackets are not links)."""
    text = re.sub(r"^(`{3,}|~{3,}).*?^\1", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "``", text)


def anchors(path):
    """The anchors a file offers: its headings' slugs and its MyST labels ``(name)=``; HTML ids."""
    text = Path(path).read_text(encoding="utf-8")
    out = {GEN.slug(s.title) for s in GEN.sections(text.splitlines())}
    out |= set(re.findall(r"^\((\S+)\)=\s*$", text, flags=re.M))
    out |= set(re.findall(r"\bid=\"([^\"]+)\"", text))
    return out


def problems(rel, text, exists=lambda p: os.path.exists(os.path.join(ROOT, p))):
    """The broken links of ``text``, the file ``rel`` (relative to the repository)."""
    out = []
    here = os.path.dirname(rel)
    for m in LINK.finditer(prose(text)):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):        # https:, mailto:
            continue
        if target.startswith("/"):
            out.append(f"{rel}: '{target}' is site-absolute: it breaks on a forge and in an editor; "
                       "link the file relative to this one")
            continue
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(here, path)) if path else rel
        if full.startswith(GENERATED_PREFIXES):
            out.append(f"{rel}: '{target}' is a page the build generates, not in a clone: link its source")
            continue
        if not exists(full):
            out.append(f"{rel}: '{target}': no such file ({full})")
            continue
        if anchor and full.endswith(".md") and anchor not in anchors(os.path.join(ROOT, full)):
            out.append(f"{rel}: '{target}': {full} has no heading or label '{anchor}'")
    for m in re.finditer(r"\(see \"([^\"]+)\"", text):
        out.append(f"{rel}: 'see \"{m.group(1)}\"' names a section by its title: link it")
    return out


OWNED_ELSEWHERE = {"docs/contributing/testing.md", "docs/implementers.md"}   # issue 46: their owners' files


@pytest.mark.parametrize("rel", [s for s in sources()])
def test_every_link_of_the_sources_resolves(rel):
    text = Path(ROOT, rel).read_text(encoding="utf-8")
    found = problems(rel, text)
    if rel in OWNED_ELSEWHERE:
        found = [p for p in found if "names a section by its title" not in p]
    assert not found, "\n".join(found)


def test_the_check_refuses_what_broke_before():
    """The links of before: site-absolute, a generated page, a missing file, a missing anchor, a
    quoted section; and what is fine: relative, with an existing anchor, a URL, code."""
    old = ("[m](/methods/index.md) [g](../reference/cli.md) [x](nowhere.md) [t](training.md#no-such-heading)\n"
           "(see \"Overlap\") [ok](cluster.md#under-a-batch-system-slurm-pbs-cray) [u](https://example.org) `[c](/in/code.md)`\n"
           "```\n[f](/fenced.md)\n```\n")
    found = problems("docs/guide/x.md", old)
    assert len(found) == 5, found
    assert "site-absolute" in found[0] and "generates" in found[1] and "no such file" in found[2]
    assert "no heading or label 'no-such-heading'" in found[3] and "names a section" in found[4]
