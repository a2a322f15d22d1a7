"""Every command of the README and of the documentation's pages runs as written, as doctests do for
code: each page's ```bash commands, in order, in a folder of their own (so that no page's output
collides with another's), with this venv (``.venv/bin/X``, and ``.venv/bin/mpiexec -n N`` the
launcher of mpi4py's MPI library) and exit code 0. A command that cannot run here is not run, and
the test says why (a download, Slurm, another machine, root, the suite itself, an hour's run);
tests/test_readme_commands.py checks, without running them, that their files do not collide.
The pages whose commands take minutes are marked ``slow``."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.launch import ROOT, mpi_env, mpiexec
from tests.test_readme_commands import ELSEWHERE, PAGES, commands

#: why a command is not run here, by a word it has (besides tests/test_readme_commands.ELSEWHERE)
NOT_HERE = {"data download": "a download (no network in the tests)", "mnist": "a download's data",
            "./run.sh setup": "the set-up the suite runs in", "./run.sh test": "the suite itself",
            "source": "a shell's state", "hosts": "other machines (a hostfile)",
            "reproduce all": "an hour's run (refsgd reproduce all)", "bench all": "minutes of benchmarks",
            "laga-table1": "a download's data (mnist)", "cifar10_cnn": "minutes of a CIFAR model",
            "pip install": "an install from PyPI", "my_backend": "a backend the reader writes"}
#: the pages with commands besides the README's old ones (tests/test_readme_commands.PAGES); the first
#: run's page (start/first-run) is run by tests/mpiexec/test_docs_first_run.py, which also checks
#: what each command shows
OTHER_PAGES = ("implementers", "conformance")
#: the pages, each run in its own folder, and those whose commands take minutes
SLOW = {"guide/bench", "guide/daso", "guide/training", "implementers/golden-trajectories"}
VENV = Path(sys.executable).parent


def page_commands(page):
    path = Path(ROOT) / ("README.md" if page == "README" else f"docs/{page}.md")
    return commands(path.read_text(encoding="utf-8"))


def why_not(argv):
    line = " ".join(argv)
    return next((w for word, w in {**ELSEWHERE, **NOT_HERE}.items() if word in line), None)


def as_run_here(argv):
    """``argv`` as this venv runs it (None: not a program of the venv or the repository)."""
    env = {}
    while argv and re.fullmatch(r"[A-Z_]+=\S*", argv[0]):
        k, _, v = argv[0].partition("=")
        env[k] = v
        argv = argv[1:]
    if argv[0] in (".venv/bin/mpiexec", "mpiexec") and argv[1] == "-n":
        n = int(argv[2])
        assert 1 <= n <= 4, argv     # the machine is shared: at most 4 ranks
        argv = mpiexec(n) + argv[3:]
    elif argv[0] == "./run.sh":
        argv = [str(Path(ROOT) / "run.sh")] + argv[1:]
        env["REFSGD_NP"] = "2"
    argv = [str(VENV / a.split("/")[-1]) if a.startswith(".venv/bin/") or a == "refsgd" else a for a in argv]
    return argv, env


def _params():
    out = []
    for page in ("README", *OTHER_PAGES, *PAGES):
        if page_commands(page):
            marks = [pytest.mark.slow] if page in SLOW else []
            out.append(pytest.param(page, marks=marks, id=page))
    return out


@pytest.mark.parametrize("page", _params())
def test_every_command_of_the_page_runs(page, tmp_path):
    ran, skipped = [], []
    for line, argv in page_commands(page):
        why = why_not(argv)
        if not why and argv[1:2] == ["verify"] and not (tmp_path / argv[2]).exists():
            why = f"reads {argv[2]}, the reader's own implementation's trace"
        if why:
            skipped.append(f"{' '.join(argv)} ({why})")
            continue
        run, extra = as_run_here(argv)
        r = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=900,
                           env=mpi_env(dict(os.environ), **extra))
        assert r.returncode == 0, f"{page}, line {line}: {shlex.join(argv)}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        ran.append(argv)
    if not ran:
        pytest.skip(f"{page}: none of its commands runs here: " + "; ".join(skipped))
    # the outputs each command names are there
    for argv in ran:
        for flag in ("--out", "--plot", "--timeline-plot", "--timeline", "--trace", "--json"):
            if flag in argv[:-1] and not re.match(r"[-\d]", argv[argv.index(flag) + 1]):   # a file, not 5:4
                out = tmp_path / argv[argv.index(flag) + 1]
                assert out.exists() and out.stat().st_size > 0, (page, shlex.join(argv), flag)


def test_a_failing_command_fails_the_page(tmp_path, monkeypatch):
    """The null: a page whose command fails (an unknown option) is refused."""
    monkeypatch.setattr(sys.modules[__name__], "page_commands",
                        lambda page: [(1, [".venv/bin/refsgd", "train", "--no-such-option"])])
    with pytest.raises(AssertionError, match="no-such-option"):
        test_every_command_of_the_page_runs("x", tmp_path)
