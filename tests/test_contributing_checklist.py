"""docs/contributing.md's checklist of a new method's files is generated from
``refsgd.registry.REQUIREMENTS`` (docs/_ext/refsgd_checklist.py), and that table names every
generic check a new method must pass: a check without its row, a row whose check does not exist,
or a checklist edited by hand fails here."""

import ast
import dataclasses
import importlib
import sys

import pytest
from tests.helpers.launch import ROOT
from tests.methods import test_registry_checks as checks

from refsgd.registry import METHODS, REQUIREMENTS

EXT = f"{ROOT}/docs/_ext"
GUIDE = f"{ROOT}/docs/contributing.md"
#: the tests outside tests/methods/test_registry_checks.py that fail for a method that lacks a file
ELSEWHERE = {"tests/test_loop_lines.py::test_the_table_is_the_measured_one",
             "tests/test_docs_pages.py::test_every_method_has_its_row_and_its_page",
             "tests/test_docs_pages.py::test_every_picture_is_drawn_by_the_commands_its_page_shows"}


@pytest.fixture(scope="module")
def checklist():
    sys.path.insert(0, EXT)
    try:
        yield importlib.import_module("refsgd_checklist")
    finally:
        sys.path.remove(EXT)


def _tests_of(path):
    with open(f"{ROOT}/{path}") as f:
        return {n.name for n in ast.parse(f.read()).body if isinstance(n, ast.FunctionDef)}


def unlisted(requirements):
    """The generic checks that no row of ``requirements`` names, and the rows whose check does not
    exist: both empty when the checklist says what the tests require."""
    generic = {c.__name__ for c in checks.CHECKS} | {"test_serial_equals_mpi"} | ELSEWHERE
    named = {r.check for r in requirements}
    missing = generic - named
    stale = {c for c in named - generic if "::" not in c or c.split("::")[1] not in _tests_of(c.split("::")[0])}
    return missing, stale


def test_the_tests_elsewhere_exist():
    for c in ELSEWHERE:
        path, name = c.split("::")
        assert name in _tests_of(path), c


def test_every_generic_check_has_its_row():
    assert unlisted(REQUIREMENTS) == (set(), set())


@pytest.mark.parametrize("k", range(len(REQUIREMENTS)))
def test_a_requirement_removed_is_found(k):
    """The null: without any one row whose check no other row names, the comparison fails; a row
    naming a test that does not exist fails too."""
    rest = REQUIREMENTS[:k] + REQUIREMENTS[k + 1:]
    if any(r.check == REQUIREMENTS[k].check for r in rest):
        return   # another row of the same check (two files one check reads) still names it
    assert unlisted(rest) == ({REQUIREMENTS[k].check}, set())
    wrong = REQUIREMENTS[k]._replace(check="tests/test_loop_lines.py::test_no_such_test")
    assert unlisted(rest + (wrong,)) == ({REQUIREMENTS[k].check}, {"tests/test_loop_lines.py::test_no_such_test"})


def test_the_guide_holds_the_generated_checklist(checklist):
    with open(GUIDE) as f:
        text = f.read()
    assert checklist.with_checklist(text) == text, \
        "docs/contributing.md's checklist is not the registry's: python docs/_ext/refsgd_docs.py checklist rewrites it"
    for r in REQUIREMENTS:
        assert f"| `{r.file}` | {r.what.replace('|', chr(92) + '|')} |" in text, r
    files = len({r.file for r in REQUIREMENTS})
    assert f"That is {files} files" in text


def test_a_checklist_edited_by_hand_is_rewritten_or_refused(checklist):
    with open(GUIDE) as f:
        text = f.read()
    row = next(line for line in text.splitlines() if line.startswith("| `docs/implementers.md`"))
    dropped = text.replace(row + "\n", "")
    assert dropped != text and checklist.with_checklist(dropped) == text   # the registry wins
    for broken in (text.replace(checklist.END, ""), text.replace(checklist.MARK, ""),
                   text + "\n" + checklist.MARK + "\n"):
        with pytest.raises(checklist.SphinxError, match="the checklist goes between"):
            checklist.with_checklist(broken)


def test_a_method_without_an_implementers_section_fails():
    m = dataclasses.replace(next(iter(METHODS.values())), name="no-such-method")
    with pytest.raises(AssertionError, match="no section of docs/implementers.md"):
        checks.check_implementers_section(m)
    assert {"laga-sgdm", "pp-asgd", "asgd", "local-sgd"} <= checks.implementers_sections()
