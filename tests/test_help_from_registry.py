"""The command line's help derives what it says of each method from the registry (issue 44): no
option's help, in any command, names a method by hand. Checked by building every command's parser
in a process whose registry renames every method (``method0``, ``method1``, ...): what the
registry says (Method.option_help, Method.lr_meaning, Method.defaults, the methods an option
applies to, the methods with servers or timing models) then names the new names, and any real
--algo name left in a help string was written by hand (and drifts: --nesterov listed three of the
four methods that take it, --lr's meanings left out local SGD)."""

import json
import re
import subprocess
import sys

from refsgd import registry
from tests.helpers.launch import scaled

#: every (command, option, method names found) whose help names a method by hand, with the
#: registry renamed; argv[1]: a JSON list of extra (help text) to add to a parser first (the null)
SCAN = r"""
import argparse, dataclasses, json, re, sys
from refsgd import registry
real = list(registry.METHODS)
renamed = {f"method{i}": dataclasses.replace(m, name=f"method{i}") for i, m in enumerate(registry.METHODS.values())}
registry.METHODS.clear()
registry.METHODS.update(renamed)
from refsgd.cli.app import build_parser
parser = build_parser()
for i, text in enumerate(json.loads(sys.argv[1])):
    parser.add_argument(f"--injected-{i}", help=text)
names = sorted(real, key=len, reverse=True)
pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, names)) + r"|laga-\*)(?![\w-])")
def walk(p, path):
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from walk(sub, path + [name])
        elif a.help and a.help != argparse.SUPPRESS:
            yield " ".join(path), (a.option_strings or [a.dest])[0], a.help
found, helps = [], {}
for command, option, text in walk(parser, []):
    helps[f"{command} {option}"] = text
    if pattern.findall(text):
        found.append([command, option, sorted(set(pattern.findall(text)))])
print(json.dumps(dict(found=found, helps=helps)))
"""


def _scan(*injected):
    r = subprocess.run([sys.executable, "-c", SCAN, json.dumps(list(injected))], capture_output=True, text=True,
                       timeout=scaled(120))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_no_help_names_a_method_by_hand():
    out = _scan()
    assert out["found"] == [], out["found"]
    helps = out["helps"]
    assert len(helps) > 150                                       # every option of every command was read
    # the per-method words are the registry's, for every method they concern
    def names(text, i):
        return re.search(rf"\bmethod{i}\b", text) is not None

    for i, m in enumerate(registry.METHODS.values()):
        assert names(helps["train --lr"].split(m.lr_meaning)[0], i), (m.name, helps["train --lr"])
        for option in ("--nesterov", "--momentum-form"):
            taken = option[2:].replace("-", "_") in m.applies
            assert names(helps[f"train {option}"], i) == taken, (m.name, option, helps[f"train {option}"])
    local = list(registry.METHODS).index("local-sgd")              # local SGD's meaning of --sync-every
    assert names(helps["train --sync-every"], local) and registry.METHODS["local-sgd"].option_help["sync_every"] \
        in helps["train --sync-every"]


def test_a_method_named_by_hand_is_found():
    """The check's null: a help string written with method names (the old --nesterov's) is found,
    with the names it holds."""
    out = _scan("Nesterov momentum, PyTorch semantics (ssgd, ssgd-opt, daso); laga-* too")
    assert out["found"] == [["", "--injected-0", ["daso", "laga-*", "ssgd", "ssgd-opt"]]], out["found"]
