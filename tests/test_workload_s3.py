"""`storlab workload` on S3 against a real S3 server (the Versity S3 Gateway on a folder): a
DLIO-style dataset under s3://bench/PREFIX is generated as one object per file (the server's
files, of the sizes the manifest records), an epoch reads the samples' bytes with GETs, the
checkpoints are PUT (multipart above the part size) and read back with GETs, the checkpoint
objects are removed at the end while the dataset is kept for reuse (as a local dataset is), a
prefix holding other objects is refused in one line, and the result names the storage without
a credential."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from storlab.errors import UserError
from storlab.jobs.dlio.translator import translate_text
from storlab.jobs.translation import Refusal
from storlab.jobs.workload import spec_from_table
from storlab.suites.training.workload import run_workload
from testbed.servers import VersityServer, s3_unavailable

WHY = s3_unavailable()
needs_s3 = pytest.mark.skipif(WHY is not None, reason=f"S3: {WHY}")
MiB = 1 << 20
_LOGGED = re.compile(r" s3_(\w+) (\S+) \S+ (\d{3}) ")


def _client_env(srv: VersityServer, monkeypatch) -> None:
    """This process as a client of the server (the engine reads credentials from the environment)."""
    for k in [k for k in __import__("os").environ if k.startswith("AWS_")]:
        monkeypatch.delenv(k)
    for k, v in srv.env.items():
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)


def _objects(srv: VersityServer, prefix: str) -> dict[str, int]:
    """Every object under bench/PREFIX (the server's files, recursively), key -> size."""
    root = srv.root / "bench" / prefix
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()} if root.is_dir() else {}


def _ops(srv: VersityServer, since: int = 0) -> list[tuple[str, str]]:
    """(operation, key) of each request the server logged, from line `since`."""
    return [(m[1], m[2]) for m in map(_LOGGED.search, srv.requests().splitlines()[since:]) if m]


def _spec(srv: VersityServer, **over):
    table = {"workload": {"name": "s3train"},
             "dataset": {"folder": "s3://bench/ds", "format": "npz", "files": 6, "record_length": 40000},
             "reader": {"batch_size": 2, "read_threads": 2},
             "train": {"epochs": 1, "computation_time": 0.0},
             "checkpoint": {"enabled": True, "folder": "s3://bench/ck", "model_size": 9 * MiB, "after_epoch": 1},
             "storage": {"endpoint": srv.endpoint}}
    for key, value in over.items():
        section, name = key.split("__")
        table.setdefault(section, {})[name] = value
    return spec_from_table(table)


@needs_s3
def test_a_training_run_generates_reads_and_checkpoints_objects_then_keeps_only_the_dataset(tmp_path, monkeypatch):
    with VersityServer(tmp_path) as srv:
        _client_env(srv, monkeypatch)
        spec = _spec(srv)
        doc = run_workload(spec, argv=["storlab", "workload"], log_folder=str(tmp_path))
        ops = _ops(srv)
        dataset = _objects(srv, "ds")
        checkpoints_after = _objects(srv, "ck")
        # a second run finds the dataset complete and reuses it: no PUT under ds/
        before = len(srv.requests().splitlines())
        again = run_workload(_spec(srv), argv=["storlab", "workload"], log_folder=str(tmp_path))
        second = _ops(srv, before)
    assert doc.get("complete", True) is not False, doc.get("error")
    data = {k: v for k, v in dataset.items() if k.startswith("train/")}
    assert len(data) == 6 and set(dataset) == set(data) | {".storlab-dataset.json"}
    assert sum(data.values()) == doc["dataset"]["bytes"] and all(v > 40000 for v in data.values())
    manifest_sizes = {f"train/{Path(k).name}": v for k, v in data.items()}
    assert manifest_sizes == data
    assert len([k for op, k in ops if op == "PutObject" and k.startswith("ds/train/")]) == 6
    # one epoch: every sample once, each a GET of its bytes (the npz's array, as the local reader reads it)
    read = sum(a["bytes_read"] for a in doc["per_accelerator"])
    assert read == spec.dataset.files * spec.dataset.samples_per_file * spec.dataset.record_length
    gets = sorted(k for op, k in ops if op == "GetObject" and k.startswith("ds/train/"))
    assert gets == sorted(f"ds/{k}" for k in data)
    # the checkpoint (9 MiB, above the 8 MiB part size): a multipart upload, then removed
    (written,) = doc["checkpoints"]
    assert written["bytes"] == 9 * MiB and written["kind"] == "write"
    assert [op for op, k in ops if k.startswith("ck/")].count("CompleteMultipartUpload") == 1
    assert "DeleteObjects" in [op for op, _k in ops]
    assert checkpoints_after == {}
    storage = doc["storage"]
    assert storage["dataset"]["type"] == "s3" and storage["dataset"]["bucket"] == "bench"
    assert storage["dataset"]["prefix"] == "ds" and storage["dataset"]["endpoint"] == srv.endpoint
    assert storage["checkpoint"]["prefix"] == "ck"
    assert srv.secret not in json.dumps(doc)
    assert again["dataset"]["generated"] is False
    assert not [k for op, k in second if op == "PutObject" and k.startswith("ds/")]


@needs_s3
@pytest.mark.parametrize("fmt, extra", [
    ("jpeg", {}),                                                    # a sample is its whole object: GET whole
    ("indexed_binary", {"dataset__samples_per_file": 4}),            # index objects, then ranged GETs
    ("parquet", {"dataset__samples_per_file": 4, "dataset__parquet": {"row_group_size": 2}}),   # row groups
])
def test_every_read_path_of_a_format_reads_the_epochs_bytes_from_objects(fmt, extra, tmp_path, monkeypatch):
    pytest.importorskip({"jpeg": "PIL", "parquet": "pyarrow"}.get(fmt, "numpy"))
    with VersityServer(tmp_path) as srv:
        _client_env(srv, monkeypatch)
        spec = _spec(srv, dataset__format=fmt, dataset__files=4, dataset__record_length=8192, checkpoint__enabled=False,
                     reader__batch_size=2, **extra)
        doc = run_workload(spec, argv=["storlab", "workload"], log_folder=str(tmp_path))
        ops = _ops(srv)
    assert doc.get("complete", True) is not False, doc.get("error")
    read = sum(a["bytes_read"] for a in doc["per_accelerator"])
    gets = [k for op, k in ops if op == "GetObject" and k.startswith("ds/train/")]
    layouts = doc["dataset"]
    if fmt == "jpeg":          # the dataset's bytes, each object once, whole
        assert read == layouts["bytes"] and len(gets) == 4
    elif fmt == "indexed_binary":
        assert read == 4 * 4 * 8192 and len([k for k in gets if k.endswith(".indexed_binary")]) == 16
        index = [k for k in gets if k.endswith(".idx")]   # each file's two index objects, once per reader thread
        assert len(set(index)) == 2 * 4 and len(index) % 2 == 0 and len(index) <= 2 * 4 * spec.reader.read_threads
    else:                      # the column chunks of each row group read (footer GETs besides)
        assert 4 * 4 * 8192 <= read < layouts["bytes"] and len(set(gets)) == 4


@needs_s3
def test_two_endpoints_of_one_store_share_the_requests(tmp_path, monkeypatch):
    with VersityServer(tmp_path) as one, VersityServer(tmp_path, same_store_as=one) as two:
        _client_env(one, monkeypatch)
        spec = _spec(one, storage__endpoint=f"{one.endpoint},{two.endpoint}", checkpoint__enabled=False)
        doc = run_workload(spec, argv=["storlab", "workload"], log_folder=str(tmp_path))
        first, second = _ops(one), _ops(two)
    assert doc.get("complete", True) is not False, doc.get("error")
    assert doc["storage"]["dataset"]["endpoint"] == f"{one.endpoint},{two.endpoint}"
    puts = [k for op, k in first + second if op == "PutObject" and k.startswith("ds/train/")]
    gets = [k for op, k in first + second if op == "GetObject" and k.startswith("ds/train/")]
    assert len(puts) == 6 and len(gets) == 6
    assert [op for op, _k in first].count("GetObject") >= 1 and [op for op, _k in second].count("GetObject") >= 1


@needs_s3
def test_a_checkpoint_workload_reads_back_the_bytes_it_put(tmp_path, monkeypatch):
    with VersityServer(tmp_path) as srv:
        _client_env(srv, monkeypatch)
        spec = _spec(srv, workload__train=False, checkpoint__count_write=2, checkpoint__count_read=1,
                     checkpoint__model_size=3 * MiB, checkpoint__files_per_rank=2)
        doc = run_workload(spec, argv=["storlab", "workload"], log_folder=str(tmp_path))
        ops = _ops(srv)
        left = _objects(srv, "ck")
    assert doc.get("complete", True) is not False, doc.get("error")
    puts = [k for op, k in ops if op == "PutObject" and k.startswith("ck/")]
    gets = [k for op, k in ops if op == "GetObject" and k.startswith("ck/")]
    assert len(puts) == 4 and len(gets) == 2      # 2 checkpoints x 2 files; one read-back of the first
    assert doc["checkpoint"]["bytes_per_checkpoint"] == 3 * MiB
    rows = [(r["kind"], r["bytes"]) for r in doc["checkpoints"]]
    assert rows == [("write", 3 * MiB), ("write", 3 * MiB), ("read", 3 * MiB)]
    assert doc["checkpoint"]["storage"]["type"] == "s3" and doc["checkpoint"]["storage"]["prefix"] == "ck"
    assert doc["checkpoint"]["write_gb_per_s"] > 0 and doc["checkpoint"]["read_gb_per_s"] > 0
    assert left == {}, "the checkpoint objects are removed at the end"
    assert [op for op, _k in ops].count("DeleteObjects") >= 2      # each checkpoint's objects, a request each


@needs_s3
def test_a_prefix_holding_other_objects_is_refused_in_one_line_before_anything_is_written(tmp_path, monkeypatch):
    with VersityServer(tmp_path) as srv:
        _client_env(srv, monkeypatch)
        (srv.root / "bench" / "ds").mkdir(parents=True)
        (srv.root / "bench" / "ds" / "precious.bin").write_bytes(b"x" * 10)
        with pytest.raises(UserError) as e:
            run_workload(_spec(srv), argv=["storlab", "workload"], log_folder=str(tmp_path))
        ops = _ops(srv)
        left = _objects(srv, "ds")
    message = str(e.value)
    assert "\n" not in message and "s3://bench/ds" in message and "precious.bin" in message, message
    assert not [k for op, k in ops if op == "PutObject"] and left == {"precious.bin": 10}


@needs_s3
def test_bad_credentials_are_one_line_naming_the_key_id_never_the_secret(tmp_path, monkeypatch):
    from storlab.errors import FailureError

    with VersityServer(tmp_path) as srv:
        _client_env(srv, monkeypatch)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-at-all")
        with pytest.raises(FailureError) as e:
            run_workload(_spec(srv), argv=["storlab", "workload"], log_folder=str(tmp_path))
    message = str(e.value)
    assert "\n" not in message and "access denied" in message and srv.access_key in message, message
    assert "not-the-secret-at-all" not in message and srv.secret not in message


_V3_OBJECT = """
model: {name: unet3d, type: cnn}
framework: pytorch
workflow: {generate_data: False, train: True, checkpoint: True}
dataset: {data_folder: test-run/unet3d, format: npz, num_files_train: 8, num_samples_per_file: 1, record_length_bytes: 4096}
reader: {data_loader: pytorch, batch_size: 2, read_threads: 2}
train: {epochs: 1, computation_time: 0.01}
checkpoint: {checkpoint_folder: checkpoints/unet3d, model_size: 4096}
storage:
  storage_type: s3
  storage_root: mlp-bucket
  storage_library: minio
  storage_options: {endpoint_url: "https://10.0.0.5:9000", region: us-east-1, secure: false%s}
"""


def test_a_v3_object_config_translates_to_prefixes_under_its_bucket_and_a_storage_table():
    t = translate_text(_V3_OBJECT % "", "unet3d_h100_minio.yaml")
    assert t.job["dataset"]["folder"] == "s3://mlp-bucket/test-run/unet3d"
    assert t.job["checkpoint"]["folder"] == "s3://mlp-bucket/checkpoints/unet3d"
    assert t.job["storage"] == {"endpoint": "https://10.0.0.5:9000", "insecure": True, "virtual_host": False,
                                "library": "minio"}
    keys = {m.key for m in t.mapped}
    assert {"storage.storage_type", "storage.storage_root", "storage.storage_options.endpoint_url"} <= keys


@pytest.mark.parametrize("extra, key, says", [
    (", secret_access_key: s3cr3t-value", "storage.storage_options.secret_access_key", "credentials are not read"),
    (", checksum: crc32", "storage.storage_options.checksum", "not a storage option"),
])
def test_what_an_object_config_cannot_run_is_refused_naming_the_key_never_a_secret(extra, key, says):
    with pytest.raises(Refusal) as e:
        translate_text(_V3_OBJECT % extra, "x.yaml")
    message = str(e.value)
    assert "\n" not in message and f": {key} = " in message and says in message and "s3cr3t" not in message, message


def test_other_object_stores_and_placeholder_buckets_are_refused_at_their_key():
    for root, says in (("az://container/data", "S3 and S3-compatible"), ("BUCKET_PLACEHOLDER", "names bucket")):
        with pytest.raises(Refusal) as e:
            translate_text((_V3_OBJECT % "").replace("mlp-bucket", root), "x.yaml")
        assert ": storage.storage_root = " in str(e.value) and says in str(e.value), str(e.value)
