"""Predicted vs measured (storlab.measure.prediction): a run's workload mapped onto the stack model, checked
against figures worked out by hand for a simple stack, and the `--stack` hook of `storlab run`."""
from __future__ import annotations

import json
import os

import pytest
from storlab.cli.main import main
from storlab.jobs.job import resolve_job
from storlab.measure.prediction import measured_value, predict_for_run
from storlab.measure.runner import run_job
from storlab.model.costs import CONTROLLER_REQUEST_LATENCY_S, DRIVE_REORDER_DEPTH, reordered_positioning_fraction

MB = 10**6
KiB = 1024

# One 8+1 RAID 5 of drives doing 200 MB/s and 100 IOPS each, 128 KiB chunks (full stripe
# 8 x 128 KiB = 1 MiB), behind a RAID adapter that carries at most 1000 MB/s each way.
# By hand, before any cap:
#   sequential read  = 8 data drives x 200 MB/s = 1600 MB/s           -> adapter cap 1000 MB/s
#   sequential write, 1 MiB full stripes = 8 x 200 MB/s = 1600 MB/s   -> adapter cap 1000 MB/s
#   sequential write, 256 KiB: each request writes 2 of 8 chunks of one stripe; read-modify-write
#     reads the 2 old chunks + old parity (384 KiB) and writes 2 chunks + parity (384 KiB), so the
#     drives move 768 KiB per 256 KiB host: amplification 3 -> 9 x 200 MB/s / 3 = 600 MB/s (drives)
#   random read 4 KiB  = 9 drives x 100 IOPS (a 4 KiB request is one chunk piece) = 900 IOPS
#   random write 4 KiB = 9 x 100 / 4 drive ops (2 reads, 2 writes) = 225 IOPS
R5_STACK = """
name = "r5-8p1-adapter"
[drive]
capacity = "1TB"
seq_read = "200MB/s"
seq_write = "200MB/s"
random_iops = 100
[raid]
layout = "R5/9"
chunk = "128KiB"
[[component]]
name = "host"
[[component]]
name = "adapter"
kind = "controller"
parent = "host"
bw = "1000MB/s"
raid_engine = true
groups = 1
"""


@pytest.fixture
def r5_stack(tmp_path):
    path = tmp_path / "r5.toml"
    path.write_text(R5_STACK)
    return str(path)


# The same drives serving their queue in arrival order (not spinning: no rotational position
# ordering), so the random figures below are the closed forms worked out by hand
R5_FCFS_STACK = R5_STACK.replace('random_iops = 100\n', 'random_iops = 100\nrotational = false\n')


@pytest.fixture
def r5_fcfs_stack(tmp_path):
    path = tmp_path / "r5-fcfs.toml"
    path.write_text(R5_FCFS_STACK)
    return str(path)


@pytest.fixture
def r5_write_through_stack(tmp_path):
    """The same stack whose controller is said to write through: nothing gathers partial stripes."""
    path = tmp_path / "r5-write-through.toml"
    path.write_text(R5_STACK + '[cache]\nsize = "1GiB"\nwrite_back = false\n')
    return str(path)


def job(rw: str, bs: int, threads: int = 1, qd: int = 1, engine: str = "io_uring",
        rwmix_read: int = 50, **extra) -> dict:
    """A job record as the runner stores it: the first group's options flat, plus the phases."""
    group = {"name": "g", "rw": rw, "bs": bs, "threads": threads, "qd": qd, "engine": engine,
             "target": ["/dev/md0"], "rwmix_read": rwmix_read, "direct": True, **extra}
    flat = {k: v for k, v in group.items() if k != "name"}
    return {**flat, "phases": [{"name": rw, "groups": [group]}]}


def test_sequential_read_is_capped_by_the_adapter_which_is_named(r5_stack):
    m = predict_for_run(r5_stack, job("read", 1 << 20, qd=16))
    run = m["predicted"]["for_this_run"]
    assert run["metric"] == "seq_read_bw_bytes" and run["unit"] == "bytes/s"
    assert run["value"] == pytest.approx(1000 * MB)
    assert run["limiting_component"] == "host/adapter"
    (adapter,) = run["headroom"]          # the host has no limit, so no headroom row
    assert adapter["component"] == "adapter" and adapter["headroom_fraction"] == pytest.approx(0.0)
    phase = m["phases"][0]
    assert phase["drives_value"] == pytest.approx(1600 * MB)
    assert phase["value_iops"] == pytest.approx(1000 * MB / (1 << 20))
    assert phase["measured_as"] == {"quantity": "bw_bytes", "directions": ["read"]}


def test_stack_figures_at_the_runs_request_size(r5_stack, r5_fcfs_stack):
    fcfs = predict_for_run(r5_fcfs_stack, job("randread", 4 * KiB, qd=32))["predicted"]
    assert fcfs["rand_read_iops"] == pytest.approx(900)
    assert fcfs["rand_write_iops"] == pytest.approx(225)
    # spinning drives reorder up to 32 queued requests: the random ceilings are that much higher
    m = predict_for_run(r5_stack, job("randread", 4 * KiB, qd=32))
    p = m["predicted"]
    gain = 1 / reordered_positioning_fraction(DRIVE_REORDER_DEPTH)
    assert p["seq_read_bw_bytes"] == pytest.approx(1000 * MB)
    assert p["rand_read_iops"] == pytest.approx(900 * gain)
    assert p["rand_write_iops"] == pytest.approx(225 * gain)
    assert p["limiting"]["seq_read_bw_bytes"] == "host/adapter"
    assert p["limiting"]["rand_read_iops"] == "drives"
    s = m["stack"]
    assert (s["layout"], s["drives"], s["data_drives"], s["full_stripe_bytes"]) == ("R5/9", 9, 8, 1 << 20)
    assert m["stack_file"] == os.path.abspath(r5_stack) and m["request_bytes"] == 4096


def test_full_stripe_sequential_write_is_capped_by_the_adapter(r5_stack):
    phase = predict_for_run(r5_stack, job("write", 1 << 20, qd=4))["phases"][0]
    assert phase["metric"] == "seq_write_bw_bytes"
    assert phase["value"] == pytest.approx(1000 * MB, rel=1e-3)
    assert phase["limiting_component"] == "host/adapter"
    a = phase["alignment"]
    assert a["full_stripe_fraction"] == 1.0 and a["write_penalty"] == pytest.approx(9 / 8)


def test_partial_stripe_sequential_write_pays_read_modify_write(r5_write_through_stack):
    phase = predict_for_run(r5_write_through_stack, job("write", 256 * KiB, qd=4))["phases"][0]
    a = phase["alignment"]
    assert a["partial_stripe_fraction"] == 1.0 and a["rmw_fraction"] == 1.0
    assert a["write_amplification"] == pytest.approx(3.0)
    # four in flight against the drives' 600 MB/s ceiling: just below it, the drives named
    assert phase["model_value"] == pytest.approx(600 * MB)
    assert 0.95 * 600 * MB < phase["value"] <= 600 * MB
    assert phase["limiting_component"].startswith("member[")


def test_a_controller_gathers_partial_stripe_sequential_writes_by_default(r5_stack):
    # the stack states no cache: its RAID controller writes back, as one does by default, so the
    # 256 KiB stream reaches the drives as full stripes (9/8 drive bytes per host byte, 1600 MB/s of
    # drives) and the adapter's 1000 MB/s binds, as it does for 1 MiB requests
    phase = predict_for_run(r5_stack, job("write", 256 * KiB, qd=4))["phases"][0]
    a = phase["alignment"]
    assert a["full_stripe_fraction"] == 1.0 and a["rmw_fraction"] == 0.0
    assert a["write_amplification"] == pytest.approx(9 / 8)
    assert phase["model_value"] == pytest.approx(1000 * MB)
    assert phase["limiting_component"] == "host/adapter"


def test_random_rates_and_the_concurrency_bound(r5_fcfs_stack):
    r5_stack = r5_fcfs_stack
    # 32 requests in flight over 9 equal drives, each request one drive visit: the balanced closed
    # network's throughput N / (N + K - 1) x 1 / D = 32 / 40 x 900 = 720 IOPS (Lazowska et al.,
    # "Quantitative System Performance", 1984, balanced job bounds); the 70 us host overhead per
    # request is a small delay beside the 10 ms drive visits
    deep_read = predict_for_run(r5_stack, job("randread", 4 * KiB, qd=32))["phases"][0]
    assert deep_read["value"] == pytest.approx(720, rel=0.01) and deep_read["model_value"] == pytest.approx(900)
    # twice the depth would still gain 11 % (64 / 72 x 900 = 800): the depth is what limits
    assert deep_read["limiting_component"] == "concurrency (32 request(s) in flight)"
    # psync keeps one request in flight per thread whatever qd says: 1 x 100 IOPS
    one = predict_for_run(r5_stack, job("randread", 4 * KiB, qd=32, engine="psync"))["phases"][0]
    assert one["outstanding"] == 1
    # one request at a time: the drive's 10 ms and the controller's own time (costs.py)
    assert one["value"] == pytest.approx(1 / (0.010 + CONTROLLER_REQUEST_LATENCY_S), rel=0.01)
    assert one["limiting_component"].startswith("concurrency (1 request")
    deep_write = predict_for_run(r5_stack, job("randwrite", 4 * KiB, threads=4, qd=8))["phases"][0]
    assert 0.9 * 225 < deep_write["value"] < 225 and deep_write["model_value"] == pytest.approx(225)
    assert deep_write["limiting_component"].startswith("member[")
    # one RAID 5 small write at a time: read old data and parity, then write both = 2 drive
    # service times per request (and the controller's own time) -> about 100 / 2 = 50 IOPS
    one_write = predict_for_run(r5_stack, job("randwrite", 4 * KiB))["phases"][0]
    assert one_write["value"] == pytest.approx(1 / (0.020 + CONTROLLER_REQUEST_LATENCY_S), rel=0.01)


def test_spinning_drives_that_reorder_serve_more_than_the_closed_form_of_arrival_order(r5_stack):
    # 32 in flight over 9 spinning drives, each holding about 3.5 to choose from: above the 720
    # IOPS of drives serving in arrival order, below the 900 x (the gain of 32 queued) ceiling
    deep = predict_for_run(r5_stack, job("randread", 4 * KiB, qd=32))["phases"][0]
    assert 720 * 1.2 < deep["value"] < 900 / reordered_positioning_fraction(DRIVE_REORDER_DEPTH)
    one = predict_for_run(r5_stack, job("randread", 4 * KiB, qd=1))["phases"][0]
    assert one["value"] == pytest.approx(1 / (0.010 + CONTROLLER_REQUEST_LATENCY_S), rel=0.01)


def test_mixed_random_is_the_harmonic_mix(r5_fcfs_stack):
    r5_stack = r5_fcfs_stack
    phase = predict_for_run(r5_stack, job("randrw", 4 * KiB, qd=32, rwmix_read=70))["phases"][0]
    assert phase["metric"] == "rand_mixed_iops"
    r, w = phase["by_direction"]["read"]["value"], phase["by_direction"]["write"]["value"]
    assert phase["value"] == pytest.approx(1 / (0.7 / r + 0.3 / w))
    assert phase["limiting_by_direction"]["write"].startswith("member[")
    assert phase["measured_as"] == {"quantity": "iops", "directions": ["read", "write"]}


def test_every_phase_is_predicted_and_measured_from_its_direction(r5_stack):
    record = job("write", 1 << 20, qd=4)
    record["phases"].append({"name": "readback", "groups": [{**record["phases"][0]["groups"][0],
                                                              "rw": "randread", "bs": 4096}]})
    m = predict_for_run(r5_stack, record)
    assert [(p["phase"], p["metric"]) for p in m["phases"]] == [
        ("write", "seq_write_bw_bytes"), ("readback", "rand_read_iops")]
    result = {"read": {"bw_bytes": 2.0e6, "iops": 488.0}, "write": None}
    assert measured_value(result, m["phases"][1]) == 488.0
    assert measured_value(result, m["phases"][0]) is None      # this phase wrote nothing


def test_notes_say_what_the_model_leaves_out(r5_stack, r5_write_through_stack):
    notes = " ".join(predict_for_run(r5_write_through_stack, job("write", 256 * KiB, engine="null",
                                                                 direct=False))["notes"])
    assert "engine null does no I/O" in notes
    assert "page cache" not in notes            # the null engine has none
    assert "costed as separate partial-stripe writes" in notes
    notes = " ".join(predict_for_run(r5_stack, job("write", 256 * KiB))["notes"])
    assert "costed as full stripes: the write-back cache gathers them" in notes
    notes = " ".join(predict_for_run(r5_stack, job("randread", 4 * KiB, direct=False))["notes"])
    assert "page cache" in notes and "requests in flight" in notes
    assert "partial-stripe" not in notes


@pytest.mark.parametrize("content,words", [
    (None, ["no such stack file"]),
    ("[raid\nlayout = 1", ["not valid TOML"]),
    ('[raid]\nlayout = "R6/3"\nchunk = "64KiB"\n', ["RAID 6 needs at least 4 drives per span"]),
    ('[raid]\nlayout = "R5/9"\nchunk = "128KiB"\nspeed = 3\n', ["unknown key 'speed'"]),
])
def test_bad_stack_file_gives_one_line_naming_the_file(tmp_path, content, words):
    path = tmp_path / "bad.toml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError) as e:
        predict_for_run(str(path), job("read", 1 << 20))
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg
    for w in words:
        assert w in msg, msg


# -- the runner hook and the CLI ------------------------------------------------------------------
def test_run_with_stack_stores_the_model_section(r5_stack, shm_dir):
    doc = run_job(resolve_job({"target": [f"{shm_dir}/p.dat"], "size": "4m", "engine": "null",
                               "rw": "read", "bs": "1m", "time": "0.2s", "stack": r5_stack,
                               "no_store": True}))
    assert doc["complete"] and doc["job"]["stack"] == r5_stack
    # one 1 MiB read at a time: the host, HBA and controller times, then the transfer through the
    # 1000 MB/s adapter (the slowest stage: the 8 data drives take 1 MiB / 1600 MB/s)
    from storlab.model.costs import HBA_REQUEST_OVERHEAD_S, HOST_REQUEST_OVERHEAD_S
    fixed = HOST_REQUEST_OVERHEAD_S + HBA_REQUEST_OVERHEAD_S + CONTROLLER_REQUEST_LATENCY_S
    one_at_a_time = (1 << 20) / (fixed + (1 << 20) / (1000 * MB))
    assert doc["model"]["predicted"]["for_this_run"]["value"] == pytest.approx(one_at_a_time, rel=1e-3)
    assert measured_value(doc["phases"][0], doc["model"]["phases"][0]) == doc["phases"][0]["read"]["bw_bytes"]


def test_run_without_stack_has_no_model_section(shm_dir):
    doc = run_job(resolve_job({"target": [f"{shm_dir}/q.dat"], "size": "1m", "engine": "null",
                               "time": "0.1s", "no_store": True}))
    assert "model" not in doc


def test_cli_bad_stack_is_one_line_and_no_io(tmp_path, shm_dir, capsys):
    target = f"{shm_dir}/never.dat"
    code = main(["run", "--stack", str(tmp_path / "missing.toml"), "--engine", "null", "--target", target,
                 "--size", "1m", "--time", "0.1s", "--json", str(tmp_path / "o.json"), "-q", "--no-store"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.count("\n") == 0 and "missing.toml: no such stack file" in err
    assert not os.path.exists(target)     # refused before the target was laid out


def test_cli_run_with_example_stack(tmp_path, shm_dir):
    out = tmp_path / "o.json"
    stack = os.path.join(os.path.dirname(__file__), "..", "examples", "stacks", "r6-12-nlsas-md.toml")
    code = main(["run", "--stack", stack, "--engine", "null", "--target", f"{shm_dir}/e.dat", "--size", "4m",
                 "--rw", "randwrite", "--bs", "4k", "--qd", "4", "--time", "0.2s", "--json", str(out), "-q",
                 "--no-store"])
    assert code == 0
    model = json.loads(out.read_text())["model"]
    assert model["stack"]["layout"] == "R6/12"
    run = model["predicted"]["for_this_run"]
    assert run["metric"] == "rand_write_iops" and run["value"] > 0 and run["limiting_component"]


def test_a_stack_cache_meets_the_runs_size(tmp_path):
    # issue 36: `run --stack` predicts with model.predict, so the stack file's [cache] applies: a
    # run over 64 MiB is served from the 1 GiB cache (its 800 MB/s binds 4 KiB reads at
    # 800e6 / 4096 = 195,312 IOPS once enough are in flight: each also spends the cache's
    # controller's 0.2 ms, so 128 of them), one over 100 GiB reaches the drives. The cache's
    # controller states its request rate above that (the default controller's 60,000 would bind)
    path = tmp_path / "cached.toml"
    no_adapter = R5_FCFS_STACK.split("[[component]]")[0]     # the drives and the RAID only
    path.write_text(no_adapter + '[cache]\nsize = "1GiB"\nbw = "800MB/s"\niops = 400000\n')
    small = predict_for_run(str(path), job("randread", 4 * KiB, threads=4, qd=32, size=64 << 20))["phases"][0]
    assert small["value"] == pytest.approx(800e6 / 4096, rel=1e-4) and small["limiting_component"] == "cache"
    large = predict_for_run(str(path), job("randread", 4 * KiB, threads=4, qd=8, size=100 << 30))["phases"][0]
    assert large["value"] < 900 and large["limiting_component"] != "cache"
