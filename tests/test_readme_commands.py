"""README.md's shell commands (and those of the documentation pages that hold the old README's
text, docs/start, guide, ...) run as written in a fresh clone (issue 33, item 5: its timeline
command wrote onto docs/timeline.png, which a clone has, and was refused). Read, not run (fast):
the commands of its ```bash blocks, in order, continuations joined and `for` loops unrolled;
those meant for this machine (not srun, Open MPI's venv, the cluster, or data to download) must
write no file of the repository, no file another README command writes first, and read only
files that an earlier command writes or the repository has."""

import os
import re
import shlex
import subprocess

import pytest
from tests.helpers.launch import ROOT

#: the options of each refsgd command whose value is a file or folder it writes
OUTPUTS = {"train": ("--out", "--trace", "--checkpoint"), "golden": ("--out",),
           "report": ("--plot", "--csv", "--json", "--timeline", "--timeline-plot"),
           "bench overlap": ("--json",), "bench scale": ("--plot",), "bench all": ("--out-dir",),
           "reproduce": ("--out-dir",)}
#: the folder a command writes when its option is not given
DEFAULT_OUTPUT = {"bench all": "bench", "reproduce": "reproduce"}
#: the commands whose leading positional arguments are files they read
READS = ("report", "verify", "data info")
#: why a command is not meant to run here, by a word it has
ELSEWHERE = {"srun": "Slurm", "apt-get": "a system package (root)", "scripts/cluster": "network namespaces (root)",
             "REFSGD_VENV": "the Open MPI venv", "PATH/TO": "a download", "DIR": "a download",
             "cifar-10-batches-py": "a download", "cifar-100-python": "a download", "...": "an ellipsis"}


def bash_blocks(text):
    """(README line, text) of each ```bash block."""
    for m in re.finditer(r"^```bash\n(.*?)^```", text, re.M | re.S):
        yield text[:m.start()].count("\n") + 2, m.group(1)


def commands(text):
    """(README line, argv) of every command of the ```bash blocks, in order (the lines of a block
    whose commands span several lines are approximate: the block's line plus the command's index)."""
    out = []
    for first, block in bash_blocks(text):
        lines = block.replace("\\\n", " ").splitlines()
        i = 0
        while i < len(lines):
            argv = shlex.split(lines[i], comments=True)
            if argv[:1] == ["for"]:      # for VAR in A B ...; do  BODY  done
                var, values = argv[1], " ".join(argv[3:]).split(";")[0].split()
                body, at = [], first + i
                i += 1
                while lines[i].strip() != "done":
                    body.append(lines[i])
                    i += 1
                for v in values:
                    for b in body:
                        out.append((at, shlex.split(re.sub(rf"\$\{{?{var}\}}?", v, b), comments=True)))
            elif argv:
                out.append((first + i, argv))
            i += 1
    return out


def refsgd_call(argv):
    """(command name, its arguments) of a refsgd command line (without mpiexec and variables), or
    None for another program."""
    while argv and re.fullmatch(r"[A-Z_]+=\S*", argv[0]):
        argv = argv[1:]
    if argv and (argv[0].endswith("mpiexec") or argv[0] == "srun"):
        argv = argv[3:]          # mpiexec -n N, srun -n N
    if not argv or not (argv[0].endswith("bin/refsgd") or argv[0] == "refsgd") or len(argv) < 2:
        return None
    name = " ".join(argv[1:3]) if argv[1] in ("bench", "data") else argv[1]
    return name, argv[1 + len(name.split()):]


def files_of(name, args):
    """(written, read) paths of a refsgd command."""
    written = [args[i + 1] for i, a in enumerate(args[:-1]) if a in OUTPUTS.get(name, ())]
    if not written and name in DEFAULT_OUTPUT and "--list" not in args:
        written = [DEFAULT_OUTPUT[name]]
    if name == "reproduce":
        written += [w.rstrip("/") + ".md" for w in written]   # its index, beside the folder
    if name == "data convert":
        written.append(args[2])
    read = []
    if name in READS:
        for a in args:
            if a.startswith("-"):
                break
            read.append(a)
    return written, read


def _tracked():
    try:
        r = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    except OSError:
        r = None
    if r is None or r.returncode != 0:
        pytest.skip("not a git checkout: which files a clone has is unknown")
    files = set(r.stdout.splitlines())
    return files | {os.path.dirname(f) for f in files} | {"."}


def _inside(path):
    """``path`` relative to the repository's root, or None when it lies outside it."""
    full = os.path.normpath(os.path.join(ROOT, path))
    return os.path.relpath(full, ROOT) if full.startswith(ROOT + os.sep) else None


def check(text, tracked):
    """The problems of README ``text`` (empty: every command meant for here runs as written)."""
    problems, made, elsewhere, ran = [], {}, set(), 0
    for line, argv in commands(text):
        call = refsgd_call(argv)
        written, read = files_of(*call) if call else ([], [])
        why = next((w for word, w in ELSEWHERE.items() if any(word in a for a in argv)), None) \
            or next((f"{r} from such a command" for r in read if r in elsewhere), None)
        if why:                                   # not meant to run here: what it writes is not made here
            elsewhere.update(written)
            continue
        ran += 1
        for r in read:
            if r not in made and _inside(r) not in tracked:
                problems.append(f"README line {line}: {' '.join(argv)}: reads {r}, which no command before it "
                                "writes and a clone does not have")
        for w in written:
            rel = _inside(w)
            if rel is None:
                continue
            if rel in tracked or any(t.startswith(rel + "/") for t in tracked):
                problems.append(f"README line {line}: {' '.join(argv)}: writes {w}, which a clone has (a "
                                "command refuses it, or with --force overwrites the repository's)")
            elif rel in made and "--force" not in argv:
                problems.append(f"README line {line}: {' '.join(argv)}: writes {w}, which line {made[rel]} "
                                "already wrote (refused without --force)")
            made.setdefault(rel, line)
    return problems, ran


#: the pages that hold the old README's commands (issue 37), in the order the README had them: the
#: README (the front page) and then these read as one text
PAGES = ("start/index", "start/install", "guide/training", "start/summary", "guide/python", "start/outputs",
         "guide/checkpoints", "guide/compression", "guide/daso", "guide/overlap", "guide/timeline",
         "implementers/golden-trajectories", "guide/models-data", "guide/bench", "guide/reproduce",
         "guide/cluster", "contributing/testing", "contributing/layout")


def test_readme_commands_run_as_written_in_a_fresh_clone():
    texts = [os.path.join(ROOT, "README.md")] + [os.path.join(ROOT, "docs", p + ".md") for p in PAGES]
    text = "\n".join(open(t).read() for t in texts)
    problems, ran = check(text, _tracked())
    assert ran >= 20, f"only {ran} README commands found to check: the parser missed the blocks"
    assert not problems, "\n".join(problems)


def test_the_check_finds_what_failed_before():
    """The README of before: the timeline plot onto docs/timeline.png, reproduce onto docs/results,
    golden's ssgd.h5 after the timeline's, and a report of a file nothing wrote."""
    old = ("```bash\n"
           "for a in ssgd laga-sgd; do\n"
           "  .venv/bin/mpiexec -n 2 .venv/bin/refsgd train --algo $a --timeline 5:4 \\\n"
           "      --out $a.h5\n"
           "done\n"
           ".venv/bin/refsgd report ssgd.h5 laga-sgd.h5 --timeline-plot docs/timeline.png  # a comment\n"
           ".venv/bin/refsgd golden --algo ssgd --workers 4 --steps 50 --out ssgd.h5\n"
           ".venv/bin/refsgd reproduce all --out-dir docs/results\n"
           ".venv/bin/refsgd report nowhere.h5\n"
           "srun -n 64 .venv/bin/refsgd train --out far.h5\n"
           ".venv/bin/refsgd report far.h5\n"
           "```\n")
    problems, ran = check(old, {"docs", "docs/timeline.png", "docs/results/daso.md", "docs/results", "."})
    assert ran == 6
    assert len(problems) == 4, problems
    assert "writes docs/timeline.png, which a clone has" in problems[0]
    assert "writes ssgd.h5, which line 2 already wrote" in problems[1]
    assert "writes docs/results, which a clone has" in problems[2]
    assert "reads nowhere.h5" in problems[3]


def test_git_status_stays_clean_after_the_docs_commands():
    """Every file that the README's and the pages' commands write in the repository's folder is
    ignored by git (.gitignore), so that `git status` after them lists nothing (issue 46)."""
    _tracked()   # a git checkout
    texts = [os.path.join(ROOT, "README.md")] + [os.path.join(ROOT, "docs", p + ".md") for p in PAGES + ("start/first-run",)]
    written = set()
    for t in texts:
        for _, argv in commands(open(t).read()):
            call = refsgd_call(argv)
            if call:
                written.update(w for w in files_of(*call)[0] if _inside(w))
    assert {"first.h5", "dc.h5", "cmp.png"} <= written, written
    r = subprocess.run(["git", "check-ignore", "--no-index", *sorted(written)], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    ignored = set(r.stdout.split())
    assert written <= ignored, f"not in .gitignore: {sorted(written - ignored)}"
