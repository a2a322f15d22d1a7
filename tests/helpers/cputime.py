"""Where the suite's CPU goes, test by test (a pytest plugin for developers, not loaded by default):

    REFSGD_CPUTIME=/tmp/cpu ./run.sh test -p tests.helpers.cputime
    .venv/bin/python -m tests.helpers.cputime /tmp/cpu [N]

The suite is CPU-bound on a small machine (its tests' processes take more CPU than the cores give
in its wall time), so a test's wall time, pytest's ``--durations``, says little: under pytest-xdist
it is mostly the other workers' load. What each test costs is its CPU: the seconds of its own
process and of the processes it started and waited for (``getrusage``: RUSAGE_SELF and
RUSAGE_CHILDREN before and after it; mpiexec's ranks count through the launcher, which waits for
them). Each worker (and each rank of a world session) appends a line per test to
``$REFSGD_CPUTIME/<worker>.jsonl``; the module, run as a script, prints the totals by file and the
N costliest tests.
"""

import collections
import glob
import json
import os
import resource
import sys
import time

import pytest

VARIABLE = "REFSGD_CPUTIME"


def _cpu():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    folder = os.environ.get(VARIABLE)
    own0, children0 = _cpu()
    t0 = time.monotonic()
    yield
    if not folder:
        return
    own1, children1 = _cpu()
    worker = os.environ.get("PYTEST_XDIST_WORKER") or f"rank{os.environ.get('PMI_RANK', '0')}-{os.getpid()}"
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{worker}.jsonl"), "a") as f:
        f.write(json.dumps(dict(test=item.nodeid, own=own1 - own0, children=children1 - children0,
                                wall=time.monotonic() - t0)) + "\n")


def summary(folder, n=30):
    """The totals by file and the ``n`` costliest tests (CPU seconds), as text."""
    rows = []
    for path in glob.glob(os.path.join(folder, "*.jsonl")):
        with open(path) as f:
            rows += [json.loads(line) for line in f]
    if not rows:
        return f"no test recorded in {folder}"
    cpu = {}
    by_file = collections.Counter()
    for r in rows:
        cpu[r["test"]] = cpu.get(r["test"], 0.0) + r["own"] + r["children"]
        by_file[r["test"].split("::")[0]] += r["own"] + r["children"]
    lines = [f"{len(cpu)} tests, {sum(cpu.values()):.0f} s of CPU (own + children)", "", "by file:"]
    lines += [f"  {s:8.1f} s  {name}" for name, s in by_file.most_common(n)]
    lines += ["", f"the {n} costliest tests:"]
    lines += [f"  {s:8.1f} s  {name}" for name, s in sorted(cpu.items(), key=lambda kv: -kv[1])[:n]]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python -m tests.helpers.cputime FOLDER [N]")
    print(summary(sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 30))
