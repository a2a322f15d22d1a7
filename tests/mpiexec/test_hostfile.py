"""Hostfile launches across the namespace cluster (scripts/cluster): the recipes of
examples/hostfile, as a user without a batch system runs them with ssh, run here with
scripts/netns-rsh as the launcher's ssh (it enters a node's namespaces instead). For each of the
mpich wheel's hydra and Open MPI's mpirun: `refsgd check` finds 2 nodes of 2 ranks, and DASO on
them verifies against the 2x2 golden.

Marker `cluster`; needs what tests/test_cluster.py needs. The mpich wheel's recipe needs a venv
of the wheel (this one, or the checkout's .venv); Open MPI's needs Debian's Open MPI and a venv
built against it (this one under CI's Open MPI venv, or the checkout's .venv-ompi), and skips
saying which is missing."""

import glob
import os
import re
import shutil
import subprocess
import sys

import pytest
from tests.helpers.launch import ONE_THREAD, ROOT, scaled
from tests.test_cluster import REASON, SCRIPT, _verify
from tests.test_cluster import cluster  # noqa: F401 the fixture: a cluster of 2 nodes, removed after the test

from refsgd import mpilib

pytestmark = [pytest.mark.cluster, pytest.mark.skipif(bool(REASON), reason=REASON or "-")]
KIND = mpilib.library_kind()
RSH = os.path.join(ROOT, "scripts", "netns-rsh")


def _venv(kind, default):
    """This venv where its MPI is ``kind``, else the checkout's ``default`` venv if it was set up."""
    if KIND == kind:
        return sys.prefix
    venv = os.path.join(ROOT, default)
    return venv if os.path.exists(os.path.join(venv, "bin", "refsgd")) else None


def _openmpi():
    """(Open MPI's mpirun, the venv built against it), or the reason the recipe cannot run."""
    mpirun = shutil.which("mpirun.openmpi")
    if mpirun is None:
        return None, "needs Debian's Open MPI (apt-get install openmpi-bin libopenmpi-dev)"
    venv = _venv("openmpi", ".venv-ompi")
    if venv is None:
        return None, ("needs a venv built against Open MPI: MPICC=$(command -v mpicc.openmpi) REFSGD_VENV=.venv-ompi "
                      "REFSGD_SYSTEM_MPI=1 ./run.sh setup")
    return (mpirun, venv), ""


def _mpich():
    venv = _venv("hydra", ".venv")
    return ((None, venv), "") if venv else (None, "needs the mpich wheel's venv: ./run.sh setup")


RECIPES = {"mpich-wheel": _mpich, "openmpi": _openmpi}


def _recipe(cluster, tmp_path, name, *args):  # noqa: F811 (the fixture)
    """examples/hostfile/NAME.sh of a hostfile of the cluster's 2 nodes, in the head namespace (a
    login node), from tmp_path; returns the finished process."""
    found, reason = RECIPES[name]()
    if reason:
        pytest.skip(reason)
    mpirun, venv = found
    hosts = tmp_path / "hosts"
    hosts.write_text(f"{cluster.name}-n0\n{cluster.name}-n1\n")
    env = {**ONE_THREAD, "REFSGD_RSH": RSH, "REFSGD_IFACE": "eth0", "REFSGD_VENV": venv,
           # Open MPI refuses root without them (the tests run as root)
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", **({"MPIRUN": mpirun} if mpirun else {})}
    cmd = [SCRIPT, "exec", "--name", cluster.name, "head", "--", "env", *[f"{k}={v}" for k, v in env.items()],
           os.path.join(ROOT, "examples", "hostfile", f"{name}.sh"), str(hosts), *args]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                         start_new_session=True)
    out, err = cluster.communicate(p, scaled(300))
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


@pytest.mark.parametrize("name,started", [("mpich-wheel", "mpiexec (MPICH's hydra)"),
                                          ("openmpi", "mpirun (Open MPI)")], ids=["mpich-wheel", "openmpi"])
def test_a_hostfile_recipe_checks_the_launch_and_runs_daso_on_2_nodes_x_2_ranks(cluster, tmp_path, name, started):  # noqa: F811
    r = _recipe(cluster, tmp_path, name, "check")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert out.startswith("refsgd check: 4 rank(s) on 2 node(s)\n") and f"started by: {started}\n" in out, out
    assert f"{cluster.name}-n0 ranks 0-1; {cluster.name}-n1 ranks 2-3" in out and "ranks per node: 2\n" in out, out
    m = re.search(r"between nodes \S+ and \S+ \(ranks 0 and 2\): latency ([\d.e+]+) us, bandwidth ([\d.e+]+) GB/s", out)
    assert m and 0.01 < float(m.group(2)) < 0.2, out   # the 1 Gbit/s link: at most 0.125 GB/s (and tbf's bucket)
    r = _recipe(cluster, tmp_path, name)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "daso on 4 rank(s)" in r.stdout and "ranks per node from shared memory" in r.stdout, r.stdout
    assert "daso: 2 nodes of 2 ranks" in r.stdout, r.stdout
    traces = glob.glob(str(tmp_path / "runs" / "daso-2x2-*.h5"))
    assert len(traces) == 1, r.stdout
    assert "OK: 35 steps x 4 workers agree" in _verify(traces[0], "daso-2x2-n4.h5", "1e-10")
