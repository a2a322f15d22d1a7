"""The pictures of refsgd's documentation site, each drawn by refsgd itself from the code, by the
commands the site shows beside it:

* ``start/first-job.png``: the README's first job (the ```bash block under "## A first job"), its
  ``refsgd report ... --plot cmp.png``;
* ``timeline.png``: the timeline guide's three methods (docs/guide/timeline.md, the ```bash block
  that ends with ``--timeline-plot timeline.png``);
* ``timelines/NAME.png``: each method's timeline, ``refsgd train --algo NAME <the registry's
  example> --timeline`` on 2 ranks and ``refsgd report --timeline-plot`` (the commands of its
  method page).

docs/pictures.json records, for each picture, the commands that drew it. ``./run.sh docs`` draws
every picture that is missing or whose commands changed (the cache: a build whose commands did not
change runs nothing), ``python docs/_ext/refsgd_pictures.py [--all] [NAME ...]`` draws them by hand
(``--all``: every one, current or not; NAME: a picture's path under docs/ or a method's name).
A picture is written atomically (a temporary name, then a rename), as every file of the build.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from refsgd.errors import RefsgdError
from refsgd.files import atomic_path, write_text

DOCS = Path(__file__).resolve().parent.parent
ROOT = DOCS.parent
#: picture (relative to docs/) -> the commands that drew it
STAMPS = DOCS / "pictures.json"

#: the options of every method's timeline run besides its registry example: the digits CNN (a
#: gradient long enough to see) and a slow emulated link (2 ms, 50 Mbit/s) so that the
#: communication and the timing model's rows show at the scale of its gradient
TIMELINE_RUN = ("--model", "digits_cnn", "--batch", "64", "--link", "2000,0.05", "--iterations", "10",
                "--eval-every", "100it", "--no-progress", "--timeline", "3:4")


class PictureError(Exception):
    """A picture that could not be drawn: one line, said by the build."""


def _block(path, pattern, what):
    """The commands of the ```bash block of ``path`` that ``pattern`` finds (its group 1),
    continuation lines joined, comments dropped, ``.venv/bin/`` left out (the venv's programs)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PictureError(f"{path}: cannot read {what} ({e})") from None
    m = re.search(pattern, text, flags=re.M | re.S)
    if m is None:
        raise PictureError(f"{path}: no ```bash block of {what} (its picture is drawn by its commands)")
    out = []
    for line in m.group(1).replace("\\\n", " ").splitlines():
        argv = [a.removeprefix(".venv/bin/") for a in shlex.split(line, comments=True)]
        if argv:
            out.append(shlex.join(argv))
    return out


def readme_first_job(readme=ROOT / "README.md"):
    """The commands of the README's first job: the first ```bash block after '## A first job'."""
    return _block(readme, r"^## A first job\n.*?^```bash\n(.*?)^```", "the README's first job")


def timeline_guide(page=DOCS / "guide" / "timeline.md"):
    """The commands of the timeline guide's picture: its ```bash block that draws timeline.png."""
    return _block(page, r"^```bash\n((?:(?!^```).)*?--timeline-plot timeline\.png\n)^```", "the guide's picture")


def timeline_commands(m):
    """The commands that draw method ``m``'s timeline (what its page shows)."""
    return [shlex.join(["mpiexec", "-n", "2", "refsgd", "train", "--algo", m.name, *TIMELINE_RUN, *m.example,
                        "--out", f"{m.name}.h5"]),
            shlex.join(["refsgd", "report", f"{m.name}.h5", "--timeline-plot", f"{m.name}.png"])]


def pictures(methods):
    """picture (relative to docs/) -> (its commands, the file they write)."""
    out = {"start/first-job.png": (readme_first_job(), "cmp.png"), "timeline.png": (timeline_guide(), "timeline.png")}
    for m in methods.values():
        out[f"timelines/{m.name}.png"] = (timeline_commands(m), f"{m.name}.png")
    return out


def _argv(command):
    """A shown command as this venv runs it: ``mpiexec -n N refsgd ...`` through refsgd.mpilib (the
    launcher of mpi4py's MPI library), ``refsgd`` the venv's."""
    venv = Path(sys.executable).parent
    argv = shlex.split(command)
    if argv[:1] == ["mpiexec"] and argv[1] == "-n" and argv[3:4] == ["refsgd"]:
        return [sys.executable, "-m", "refsgd.mpilib", "-n", argv[2], str(venv / "refsgd"), *argv[4:]]
    if argv[:1] == ["refsgd"]:
        return [str(venv / "refsgd"), *argv[1:]]
    raise PictureError(f"'{command}': a picture's command is mpiexec -n N refsgd ... or refsgd ...")


def stamps():
    try:
        return json.loads(STAMPS.read_text(encoding="utf-8")) if STAMPS.exists() else {}
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise PictureError(f"{STAMPS}: unreadable ({e}); remove it and the build redraws every picture") from None


def stale(methods):
    """The pictures that are missing or whose commands changed since they were drawn."""
    done = stamps()
    return [p for p, (cmds, _) in pictures(methods).items() if not (DOCS / p).exists() or done.get(p) != cmds]


def draw(methods, which=None, log=print):
    """Draw the pictures ``which`` (default: the stale ones) and record their commands."""
    todo = pictures(methods)
    which = stale(methods) if which is None else which
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        env.setdefault(k, "1")   # one thread per rank, as run.sh
    for pic in which:
        cmds, made = todo[pic]
        with tempfile.TemporaryDirectory() as tmp:
            for c in cmds:
                log(f"docs: {pic}: {c}")
                try:
                    r = subprocess.run(_argv(c), cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
                except (OSError, subprocess.TimeoutExpired) as e:
                    raise PictureError(f"{pic}: '{c}' did not run ({e})") from None
                if r.returncode:
                    last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
                    raise PictureError(f"{pic}: '{c}' failed (exit {r.returncode}): {last}")
            try:
                (DOCS / pic).parent.mkdir(parents=True, exist_ok=True)
                with atomic_path(DOCS / pic, what="the picture") as part:
                    shutil.copyfile(Path(tmp) / made, part)
            except OSError as e:
                raise PictureError(f"could not write docs/{pic} ({e.strerror or e})") from None
            except RefsgdError as e:
                raise PictureError(str(e)) from None
        done = stamps()
        done[pic] = cmds
        try:
            write_text(STAMPS, json.dumps(done, indent=1, sort_keys=True) + "\n", what="the pictures' commands")
        except RefsgdError as e:
            raise PictureError(str(e)) from None


def main(argv):
    from refsgd.registry import METHODS  # noqa: PLC0415 start-up: the module is also imported by the docs' build
    every = "--all" in argv
    names = [a for a in argv if a != "--all"]
    known = pictures(METHODS)
    which = list(known) if every else None
    if names:
        which = [n if n in known else f"timelines/{n}.png" for n in names]
        unknown = [w for w in which if w not in known]
        if unknown:
            sys.exit(f"refsgd_pictures: error: no such picture: {', '.join(unknown)} (known: {', '.join(known)})")
    try:
        draw(METHODS, which)
    except PictureError as e:
        sys.exit(f"refsgd_pictures: error: {e}")


if __name__ == "__main__":
    main(sys.argv[1:])
