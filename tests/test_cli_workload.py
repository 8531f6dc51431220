"""`storlab workload` from the command line: built-ins, DLIO YAML and storlab TOML, --emit,
--scale, the stored and validated document, and one-line refusals (exit 2)."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest
from storlab.cli.main import main

UNET = """model: unet3d
framework: pytorch
dataset:
  data_folder: {folder}
  format: npz
  num_files_train: 8
  record_length: 8192
reader:
  batch_size: 2
  read_threads: 1
train:
  epochs: 1
  computation_time: 0.005
"""


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "storlab", "workload", *args], capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)


def test_list_names_the_builtins(capsys):
    assert main(["workload", "--list"]) == 0
    names = capsys.readouterr().out.split()
    assert {"unet3d_a100", "unet3d_h100", "resnet50_h100", "cosmoflow_a100", "llama3_8b", "llama3_1t"} <= set(names)


@pytest.mark.parametrize("args, message", [
    (["bert_tpu"], "workload: 'bert_tpu' is not a built-in workload"),
    (["unet3d_h100", "--set", "reader.batch_size=0"], "reader.batch_size: 0 is not allowed"),
    (["unet3d_h100", "--set", "reader.read_threads=-2"], "reader.read_threads: -2 is not allowed"),
    (["unet3d_h100", "--set", "dataset.record_length=0"], "dataset.record_length: 0 is not allowed"),
    (["unet3d_h100", "--set", "foo"], "--set: 'foo' is not allowed"),
    (["unet3d_h100", "--scale", "2"], "--scale: 2.0 is not allowed"),
    (["missing.yaml"], "missing.yaml: not found"),
    (["unet3d_h100", "--accelerators", "many"], "--accelerators: 'many' is not allowed"),
    (["unet3d_h100", "--accelerators", "0"], "--accelerators"),
    (["unet3d_h100", "--set", "dataset.files=-1"], "dataset.files: -1 is not allowed"),
    (["unet3d_h100", "--set", "reader.batch_size=-4"], "reader.batch_size: -4 is not allowed"),
    (["unet3d_h100", "--set", "dataset.file_size=1000000"],
     "dataset.record_length: 146600628 is over dataset.file_size 1000000; use 1..1000000"),
    (["unet3d_h100", "--set", "checkpoint.model_size=-1", "--set", "checkpoint.enabled=true"], "checkpoint.model_size"),
    (["unet3d_b200", "--runs", "0"], "--runs: '0' is not allowed"),
    (["llama3_8b", "--runs", "6"], "--runs: 6 is allowed for a training workload without --search only"),
    (["retinanet_b200", "--set", "dataset.samples_per_file=2"], "dataset.samples_per_file: 2 is not allowed with format jpeg"),
])
def test_bad_input_is_one_line_exit_2(args, message, capsys):
    assert main(["workload", *args, "--no-store"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


@pytest.mark.parametrize("text, message", [
    ("model: [unclosed\n", "dlio w.yaml:2: (file): not valid YAML"),
    (UNET + "  wobble: 1\n", "dlio w.yaml:14: train.wobble = 1: not a DLIO workload key"),
    (UNET.replace("batch_size: 2", "batch_size: 0"), "dlio w.yaml:9: reader.batch_size = 0: reader.batch_size: 0"),
    (UNET.replace("record_length: 8192", "record_length: -8192"), "dlio w.yaml:7: dataset.record_length = -8192"),
])
def test_bad_yaml_is_one_line_exit_2_naming_file_line_and_key(tmp_path, capsys, text, message):
    src = tmp_path / "w.yaml"
    src.write_text(text.format(folder=tmp_path / "d") if "{folder}" in text else text)
    assert main(["workload", str(src), "--no-store"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_dataset_folder_holding_other_files_is_one_line_exit_2(tmp_path, capsys):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "results.csv").write_text("mine")
    src = tmp_path / "w.yaml"
    src.write_text(UNET.format(folder=folder))
    assert main(["workload", str(src), "--no-store"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "dataset.folder:" in lines[0] and "results.csv" in lines[0], lines
    assert os.listdir(folder) == ["results.csv"]


def test_yaml_runs_is_stored_and_valid(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")  # noqa: F841 - validate() needs it
    from storlab.schemas import validate

    src = tmp_path / "u.yaml"
    src.write_text(UNET.format(folder=tmp_path / "data"))
    store = tmp_path / "s.db"
    out = tmp_path / "r.json"
    r = cli(str(src), "--json", str(out), "--store", str(store), "--tag", "trial")
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    validate(doc)
    assert doc["kind"] == "workload" and doc["translation"]["format"] == "dlio"
    assert 0 < doc["au"] <= 1.05 and doc["samples_per_s"] > 0
    assert "AU " in r.stdout and "samples/s" in r.stdout and "MiB/s" in r.stdout
    with sqlite3.connect(store) as db:
        kinds = [row[0] for row in db.execute("SELECT kind FROM runs")]
    assert kinds == ["workload"]


def test_emit_then_run_the_toml(tmp_path):
    src = tmp_path / "u.yaml"
    src.write_text(UNET.format(folder=tmp_path / "data"))
    toml = tmp_path / "u.toml"
    r = cli(str(src), "--emit", str(toml))
    assert r.returncode == 0 and toml.exists() and not (tmp_path / "data").exists()
    out = tmp_path / "r.json"
    r = cli(str(toml), "--json", str(out), "--no-store", "--quiet")
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["workload"]["job"]["dataset"]["files"] == 8 and doc["epochs_done"] == 1


def test_scale_is_recorded_and_not_compliant(tmp_path):
    out = tmp_path / "r.json"
    r = cli("resnet50_h100", "--scale", "0.002", "--set", f"dataset.folder={tmp_path / 'data'}",
            "--set", "dataset.samples_per_file=200", "--set", "dataset.record_length=1024",
            "--set", "train.computation_time=0.001", "--set", "train.total_training_steps=2",
            "--epochs", "1", "--json", str(out), "--no-store", "--quiet")
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["workload"]["scaled"]["dataset.files"] == {"from": 1024, "to": 2, "fraction": 0.002}
    assert doc["compliant"] is False and any("scaled" in x for x in doc["noncompliant_reasons"])


def test_scale_of_a_one_file_dataset_scales_its_samples_per_file():
    import argparse

    from storlab.cli.workload import load_spec

    args = argparse.Namespace(workload="unet3d_h100", set=["dataset.files=1", "dataset.samples_per_file=100000",
                                                           "dataset.eval_files=10"],
                              accelerators=None, epochs=None, folder=None, scale=0.01)
    spec, _, _ = load_spec(args)
    assert spec.dataset.files == 1 and spec.dataset.samples_per_file == 1000 and spec.dataset.eval_files == 1
    assert spec.scaled["dataset.samples_per_file"] == {"from": 100000, "to": 1000, "fraction": 0.01}


def test_search_finds_the_most_accelerators(tmp_path):
    # tmpfs-fast storage and a low AU bar: AU holds for every count up to the bound, even on a slow
    # shared machine (CI once measured AU < 0.5 at four accelerators on two cores and bisected to 3)
    out = tmp_path / "r.json"
    r = cli("unet3d_h100", "--search", "--max-accelerators", "4", "--set", f"dataset.folder={tmp_path / 'd'}",
            "--set", "dataset.record_length=4096", "--set", "dataset.record_length_stdev=0",
            "--set", "dataset.files=64", "--set", "train.computation_time=0.01", "--set", "checkpoint.enabled=false",
            "--set", "workload.au_threshold=0.05", "--epochs", "1", "--json", str(out), "--no-store", "--quiet")
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert [t["accelerators"] for t in doc["search"]["trials"]] == [1, 2, 4]
    assert doc["search"]["max_accelerators"] == 4 and doc["accelerators"] == 4


def test_search_doubles_then_bisects_to_the_last_passing_count():
    # the search's steps alone, with a run whose AU falls as accelerators rise: 1, 2, 4, 8 pass,
    # 16 fails, then 12 passes, 14 fails, 13 passes -> 13
    from storlab.jobs.workload import DatasetSpec, WorkloadSpec
    from storlab.suites.training.workload import search_accelerators

    def run(spec):
        return {"accelerators": spec.accelerators, "au": 1.0 - spec.accelerators / 30, "passed": spec.accelerators <= 13}

    spec = WorkloadSpec(dataset=DatasetSpec(files=100_000))     # steps for every count tried
    trials, best = search_accelerators(spec, run, max_accelerators=64)
    assert [t["accelerators"] for t in trials] == [1, 2, 4, 8, 16, 12, 14, 13]
    assert best == 13 and [t["passed"] for t in trials][-3:] == [True, False, True]
