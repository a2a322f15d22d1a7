"""The generic checks of every method of the registry (refsgd/registry.py), as scikit-learn's
``parametrize_with_checks`` does for estimators: one test per method and piece, so that a method
that lacks a piece fails with a message that names it. A new method passes them all or says,
in its Method.lacks, why a piece (a timing model, a timeline schedule) does not exist.

Each piece: the entry points import (``train``, the serial rendering); the MPI run traces what
the serial rendering computes (its first golden configuration, at 2 ranks where the method has
workers there, in-process in the world session of that size: tests.helpers.world); every golden file is checked in and has an outside replay
(tests/mpiexec/test_golden.py); a timing model (refsgd.bench.models); a timeline schedule
(refsgd.timeline.gantt); a section of docs/algorithms.md that names ``--algo NAME``; a section of
docs/implementers.md; a line of ``refsgd train --list``. Each check is a row of
``refsgd.registry.REQUIREMENTS``, the table docs/contributing.md's checklist is generated from
(tests/test_contributing_checklist.py)."""

import ast
import dataclasses
import importlib
import os
import re

import pytest
from tests.helpers import world
from tests.helpers.launch import ROOT, cli

from refsgd.bench import models
from refsgd.registry import METHODS, Schedule, Timing, Update, entry

GOLDEN = os.path.join(ROOT, "tests", "golden")


def check_entry_points(m):
    for what, dotted in (("train", m.train), ("serial rendering", m.serial)):
        try:
            fn = entry(dotted)
        except (ImportError, AttributeError) as e:
            pytest.fail(f"{m.name}: its {what} {dotted!r} (Method.{what.split()[0]}) does not import: {e}")
        assert callable(fn), f"{m.name}: its {what} {dotted!r} is not a function"


def check_train_comes_first(m):
    """A method file opens with its train functions (its listing), after the checks of its options;
    its kernels and helpers come after."""
    module = importlib.import_module(m.train.partition(":")[0])
    with open(module.__file__) as f:
        defs = [n.name for n in ast.parse(f.read()).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    name = m.train.partition(":")[2]
    before = [d for d in defs[:defs.index(name)] if d not in ("check", "check_sizes") and not d.startswith("train")]
    assert not before, (f"{m.name}: {os.path.relpath(module.__file__, ROOT)} defines {', '.join(before)} before its "
                        f"{name}: the listing first, its kernels after")


def check_golden_files(m):
    if not m.goldens:
        pytest.fail(f"{m.name}: no golden file (Method.goldens): `refsgd golden regenerate tests/golden` writes "
                    "the registry's")
    missing = [g.file for g in m.goldens if not os.path.exists(os.path.join(GOLDEN, g.file))]
    assert not missing, (f"{m.name}: golden file(s) {', '.join(missing)} not in tests/golden "
                         "(tests/golden/regenerate.sh writes them)")
    from tests.mpiexec import test_golden
    assert m.name in test_golden.REPLAY, (f"{m.name}: no outside replay of its golden file in tests/mpiexec/test_golden.py "
                                          "(REPLAY): an implementer's NumPy loop from docs/implementers.md")


def check_timing_model(m):
    if m.timing_model is None:
        assert m.lacks.get("timing_model"), (f"{m.name}: no timing model (Method.timing_model, a function of "
                                             "refsgd.bench.models) and no reason in Method.lacks")
        return
    assert isinstance(m.timing_model, Timing) and callable(models.TIMINGS.get(m.timing_model)), \
        f"{m.name}: its timing model {m.timing_model!r} is no Timing with a function in refsgd.bench.models.TIMINGS"
    assert isinstance(m.update, Update), f"{m.name}: its update {m.update!r} (Method.update) is no registry.Update"
    assert m.timing_text and m.name in models.MODELS, f"{m.name}: its timing model has no text (Method.timing_text)"


def check_timeline_schedule(m):
    gantt = importlib.import_module("refsgd.timeline.gantt")
    if m.schedule is None:
        assert m.lacks.get("schedule"), (f"{m.name}: no timeline schedule (Method.schedule: a "
                                         "registry.Schedule) and no reason in Method.lacks")
        return
    assert isinstance(m.schedule, Schedule) and gantt.SCHEDULES.get(m.name) is m.schedule, \
        f"{m.name}: its timeline schedule {m.schedule!r} is not a registry.Schedule refsgd.timeline.gantt draws"


def check_docs_section(m):
    with open(os.path.join(ROOT, "docs", "algorithms.md")) as f:
        text = f.read()
    found = re.search(rf"^## {re.escape(m.section)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert found, f"{m.name}: no section '## {m.section}' in docs/algorithms.md (Method.listing)"
    assert re.search(rf"--algo {re.escape(m.name)}\b(?!-)", found.group(1)), \
        f"{m.name}: docs/algorithms.md, section '{m.section}', does not name `--algo {m.name}`"


def implementers_sections():
    """The method names of docs/implementers.md's sections (``## ssgd``, ``## laga-sgd, laga-sgdm,
    laga-sgdn``, ``## pp-asgd and asgd``)."""
    with open(os.path.join(ROOT, "docs", "implementers.md")) as f:
        titles = re.findall(r"^## (.+)$", f.read(), re.M)
    return {name for t in titles for name in re.split(r", | and ", t.strip())}


def check_implementers_section(m):
    assert m.name in implementers_sections(), (f"{m.name}: no section of docs/implementers.md names it "
                                               f"('## {m.name}', or one naming it among others)")


def check_train_list(m, listing):
    """Its line names it and says its summary (the paper and listing: LAGA's "Algorithm 3")."""
    lines = [line for line in listing.splitlines() if line.split()[:1] == [m.name]]
    assert lines, f"{m.name}: no line of `refsgd train --list`"
    assert m.summary in lines[0], f"{m.name}: its line of `refsgd train --list` does not say {m.summary!r}"


CHECKS = [check_entry_points, check_train_comes_first, check_golden_files, check_timing_model,
          check_timeline_schedule, check_docs_section, check_implementers_section, check_train_list]


@pytest.fixture(scope="module")
def listing():
    r = cli("train", "--list")
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[len("check_"):])
@pytest.mark.parametrize("name", list(METHODS))
def test_method(name, check, request, tmp_path):
    kw = {}
    if "tmp_path" in check.__code__.co_varnames[:check.__code__.co_argcount]:
        kw["tmp_path"] = tmp_path
    if "listing" in check.__code__.co_varnames[:check.__code__.co_argcount]:
        kw["listing"] = request.getfixturevalue("listing")
    check(METHODS[name], **kw)


def _world_of(m):
    """The world size of a method's MPI = serial check: its first golden's where the method has
    servers or nodes of ranks, 2 otherwise (2 where it has no golden: the check then names that)."""
    g = m.goldens[0] if m.goldens else None
    return g.workers if g and (m.servers or "ranks_per_node" in g.options) else 2


@pytest.mark.parametrize("name", [pytest.param(m.name, marks=pytest.mark.world(_world_of(m))) for m in METHODS.values()])
def test_serial_equals_mpi(name, tmp_path):
    """In the world session of its size (tests.helpers.world): the method's MPI run traces what its
    serial rendering computes, at its first golden configuration."""
    m = METHODS[name]
    if not m.goldens:
        pytest.fail(f"{m.name}: no golden configuration (Method.goldens) to run its MPI and serial renderings with")
    argv = m.goldens[0].argv(m.name)
    steps = int(argv[argv.index("--steps") + 1])
    common = [a for i, a in enumerate(argv) if a not in ("--workers", "--steps") and
              argv[i - 1] not in ("--workers", "--steps")]
    world.mpi_equals_serial(tmp_path, common, steps)


def test_a_kind_spelled_as_a_string_fails():
    """The null of the kinds' checks: a timing model, an update or a schedule given as the string
    it used to be, not the registry's enum, is refused by name."""
    m = METHODS["ssgd"]
    for bad, check in ((dict(timing_model="sequential"), check_timing_model), (dict(update="U/N"), check_timing_model),
                       (dict(schedule="blocking"), check_timeline_schedule)):
        with pytest.raises(AssertionError, match="ssgd: its"):
            check(dataclasses.replace(m, **bad))
