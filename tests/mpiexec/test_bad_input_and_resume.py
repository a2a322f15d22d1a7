"""Bad input and resumes: a damaged file, options that would allocate without bound, resumes
that must be refused, and small refusals. Every refusal runs the command line as a user does
(under mpiexec for train), with a timeout, and asserts the exit code and the one message; what a
run that is not refused writes (a resume, its checkpoints) is checked in-process, in the world
session of 2 ranks (tests.helpers.world)."""

import os
import shutil

import h5py
import numpy as np
import pytest
from tests.helpers import world
from tests.helpers.launch import cli

SHORT = ["--no-progress"]


def errors(r):
    return [ln for ln in r.stderr.splitlines() if ln.startswith("refsgd")]


def one_message(r, *texts):
    lines = errors(r)
    assert len(lines) == 1 and all(t in lines[0] for t in texts), r.stderr
    assert "Traceback" not in r.stderr and "Abort(" not in r.stderr, r.stderr


def damage_chunk(path, name):
    """Rewrite ``path`` with dataset ``name`` gzip-compressed in chunks (as h5repack -f GZIP would),
    then overwrite bytes of its first chunk, as a bad disk block does."""
    tmp = str(path) + ".repack"
    with h5py.File(path) as src, h5py.File(tmp, "w") as dst:
        for k, v in src.attrs.items():
            dst.attrs[k] = v

        def copy(key, obj):
            if isinstance(obj, h5py.Group):
                dst.require_group(key)
                for k, v in obj.attrs.items():
                    dst[key].attrs[k] = v
                return
            if key == name and obj.size > 1:
                dst.create_dataset(key, data=obj[...], compression="gzip", chunks=True)
            else:
                dst.create_dataset(key, data=obj[...], compression=obj.compression, chunks=obj.chunks)
            for k, v in obj.attrs.items():
                dst[key].attrs[k] = v
        src.visititems(copy)
        if name in dst and dst[name].compression is None:  # a dataset visititems met before its group
            raise AssertionError(f"{name} was not compressed")
    with h5py.File(tmp) as f:
        offset = f[name].id.get_chunk_info(0).byte_offset
    raw = bytearray(open(tmp, "rb").read())
    raw[offset + 10: offset + 60] = b"\xff" * 50
    with open(path, "wb") as f:
        f.write(bytes(raw))
    os.unlink(tmp)


# ---------------------------------------------------------------------- a damaged file
def test_verify_on_a_damaged_trace_names_the_file_and_the_dataset(tmp_path):
    g = tmp_path / "g.h5"
    assert cli("golden", "--workers", "2", "--steps", "6", "--out", str(g)).returncode == 0
    bad = tmp_path / "bad.h5"
    shutil.copy(g, bad)
    damage_chunk(bad, "state/x")  # the golden file's own chunks (gzip), bytes overwritten
    r = cli("verify", str(bad), str(g), timeout=120)
    assert r.returncode == 2, r.stderr
    one_message(r, f"{bad}: the dataset /state/x cannot be read, the file is damaged")


def test_report_and_resume_of_a_damaged_file_name_the_dataset(tmp_path):
    out, ck = tmp_path / "run.h5", tmp_path / "ck"
    r = cli("train", "--iterations", "6", *SHORT, "--out", str(out), "--checkpoint", str(ck), "--checkpoint-every",
            "6", n=2, timeout=120)
    assert r.returncode == 0, r.stderr
    damage_chunk(out, "iterations/compute")
    r = cli("report", str(out), timeout=120)
    assert r.returncode == 2, r.stderr
    one_message(r, f"{out}: the dataset /iterations/compute cannot be read, the file is damaged")
    rank1 = ck / "ckpt-6" / "rank1.h5"
    damage_chunk(rank1, "state/x")
    r = cli("train", "--iterations", "12", *SHORT, "--resume", str(ck), n=2, timeout=120)
    assert r.returncode == 2, r.stderr
    one_message(r, f"{rank1}: the dataset /state/x cannot be read, the file is damaged", "resume from an earlier",
                "(on rank(s) 1)")


# ---------------------------------------------------------------------- allocations nobody asked for
@pytest.mark.parametrize("args, text", [
    (["--algo", "pipe-sgd", "--dependency", "1000000000"], "--dependency 1000000000 is not below the run's 20 iterations"),
    (["--algo", "pipe-sgd", "--dependency", "20"], "would never apply a gradient"),
    (["--algo", "pp-asgd", "--staleness", "1000000000"], "--staleness 1000000000 is not below the run's 20 iterations"),
    (["--algo", "asgd", "--staleness", "20"], "give a staleness below 20"),
])
def test_a_dependency_or_staleness_not_below_the_iterations_is_refused(args, text):
    r = cli("train", "--iterations", "20", *SHORT, *args, n=2, timeout=120)
    assert r.returncode == 2, r.stderr
    one_message(r, text)
    assert "refsgd 0." not in r.stdout  # refused before the run started


@pytest.mark.parametrize("what", ["dependency", "trace"])
def test_what_the_run_would_allocate_is_said_when_it_exceeds_the_memory(tmp_path, what):
    """Sized from this machine's memory (twice what it has available), so that it runs anywhere."""
    from refsgd.nn.network import available_memory
    available = available_memory()
    if available is None:
        pytest.skip("this machine does not say how much memory it has available")
    model_bytes = 4810 * 4                     # digits_mlp in float32
    if what == "dependency":                   # Pipe-SGD keeps 4 K copies of the model
        K = 10 ** 6 * max(1, -(-2 * available // (4 * model_bytes * 10 ** 6)))
        args = ["--algo", "pipe-sgd", "--dependency", str(K), "--iterations", str(2 * K)]
        text = f"--dependency {K}: {4 * K:,} copies of the model (4,810 parameters, float32) per rank need about"
    else:                                      # a trace keeps a state array per iteration
        T = 10 ** 6 * max(5, -(-2 * available // (model_bytes * 10 ** 6)))
        args = ["--iterations", str(T), "--trace", str(tmp_path / "t.h5")]
        text = f"--trace of {T} iterations keeps at least one state array"
    r = cli("train", *SHORT, *args, n=2, timeout=120)
    assert r.returncode == 2, r.stderr
    one_message(r, text, "of memory available")


# ---------------------------------------------------------------------- resumes
@pytest.fixture(scope="module")
def forty(tmp_path_factory):
    """A 40-iteration run on a copy of the embedded digits, checkpointed at its end."""
    from refsgd.datasets import _embedded_path
    d = tmp_path_factory.mktemp("forty")
    shutil.copy(_embedded_path(), d / "digits.h5")
    r = cli("train", "--iterations", "40", *SHORT, "--data", str(d / "digits.h5"), "--checkpoint", str(d / "ck"),
            "--checkpoint-every", "40", n=2, timeout=120)
    assert r.returncode == 0, r.stderr
    return d


@pytest.mark.parametrize("end", [["--iterations", "20"], ["--epochs", "1"]])
def test_resuming_past_the_end_is_refused(forty, end):
    r = cli("train", *end, *SHORT, "--data", str(forty / "digits.h5"), "--resume", str(forty / "ck"), n=2,
            timeout=120)
    assert r.returncode == 2, r.stderr
    one_message(r, "the checkpoint is at iteration 40, already past the end of this run", "nothing to do")
    assert "throughput" not in r.stdout and "-" not in r.stdout


def _checkpointed_on_a_copy(folder, iterations="10"):
    from refsgd.datasets import _embedded_path
    shutil.copy(_embedded_path(), folder / "digits.h5")
    r = cli("train", "--iterations", iterations, *SHORT, "--data", str(folder / "digits.h5"), "--checkpoint",
            str(folder / "ck"), "--checkpoint-every", iterations, n=2, timeout=120)
    assert r.returncode == 0, r.stderr
    return folder / "digits.h5", folder / "ck"


def test_resuming_with_other_data_at_the_same_path_is_refused(tmp_path):
    from refsgd import datasets
    from refsgd.trace import dataset_sha256
    data, ck = _checkpointed_on_a_copy(tmp_path)
    before = dataset_sha256(datasets.load(str(data)), np.float32, test=True)
    with h5py.File(data, "r+") as f:  # other contents, same path: a label changed
        y = f["train/labels"][...]
        y[0] = (y[0] + 1) % 10
        f["train/labels"][...] = y
    after = dataset_sha256(datasets.load(str(data)), np.float32, test=True)
    r = cli("train", "--iterations", "20", *SHORT, "--data", str(data), "--resume", str(ck), n=2, timeout=120)
    assert r.returncode == 2, r.stderr
    one_message(r, "the checkpoint was trained on other data", before[:16], after[:16])


def _rank0_then_all(step):
    """Collective: ``step()`` on rank 0 (a file of the shared folder made or edited), every rank
    told whether it raised, then the ranks meet; its value on rank 0 (None elsewhere)."""
    value, error = None, None
    if world.comm().Get_rank() == 0:
        try:
            value = step()
        except Exception as e:  # noqa: BLE001 -- every rank must learn it, not only rank 0
            error = f"{type(e).__name__}: {e}"
    world.all_ranks(error is None, error)
    return value


@pytest.mark.world(2)
def test_a_version_2_checkpoint_without_the_data_sha_still_resumes(tmp_path):
    import json
    from refsgd.datasets import _embedded_path
    tmp_path = world.shared_path(tmp_path)
    data, ck = tmp_path / "digits.h5", tmp_path / "ck"
    _rank0_then_all(lambda: shutil.copy(_embedded_path(), data))
    world.train("--iterations", "10", *SHORT, "--data", str(data), "--checkpoint", str(ck), "--checkpoint-every", "10",
                log=None)
    meta_path = ck / "ckpt-10" / "meta.json"

    def as_version_2():
        meta = json.loads(meta_path.read_text())
        assert meta["format_version"] == 3 and len(meta["data_sha256"]) == 64
        meta["format_version"] = 2  # as refsgd wrote it before the data's SHA-256
        del meta["data_sha256"]
        meta_path.write_text(json.dumps(meta))
    _rank0_then_all(as_version_2)
    lines = []
    world.train("--iterations", "15", *SHORT, "--data", str(data), "--resume", str(ck), log=lines.append)
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    stdout = "\n".join(lines)
    assert "resumed from" in stdout and "after 15 iterations" in stdout


# ---------------------------------------------------------------------- small refusals
@pytest.mark.parametrize("args, text", [
    (["--link", ""], "--link expects LATENCY_US,GBIT_S with latency in [0, 1e+07] us and bandwidth in [1e-06, 1e+06] "
                     "Gbit/s, got ''"),
    (["--link", "-5,1"], "--link -5,1: the latency -5 us is negative"),
    (["--link", "5,-1"], "--link 5,-1: the bandwidth -1 Gbit/s is not positive"),
    (["--algo", "daso", "--local-link", "-5,1"], "--local-link -5,1: the latency -5 us is negative"),
    (["--nesterov"], "--nesterov needs --momentum > 0"),
])
def test_small_option_errors_are_one_line(args, text):
    r = cli("train", "--iterations", "3", *SHORT, *args, n=2, timeout=120)
    assert r.returncode == 2, r.stderr
    one_message(r, text)
    assert "(rank" not in r.stderr


def test_a_garbage_tarball_is_one_line(tmp_path):
    import gzip
    junk, gz = tmp_path / "junk.tar.gz", tmp_path / "notatar.tar.gz"
    junk.write_bytes(bytes(range(256)) * 20)
    gz.write_bytes(gzip.compress(b"hello"))
    for src, why in [(junk, "neither a tar archive nor a gzip, bzip2 or xz-compressed one"),
                     (gz, "a gzip file whose content is not a tar archive")]:
        r = cli("data", "convert", "cifar10", str(src), str(tmp_path / "c.h5"), timeout=120)
        assert r.returncode == 2, r.stderr
        one_message(r, f"{src}: not a readable tar archive ({why}", "cifar-10-python.tar.gz")
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.world(2)
def test_unfinished_checkpoints_of_a_killed_run_are_removed_and_said(tmp_path):
    ck = world.shared_path(tmp_path) / "ck"
    world.train("--iterations", "10", *SHORT, "--checkpoint", str(ck), "--checkpoint-every", "5", log=None)

    def killed_while_writing():
        # what a kill -9 during the writes of checkpoints 15 and 20 leaves behind
        for t in (15, 20):
            shutil.copytree(ck / "ckpt-10", ck / f".tmp-ckpt-{t}")
        (ck / ".latest.tmp").write_text("ckpt-15\n")
    _rank0_then_all(killed_while_writing)
    lines = []
    world.train("--iterations", "12", *SHORT, "--checkpoint", str(ck), "--checkpoint-every", "5", "--resume",
                str(ck), log=lines.append)
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    assert f"removed from {ck} the unfinished checkpoint(s) .tmp-ckpt-15, .tmp-ckpt-20" in "\n".join(lines)
    assert sorted(os.listdir(ck)) == ["ckpt-10", "ckpt-12", "ckpt-5", "latest"]


@pytest.mark.world(2)
@pytest.mark.parametrize("args", [["--algo", "daso", "--ranks-per-node", "1", "--warmup-epochs", "0"],
                                  ["--schedule", "plateau:patience=2"]])
def test_no_checkpoint_holds_a_non_finite_number(tmp_path, args):
    """DASO's "best loss so far" and the plateau schedule's, before their first observation."""
    ck = world.shared_path(tmp_path) / "ck"
    world.train("--iterations", "4", *SHORT, *args, "--checkpoint", str(ck), "--checkpoint-every", "2", log=None)
    if world.comm().Get_rank() != 0:
        return  # rank 0 checks; every rank's report says how it went (tests.helpers.world.agree)
    checked = 0
    for t in (2, 4):
        for rank in (0, 1):
            with h5py.File(ck / f"ckpt-{t}" / f"rank{rank}.h5") as f:
                arrays = [f["state"][k][...] for k in f["state"]]
                arrays += [f["schedule_state"][...]] if "schedule_state" in f else []
            for a in arrays:
                if a.dtype.kind == "f":
                    assert np.isfinite(a).all(), (t, rank, a)
                    checked += 1
    assert checked >= 4
