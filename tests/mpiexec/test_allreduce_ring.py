"""--allreduce ring: the configuration of every checked-in golden file (refsgd/registry.py), run
under mpiexec at 2, 3, 4 and 8 ranks, is bitwise (verify --rtol 0 --atol 0) the serial rendering
for that many workers, whatever the MPI library (CI runs this file under MPICH and Open MPI); and --allreduce mpi (the
default) is bitwise at 2 ranks, where a + b = b + a leaves the library no choice (but for dcs3gd,
whose eq. 17 norms are vectorised under mpi, in an order of the machine's: within round-off).

Each configuration is its golden file's (Method.goldens) with fewer steps (4; 6 for the staleness-3 methods;
three epochs for daso, so that its warm-up, cycling and cool-down all run), and for daso the
virtual nodes that the world size allows: 2 x 1 at 2 ranks, 3 x 1 at 3 (a group ring of 3), 2 x 2
at 4 (the golden file's) and 2 x 4 at 8 (a node-local ring of 4). dcasgd and ps-sync have no sum
over ranks (their server applies each push, or sums the gathered gradients itself): they run
without --allreduce, which they refuse.

Quick: one mpiexec job per world size trains every configuration in turn (main() of the command
line, once per configuration, in the same processes), and one process then writes the golden files
and verifies; a few seconds per world size on 2 cores (8 ranks oversubscribe them).
"""

import json
import os
import subprocess
import sys

import pytest
from tests.helpers.launch import ROOT, cli, mpi_env, mpiexec, scaled

from refsgd.registry import METHODS

GOLDEN = os.path.join(ROOT, "tests", "golden")
#: digits' training samples (the embedded data set), for daso's epochs
N_TRAIN = 1500


def _configurations():
    """(name, options) of every golden file of the registry (Method.goldens; regenerate.sh writes
    them), without --workers and --steps."""
    for m in METHODS.values():
        for g in m.goldens:
            words = g.argv(m.name)
            opts, i = [], 0
            while i < len(words):
                if words[i] in ("--workers", "--steps"):
                    i += 2
                    continue
                opts.append(words[i])
                i += 1
            yield g.file[:-len(".h5")], opts


CONFIGS = dict(_configurations())


def _option(opts, flag, value):
    """opts with flag's value replaced (or added)."""
    if flag in opts:
        i = opts.index(flag)
        return opts[:i + 1] + [value] + opts[i + 2:]
    return opts + [flag, value]


def _at(name, n):
    """(options, steps) of configuration ``name`` at n ranks."""
    opts = list(CONFIGS[name])
    algo = opts[opts.index("--algo") + 1]
    steps = 6 if "--staleness" in opts else 4
    if "ranks_per_node" in METHODS[algo].options:   # DASO's nodes
        opts = _option(opts, "--ranks-per-node", {2: "1", 3: "1", 4: "2", 8: "4"}[n])
        steps = 3 * (N_TRAIN // (n * int(opts[opts.index("--batch") + 1])))   # warm-up, cycling, cool-down
    return opts, steps


#: the MPI job: every configuration's `refsgd train --trace` in one launch (one Python and Numba
#: start-up per rank instead of one per configuration), each through the command line's main()
_TRAIN_ALL = """
import json, sys
from refsgd.cli import main
for argv in json.loads(sys.argv[1]):
    rc = main(["train", *argv])
    if rc:
        print("FAILED: refsgd train", *argv, flush=True)
        sys.exit(rc)
"""

#: no MPI: each configuration's golden file and verify (bitwise, or within round-off)
_CHECK_ALL = """
import json, sys
from refsgd.cli import main
from refsgd.trace import verify
for name, golden, checks in json.loads(sys.argv[1]):
    assert main(golden) == 0, golden
    for trace, rtol, atol in checks:
        ok, lines = verify(trace, golden[golden.index("--out") + 1], rtol=rtol, atol=atol)
        print(("OK " if ok else "FAILED ") + name + " " + trace + ": " + lines[-1], flush=True)
"""


def _check_world(tmp_path, n, names):
    """Every configuration of ``names`` at n ranks: --allreduce ring bitwise its golden file (and at
    2 ranks --allreduce mpi too). Returns the verify lines."""
    jobs, checks = [], []
    for name in names:
        opts, steps = _at(name, n)
        algo = opts[opts.index("--algo") + 1]
        run = ["--dtype", "float64", "--iterations", str(steps), "--no-progress", "--force"]
        ring = str(tmp_path / f"{name}-ring.h5")
        sums = "allreduce" in METHODS[algo].options   # a server's sums are its own (dcasgd, ps-sync)
        jobs.append(opts + (["--allreduce", "ring"] if sums else []) + run + ["--trace", ring])
        mine = [(ring, 0.0, 0.0)]
        if n == 2:  # --allreduce mpi (the default): a + b = b + a, bitwise too; dcs3gd's eq. 17 norms are
            mpi = str(tmp_path / f"{name}-mpi.h5")   # vectorised under mpi, in the machine's order: round-off
            jobs.append(opts + run + ["--trace", mpi])
            mine.append((mpi, 1e-10, 1e-12) if algo == "dcs3gd" else (mpi, 0.0, 0.0))
        golden = ["golden", *opts, "--workers", str(n), "--steps", str(steps), "--out",
                  str(tmp_path / f"{name}-golden.h5")]
        checks.append((name, golden, mine))
    r = subprocess.run(mpiexec(n) + [sys.executable, "-c", _TRAIN_ALL, json.dumps(jobs)], capture_output=True,
                       text=True, timeout=scaled(1200), env=mpi_env(), cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = subprocess.run([sys.executable, "-c", _CHECK_ALL, json.dumps(checks)], capture_output=True, text=True,
                       timeout=scaled(600), env=mpi_env(), cwd=ROOT)
    lines = [line for line in r.stdout.splitlines() if line.startswith(("OK ", "FAILED "))]
    assert r.returncode == 0 and len(lines) == sum(len(c[2]) for c in checks), r.stdout[-3000:] + r.stderr[-3000:]
    failed = [line for line in lines if not line.startswith("OK ")]
    assert not failed, "\n".join(failed)
    return lines


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_ring_is_bitwise_the_golden_rendering(tmp_path, n):
    names = list(CONFIGS)
    lines = _check_world(tmp_path, n, names)
    assert all("rtol 0, atol 0" in line for line in lines if "-ring.h5" in line)
    assert len(lines) == len(names) * (2 if n == 2 else 1)


def test_allreduce_is_refused_where_nothing_is_summed_over_ranks():
    for algo, why in (("dcasgd", "nothing is summed over ranks"), ("ps-sync", "sums the gathered gradients itself")):
        r = cli("golden", "--algo", algo, "--workers", "3", "--steps", "1", "--allreduce", "ring", "--model",
                "digits_tiny", "--out", os.devnull)
        assert r.returncode == 2 and f"--allreduce does not apply to --algo {algo}" in r.stderr and why in r.stderr, \
            r.stderr
    r = cli("golden", "--algo", "ssgd", "--workers", "3", "--steps", "1", "--allreduce", "mpi", "--model",
            "digits_tiny", "--out", os.devnull)
    assert r.returncode == 2 and "refsgd golden takes --allreduce ring" in r.stderr, r.stderr
