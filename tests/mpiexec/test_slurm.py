"""A real Slurm on the namespace cluster (`scripts/cluster up --slurm`): the job scripts of
examples/slurm run as a user submits them, a launch of singletons is refused, and scancel, a
time limit and a pre-emption warning each leave a checkpoint that the requeued job resumes bitwise.

Marker `cluster`; needs what tests/test_cluster.py needs and Slurm with MUNGE (Debian:
`apt-get install slurm-wlm munge`; .ci/run installs them), and skips with the reason elsewhere.
The recipes follow this venv's MPI library: the mpich wheel's (mpich-wheel.sbatch,
srun-pmi2.sbatch) or, under CI's Open MPI venv, the system MPI's (system-mpi.sbatch)."""

import os
import re
import shutil
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from tests.helpers.launch import ONE_THREAD, ROOT, scaled
from tests.helpers.launch import cli as refsgd
from tests.test_cluster import REASON as CLUSTER_REASON
from tests.test_cluster import SCRIPT, _verify

from refsgd import mpilib


def _missing():
    if CLUSTER_REASON:
        return CLUSTER_REASON
    tools = [t for t in ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "srun") if shutil.which(t) is None]
    return "needs Slurm and MUNGE (apt-get install slurm-wlm munge): missing " + ", ".join(tools) if tools else ""


REASON = _missing()
pytestmark = [pytest.mark.cluster, pytest.mark.skipif(bool(REASON), reason=REASON or "-")]
KIND = mpilib.library_kind()
hydra_only = pytest.mark.skipif(KIND != "hydra", reason="the mpich wheel's recipe (this venv's MPI is another)")
RECIPE = "mpich-wheel.sbatch" if KIND == "hydra" else "system-mpi.sbatch"
ENV = {**ONE_THREAD, "REFSGD_VENV": sys.prefix, "REFSGD_IFACE": "eth0"}


class Slurm:
    def __init__(self, name):
        self.name = name

    def exec(self, *cmd, timeout=120, **kw):
        """COMMAND in the head namespace (the login node), from the checkout."""
        return subprocess.run([SCRIPT, "exec", "--name", self.name, "head", "--", "env",
                               *[f"{k}={v}" for k, v in ENV.items()], *cmd], capture_output=True, text=True,
                              timeout=scaled(timeout), cwd=ROOT, **kw)

    def kill_jobs(self):
        """Every process of the nodes' jobs (the daemons stay): a job that never ends fails the test
        in seconds instead of holding the pipes open until pytest's timeout."""
        for ns in ("n0", "n1"):
            pids = subprocess.run(["ip", "netns", "pids", f"{self.name}-{ns}"], capture_output=True,
                                  text=True).stdout.split()
            for pid in pids:
                try:
                    with open(f"/proc/{pid}/comm") as f:
                        if f.read().strip() in ("slurmd", "munged"):
                            continue
                    os.kill(int(pid), 9)
                except (OSError, ValueError):
                    pass

    def sbatch(self, script, *args, options=(), chdir, timeout=240):
        """`sbatch --wait --parsable` of examples/slurm/SCRIPT ARGS from the checkout; returns
        (its exit code, the job id, the job's output)."""
        cmd = [SCRIPT, "exec", "--name", self.name, "head", "--", "env", *[f"{k}={v}" for k, v in ENV.items()],
               "sbatch", "--wait", "--parsable", f"--chdir={chdir}", *options,
               os.path.join(ROOT, "examples", "slurm", script), *args]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        timeout = scaled(timeout)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.exec("scancel", "--user=root", timeout=30)
            self.kill_jobs()
            p.kill()
            p.communicate()
            raise AssertionError(f"the job of {script} was still running after {timeout} s")
        job = out.strip().splitlines()[0] if out.strip() else "?"
        return p.returncode, job, _output(chdir, job) + err

    def state(self, job):
        r = self.exec("scontrol", "show", "job", "-o", job, timeout=30)
        m = re.search(r"JobState=(\S+)", r.stdout)
        return m.group(1) if m else r.stdout + r.stderr


def _output(chdir, job):
    path = os.path.join(chdir, f"refsgd-{job}.out")
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        return f.read()


@pytest.fixture(scope="module")
def slurm():
    s = Slurm(f"rs{os.getpid() % 100000}")
    r = subprocess.run([SCRIPT, "up", "--name", s.name, "--nodes", "2", "--slurm"], capture_output=True, text=True,
                       timeout=scaled(120))
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        yield s
    finally:
        s.kill_jobs()
        d = subprocess.run([SCRIPT, "down", "--name", s.name], capture_output=True, text=True, timeout=scaled(60))
        assert d.returncode == 0, d.stdout + d.stderr
        assert not os.path.exists(f"/run/refsgd-cluster/{s.name}")
        assert not [n for n in os.listdir("/etc/netns") if n.startswith(s.name + "-")] \
            if os.path.isdir("/etc/netns") else True


def test_sinfo_shows_the_nodes_idle(slurm):
    r = slurm.exec("sinfo", "-h", "-N", "-o", "%N %t %c %P")
    assert r.returncode == 0, r.stderr
    cpus = os.cpu_count()
    assert r.stdout.split("\n")[:2] == [f"{slurm.name}-n0 idle {cpus} main*", f"{slurm.name}-n1 idle {cpus} main*"]


def _recipe_runs_daso_on_two_nodes(slurm, tmp_path, script):
    rc, job, out = slurm.sbatch(script, chdir=tmp_path)
    assert rc == 0, out
    assert "daso on 4 rank(s)" in out and "ranks per node from shared memory" in out, out
    assert "daso: 2 nodes of 2 ranks" in out, out
    assert "OK: 35 steps x 4 workers agree" in _verify(tmp_path / "runs" / f"daso-2x2-{job}.h5", "daso-2x2-n4.h5",
                                                         "1e-10")
    return out


@hydra_only
def test_mpich_wheel_sbatch_runs_daso_on_2_nodes_x_2_ranks(slurm, tmp_path):
    _recipe_runs_daso_on_two_nodes(slurm, tmp_path, "mpich-wheel.sbatch")


@hydra_only
def test_srun_pmi2_sbatch_runs_daso_on_2_nodes_x_2_ranks(slurm, tmp_path):
    _recipe_runs_daso_on_two_nodes(slurm, tmp_path, "srun-pmi2.sbatch")


@pytest.mark.skipif(KIND != "openmpi", reason="the system MPI's recipe runs under CI's Open MPI venv")
def test_system_mpi_sbatch_runs_daso_on_2_nodes_x_2_ranks(slurm, tmp_path):
    _recipe_runs_daso_on_two_nodes(slurm, tmp_path, "system-mpi.sbatch")


@hydra_only
def test_srun_without_the_pmi_of_the_library_is_refused_with_one_line(slurm, tmp_path):
    """srun -n 4 without --mpi (MpiDefault none): four worlds of one, each refused before training;
    one line from refsgd, whatever srun adds of its own."""
    t0 = time.monotonic()
    r = slurm.exec("srun", "-N", "2", "-n", "4", f"--chdir={tmp_path}", os.path.join(sys.prefix, "bin", "refsgd"),
                   "train", "--algo", "ssgd", "--iterations", "3", "--no-progress", timeout=180)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("refsgd")]
    assert len(lines) == 1 and "but MPI made each one a world of 1" in lines[0], r.stderr
    assert "(SLURM_STEP_NUM_TASKS=4)" in lines[0] and "srun --mpi=pmi2" in lines[0]
    assert "iter" not in r.stdout and "Traceback" not in r.stderr
    assert time.monotonic() - t0 < scaled(120)


# ------------------------------------------------------------------------- requeue, bitwise
#: a flat method (bitwise the same on one host as across the nodes), slowed by an emulated link
#: (timing only) so that a signal finds it training
RUN = ["--algo", "ssgd", "--dtype", "float64", "--momentum", "0.9", "--lr", "0.05", "--batch", "16",
       "--model", "digits_tiny", "--seed", "5", "--eval-every", "20it", "--no-progress"]
SLOW = ["--link", "50000,1"]


def _job_args(ck, out, iterations):
    return [*RUN, *SLOW, "--iterations", str(iterations), "--checkpoint", str(ck), "--checkpoint-every", "100000",
            "--resume", "auto", "--out", str(out), "--force"]


def _start(slurm, tmp_path, args, options=()):
    cmd = [SCRIPT, "exec", "--name", slurm.name, "head", "--", "env", *[f"{k}={v}" for k, v in ENV.items()],
           "sbatch", "--parsable", f"--chdir={tmp_path}", *options, os.path.join(ROOT, "examples", "slurm", RECIPE),
           *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=scaled(60), cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def _wait_for(slurm, tmp_path, job, predicate, within, what):
    """Poll the job until ``predicate(state, output)``; ``within`` seconds on idle cores, scaled
    by the load (the time Slurm itself waits, such as a requeued job's hold, does not shrink)."""
    within = scaled(within)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        state, out = slurm.state(job), _output(tmp_path, job)
        if predicate(state, out):
            return state, out
        time.sleep(0.5)
    slurm.exec("scancel", job, timeout=30)
    slurm.kill_jobs()
    raise AssertionError(f"{what} within {within} s: job {job} is {slurm.state(job)}\n{_output(tmp_path, job)}")


def _reference(tmp_path, iterations):
    """The uninterrupted run on one host."""
    r = refsgd("train", *RUN, "--iterations", str(iterations), "--out", str(tmp_path / "a.h5"), n=4)
    assert r.returncode == 0, r.stderr
    return tmp_path / "a.h5"


def _same_run(a, b):
    with h5py.File(a) as f, h5py.File(b) as g:
        assert not g.attrs.get("interrupted"), dict(g.attrs)
        np.testing.assert_array_equal(f["model"][...], g["model"][...])
        np.testing.assert_array_equal(f["iterations/loss"][...], g["iterations/loss"][...])


def test_a_usr1_pre_emption_checkpoints_and_the_job_requeues_itself_bitwise(slurm, tmp_path):
    """scancel --signal=USR1 (what `--signal=USR1@60` sends a minute before the limit, to every
    task of the job's steps): refsgd checkpoints at the next boundary and exits 138, the script
    requeues the job, whose `--resume auto` continues to the end: bitwise the uninterrupted run."""
    n = 150
    # the order injected: the emulated link holds each of the 130 iterations after the first
    # evaluation (iteration 20) for at least 0.15 s, so that USR1, sent once the evaluation is
    # seen, lands at least 19 s before the last iteration on any machine (with SLOW's 0.05 s, an
    # idle machine's job ended first, and the test skipped: it tested nothing there)
    args = _job_args(tmp_path / "ck", tmp_path / "b.h5", n)
    args[args.index(SLOW[1])] = "150000,1"
    job = _start(slurm, tmp_path, args)
    _wait_for(slurm, tmp_path, job, lambda s, out: "test acc" in out, 180, "no evaluation")
    r = slurm.exec("scancel", "--signal=USR1", job)
    assert r.returncode == 0, r.stderr
    state, out = _wait_for(slurm, tmp_path, job, lambda s, out: s == "COMPLETED", 240, "not completed")
    assert "pre-empted" in out and "requeueing" in out, f"USR1 did not pre-empt the run:\n{out}"
    assert out.count("refsgd: pre-empted (SIGUSR1) after iteration") == 1, out
    assert "checkpoint written to" in out and f"requeueing job {job} (restart 0)" in out, out
    t = int(re.search(r"pre-empted \(SIGUSR1\) after iteration (\d+)", out).group(1))
    assert 0 < t < n and f"at iteration {t}" in out, out
    _same_run(_reference(tmp_path, n), tmp_path / "b.h5")


@pytest.mark.parametrize("how", ["scancel", "time-limit"])
def test_scancel_and_the_time_limit_leave_a_checkpoint_that_a_requeued_job_resumes_bitwise(slurm, tmp_path, how):
    """scancel, or the time limit (1 minute), sends SIGTERM: every rank stops at the next boundary
    with a checkpoint, exit 143; the same job script submitted again resumes it (--resume auto)."""
    n = 100000  # never reached: on idle cores a short run could end before scancel lands
    args = _job_args(tmp_path / "ck", tmp_path / "b.h5", n)
    if how == "scancel":
        job = _start(slurm, tmp_path, args)
        _wait_for(slurm, tmp_path, job, lambda s, out: "test acc" in out, 180, "no evaluation")
        assert slurm.exec("scancel", job).returncode == 0
        final = "CANCELLED"
    else:
        # the recipe's pre-emption warning (USR1 60 s before the limit) replaced by a harmless
        # SIGCONT: the time limit's SIGTERM alone
        job = _start(slurm, tmp_path, args, options=["--time=1", "--signal=CONT@60"])
        final = "TIMEOUT"
    state, out = _wait_for(slurm, tmp_path, job, lambda s, out: s == final and "refsgd: terminated" in out,
                           180, f"not {final}")
    assert out.count("refsgd: terminated (SIGTERM) after iteration") == 1, out
    t = int(re.search(r"terminated \(SIGTERM\) after iteration (\d+)", out).group(1))
    assert (tmp_path / "ck" / "latest").read_text().strip() == f"ckpt-{t}"
    end = t + 20
    args[args.index("--iterations") + 1] = str(end)
    rc, job2, out2 = slurm.sbatch(RECIPE, *args, chdir=tmp_path)
    assert rc == 0 and f"at iteration {t}" in out2, out2
    _same_run(_reference(tmp_path, end), tmp_path / "b.h5")


@hydra_only
def test_refsgd_check_across_the_two_nodes(slurm, tmp_path):
    r = slurm.exec("srun", "--mpi=pmi2", "-N", "2", "-n", "4", f"--chdir={tmp_path}",
                   os.path.join(sys.prefix, "bin", "refsgd"), "check", timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert out.startswith("refsgd check: 4 rank(s) on 2 node(s)\n") and "started by: srun --mpi=pmi2 (Slurm)" in out
    assert f"{slurm.name}-n0 ranks 0-1; {slurm.name}-n1 ranks 2-3" in out and "ranks per node: 2\n" in out, out
    m = re.search(r"between nodes \S+ and \S+ \(ranks 0 and 2\): latency ([\d.e+]+) us, bandwidth ([\d.e+]+) GB/s", out)
    assert m and 0.01 < float(m.group(2)) < 0.2, out   # the 1 Gbit/s link: at most 0.125 GB/s
    assert "not the same folder on every node" not in out, out
