"""`storlab plan perf --workload` and `plan recommend --workload --accelerators`, run in-process: the
accelerators a stack feeds (figures worked by hand in tests/test_model_training.py), pass or fail at
--accelerators, a checkpoint's seconds, DLIO YAML through the workload translator, and one-line
errors with exit code 2."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from storlab.cli.main import main
from storlab.model.profile import DeviceProfile, save_profile

MiB = 1 << 20


def run(capsys, *argv):
    code = main(["plan", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def throttle_profile(tmp_path) -> str:
    """A blkio-throttled loop described as plan profile fits one: 32 MiB/s, a rate limiter."""
    path = tmp_path / "throttle.json"
    save_profile(DeviceProfile("loop", 32 * MiB, 32 * MiB, 1e6, 1e6, 20e-6, 20e-6, 1, False), str(path))
    return str(path)


@pytest.fixture
def small_workload(tmp_path) -> str:
    """1 MiB samples, batch 1, 0.1 s compute, 2 readers, 500 steps: on 32 MiB/s AU(n) = 3.2064 / n."""
    path = tmp_path / "small.toml"
    path.write_text("""[workload]
name = "small"
au_threshold = 0.75
[dataset]
folder = "unused"
files = 100000
record_length = 1048576
[reader]
batch_size = 1
read_threads = 2
[train]
computation_time = 0.1
total_training_steps = 500
""")
    return str(path)


@pytest.fixture
def eval_workload(small_workload, tmp_path) -> str:
    """The small workload with DLIO's evaluation after epochs 2 and 3: 4000 eval samples, batch 2,
    0.05 s per batch (worked by hand in tests/test_model_training.py)."""
    path = tmp_path / "eval.toml"
    text = Path(small_workload).read_text().replace('name = "small"', 'name = "small_eval"')
    path.write_text(text.replace("files = 100000", "files = 100000\neval_files = 4000")
                    + "epochs = 3\n[evaluation]\nenabled = true\nbatch_size = 2\ncomputation_time = 0.05\nafter_epoch = 2\n")
    return str(path)


def test_perf_workload_predicts_the_eval_phase_apart(capsys, throttle_profile, eval_workload):
    code, out, err = run(capsys, "perf", "device", "--workload", eval_workload, "--profile", throttle_profile,
                         "--dataset-size", "as-written")
    assert code == 0 and err == ""
    train, _, block = out.partition("small_eval on one device: evaluation (DLIO's eval, apart from training)")
    assert "accelerators fed: 4" in train and "at 4: AU 0.80" in train and "eval" not in train.split("at 4:")[1]
    # Se = 500, Le = 0.25 s: 125.05 s per evaluation, AU 24.95 / 124.5, 31.99 samples/s of 1 MiB
    assert "after epoch 2 then every 1" in block
    assert "at 4: eval AU 0.200 (fail), 32.0 samples/s, 31.99 MiB/s; demand 160.0 MiB/s, delivered 32.0 MiB/s" in block
    assert "125 s per evaluation (500 steps); 2 evaluation(s) per run: 250 s" in block
    code, out, _ = run(capsys, "perf", "device", "--workload", eval_workload, "--profile", throttle_profile,
                       "--dataset-size", "as-written", "--accelerators", "8", "--json")
    assert code == 0
    ev = json.loads(out)["workload"]["evaluation"]
    assert ev["load"]["batch"] == 2 and ev["load"]["samples"] == 4000 and ev["load"]["rule_sized"] is False
    fed = ev["at_fed"]
    assert fed["accelerators"] == 4 and fed["steps_per_evaluation"] == 500 and fed["evaluations_per_run"] == 2
    assert fed["au"] == pytest.approx(24.95 / 124.5, rel=1e-3) and fed["passed"] is False
    assert fed["seconds_per_evaluation"] == pytest.approx(125.05, rel=1e-3)
    assert fed["seconds_per_run"] == pytest.approx(250.1, rel=1e-3)
    assert fed["mib_per_s"] == pytest.approx(4000 / 125.05, rel=1e-3)
    assert fed["demand_bytes_per_s"] == pytest.approx(160 * MiB)
    assert fed["delivered_bytes_per_s"] == pytest.approx(32 * MiB, rel=0.01)
    at8 = ev["at_accelerators"]        # Se = 250, Le = 0.5 s: AU 249 x 0.05 / 124.0
    assert at8["accelerators"] == 8 and at8["au"] == pytest.approx(12.45 / 124.0, rel=1e-3)


def test_perf_workload_eval_when_no_accelerator_is_fed(capsys, tmp_path, eval_workload):
    # 1 MiB/s: training's AU at 1 is 0.1, below the threshold; the evaluation is shown at 1:
    # Le = 2 s, Se = 2000: wall = 2000 x 2 + 0.05 = 4000.05 s, AU = 1999 x 0.05 / (4000.05 - 4.05)
    slow = tmp_path / "slow.json"
    save_profile(DeviceProfile("loop", MiB, MiB, 1e6, 1e6, 20e-6, 20e-6, 1, False), str(slow))
    code, out, _ = run(capsys, "perf", "device", "--workload", eval_workload, "--profile", str(slow),
                       "--dataset-size", "as-written")
    assert code == 0 and "accelerators fed: 0" in out
    assert "4,000 s per evaluation (2000 steps); 2 evaluation(s) per run: 8,000 s" in out
    assert "no accelerator holds the training threshold: at_fed shows the evaluation at 1" in out
    code, out, _ = run(capsys, "perf", "device", "--workload", eval_workload, "--profile", str(slow),
                       "--dataset-size", "as-written", "--json")
    fed = json.loads(out)["workload"]["evaluation"]["at_fed"]
    assert fed["accelerators"] == 1 and fed["au"] == pytest.approx(99.95 / 3996.0, rel=1e-3)


def test_perf_workload_without_evaluation_has_no_eval_block(capsys, throttle_profile, small_workload):
    code, out, _ = run(capsys, "perf", "device", "--workload", small_workload, "--profile", throttle_profile)
    assert code == 0 and "evaluation" not in out
    code, out, _ = run(capsys, "perf", "device", "--workload", small_workload, "--profile", throttle_profile, "--json")
    assert code == 0 and "evaluation" not in json.loads(out)["workload"]


def test_perf_workload_on_one_device(capsys, throttle_profile, small_workload):
    code, out, err = run(capsys, "perf", "device", "--workload", small_workload, "--profile", throttle_profile,
                         "--dataset-size", "as-written")
    assert code == 0 and err == ""
    assert "accelerators fed: 4" in out
    assert "at 4: AU 0.80" in out and "at 5: AU 0.64" in out and "storage limited by loop" in out


def test_perf_workload_json_and_pass_or_fail(capsys, throttle_profile, small_workload):
    code, out, _ = run(capsys, "perf", "R0/2", "--workload", small_workload, "--profile", throttle_profile,
                       "--accelerators", "9", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "storlab.plan.perf/1"
    wl = doc["workload"]
    assert wl["kind"] == "training" and wl["accelerators_fed"] == 8      # two members: twice one
    assert wl["at_fed"]["delivered_bytes_per_s"] == pytest.approx(64 * MiB, rel=0.02)
    assert wl["passed"] is False and wl["at_accelerators"]["accelerators"] == 9
    assert wl["at_accelerators"]["au"] == pytest.approx(2 * 3.2064 / 9, rel=0.02)
    code, out, _ = run(capsys, "perf", "R0/2", "--workload", small_workload, "--profile", throttle_profile,
                       "--accelerators", "8")
    assert code == 0 and "--accelerators 8: AU 0.80" in out and "PASS" in out


def test_perf_checkpoint_workload(capsys, throttle_profile):
    code, out, _ = run(capsys, "perf", "R0/2", "--workload", "llama3_8b", "--profile", throttle_profile, "--json")
    assert code == 0
    ck = json.loads(out)["workload"]["checkpoint"]
    # DLIO's llama3-8b over 8 ZeRO-3 ranks: 16,060,522,496 B of fp16 model + 96,365,101,056 B of fp32
    # optimizer (mlpstorage's "15 + 90 GB" are GiB), an equal share per rank, on 2 x 32 MiB/s: 1675 s each way
    total = 16_060_522_496 + 96_365_101_056
    assert ck["writers"] == 8 and ck["bytes_per_checkpoint"] == total
    assert ck["write_seconds"] == pytest.approx(total / (64 * MiB), rel=0.02)
    assert ck["read_seconds"] == pytest.approx(total / (64 * MiB), rel=0.02)
    code, out, _ = run(capsys, "perf", "R0/2", "--workload", "llama3_8b", "--profile", throttle_profile,
                       "--accelerators", "4")
    assert code == 0 and "by 4 writer(s)" in out        # subset mode: 4 of the 8 ranks write their share


DLIO = os.environ.get("STORLAB_DLIO_CONFIGS")


@pytest.mark.skipif(not DLIO or not (Path(DLIO) / "unet3d_h100.yaml").exists(),
                    reason="DLIO's configs not found: set STORLAB_DLIO_CONFIGS (scripts/test.sh fetches them)")
def test_perf_takes_a_dlio_yaml_through_the_translator(capsys):
    code, out, _ = run(capsys, "perf", "R6/12", "--workload", str(Path(DLIO) / "unet3d_h100.yaml"), "--json")
    assert code == 0
    wl = json.loads(out)["workload"]
    assert wl["load"]["record_bytes"] == 146600628 and wl["load"]["batch"] == 7


def test_recommend_keeps_layouts_that_feed_the_accelerators(capsys):
    code, out, _ = run(capsys, "recommend", "--drives", "12", "--workload", "resnet50_h100", "--accelerators", "4",
                       "--levels", "6,10", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["workload"] == {"name": "resnet50_h100", "accelerators": 4, "au_threshold": 0.9, "dataset_size": "rule"}
    assert doc["pareto"] and all(c["training"]["accelerators"] >= 4 for c in doc["pareto"])
    code, out, _ = run(capsys, "recommend", "--drives", "12", "--workload", "resnet50_h100", "--accelerators", "4",
                       "--levels", "6,10")
    assert code == 0 and "layouts feeding 4 resnet50_h100 accelerators" in out and "accelerators: feeds" in out


def test_recommend_says_what_each_layout_misses_when_none_feeds_them(capsys):
    code, out, _ = run(capsys, "recommend", "--drives", "12", "--workload", "unet3d_h100", "--accelerators", "64",
                       "--levels", "6", "--chunks", "1m", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["feasible"] == 0 and "no candidate meets every need" in doc["note"]
    assert all(any("unet3d_h100 accelerators < 64" in m for m in c["misses"]) for c in doc["pareto"])


@pytest.mark.parametrize("argv, needle", [
    (["perf", "R6/8", "--workload", "nosuch"], "--workload: 'nosuch' is not a built-in workload"),
    (["perf", "R6/8", "--accelerators", "4"], "--accelerators needs --workload"),
    (["perf", "device"], "needs --workload"),
    (["perf", "R6/8", "--workload", "unet3d_h100", "--dataset-size", "huge"], "--dataset-size"),
    (["perf", "R6/8", "--workload", "unet3d_h100", "--accelerators", "0"], "--accelerators"),
    (["recommend", "--drives", "12", "--workload", "unet3d_h100"], "--workload needs --accelerators"),
    (["recommend", "--drives", "12", "--workload", "llama3_8b", "--accelerators", "2"], "checkpoint workload"),
    (["perf", "R6/8", "--workload", "missing.yaml"], "missing.yaml"),
    (["perf", "R6/8", "--workload", "unet3d_h100", "--rw", "read"], "--rw draws the curve"),
])
def test_bad_workload_input_is_one_line_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("storlab plan: error: ") and needle in err, err
    if "nosuch" in argv:
        assert "built-ins: " in err and "unet3d_h100" in err and "llama3_8b" in err


@pytest.mark.parametrize("name, threshold", [("retinanet_b200", "85.0 %"), ("unet3d_b200", "90.0 %"),
                                             ("dlrm_b200", "70.0 %"), ("flux_b200", "90.0 %")])
def test_perf_covers_the_v3_builtins(capsys, throttle_profile, name, threshold):
    if name.startswith("retinanet"):
        pytest.importorskip("PIL", reason="Pillow sizes the JPEG files retinanet reads")
    code, out, err = run(capsys, "perf", "device", "--workload", name, "--profile", throttle_profile)
    assert code == 0 and err == ""
    assert f"{name} on one device: AI training, AU threshold {threshold}" in out
    if name in ("dlrm_b200", "flux_b200"):
        assert "a column chunk of the rows read at once" in out


def test_recommend_takes_a_v3_builtin(capsys):
    pytest.importorskip("PIL", reason="Pillow sizes the JPEG files retinanet reads")
    code, out, _ = run(capsys, "recommend", "--drives", "12", "--workload", "retinanet_b200", "--accelerators", "4",
                       "--levels", "6,10", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["workload"] == {"name": "retinanet_b200", "accelerators": 4, "au_threshold": 0.85, "dataset_size": "rule"}
    assert doc["pareto"]
