"""Mutation testing of the conformance suite: every bug of the catalogue
(examples/conformance/mutants.py), planted one at a time in the NumPy example backend, is caught
by the suite, by the configuration and at the step that docs/conformance.md shows; the example
itself (the null: no bug) passes every configuration it declares."""

import os
import re
import sys

import pytest
from tests.helpers.launch import ROOT

from refsgd.conformance import References, configurations, load_backend, run

EXAMPLES = os.path.join(ROOT, "examples", "conformance")
sys.path.insert(0, EXAMPLES)
import mutants  # noqa: E402 -- the catalogue lives beside the example it patches

SOURCE = open(os.path.join(EXAMPLES, "numpy_backend.py")).read()
#: the runs of the module's fixture are made once per worker that runs one of its tests: under
#: pytest-xdist (./run.sh test) one worker runs them all (tests/helpers/suite.py)
pytestmark = pytest.mark.xdist_group("conformance-mutants")


@pytest.fixture(scope="module")
def caught(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("mutants"))
    os.makedirs(os.path.join(folder, "expected"))
    references = References(os.path.join(folder, "expected"))
    good = load_backend(os.path.join(EXAMPLES, "numpy_backend.py") + ":Backend")
    declared = [c for c in configurations() if good().supports(c)]
    for c in declared:                                      # the null: the example without a bug passes
        assert run(good, c, references, os.path.join(folder, f"good-{c.name}.h5")).ok, c.name
    return {m[0]: mutants.catch(SOURCE, m, folder, references, declared) for m in mutants.MUTANTS}


def test_the_catalogue_is_large_and_each_mutant_is_a_small_patch():
    assert len(mutants.MUTANTS) >= 40 and len({m[0] for m in mutants.MUTANTS}) == len(mutants.MUTANTS)
    for name, _, old, new in mutants.MUTANTS:
        assert SOURCE.count(old) == 1 and old != new, name
        assert max(old.count("\n"), new.count("\n")) < 5, name            # a few lines at most


def test_the_suite_catches_every_mutant(caught):
    survivors = [name for name, c in caught.items() if c is None]
    assert survivors == [], survivors


def test_the_docs_show_the_catalogue_and_who_catches_each(caught):
    page = open(os.path.join(ROOT, "docs", "conformance.md")).read()
    shown = re.search(r"<!-- mutants -->\n(.*?)<!-- /mutants -->", page, re.S)
    assert shown and shown.group(1) == mutants.markdown(caught), mutants.markdown(caught)
