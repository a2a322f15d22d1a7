"""The conformance suite's one test, which refsgd's pytest plugin (refsgd.conformance.plugin)
generates once per configuration: ``pytest --pyargs refsgd.conformance --backend module:Class``."""

import pytest


def test_conformance(conformance_configuration, conformance_run):
    outcome = conformance_run(conformance_configuration)
    if not outcome.ok:
        pytest.fail(f"{conformance_configuration.name}: {outcome.message}\n" + "\n".join(outcome.lines), pytrace=False)
