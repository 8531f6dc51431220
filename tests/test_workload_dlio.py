"""DLIO's own workload YAML files (the pip wheel's dlio_benchmark/configs/workload/, fetched by
scripts/test.sh into STORLAB_DLIO_CONFIGS): each one is translated and run scaled down, or
refused in one line naming the file, line, key and why. Plus the translator's faces: line
numbers, --emit TOML that reads back, the record, refusals of unknown keys and bad YAML."""
from __future__ import annotations

import glob
import importlib.util
import math
import os

import pytest
from storlab.jobs.dlio.translator import translate, translate_text
from storlab.jobs.translation import MAX_REFUSAL, Refusal, translator
from storlab.jobs.workload import spec_from_table
from storlab.suites.training.workload import run_workload


def dlio_configs() -> str | None:
    env = os.environ.get("STORLAB_DLIO_CONFIGS")
    if env and os.path.isdir(env):
        return env
    found = importlib.util.find_spec("dlio_benchmark")
    if found and found.submodule_search_locations:
        path = os.path.join(list(found.submodule_search_locations)[0], "configs", "workload")
        if os.path.isdir(path):
            return path
    return None


CONFIGS = dlio_configs()
FILES = sorted(glob.glob(os.path.join(CONFIGS, "*.yaml"))) if CONFIGS else []
# what storlab does not emulate, by file: DLIO 2.0's mmap reader issues no data reads
REFUSED = {"megatron_deepspeed.yaml": "dataset.format = mmap_indexed_binary: not emulated: DLIO 2.0's mmap reader",
           # DLIO master's folder (STORLAB_DLIO_CONFIGS pointed at a checkout): predefined layer lists, and
           # S3 configs that write their credentials in the file (storlab takes them from the environment)
           "megatron_deepspeed_LLNL.yaml": "model.optimization_groups = ",
           **{f"unet3d_{a}_s3.yaml": "storage.storage_options.access_key_id = (hidden): credentials are not read"
              for a in ("a100", "h100", "v100")}}


def scaled_down(table: dict, tmp: str) -> dict:
    """The same workload, small: few tiny samples, short compute, one epoch of two steps."""
    t = {k: dict(v) for k, v in table.items()}
    d, r, tr, ck, ev = t["dataset"], t["reader"], t["train"], t["checkpoint"], t["evaluation"]
    d["folder"] = os.path.join(tmp, "data")
    r["batch_size"] = min(r["batch_size"], 8)
    ev["batch_size"] = min(ev["batch_size"], 8)
    ev["computation_time"] = min(ev["computation_time"], 0.001)
    spf = d["samples_per_file"]
    d["samples_per_file"] = min(spf, 4)
    d["record_length"] = min(d["record_length"], 4096)
    d["record_length_stdev"] = min(d["record_length_stdev"], 512)
    d["files"] = min(d["files"], max(2, math.ceil(2 * r["batch_size"] / d["samples_per_file"])))
    d["samples_per_file"] = min(spf, max(d["samples_per_file"], math.ceil(2 * r["batch_size"] / d["files"])))
    d["eval_files"] = min(d["eval_files"], max(1, math.ceil(ev["batch_size"] / d["samples_per_file"])))
    tr.update(computation_time=min(tr["computation_time"], 0.001), epochs=1, total_training_steps=2)
    ck.update(folder=os.path.join(tmp, "ck"), model_size=min(ck["model_size"], 1 << 16),
              optimizer_size=min(ck["optimizer_size"], 1 << 16), steps_between=ck["steps_between"] and 1,
              after_epoch=min(ck["after_epoch"], 1), count_write=min(ck["count_write"], 1),
              count_read=min(ck["count_read"], 1))
    if "transformer" in ck:         # a DLIO transformer's files, each a few KiB at most
        ck["scale"] = min(1.0, 4096 / (16 << 30))
    return t


@pytest.mark.skipif(not FILES, reason="DLIO's configs not found: set STORLAB_DLIO_CONFIGS (scripts/test.sh fetches them)")
@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_every_dlio_workload_runs_or_is_refused_in_one_line(path, tmp_path):
    name = os.path.basename(path)
    if name in REFUSED:
        with pytest.raises(Refusal) as info:
            translate(path)
        text = str(info.value)
        assert "\n" not in text and len(text) <= MAX_REFUSAL
        assert text.startswith(f"dlio {name}:") and REFUSED[name] in text
        return
    t = translate(path)
    # every key is traced to its line; the accelerator a file's name gives (unet3d_h100.yaml) has none
    assert t.format == "dlio" and t.record()["sha256"] and all(m.line for m in t.mapped if m.key != "(file name)")
    spec = spec_from_table(scaled_down(t.job, str(tmp_path)))
    doc = run_workload(spec, argv=["test"], translation=t.record())
    assert doc["complete"] and doc["translation"]["format"] == "dlio"
    if spec.mode == "checkpoint":
        assert [c["kind"] for c in doc["checkpoints"]] == ["write", "read"]
        assert doc["checkpoints"][0]["bytes"] == doc["checkpoints"][1]["bytes"] > 0
    elif spec.mode == "generate":
        assert doc["generation"]["generated"] and doc["generation"]["bytes"] == doc["dataset"]["bytes"] > 0
    else:
        assert doc["epochs_done"] == 1
        assert 0 <= doc["au"] <= 1.05 and doc["samples_per_s"] > 0


UNET = """model: unet3d
framework: pytorch
workflow:
  generate_data: False
  train: True
dataset:
  data_folder: data/unet3d/
  format: npz
  num_files_train: 168
  record_length: 146600628.5
reader:
  batch_size: 7
  read_threads: 4
train:
  computation_time: 0.323
metric:
  au: 0.90
"""


def test_keys_map_with_their_lines():
    t = translate_text(UNET, "unet.yaml", "0" * 64)
    by = {m.key: m for m in t.mapped}
    assert by["dataset.num_files_train"].line == 9 and by["dataset.num_files_train"].storlab == "dataset.files = 168"
    assert by["reader.batch_size"].storlab == "reader.batch_size = 7"
    assert by["framework"].how == "accepted" and by["framework"].note
    assert t.job["dataset"]["record_length"] == 146600628
    assert t.job["workload"]["au_threshold"] == 0.9
    assert translator("dlio").FORMAT == "dlio"


def test_emit_reads_back_as_the_same_workload(tmp_path):
    t = translate_text(UNET, "unet.yaml", "0" * 64)
    out = tmp_path / "u.toml"
    t.emit(str(out))
    text = out.read_text()
    assert text.startswith("# storlab job translated from dlio unet.yaml")
    assert "# run it with: storlab workload THIS_FILE" in text
    from storlab.jobs.tomlfile import read_toml

    assert spec_from_table(read_toml(str(out), "workload")) == spec_from_table(t.job) == t.resolve()


@pytest.mark.parametrize("text, where", [
    (UNET.replace("  read_threads: 4", "  read_threads: 4\n  wobble: 3"), "dlio u.yaml:14: reader.wobble = 3: not a DLIO workload key"),
    (UNET + "extras:\n  a: 1\n", "dlio u.yaml:18: extras"),
    (UNET.replace("format: npz", "format: png"), "dlio u.yaml:8: dataset.format = png"),
    (UNET.replace("batch_size: 7", "batch_size: seven"), "dlio u.yaml:12: reader.batch_size = seven"),
    ("model: [unclosed\n", "dlio u.yaml:2: (file): not valid YAML"),
    (UNET.replace("  train: True", "  train: True\n  checkpoint: True\ncheckpoint:\n  checkpoint_mechanism_classname: x.Y"),
     "checkpoint.checkpoint_mechanism_classname = x.Y"),
])
def test_refusals_are_one_line_naming_line_and_key(text, where):
    with pytest.raises(Refusal) as info:
        translate_text(text, "u.yaml", "0" * 64)
    msg = str(info.value)
    assert "\n" not in msg and where in msg


@pytest.mark.parametrize("old, new, where", [
    ("batch_size: 7", "batch_size: 0", "dlio u.yaml:12: reader.batch_size = 0: reader.batch_size: 0 is not allowed; use a number > 0"),
    ("num_files_train: 168", "num_files_train: -3", "dlio u.yaml:9: dataset.num_files_train = -3: dataset.files: -3"),
    ("record_length: 146600628.5", "record_length: 0", "dlio u.yaml:10: dataset.record_length = 0: dataset.record_length: 0"),
    ("read_threads: 4", "read_threads: -1", "dlio u.yaml:13: reader.read_threads = -1: reader.read_threads: -1 is not "
                                            "allowed; use a number >= 0"),
    ("batch_size: 7", "batch_size: 1000", "dlio u.yaml:12: reader.batch_size = 1000: reader.batch_size: 1000 x 1 "
                                          "accelerator(s) needs more samples than the dataset's 168"),
    ("  train: True", "  train: True\n  evaluation: True", "dlio u.yaml:6: workflow.evaluation = true: dataset.eval_files: 0 "
                                                         "is not allowed with evaluation on"),
])
def test_bad_values_after_translation_are_refused_at_their_yaml_line(old, new, where):
    with pytest.raises(Refusal) as info:
        translate_text(UNET.replace(old, new), "u.yaml", "0" * 64)
    assert "\n" not in str(info.value) and str(info.value).startswith(where)


def test_hydra_overrides_apply_before_translation():
    t = translate_text(UNET, "u.yaml", "0" * 64, ["++workload.dataset.format=hdf5", "++workload.reader.read_threads=2"])
    assert t.job["dataset"]["format"] == "hdf5" and t.job["reader"]["read_threads"] == 2


def test_evaluation_keys_translate_as_dlio_reads_them():
    text = UNET.replace("  train: True", "  train: True\n  evaluation: True\n  do_eval: False").replace(
        "  num_files_train: 168", "  num_files_train: 168\n  num_files_eval: 42\n  num_subfolders_eval: 2\n"
        "  eval_num_samples_per_file: 9").replace("  batch_size: 7", "  batch_size: 7\n  batch_size_eval: 3") + (
        "evaluation:\n  eval_time: 0.5\n  eval_time_stdev: 0.1\n  eval_after_epoch: 2\n  epochs_between_evals: 3\n"
        "  steps_between_evals: 100\n")
    t = translate_text(text, "u.yaml", "0" * 64)
    assert t.job["evaluation"] == {"enabled": True, "batch_size": 3, "computation_time": 0.5,
                                   "computation_time_stdev": 0.1, "after_epoch": 2, "epochs_between": 3}
    assert t.job["dataset"]["eval_files"] == 42 and t.job["dataset"]["eval_subfolders"] == 2
    by = {m.key: m for m in t.mapped}
    # keys DLIO 2.0 does not read are accepted and ignored, saying so
    for key in ("workflow.do_eval", "dataset.eval_num_samples_per_file", "evaluation.steps_between_evals"):
        assert by[key].how == "accepted" and "DLIO 2.0 does not read" in by[key].note


def test_checkpoint_sizes_follow_dlio():
    text = UNET.replace("  train: True", "  train: True\n  checkpoint: True") + (
        "checkpoint:\n  type: all_ranks\n  model_size: 1000\n  optimization_groups: [10, 20]\n"
        "  num_layers: 4\n  layer_parameters: [5, 7]\n  tensor_parallelism: 2\n")
    t = translate_text(text, "u.yaml", "0" * 64)
    ck = t.job["checkpoint"]
    assert ck["optimizer_size"] == 3 * 30 and ck["model_size"] == 1000 + (4 + 2) * 12 and ck["ranks"] == "all"
