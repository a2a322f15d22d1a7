"""refsgd's pytest plugin (installed with refsgd, entry point ``pytest11``): the conformance
suite as generated test cases, as ONNX's backend tests::

    pytest --pyargs refsgd.conformance --backend mypkg.mymodule:MyBackend
    pytest --pyargs refsgd.conformance --backend my_backend.py:Backend --conformance-include '^ssgd' -rs

One test per configuration (``test_conformance[ssgd-n2]``); a configuration the backend does not
declare is skipped ("not declared"), one that ``--conformance-include`` / ``--conformance-exclude``
(regular expressions, ``re.search`` on the name, repeatable) leaves out is not generated. A
failure names the first step, worker, array and index that differ, with both values.

Without ``--backend`` the plugin adds its options and nothing else: it imports no NumPy and
touches no other test, so that pytest runs of other projects in the same environment are
unchanged.
"""

import os

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("refsgd-conformance", "refsgd conformance suite (pytest --pyargs refsgd.conformance)")
    group.addoption("--backend", metavar="MODULE:CLASS", default=None,
                    help="the implementation to check: module.path:Class or path/to/file.py:Class "
                         "(a subclass of refsgd.conformance.Backend)")
    group.addoption("--conformance-include", metavar="REGEX", action="append", default=[],
                    help="only the configurations whose name matches (repeatable)")
    group.addoption("--conformance-exclude", metavar="REGEX", action="append", default=[],
                    help="leave out the configurations whose name matches (repeatable)")
    group.addoption("--conformance-traces", metavar="DIR", default=None,
                    help="keep the backend's traces (DIR/<name>.h5) and the expected ones (DIR/expected/)")


def pytest_configure(config):
    text = config.getoption("backend", None)
    if text:
        from refsgd.conformance.backend import load_backend  # noqa: PLC0415 start-up: the plugin loads with every pytest run; NumPy and h5py only with --backend
        from refsgd.errors import RefsgdError  # noqa: PLC0415 start-up: the plugin loads with every pytest run; NumPy and h5py only with --backend
        from refsgd.conformance.backend import declared, instantiate  # noqa: PLC0415 start-up: the plugin loads with every pytest run; NumPy and h5py only with --backend
        from refsgd.conformance.suite import configurations  # noqa: PLC0415 start-up: the plugin loads with every pytest run; NumPy and h5py only with --backend
        from refsgd.registry import METHODS  # noqa: PLC0415 start-up: the plugin loads with every pytest run; NumPy and h5py only with --backend
        try:   # every bad input here, as one line (a UsageError), not as a collection error
            keep = config.getoption("conformance_traces")
            if keep is not None and (not keep.strip() or os.path.lexists(keep) and not os.path.isdir(keep)):
                raise RefsgdError(f"--conformance-traces {keep!r}: not a folder")
            chosen = configurations(config.getoption("conformance_include"), config.getoption("conformance_exclude"))
            backend = load_backend(text)
            ours = declared(instantiate(backend, text), text, chosen, METHODS)
            if not ours:   # all skipped would be a green run that checked nothing
                raise RefsgdError(f"{text} declares none of the {len(chosen)} configurations chosen (its methods, "
                                  "dtypes, codecs and world_sizes, or supports())")
        except RefsgdError as e:
            raise pytest.UsageError(str(e)) from None
        config._refsgd_backend = (text, backend, chosen, {c.name for c in ours})


def pytest_generate_tests(metafunc):
    if "conformance_configuration" not in metafunc.fixturenames:
        return
    loaded = getattr(metafunc.config, "_refsgd_backend", None)
    if loaded is None:
        metafunc.parametrize("conformance_configuration", [pytest.param(None, marks=pytest.mark.skip(
            reason="give the backend to check: --backend module:Class"))])
        return
    text, _, chosen, ours = loaded
    params = [pytest.param(c, id=c.name, marks=() if c.name in ours else pytest.mark.skip(
        reason=f"not declared by {text}")) for c in chosen]
    metafunc.parametrize("conformance_configuration", params)


@pytest.fixture(scope="session")
def conformance_folders(request, tmp_path_factory):
    """(the folder of the backend's traces, the References of the expected ones)."""
    from refsgd.conformance.suite import References  # noqa: PLC0415 start-up: the plugin loads with every pytest run; NumPy and h5py only with --backend
    keep = request.config.getoption("conformance_traces")
    if keep:
        os.makedirs(os.path.join(keep, "expected"), exist_ok=True)
        return keep, References(os.path.join(keep, "expected"))
    base = tmp_path_factory.mktemp("refsgd-conformance")
    os.makedirs(base / "expected")
    return str(base), References(str(base / "expected"))


@pytest.fixture
def conformance_run(request, conformance_folders):
    """run(configuration) -> Outcome: the backend given with --backend through one configuration."""
    from refsgd.conformance.suite import run  # noqa: PLC0415 start-up: the plugin loads with every pytest run; NumPy and h5py only with --backend
    from refsgd.errors import Stopped  # noqa: PLC0415 start-up: the plugin loads with every pytest run; NumPy and h5py only with --backend
    text, backend = request.config._refsgd_backend[:2]
    folder, references = conformance_folders

    def run_one(configuration):
        try:
            return run(backend, configuration, references, os.path.join(folder, f"{configuration.name}.h5"), name=text)
        except Stopped as e:   # SIGTERM: the session ends interrupted, no test failed
            raise KeyboardInterrupt(str(e)) from None
    return run_one
