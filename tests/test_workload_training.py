"""Training emulation measured as DLIO measures it: the AU formula's edges, tmpfs keeping the
accelerators busy, the per-batch figures, checkpoints, and a stop keeping completed epochs."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from storlab.jobs.workload import WorkloadError, dataset_size_rule, spec_from_table
from storlab.suites.training.training import au_of_block
from storlab.suites.training.workload import run_workload

SHM = "/dev/shm"


def table(folder, **over):
    t = {"workload": {"name": "t", "au_threshold": 0.9},
         "dataset": {"folder": str(folder), "format": "npz", "files": 32, "samples_per_file": 1,
                     "record_length": 64 << 10},
         "reader": {"batch_size": 2, "read_threads": 2, "prefetch": 4},
         "train": {"epochs": 2, "computation_time": 0.01}}
    for key, value in over.items():
        section, name = key.split("__")
        t.setdefault(section, {})[name] = value
    return t


def test_au_leaves_the_first_step_out():
    # 4 steps of 0.1 s compute; the first took 0.5 s (0.4 s waiting); block wall 0.8 s
    assert au_of_block([0.1] * 4, [0.5, 0.1, 0.1, 0.1], 0.8) == pytest.approx(0.3 / 0.3)
    # waits after the first step count against AU
    assert au_of_block([0.1] * 4, [0.5, 0.2, 0.2, 0.2], 1.1) == pytest.approx(0.3 / 0.6)
    assert au_of_block([0.0] * 3, [0.1] * 3, 0.3) == 0.0


@pytest.fixture
def shm_folder(tmp_path):
    if not os.path.isdir(SHM):
        pytest.skip("no /dev/shm")
    import shutil
    import tempfile

    d = tempfile.mkdtemp(prefix="storlab-test-wl-", dir=SHM)
    yield os.path.join(d, "data")
    shutil.rmtree(d, ignore_errors=True)


def test_tmpfs_keeps_accelerators_busy(shm_folder):
    spec = spec_from_table(table(shm_folder, train__computation_time=0.05, dataset__files=48))
    doc = run_workload(spec, argv=["test"])
    assert doc["complete"] and doc["epochs_done"] == 2
    assert doc["au"] >= 0.95, doc["epochs"]
    assert doc["passed"]
    # 24 steps of 2 samples at 0.05 s each: about 40 samples/s at most
    assert 30 < doc["samples_per_s"] <= 40.5
    assert doc["mib_per_s"] == pytest.approx(doc["samples_per_s"] * (64 << 10) / 2**20)
    assert doc["steps_per_epoch"] == 24 and len(doc["timeseries"]["au"]) >= 1
    assert set(doc["wait_s"]) >= {"p50", "p99", "max"}
    assert doc["dataset"]["size_rule"]["compliant"] is False and doc["compliant"] is False
    assert doc["dataset"]["cache_dropped_each_epoch"] is True
    assert doc["bytes_per_s_read"] > 0
    assert doc["warnings"] == []


def test_every_sample_is_read_once_per_epoch(shm_folder):
    spec = spec_from_table(table(shm_folder, train__computation_time=0.0, train__epochs=3,
                                 reader__file_shuffle="seed", reader__sample_shuffle="seed"))
    doc = run_workload(spec, argv=["test"])
    read = sum(a["bytes_read"] for a in doc["per_accelerator"])
    assert read == 3 * 32 * (64 << 10)


def test_accelerators_split_the_dataset_and_the_step_count(shm_folder):
    spec = spec_from_table(table(shm_folder, workload__accelerators=4, train__epochs=1))
    doc = run_workload(spec, argv=["test"])
    assert doc["accelerators"] == 4 and doc["steps_per_epoch"] == 4
    assert len(doc["per_accelerator"]) == 4 and len(doc["epochs"][0]["au_per_accelerator"]) == 4
    # 4 steps per epoch with 4 batches read ahead: AU, without its first step, says little
    assert [w["code"] for w in doc["warnings"]] == ["au_first_step"]


def test_indexed_binary_reads_its_index_then_each_sample_where_it_says(shm_folder, monkeypatch):
    import storlab.suites.training.training as training

    loads, reads = [], []
    real_index, real_preadv = training.read_index, os.preadv
    monkeypatch.setattr(training, "read_index", lambda path, n: loads.append(path) or real_index(path, n))
    monkeypatch.setattr(training.os, "preadv", lambda fd, bufs, off: reads.append((off, len(bufs[0])))
                        or real_preadv(fd, bufs, off))
    spec = spec_from_table(table(shm_folder, dataset__format="indexed_binary", dataset__files=2,
                                 dataset__samples_per_file=16, dataset__record_length=4096, train__epochs=2,
                                 reader__sample_shuffle="seed", train__computation_time=0.0))
    doc = run_workload(spec, argv=["test"])
    assert doc["complete"] and doc["steps_per_epoch"] == 16
    # each epoch, each of the 2 reader threads loads the index of each file it reads (DLIO: per worker)
    assert len(loads) == 2 * 2 * 2 and all(p.endswith(".indexed_binary") for p in loads)
    # one read per sample, of its size, at its index offset; every sample once per epoch
    assert len(reads) == 2 * 32 and {n for _, n in reads} == {4096}
    assert sorted(reads) == sorted([(k * 4096, 4096) for k in range(16)] * 4)


def test_read_threads_zero_reads_in_the_consumer(shm_folder):
    spec = spec_from_table(table(shm_folder, reader__read_threads=0, train__epochs=1))
    doc = run_workload(spec, argv=["test"])
    assert doc["complete"] and doc["epochs"][0]["steps"] == 16


def test_evaluation_reads_the_eval_files_and_is_reported_apart(shm_folder):
    spec = spec_from_table(table(shm_folder, train__epochs=4, train__computation_time=0.005, dataset__eval_files=12,
                                 evaluation__enabled=True, evaluation__batch_size=3, evaluation__computation_time=0.05,
                                 evaluation__after_epoch=2, evaluation__epochs_between=2, workload__accelerators=2,
                                 workload__au_threshold=0.8,
                                 reader__sample_shuffle="seed"))
    doc = run_workload(spec, argv=["test"])
    ev = doc["evaluation"]
    # DLIO: evaluations after epochs 2 and 4; 12 samples / batch 3 / 2 accelerators = 2 steps each
    assert [e["epoch"] for e in ev["evaluations"]] == [2, 4] and ev["steps_per_evaluation"] == 2
    assert all(e["steps"] == 2 and len(e["au_per_accelerator"]) == 2 for e in ev["evaluations"])
    # tmpfs: the eval compute (0.05 s a batch, no barrier) keeps the accelerators busy (a bar with
    # room for a loaded machine: one measured step each, so a few ms of scheduling weigh)
    assert ev["au"] >= 0.8 and ev["passed"]
    # 2 accelerators x 3 samples / 0.05 s = at most 120 samples/s
    assert 60 < ev["samples_per_s"] <= 122
    assert ev["mib_per_s"] == pytest.approx(ev["samples_per_s"] * (64 << 10) / 2**20)
    # every training sample once per epoch, every eval sample once per evaluation
    read = sum(a["bytes_read"] for a in doc["per_accelerator"])
    assert read == (4 * 32 + 2 * 12) * (64 << 10)
    # training figures leave evaluation out: each epoch's seconds are its training steps only
    assert all(e["steps"] == 8 for e in doc["epochs"])
    assert sorted(os.listdir(os.path.join(shm_folder, "valid")))[0] == "img_00_of_12.npz"


def test_evaluation_on_without_eval_files_is_refused(tmp_path):
    with pytest.raises(WorkloadError, match=r"^dataset.eval_files: 0 is not allowed with evaluation on"):
        spec_from_table(table(tmp_path, evaluation__enabled=True))
    with pytest.raises(WorkloadError, match=r"^evaluation.batch_size: 8 x 1 accelerator\(s\) needs more samples"):
        spec_from_table(table(tmp_path, evaluation__enabled=True, dataset__eval_files=4, evaluation__batch_size=8))


def test_checkpoints_during_training(shm_folder, tmp_path):
    ck = os.path.join(os.path.dirname(shm_folder), "ck")
    spec = spec_from_table(table(shm_folder, checkpoint__enabled=True, checkpoint__folder=ck,
                                 checkpoint__model_size=1 << 20, checkpoint__steps_between=5,
                                 workload__accelerators=2, checkpoint__ranks="all", train__epochs=1))
    doc = run_workload(spec, argv=["test"])
    assert len(doc["checkpoints"]) == 1      # 8 steps per accelerator: one checkpoint after step 5
    c = doc["checkpoints"][0]
    assert c["writers"] == 2 and c["bytes"] == 2 << 20 and c["gb_per_s"] > 0
    assert os.listdir(ck) == []              # storlab's checkpoint files are removed


def test_checkpoint_workload_writes_and_reads_back(tmp_path):
    spec = spec_from_table({"workload": {"name": "llama3_8b", "train": False, "accelerators": 2},
                            "checkpoint": {"enabled": True, "folder": str(tmp_path / "ck"), "model_size": 3 << 20,
                                           "optimizer_size": 5 << 20, "ranks_total": 8, "count_write": 2,
                                           "count_read": 1, "files_per_rank": 2}})
    doc = run_workload(spec, argv=["test"])
    ck = doc["checkpoint"]
    assert ck["writers"] == 2 and ck["bytes_per_writer"] == (8 << 20) // 8
    assert ck["subset"] is True and ck["fraction_written"] == 0.25 and doc["compliant"] is False
    kinds = [c["kind"] for c in doc["checkpoints"]]
    assert kinds == ["write", "write", "read"]
    read = doc["checkpoints"][2]
    assert read["bytes"] == 2 * (1 << 20) and read["slowest_rank"] in (0, 1)
    assert os.listdir(tmp_path / "ck") == []


@pytest.mark.parametrize("over, field", [
    ({"reader__batch_size": 0}, "reader.batch_size"),
    ({"reader__read_threads": -1}, "reader.read_threads"),
    ({"dataset__files": 0}, "dataset.files"),
    ({"dataset__record_length": -5}, "dataset.record_length"),
    ({"dataset__format": "png"}, "dataset.format"),
    ({"reader__batch_size": 1000}, "reader.batch_size"),
    ({"train__epochs": 0}, "train.epochs"),
    ({"reader__wobble": 1}, "reader.wobble"),
    ({"dataset__file_size": 32 << 10}, r"dataset.record_length: 65536 is over dataset.file_size 32768; use 1..32768"),
    ({"dataset__file_size": 100 << 10, "dataset__samples_per_file": 2},
     r"dataset.samples_per_file: 2 records of 65536 B are over dataset.file_size 102400; use 1..1"),
    ({"dataset__file_size": -1}, "dataset.file_size"),
    ({"workload__accelerators": 0}, "workload.accelerators"),
    ({"reader__prefetch": 0}, "reader.prefetch"),
    ({"reader__transfer_size": -4096}, "reader.transfer_size"),
    ({"train__computation_time": -0.1}, "train.computation_time"),
])
def test_bad_values_name_the_field(tmp_path, over, field):
    with pytest.raises(WorkloadError, match=rf"{field}"):
        spec_from_table(table(tmp_path / "d", **over))


def test_file_size_sets_the_samples_per_file_and_bounds_every_record(tmp_path):
    from storlab.suites.training.dataset import record_lengths

    def without_samples_per_file(**over):
        t = table(tmp_path, dataset__file_size=1 << 20, **over)
        del t["dataset"]["samples_per_file"]
        return t

    spec = spec_from_table(without_samples_per_file())
    assert spec.dataset.samples_per_file == 16          # 1 MiB of 64 KiB records
    spec = spec_from_table(without_samples_per_file(dataset__record_length_stdev=64 << 10))
    assert max(record_lengths(spec.dataset)) * spec.dataset.samples_per_file <= 1 << 20


def test_dataset_size_rule_follows_mlperf():
    spec = spec_from_table(table("/x", dataset__record_length=146600628, reader__batch_size=7))
    rule = dataset_size_rule(spec, 36, 251 << 30)
    # 5 x 251 GiB / 146.6 MB = 9192 samples; 500 x 7 x 36 = 126,000 steps' worth: the larger
    assert rule["min_samples_steps"] == 126000 and rule["min_files"] == 126000
    assert rule["compliant"] is False


def test_sigint_keeps_completed_epochs(shm_folder, tmp_path):
    out = tmp_path / "r.json"
    src = os.path.join(os.path.dirname(shm_folder), "w.toml")
    from storlab.jobs.translation import to_toml

    with open(src, "w") as f:
        f.write(to_toml(table(shm_folder, train__epochs=50, train__computation_time=0.02)))
    env = dict(os.environ)
    p = subprocess.Popen([sys.executable, "-m", "storlab", "workload", src, "--json", str(out), "--no-store",
                          "--quiet"], env=env, stderr=subprocess.PIPE, text=True)
    manifest = os.path.join(shm_folder, ".storlab-dataset.json")
    deadline = time.monotonic() + 60
    while not os.path.exists(manifest) and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)            # the dataset is written: training starts now
    time.sleep(1.5)                 # a few epochs of about 0.35 s each
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "interrupted"
    assert 1 <= doc["epochs_done"] < 50 and len(doc["epochs"]) == doc["epochs_done"]
    assert "complete: false" in err


def test_sigint_during_generation_leaves_a_dataset_that_is_redone(shm_folder, tmp_path):
    from storlab.jobs.translation import to_toml
    from storlab.suites.training import dataset as ds

    src = tmp_path / "w.toml"
    src.write_text(to_toml(table(shm_folder, dataset__files=200, dataset__record_length=256 << 10,
                                 dataset__format="tfrecord")))
    p = subprocess.Popen([sys.executable, "-m", "storlab", "workload", str(src), "--no-store", "--quiet"],
                         stderr=subprocess.PIPE, text=True)
    train = os.path.join(shm_folder, "train")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None and \
            not (os.path.isdir(train) and len(os.listdir(train)) >= 2):
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert os.path.exists(os.path.join(shm_folder, ds.PARTIAL))
    assert not os.path.exists(os.path.join(shm_folder, ds.MANIFEST))
    assert len([f for f in os.listdir(train) if not f.startswith(".tmp-")]) < 200
    spec = spec_from_table(table(shm_folder, dataset__files=200, dataset__record_length=256 << 10, dataset__format="tfrecord"))
    again = ds.prepare(spec.dataset)
    assert again.generated and again.regenerated_because == "a previous generation did not finish"
