"""One-off costs stay outside the time split: Numba's compiling (a first run) and its loading of
cached kernels (every run) are counted whole, outside every time, and a first run says that it
compiles before it does; the status line's rate and the summary's throughput are one figure;
what a run records and says of itself is what it ran."""

import json
import os
import subprocess
import sys
import textwrap
import time

import h5py
import numpy as np
import pytest

from tests.helpers.launch import ROOT, cli, mpi_env

ANNOUNCED = "compiling kernels for this machine, once"


def _train(tmp_path, name, cache, *extra):
    """`refsgd train` on one rank with Numba's cache in ``cache``: (stdout, seconds, records)."""
    out = tmp_path / f"{name}.h5"
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "refsgd", "train", "--model", "digits_mlp", "--epochs", "1",
                        "--out", str(out), *extra], capture_output=True, text=True, timeout=900, cwd=ROOT,
                       env=mpi_env(NUMBA_CACHE_DIR=str(cache)))
    seconds = time.perf_counter() - t0
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    with h5py.File(out) as f:
        rec = {k: f["iterations"][k][0] for k in ("compile", "update", "wall")}
    return r.stdout, seconds, rec


def test_a_first_run_says_it_compiles_and_counts_all_of_it(tmp_path):
    """With an empty Numba cache the kernels compile for seconds (9.6 s on one rank here, before
    the first line of the run): the run says so before, and the seconds it counts as compiling
    are the seconds the first run took longer than the second (which loads them). Before: nothing
    was said, and the summary counted 0.99 s of those 9.6 s."""
    cache = tmp_path / "numba-cache"
    first, t_first, rec_first = _train(tmp_path, "first", cache)
    second, t_second, rec_second = _train(tmp_path, "second", cache)
    lines = first.splitlines()
    said = [i for i, x in enumerate(lines) if ANNOUNCED in x]
    assert said and said[0] < min(i for i, x in enumerate(lines) if x.startswith("iter")), first
    assert ANNOUNCED not in second                      # loaded from the cache: nothing to say
    more = t_first - t_second                           # what compiling cost the first run
    counted = rec_first["compile"].sum() - rec_second["compile"].sum()
    assert more > 1.0, (t_first, t_second)
    assert counted > 0.6 * more, (counted, more, t_first, t_second)
    assert any(x.startswith("Numba compiling or loading its kernels: ") for x in lines)


@pytest.mark.alone   # a wait for a core of a few ms fails it: no neighbour (tests/conftest.py)
def test_the_first_update_holds_no_loading_of_its_kernel(tmp_path):
    """A run whose kernels are in the cache: loading the optimizer's kernel from it (28 ms here,
    50-80 ms under load: it reads the disk; the median update is 0.03 ms) and typing its
    arguments (about 1 ms) happen in the warm-up before the loop (refsgd.optim.warm), counted as
    the first iteration's compile, not in its update (0.15-0.28 ms left at a load of 5). What is left on a loaded machine is the wait for a core
    after the disk read (up to 25 ms in 3 of 7 runs here): the least of two runs is compared."""
    cache = tmp_path / "numba-cache"
    _train(tmp_path, "fill", cache, "--iterations", "3")
    first = []
    for k in range(2):
        _, _, rec = _train(tmp_path, f"warm{k}", cache)
        assert rec["compile"][0] > 0                    # the loading, counted
        first.append(rec["update"][0])
    assert min(first) < 10e-3, first


def _second_process(tmp_path, probe):
    """Run the Python ``probe`` twice in fresh processes with modules and Numba's cache in
    ``tmp_path``: the first compiles and caches its kernels, the second loads them; the second's
    output."""
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}", "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, env=env,
                           cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.alone   # a few ms of loading, timed: a neighbour stretches it (tests/conftest.py)
def test_the_compile_clock_counts_the_loading_of_a_cached_kernel(tmp_path):
    """A kernel of Numba's disk cache, in a fresh process: its first call loads it (no compiling),
    and the clock counts that (Numba's compile event alone counted nothing of it)."""
    mod = tmp_path / "cached_kernel.py"
    mod.write_text(textwrap.dedent("""\
        import numba

        @numba.njit(cache=True)
        def warm(x):
            return x - 1.0

        @numba.njit(cache=True)
        def kernel(x):
            s = 0.0
            for i in range(10):
                s += x * i
            return s
        """))
    probe = textwrap.dedent("""\
        import time
        from refsgd.run.timing import _CompileClock
        import cached_kernel as m
        with _CompileClock() as clock:
            m.warm(1.0)                    # Numba's own first-call set-up
            c0, t0 = clock.mine(), time.perf_counter()
            m.kernel(1.0)
            t1 = time.perf_counter()
            print(clock.mine() - c0, t1 - t0)
        """)
    counted, took = (float(v) for v in _second_process(tmp_path, probe).split())
    assert counted > 0.8 * took > 0, (counted, took)


@pytest.mark.alone   # a wait for a core of a few ms fails it: no neighbour (tests/conftest.py)
def test_the_warm_up_takes_the_typing_of_a_first_call_out_of_the_update(tmp_path):
    """A cached kernel's first call in a process types its arguments in Python before Numba's
    compiler lock (about 1 ms; no Numba event covers it, and Numba's private dispatcher is not
    patched to announce it): the Run calls the update kernels before its clock starts
    (refsgd.optim.warm), so that the first update is the update alone. In a process whose kernels
    are in the cache: float64 warmed, its first SGD step (less the compile clock) within 0.25 ms;
    float32 not warmed, its first step holds the typing (the null: without the warm-up the first
    update carries it), more than the warmed one. Before: ssgd's first update was 1.2 ms against
    a median of 0.04 ms."""
    probe = textwrap.dedent("""\
        import time
        import numpy as np
        from refsgd import optim
        from refsgd.run.timing import _CompileClock

        def first_step(dtype, momentum):
            U = optim.SGD(1000, dtype, momentum=momentum, weight_decay=1e-4)
            w, g = np.ones(1000, dtype), np.ones(1000, dtype)
            c0, t0 = clock.mine(), time.perf_counter()
            U.step(w, g, 0.1, divide=2)
            return (time.perf_counter() - t0) - (clock.mine() - c0)

        with _CompileClock() as clock:
            optim.warm(np.float64)             # the Run's warm-up, before its clock
            warmed = min(first_step(np.float64, mu) for mu in (0.9, 0.0))
            cold = first_step(np.float32, 0.9)
            print(warmed, cold)
        """)
    (tmp_path / "fill.py").write_text("import numpy as np\nfrom refsgd import optim\n"
                                      "optim.warm(np.float64); optim.warm(np.float32)\n")
    subprocess.run([sys.executable, str(tmp_path / "fill.py")], check=True, timeout=300, cwd=tmp_path,
                   env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")})
    warmed, cold = (float(v) for v in _second_process(tmp_path, probe).split())
    assert warmed < 0.25e-3, (warmed, cold)
    assert cold > warmed + 0.2e-3, (warmed, cold)


@pytest.mark.alone   # a neighbour that slows its last iterations moves the rates apart (tests/conftest.py)
def test_the_status_line_and_the_summary_give_one_throughput(tmp_path):
    """Both are the samples over the iterations' wall times (evaluations, checkpoints and Numba
    left out): the last status line's rate is the summary's. Before: the summary divided by the
    wall time with the evaluations, the status line by the time so far (20,144 against 36,657)."""
    out = tmp_path / "r.h5"
    r = cli("train", "--model", "digits_mlp", "--epochs", "2", "--eval-every", "3it", "--log-every", "5",
            "--out", str(out))
    assert r.returncode == 0, r.stderr
    status = [x for x in r.stdout.splitlines() if "%)" in x and "samples/s" in x]
    summary = [x for x in r.stdout.splitlines() if x.startswith("throughput ")]
    assert status and len(summary) == 1, r.stdout
    rate = float(status[-1].split("samples/s")[0].split()[-1].replace(",", ""))
    throughput = float(summary[0].split()[1].replace(",", ""))
    assert "evaluations, checkpoints and Numba's compiling left out" in summary[0]
    with h5py.File(out) as f:
        wall, grads = f["iterations/wall"][0], f["iterations/gradients"][0]
        batch = json.loads(f.attrs["config"])["batch"]
        evaluated = f["iterations/evaluate"][0].sum()
    assert evaluated > 0.05 * wall.sum()                # the evaluations would show
    assert throughput == np.float64(grads.sum() * batch / wall.sum()).round(), (throughput, wall.sum())
    assert abs(rate - throughput) < 0.1 * throughput, (rate, throughput)


def test_a_run_of_iterations_records_no_epochs(tmp_path):
    out = tmp_path / "r.h5"
    r = cli("train", "--iterations", "10", "--no-progress", "--out", str(out))
    assert r.returncode == 0, r.stderr
    with h5py.File(out) as f:
        config = json.loads(f.attrs["config"])
    assert config["iterations"] == 10 and config["epochs"] is None, config
    r = cli("train", "--epochs", "1", "--no-progress", "--out", str(out), "--force")
    assert r.returncode == 0, r.stderr
    with h5py.File(out) as f:
        config = json.loads(f.attrs["config"])
    assert config["epochs"] == 1 and config["iterations"] is None, config


def test_the_busy_note_counts_the_runs_ranks_and_those_on_this_machine():
    """A 4-rank run on two machines of 2 ranks: its note spoke of "this run's 2 rank(s)"."""
    from refsgd import busy
    text = busy.note([9.0, 9.0, 9.0], 2, 1, cores=2, world=4)
    assert "this run's 2 rank(s) on this machine (of its 4) x 1 thread(s) leave 0 free" in text, text
    text = busy.note([9.0, 9.0, 9.0], 4, 1, cores=2, world=4)
    assert "this run's 4 rank(s) x 1 thread(s) leave 0 free" in text, text
