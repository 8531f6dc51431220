"""MLPerf Storage v3.0 in `storlab workload`: every v3.0 YAML of the reference folder runs scaled
down on tmpfs or is refused in one line; JPEG and parquet datasets open with Pillow and pyarrow
with the sizes asked, and the reader reads what DLIO's reads; the rule checks pass and fail where
they should; the vector-database configs are refused; `--list` names each built-in's division."""
from __future__ import annotations

import glob
import json
import os
import re

import pytest
from storlab.cli.main import main
from storlab.errors import UserError
from storlab.jobs import mlperf_v3
from storlab.jobs.dlio.translator import translate_text
from storlab.jobs.translation import Refusal
from storlab.jobs.workload import dataset_size_rule, spec_from_table
from storlab.jobs.workload_job import load_workload
from storlab.suites.training import rules
from storlab.suites.training.dataset import prepare, record_lengths
from storlab.suites.training.formats import jpeg_side
from storlab.suites.training.workload import run_workload

REFERENCE = os.environ.get("STORLAB_MLPERF_V3_CONFIGS", "/work/shared/reference/mlperf-storage-v3/configs")
YAMLS = sorted(glob.glob(os.path.join(REFERENCE, "*.yaml")))
OBJECT_KEYS = ("storage_type", "storage_library", "data_loader_root")


def _needs(module: str) -> None:
    pytest.importorskip(module, reason=f"{module} is needed to write this format (the test extra installs it)")


def _scaled_sets(spec, folder: str) -> list[str]:
    """--set values that make a workload small enough for a test on tmpfs, keeping its format,
    layout and rules (the fewest files and samples that still give a step per epoch)."""
    d, r = spec.dataset, spec.reader
    sets = [f"dataset.folder={folder}/data", f"checkpoint.folder={folder}/ckpt", "train.epochs=1",
            "train.computation_time=0.001", "train.computation_time_stdev=0", f"reader.read_threads={min(2, r.read_threads)}"]
    if spec.mode == "checkpoint":
        return sets + ["checkpoint.count_write=1", "checkpoint.count_read=1"]
    batch = min(r.batch_size, 2)
    spf = min(d.samples_per_file, 4)
    sets += [f"reader.batch_size={batch}", f"dataset.samples_per_file={spf}",
             f"dataset.files={max(1, min(d.files, -(-batch * spec.accelerators // spf) + 1))}",
             "evaluation.batch_size=1"]
    if d.eval_files:
        sets.append("dataset.eval_files=1")
    if d.format != "parquet":
        length = min(d.record_length, 16384)
        sets += [f"dataset.record_length={length}", f"dataset.record_length_stdev={min(d.record_length_stdev, length // 4)}",
                 "dataset.file_size=0"]
    else:
        sets.append(f"dataset.parquet.row_group_size={min(d.parquet.row_group_size, 2)}")
    return sets


def _one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and text, f"not one line: {text!r}"
    return text


@pytest.mark.skipif(not YAMLS, reason=f"MLPerf Storage v3.0 configs not found in {REFERENCE} "
                                      "(set STORLAB_MLPERF_V3_CONFIGS)")
@pytest.mark.parametrize("path", YAMLS, ids=[os.path.basename(p) for p in YAMLS])
def test_every_v3_yaml_runs_scaled_down_or_is_refused_in_one_line(path, shm_dir, tmp_path, monkeypatch):
    text = open(path, encoding="utf-8").read()
    is_object = any(f"{k}:" in line and not line.strip().startswith("#") and "local_fs" not in line
                    for line in text.splitlines() for k in OBJECT_KEYS)
    try:
        spec, _translation, _source = load_workload(path)
    except (Refusal, UserError) as e:
        message = _one_line(e)
        if is_object:       # refused at the key storlab cannot run (az://, a placeholder bucket, ...)
            assert isinstance(e, Refusal) and re.search(r"\.yaml:\d+: [\w.]+ = ", message), message
        return
    on_objects = [f for f in (spec.dataset.folder, spec.checkpoint.folder) if f.startswith("s3://")]
    if on_objects:          # an object config runs scaled down on a real S3 server (the Versity S3 Gateway)
        from testbed.servers import VersityServer, s3_unavailable

        why = s3_unavailable()
        if why is not None:
            pytest.skip(f"S3: {why}")
        with VersityServer(tmp_path) as srv:
            for k in [k for k in os.environ if k.startswith("AWS_")]:
                monkeypatch.delenv(k)
            for k, v in srv.env.items():
                if k.startswith("AWS_"):
                    monkeypatch.setenv(k, v)
            _run_scaled(path, spec, shm_dir, ["dataset.folder=s3://bench/data", "checkpoint.folder=s3://bench/ckpt",
                                              f"storage.endpoint={srv.endpoint}", "storage.insecure=false"])
            left = [str(p.relative_to(srv.root)) for p in (srv.root / "bench").rglob("*") if p.is_file()]
        assert all(k.startswith("bench/data/") for k in left), left    # checkpoints removed, the dataset kept
        return
    _run_scaled(path, spec, shm_dir, [])


def _run_scaled(path: str, spec, shm_dir: str, placed: list[str]) -> None:
    """Run the YAML scaled down (`placed`: --set values that move its folders, after the scaling's)."""
    for fmt, module in (("jpeg", "PIL"), ("parquet", "pyarrow")):
        if spec.dataset.format == fmt:
            _needs(module)
    fraction = None
    if spec.mode == "checkpoint":       # a few MB per writer: the checkpoint's files shrunk alike
        per_writer = sum(spec.checkpoint.rank_file_bytes(0, 1))
        fraction = min(1.0, (2 << 20) / max(1, per_writer))
    spec, translation, source = load_workload(path, _scaled_sets(spec, shm_dir) + placed, fraction=fraction)
    doc = run_workload(spec, argv=["storlab", "workload", path], translation=translation.record(), source=source,
                       log_folder=shm_dir)
    assert doc["complete"] is not False, doc.get("error")
    checks = doc["mlperf"]["checks"]
    assert checks and all(c["result"] in ("pass", "fail") and c["source"].startswith("MLPerf Storage Rules v3.0 §")
                          for c in checks)
    assert doc["provenance"]["workload"]["source_sha256"] == translation.sha256
    from storlab.schemas import validate

    pytest.importorskip("jsonschema", reason="jsonschema validates the document")
    validate(json.loads(json.dumps(doc)))


def _dataset(folder, **dataset):
    return spec_from_table({"workload": {"name": "t"},
                            "dataset": {"folder": str(folder), "files": 6, **dataset},
                            "reader": {"batch_size": 2, "read_threads": 0},
                            "train": {"epochs": 1, "computation_time": 0.0}})


def test_jpeg_files_open_with_pillow_at_the_size_asked(shm_dir):
    _needs("PIL")
    from PIL import Image

    spec = _dataset(shm_dir, format="jpeg", record_length=20000, record_length_stdev=4000)
    dataset = prepare(spec.dataset)
    lengths = record_lengths(spec.dataset)
    assert len(set(lengths)) > 1                      # the stdev spreads the sizes
    for path, length, layout in zip(dataset.paths, lengths, dataset.layouts):
        assert path.endswith(".jpeg")
        with Image.open(path) as image:
            assert image.format == "JPEG" and image.mode == "L"
            assert image.size == (jpeg_side(length), jpeg_side(length))
            image.load()
        assert os.path.getsize(path) == layout.size == layout.length   # the reader reads the whole file
    doc = run_workload(spec, argv=["t"], log_folder=shm_dir)
    assert doc["per_accelerator"][0]["bytes_read"] == sum(os.path.getsize(p) for p in dataset.paths)


PARQUET = {"row_group_size": 3, "columns": [
    {"name": "label", "dtype": "float16", "read": False},
    {"name": "dense", "dtype": "float32", "size": 13, "read": True},
    {"name": "sparse", "dtype": "int8", "size": 26, "read": True},
    {"name": "extra", "dtype": "float64", "size": 4, "read": False}]}
PARQUET_ROW = 2 + 4 * 13 + 26 + 8 * 4


def test_parquet_files_open_with_pyarrow_with_the_columns_and_row_groups_asked(shm_dir):
    _needs("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    spec = _dataset(shm_dir, format="parquet", samples_per_file=8, record_length=PARQUET_ROW, parquet=PARQUET)
    dataset = prepare(spec.dataset)
    want = {"label": pa.float16(), "dense": pa.list_(pa.float32(), 13), "sparse": pa.list_(pa.int8(), 26),
            "extra": pa.list_(pa.float64(), 4)}
    read_bytes = 0
    for path in dataset.paths:
        f = pq.ParquetFile(path)
        assert {n: f.schema_arrow.field(n).type for n in f.schema_arrow.names} == want
        meta = f.metadata
        assert meta.num_rows == 8
        assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [3, 3, 2]
        table = f.read()
        assert table.num_rows == 8 and len(table.column("dense")[0]) == 13
        for g in range(meta.num_row_groups):
            for j, read in enumerate((False, True, True, False)):
                if read:
                    read_bytes += meta.row_group(g).column(j).total_compressed_size
    # one accelerator reading in order: each row group's read columns once, the others never
    doc = run_workload(spec, argv=["t"], log_folder=shm_dir)
    assert doc["epochs"][0]["steps"] == 6 * 8 // 2
    assert doc["per_accelerator"][0]["bytes_read"] == read_bytes
    assert read_bytes < sum(os.path.getsize(p) for p in dataset.paths) // 2
    assert not prepare(spec.dataset).generated       # the manifest (with the columns) matches: reused


def test_parquet_record_length_must_be_the_row_its_columns_hold(tmp_path):
    with pytest.raises(UserError, match=rf"dataset.record_length: 100 is not the {PARQUET_ROW} bytes"):
        _dataset(tmp_path, format="parquet", record_length=100, parquet=PARQUET)


def test_dlio_parquet_keys_translate_and_bad_ones_name_the_key():
    yaml = ("model: {name: dlrm}\nworkflow: {train: True}\ndataset:\n  format: parquet\n  num_files_train: 4\n"
            "  num_samples_per_file: 8\n  compression: none\n  parquet:\n    row_group_size: 4\n    columns:\n"
            "      - {name: a, dtype: float32, size: 2}\n      - {name: b, dtype: int8, read: false}\n"
            "reader: {batch_size: 2}\n")
    spec = translate_text(yaml, "dlrm_b200.yaml").resolve()
    assert spec.dataset.record_length == 9 and spec.accelerator == "b200"
    assert [c.read for c in spec.dataset.parquet.columns] == [True, False]
    with pytest.raises(Refusal) as e:
        translate_text(yaml.replace("dtype: int8", "dtype: complex64"), "x.yaml")
    assert "dataset.parquet" in _one_line(e.value) and "line 8" not in str(e.value)


def test_vector_database_configs_are_refused_in_one_line_saying_milvus():
    yaml = ("database:\n  host: 127.0.0.1\n  port: 19530\ndataset:\n  collection_name: c\n  num_vectors: 1000\n"
            "  dimension: 8\nindex:\n  index_type: HNSW\n  metric_type: COSINE\n")
    with pytest.raises(Refusal) as e:
        translate_text(yaml, "1m_hnsw.yaml")
    message = _one_line(e.value)
    assert "1m_hnsw.yaml:1: database" in message and "Milvus" in message


# -- the rule checks --------------------------------------------------------------------------------
def test_dataset_size_check_passes_and_fails_with_the_rule(tmp_path):
    spec = _dataset(tmp_path, format="npz", record_length=1 << 20, files=100)
    # 100 files of 1 MiB: over 5 x 16 MiB of memory (80 samples), under 500 steps x batch 2 (1000)
    assert rules.check_dataset(dataset_size_rule(spec, 1, 16 << 20))["result"] == "fail"
    spec.dataset.files = 1000
    assert rules.check_dataset(dataset_size_rule(spec, 1, 16 << 20))["result"] == "pass"
    assert rules.check_dataset(dataset_size_rule(spec, 1, 1 << 30))["result"] == "fail"   # 5 GiB asked


def test_retinanet_au_is_judged_against_85_percent():
    spec, _, _ = load_workload("retinanet_b200")
    assert spec.au_threshold == mlperf_v3.AU_THRESHOLDS["retinanet"] == 0.85
    assert rules.check_au(spec, 0.86, 1)["result"] == "pass"
    assert rules.check_au(spec, 0.84, 1)["result"] == "fail"
    spec.au_threshold = 0.90          # a threshold other than v3.0's fails, whatever the AU
    failed = rules.check_au(spec, 0.95, 1)
    assert failed["result"] == "fail" and "v3.0's threshold for retinanet is 85 %" in failed["detail"]
    unet, _, _ = load_workload("unet3d_b200")
    assert rules.check_au(unet, 0.88, 1)["result"] == "fail"      # 90 % for unet3d


def _runs(*rates):
    return [{"run": i + 1, "warmup": i == 0, "samples_per_s": r, "au": 0.9, "complete": True}
            for i, r in enumerate(rates)]


def test_runs_check_wants_a_warmup_and_five_runs_within_five_percent():
    assert rules.check_runs(_runs(50, 100, 101, 99, 102, 98))["result"] == "pass"     # warm-up left out
    assert rules.check_runs(_runs(100, 100, 100, 100, 100, 112))["result"] == "fail"  # 112 is 9.3 % off
    assert rules.check_runs(_runs(100, 100, 100, 100, 100))["result"] == "fail"       # 4 measured
    assert rules.check_runs(_runs(100))["result"] == "fail"


def test_log_folder_on_the_data_file_system_fails(shm_dir, tmp_path):
    same = rules.check_log_folder(os.path.join(shm_dir, "data"), shm_dir, "3.4.2")
    assert same["result"] == "fail" and same["df"]["data"] == same["df"]["log"] and "tmpfs" in same["detail"]
    if os.stat(tmp_path).st_dev == os.stat(shm_dir).st_dev:
        pytest.skip("tmp_path is on /dev/shm's file system: no second file system to compare with")
    assert rules.check_log_folder(shm_dir, str(tmp_path), "3.4.2")["result"] == "pass"


def _checkpoint(name, folder, world=None):
    sets = [f"checkpoint.folder={folder}", "checkpoint.count_write=1", "checkpoint.count_read=1"]
    if world:
        sets.append(f"checkpoint.ranks_total={world}")
    spec, _, _ = load_workload(name, sets)
    fraction = (1 << 20) / sum(spec.checkpoint.rank_file_bytes(0, 1))
    return load_workload(name, sets, fraction=fraction)[0]


def test_checkpoint_checks_subset_mode_and_the_cache(shm_dir, tmp_path):
    doc = run_workload(_checkpoint("llama3_8b", os.path.join(shm_dir, "c8")), argv=["t"], log_folder=str(tmp_path))
    by = {c["source"].rsplit("§", 1)[1]: c for c in doc["mlperf"]["checks"]}
    assert by["4.3.5"]["result"] == "pass" and "subset run of llama3_8b: 1 of 8" in by["4.3.5"]["detail"]
    assert by["4.6.1"]["result"] == "pass"
    # a scaled checkpoint is far below 3 x memory, and tmpfs keeps its pages: the cache cannot be cleared
    assert by["4.3.1"]["result"] == "fail" and "could not be cleared (tmpfs" in by["4.3.1"]["detail"]
    doc = run_workload(_checkpoint("llama3_70b", os.path.join(shm_dir, "c70"), world=64), argv=["t"],
                       log_folder=str(tmp_path))
    by = {c["source"].rsplit("§", 1)[1]: c for c in doc["mlperf"]["checks"]}
    assert by["4.3.5"]["result"] == "fail"          # subset mode is the 8B model's only
    assert by["4.6.1"]["result"] == "pass"          # 64 processes for 70b


def test_checkpoint_cache_cleared_on_a_disk_file_system_passes(tmp_path, shm_dir):
    if rules._filesystem_type(str(tmp_path)) in ("tmpfs", "ramfs", ""):
        pytest.skip(f"{tmp_path} is on tmpfs: its page cache is the storage and cannot be dropped")
    doc = run_workload(_checkpoint("llama3_8b", str(tmp_path / "c")), argv=["t"], log_folder=shm_dir)
    check = next(c for c in doc["mlperf"]["checks"] if c["source"].endswith("§4.3.1"))
    assert check["result"] == "pass" and "cache was cleared" in check["detail"]


def test_provenance_hashes_the_workload_not_the_site(tmp_path):
    a = _dataset(tmp_path / "a", format="npz")
    b = _dataset(tmp_path / "b", format="npz")
    b.reader.read_threads = 7
    assert rules.config_hash(a)["hash"] == rules.config_hash(b)["hash"]
    b.train.computation_time = 0.5
    assert rules.config_hash(a)["hash"] != rules.config_hash(b)["hash"]


# -- the command ------------------------------------------------------------------------------------
def test_list_shows_each_builtins_division(capsys):
    assert main(["workload", "--list"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "closed, open" in rows["unet3d_b200"] and "closed, open" in rows["retinanet_b200"]
    for name in ("unet3d_h100", "retinanet_h100", "flux_b200", "dlrm_b200", "resnet50_a100", "cosmoflow_h100"):
        assert "exploration" in rows[name], rows[name]
    assert "closed, open" in rows["llama3_8b"]


def test_retinanet_b200_prints_every_rule_and_the_runs(shm_dir, tmp_path, capsys):
    _needs("PIL")
    out = tmp_path / "r.json"
    code = main(["workload", "retinanet_b200", "--no-store", "--json", str(out), "--runs", "3",
                 "--set", f"dataset.folder={shm_dir}/retinanet", "--set", "dataset.files=8",
                 "--set", "dataset.record_length=4096", "--set", "reader.batch_size=2",
                 "--set", "reader.read_threads=1", "--set", "train.computation_time=0.001", "--epochs", "1"])
    assert code == 0
    text = capsys.readouterr().out
    assert "against 85 %" in text and "(v3.0's for retinanet)" in text
    for section in ("3.1.2", "3.3.2", "2.1.17", "3.4.2"):
        assert f"§{section}]" in text
    assert "3 run(s): 1 warm-up, 2 measured" in text
    assert "no storlab run is an MLPerf Storage submission" in text
    doc = json.loads(out.read_text())
    assert [r["warmup"] for r in doc["runs"]] == [True, False, False]
    assert doc["mlperf"]["division"] == "closed, open" and doc["mlperf"]["accelerator"] == "b200"
    assert next(c for c in doc["mlperf"]["checks"] if c["source"].endswith("§2.1.17"))["result"] == "fail"
