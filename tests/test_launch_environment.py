"""Odd launch environments, empty strings and options that do not apply, one-process commands under
a launcher: one `refsgd: error:` line and exit code 2, naming the variable or option and its value
(issue 45, items 3 to 6). No mpiexec: the launchers' variables are set by hand, as a job script or
a variable left from another job sets them.
"""

import http.server
import os
import subprocess
import sys
import threading

import pytest
from tests.helpers.launch import ROOT, mpi_env, scaled

from refsgd import checkpoint, launch, launchenv
from refsgd.datasets import download as dl
from refsgd.errors import RefsgdError

#: the launchers' variables of this test process (a suite run under mpiexec), left out of every run
LAUNCH_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "PMI_RANK", "PMIX_RANK",
               "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID")


def refsgd(*args, cwd=ROOT, **env):
    base = {k: v for k, v in mpi_env().items() if k not in LAUNCH_VARS and not k.startswith("REFSGD_")}
    return subprocess.run([sys.executable, "-m", "refsgd", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=scaled(300), env={**base, **env})


def one_line(r, *words, code=2):
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("refsgd: error: "), r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("env, says", [
    ({"NUMBA_NUM_THREADS": "0"}, "NUMBA_NUM_THREADS='0'"),      # a traceback from Numba's import before
    ({"NUMBA_NUM_THREADS": "abc"}, "NUMBA_NUM_THREADS='abc'"),
    ({"REFSGD_MPI_START_TIMEOUT": "0"}, "REFSGD_MPI_START_TIMEOUT='0'"),       # taken as 1 s before
    ({"REFSGD_MPI_START_TIMEOUT": "soon"}, "REFSGD_MPI_START_TIMEOUT='soon'"),  # silently 300 s before
    ({"REFSGD_MPI_START_TIMEOUT": "99999999999"}, "REFSGD_MPI_START_TIMEOUT='99999999999'"),  # OverflowError
    ({"REFSGD_MPI_START_TIMEOUT": "-3"}, "REFSGD_MPI_START_TIMEOUT='-3'"),
    ({"PMI_SIZE": "four"}, "PMI_SIZE='four'"),
    ({"SLURM_STEP_NUM_TASKS": "1", "SLURM_PROCID": "3"}, "SLURM_PROCID=3 is not below SLURM_STEP_NUM_TASKS=1"),
])
@pytest.mark.parametrize("args", [["--version"], ["train", "--iterations", "1"]])
def test_a_variable_that_means_nothing_is_refused_naming_it(env, says, args):
    one_line(refsgd(*args, **env), says)


def test_the_environment_check_passes_what_launchers_set():
    """The null: a real launch's variables and the usual thread settings pass."""
    for env in ({}, {"PMI_SIZE": "4", "PMI_RANK": "3"}, {"SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "1",
                                                           "SLURM_NTASKS": "8"},
                {"NUMBA_NUM_THREADS": "1", "REFSGD_MPI_START_TIMEOUT": "2.5"}):
        assert launchenv.environment_error(env) == "", env
    assert launchenv.environment_error({"NUMBA_NUM_THREADS": "0"}).startswith("NUMBA_NUM_THREADS='0'")


def test_a_lone_rank_above_0_says_why():
    """SLURM_PROCID=2 in a world of one: exit 2 with no output at all before (only rank 0 spoke)."""
    one_line(refsgd("check", SLURM_PROCID="2"), "SLURM_PROCID=2", "world of 1")


def test_check_refuses_a_world_of_one_under_a_launcher_of_several():
    """docs/guide/cluster.md: "a world of one is refused at once" (check only warned, exit 0)."""
    one_line(refsgd("check", SLURM_STEP_NUM_TASKS="4", SLURM_PROCID="0"), "SLURM_STEP_NUM_TASKS=4")


def test_check_flags_a_thread_variable_that_is_not_a_number_and_a_lone_process():
    r = refsgd("check", OMP_NUM_THREADS="lots")
    assert r.returncode == 0, r.stderr
    assert "  - OMP_NUM_THREADS='lots' is not a whole number of threads" in r.stdout, r.stdout
    assert "started by: no launcher: one process" in r.stdout and "warnings: none" not in r.stdout, r.stdout
    assert "  - a world of one rank" in r.stdout


def test_thread_variables_ignored_names_each_bad_one_only():
    assert launch.thread_variables_ignored({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "8"}) == []
    bad = launch.thread_variables_ignored({"OMP_NUM_THREADS": "lots", "OPENBLAS_NUM_THREADS": "0"})
    assert [b.split("=")[0] for b in bad] == ["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"]


def test_started_by_says_no_launcher_only_without_a_launchers_variables():
    assert launch.started_by({}, parent="bash") == "no launcher: one process, started by bash"
    assert launch.started_by({"PMI_RANK": "0", "PMI_SIZE": "2"}, parent="hydra_pmi_proxy") == "mpiexec (MPICH's hydra)"


def test_slurm_ntasks_is_read_one_way():
    """SLURM_NTASKS is an allocation's size, not a launch's: a batch script's refsgd reproduce was
    refused ("run it without mpiexec") in any multi-task allocation."""
    assert launchenv.launcher_size({"SLURM_NTASKS": "4"}) is None
    assert launchenv.launcher_size({"SLURM_NTASKS": "4", "SLURM_STEP_NUM_TASKS": "2"}) == 2
    launchenv.one_process("x")  # this test process: no launcher


def test_reproduce_runs_in_a_multi_task_batch_allocation(tmp_path):
    r = refsgd("reproduce", "dcs3gd-accuracy", "--out-dir", str(tmp_path / "out"), SLURM_NTASKS="4",
               SLURM_JOB_ID="7", REFSGD_DATA_DIR=str(tmp_path / "cache"))
    assert r.returncode == 0, r.stderr
    assert "not testable here" in r.stdout  # no MNIST in this cache: the claim says so, and nothing was refused


@pytest.mark.parametrize("args", [["compile"], ["data", "download", "mnist"], ["data", "convert", "mnist", "a", "b.h5"],
                                  ["conformance", "export", "exported"], ["reproduce", "dcs3gd-iteration"]])
def test_one_process_commands_refuse_a_launcher_of_several(args, tmp_path):
    """compile, conformance and data ran once per rank, writing the same files."""
    one_line(refsgd(*args, cwd=tmp_path, PMI_SIZE="2", PMI_RANK="0"), "runs in one process", "PMI_SIZE=2")
    r = refsgd(*args, cwd=tmp_path, PMI_SIZE="2", PMI_RANK="1")  # rank 0 says it: one line per job
    assert r.returncode == 2 and r.stderr == "", r.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("args, says", [
    (["data", "download", "mnist", "--cache-dir", ""], "--cache-dir ''"),
    (["data", "download", "mnist", "--mirror", ""], "--mirror ''"),  # taken for none: the internet was tried
    (["reproduce", "dcs3gd-iteration", "--link", ""], "--link ''"),
    (["reproduce", "dcs3gd-accuracy", "--link", "50,10"], "--link does not apply to dcs3gd-accuracy"),
])
def test_empty_strings_and_options_that_do_not_apply_are_refused(args, says, tmp_path):
    one_line(refsgd(*args, cwd=tmp_path, REFSGD_DATA_DIR=str(tmp_path / "cache")), says)
    assert not (tmp_path / "reproduce").exists()


def test_compile_refuses_a_cache_folder_that_is_a_file(tmp_path):
    """It reported "0 of 68 kernels" and exited 0: its one purpose failed."""
    (tmp_path / "file").write_text("")
    one_line(refsgd("compile", "--dtype", "float32", NUMBA_CACHE_DIR=str(tmp_path / "file")),
             f"NUMBA_CACHE_DIR='{tmp_path / 'file'}' is not a folder")


class _Loop(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", self.path)
        self.end_headers()

    def log_message(self, *a):
        pass


def test_a_redirect_loop_is_one_line(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Loop)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(RefsgdError) as e:
            dl.download("mnist", cache_dir=tmp_path, mirror=f"http://127.0.0.1:{server.server_port}", log=lambda s: None)
    finally:
        server.shutdown()
    assert "\n" not in str(e.value) and "redirect" in str(e.value), str(e.value)


def test_resume_auto_with_a_latest_that_is_not_text_is_one_line(tmp_path):
    """A 66-line traceback on every rank before (UnicodeDecodeError)."""
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "latest").write_bytes(b"\xff\xfe\x00ckpt\n")
    one_line(refsgd("train", "--iterations", "2", "--no-progress", "--checkpoint", str(tmp_path / "ck"),
                    "--checkpoint-every", "2", "--resume", "auto"), "not UTF-8 text")


def test_the_advice_after_a_folder_without_latest_is_a_resume_that_works(tmp_path):
    """`--resume DIR` was advised for a folder without `latest`, which --resume then refused."""
    for t in (2, 4):
        (tmp_path / f"ckpt-{t}").mkdir()
        (tmp_path / f"ckpt-{t}" / "meta.json").write_text("{}")
    assert checkpoint.resume_hint(str(tmp_path)) == f"--resume {tmp_path / 'ckpt-4'}"
    (tmp_path / "latest").write_text("ckpt-2\n")
    assert checkpoint.resume_hint(str(tmp_path)) == f"--resume {tmp_path}"
    with pytest.raises(RefsgdError, match="not UTF-8"):
        (tmp_path / "latest").write_bytes(b"\xff")
        checkpoint._ckpt_dir(str(tmp_path))
