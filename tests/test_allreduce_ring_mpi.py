"""--allreduce ring: the configuration of every checked-in golden file, run under mpiexec at 2, 3, 4
and 8 ranks, is bitwise (verify --rtol 0 --atol 0) the serial rendering for that many workers,
whatever the MPI library (CI runs this file under MPICH and Open MPI); and --allreduce mpi (the
default) is bitwise at 2 ranks, where a + b = b + a leaves the library no choice (but for dcs3gd,
whose eq. 17 norms are vectorised under mpi, in an order of the machine's: within round-off).

Each configuration is regenerate.sh's line with fewer steps (4; 6 for the staleness-3 methods;
three epochs for daso, so that its warm-up, cycling and cool-down all run), and for daso the
virtual nodes that the world size allows: 2 x 1 at 2 ranks, 3 x 1 at 3 (a group ring of 3), 2 x 2
at 4 (the golden file's) and 2 x 4 at 8 (a node-local ring of 4). dcasgd has no sum over ranks
(its server applies each push): it runs without --allreduce, which it refuses. At 8 ranks (which
oversubscribe a small machine) a subset runs, one configuration per kind of reduction: EIGHT.
"""

import os

import pytest
from conftest import ROOT, cli

GOLDEN = os.path.join(ROOT, "tests", "golden")
#: digits' training samples (the embedded data set), for daso's epochs
N_TRAIN = 1500
#: at 8 ranks: every reduction site once (SSGD's blocking L2, DC-S3GD's and LAGA's Iallreduce,
#: Pipe-SGD's communication thread, a codec's ring, DASO's node and group rings, PP-ASGD's L5,
#: DC-ASGD's server)
EIGHT = {"ssgd-n4", "dcs3gd-n4", "laga-sgdn-n4", "pipe-sgd-k2-n4", "pipe-sgd-k2-t16-n4", "daso-2x2-n4",
         "pp-asgd-s3-n2", "dcasgd-n3"}


def _configurations():
    """(name, options) of every line of regenerate.sh, without --workers, --steps, --out, --force."""
    with open(os.path.join(GOLDEN, "regenerate.sh")) as f:
        for line in f:
            if not line.startswith("$R golden"):
                continue
            words = line.split()[2:]
            name = words[words.index("--out") + 1][:-len(".h5")]
            opts, i = [], 0
            while i < len(words):
                if words[i] in ("--workers", "--steps", "--out"):
                    i += 2
                    continue
                if words[i] != "--force":
                    opts.append(words[i])
                i += 1
            yield name, opts


CONFIGS = dict(_configurations())
CASES = [(name, n) for name in CONFIGS for n in (2, 3, 4, 8) if n < 8 or name in EIGHT]


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
    steps = 6 if algo in ("pp-asgd", "asgd") else 4
    if algo == "daso":
        opts = _option(opts, "--ranks-per-node", {2: "1", 3: "1", 4: "2", 8: "4"}[n])
        steps = 3 * (N_TRAIN // (n * int(opts[opts.index("--batch") + 1])))   # warm-up, cycling, cool-down
    return opts, steps


def _verify(tmp_path, opts, n, steps, tag, rtol="0"):
    trace = tmp_path / f"{tag}.h5"
    r = cli("train", *opts, "--dtype", "float64", "--iterations", str(steps), "--no-progress", "--trace", str(trace),
            n=n, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    atol = "0" if rtol == "0" else "1e-12"
    r = cli("verify", str(trace), str(tmp_path / "golden.h5"), "--rtol", rtol, "--atol", atol)
    assert r.returncode == 0 and f"OK: {steps} steps x {n} workers agree" in r.stdout, r.stdout + r.stderr
    return r.stdout


@pytest.mark.parametrize("name, n", CASES, ids=[f"{name}-np{n}" for name, n in CASES])
def test_ring_is_bitwise_the_golden_rendering(tmp_path, name, n):
    opts, steps = _at(name, n)
    algo = opts[opts.index("--algo") + 1]
    r = cli("golden", *opts, "--workers", str(n), "--steps", str(steps), "--out", str(tmp_path / "golden.h5"))
    assert r.returncode == 0, r.stderr
    ring = opts if algo == "dcasgd" else opts + ["--allreduce", "ring"]
    _verify(tmp_path, ring, n, steps, "ring")
    if n == 2 and algo != "dcs3gd":  # --allreduce mpi (the default): a + b = b + a, bitwise too
        out = _verify(tmp_path, opts, n, steps, "mpi")
        if algo != "dcasgd":
            assert "A summed over workers with --allreduce mpi, B with ring" in out
    elif n == 2:  # dcs3gd under mpi lets LLVM vectorise eq. 17's norms: the golden to round-off
        _verify(tmp_path, opts, n, steps, "mpi", rtol="1e-10")


def test_allreduce_is_refused_where_nothing_is_summed_over_ranks():
    for algo, why in (("dcasgd", "nothing is summed over ranks"), ("ps-sync", "sums the gathered gradients itself")):
        r = cli("golden", "--algo", algo, "--workers", "3", "--steps", "1", "--allreduce", "ring", "--model",
                "digits_tiny", "--out", os.devnull)
        assert r.returncode == 2 and f"--allreduce does not apply to --algo {algo}" in r.stderr and why in r.stderr, \
            r.stderr
    r = cli("golden", "--algo", "ssgd", "--workers", "3", "--steps", "1", "--allreduce", "mpi", "--model",
            "digits_tiny", "--out", os.devnull)
    assert r.returncode == 2 and "refsgd golden takes --allreduce ring" in r.stderr, r.stderr
