"""`refsgd check` (a launch check, under the launcher) and `refsgd compile` (the Numba cache
warmed once before a job)."""

import os
import re
import subprocess
import sys

from tests.helpers.launch import ONE_THREAD, ROOT, cli

from refsgd import launch as check


def test_check_under_mpiexec_names_the_launch_and_measures_a_ping_pong():
    r = cli("check", n=2)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("refsgd check: 2 rank(s) on 1 node(s)\n"), out
    assert re.search(r"^  MPI library: (MPICH|Open MPI)", out, re.M), out
    assert re.search(r"^  started by: (mpiexec \(MPICH's hydra\)|mpirun \(Open MPI\))$", out, re.M), out
    assert "  ranks per node: 2\n" in out and "ranks 0-1" in out
    m = re.search(r"ping-pong within node \S+ \(ranks 0 and 1\): latency ([\d.e+]+) us, bandwidth ([\d.e+]+) GB/s", out)
    assert m and 0 < float(m.group(1)) < 1e5 and 0 < float(m.group(2)) < 1e3, out
    assert "ping-pong between nodes: no pair of ranks" in out
    assert re.search(r"Numba cache: .+: \d+ of \d+ kernels cached", out), out
    assert out.rstrip().splitlines()[-1].startswith(("warnings: none", "  - ")), out


def test_the_launcher_of_a_rank_is_its_parent_process():
    assert check.started_by({}, "hydra_pmi_proxy") == "mpiexec (MPICH's hydra)"
    assert check.started_by({"PMI_FD": "5", "SLURM_JOB_ID": "7"}, "slurmstepd") == "srun --mpi=pmi2 (Slurm)"
    assert check.started_by({"PMIX_RANK": "0"}, "slurmstepd") == "srun --mpi=pmix (Slurm)"
    assert check.started_by({}, "slurmstepd") == "srun without a PMI (--mpi=none)"
    assert check.started_by({"OMPI_COMM_WORLD_SIZE": "2"}, "mpiexec") == "mpirun (Open MPI)"
    assert check.started_by({}, "mpiexec") == "mpiexec"
    assert check.started_by({"SLURM_JOB_ID": "7"}, "hydra_pmi_proxy") == "mpiexec (MPICH's hydra), in Slurm job 7"


def test_compile_fills_an_empty_numba_cache(tmp_path):
    """With NUMBA_CACHE_DIR empty, `refsgd compile` leaves refsgd's kernels there, and `check`
    counts them."""
    env_dir = tmp_path / "numba"
    env = {**os.environ, **ONE_THREAD, "NUMBA_CACHE_DIR": str(env_dir)}
    r = subprocess.run([sys.executable, "-m", "refsgd", "compile", "--dtype", "float32"], capture_output=True,
                       text=True, timeout=900, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    m = re.search(r"the Numba cache (\S+) holds (\d+) of (\d+) kernels", r.stdout)
    assert m and m.group(1) == str(env_dir) and int(m.group(2)) >= 10, r.stdout
    assert len(list(env_dir.rglob("*.nbi"))) >= int(m.group(2))
