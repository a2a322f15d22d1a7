"""The conformance configurations cover every option that changes a method's trajectory
(refsgd.conformance.coverage): the check passes on the suite, and fails, naming the method and
the option, on a suite with a configuration taken away."""

import dataclasses

from refsgd.conformance.coverage import uncovered
from refsgd.conformance.suite import configurations


def test_every_trajectory_option_of_every_method_is_exercised():
    assert uncovered(configurations()) == []


def test_the_check_names_the_method_and_the_option_a_removed_configuration_left_uncovered():
    cs = configurations()
    assert uncovered([c for c in cs if c.name != "dcasgd-adaptive-wd-n4"]) == [
        "dcasgd: --weight-decay never differs from its default (0.0) in its configurations "
        "(dcasgd-n3, dcasgd-n3-float32, dcasgd-l01-n4)",
        "dcasgd: --dc-adaptive never differs from its default (False) in its configurations "
        "(dcasgd-n3, dcasgd-n3-float32, dcasgd-l01-n4)",
        "dcasgd: --dc-ms-decay never differs from its default (0.95) in its configurations "
        "(dcasgd-n3, dcasgd-n3-float32, dcasgd-l01-n4)"]
    gaps = uncovered([c for c in cs if c.name not in ("ssgd-nesterov-wd-n3", "ssgd-mxnet-wd-n2")])
    assert [g.split(" never")[0] for g in gaps if " never differs" in g] == [
        "ssgd: --nesterov", "ssgd: --momentum-form", "ssgd: --weight-decay"]
    assert "ssgd: the learning rate is constant in every configuration (--schedule)" in gaps
    assert any(g.startswith("ssgd: every configuration runs at a world size that is a power of two (2, 4)")
               for g in gaps)
    # a new method without a configuration, and a variant at its default value, are gaps too
    assert uncovered([c for c in cs if c.method != "local-sgd"]) == ["local-sgd: no configuration"]
    at_default = [dataclasses.replace(c, options=dict(c.options, dependency=2)) if c.name == "pipe-sgd-k3-warmup-n3"
                  else c for c in cs]
    assert [g.split(" never")[0] for g in uncovered(at_default)] == ["pipe-sgd: --dependency"]


def test_the_docs_list_the_configurations_as_refsgd_conformance_list_does(capfd):
    import os  # noqa: PLC0415
    import re  # noqa: PLC0415

    from tests.helpers.in_process import refsgd  # noqa: PLC0415
    from tests.helpers.launch import ROOT  # noqa: PLC0415

    from refsgd.conformance import listing  # noqa: PLC0415
    page = open(os.path.join(ROOT, "docs", "conformance.md")).read()
    shown = re.search(r"<!-- configurations -->\n(.*?)<!-- /configurations -->", page, re.S)
    assert shown and shown.group(1) == listing.markdown(configurations())
    r = refsgd(capfd, "conformance", "--list", "--algo", "dcasgd")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "4 configurations (model digits_tiny, the embedded digits)"
    assert lines[3].split() == ["dcasgd-adaptive-wd-n4", "dcasgd", "4", "6", "float64", "none", "--ps-order",
                                "round-robin", "--dc-lambda", "2.0", "--lr", "0.1", "--batch", "16", "--dc-adaptive",
                                "--dc-ms-decay", "0.9", "--weight-decay", "0.01"]
