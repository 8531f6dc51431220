"""The KV-cache benchmark as the model's load (model/kvcache.py): the load of option 2 worked by
hand from the reference README's numbers, the figures on one device against their closed forms,
`plan perf device --workload kvcache_N --json` against the plan schema, `plan recommend --workload
kvcache_N --tokens-per-s`, one-line errors (exit 2), and one prediction against a real `storlab
kvcache` run on tmpfs."""
from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from storlab.cli.main import main
from storlab.jobs.kvcache_job import BUILTINS, GIB, MODELS
from storlab.model.kvcache import (
    CHUNK_BYTES,
    GENERATION_S_PER_TOKEN,
    kvcache_load,
    kvcache_option,
    mean_turns_before,
    mixed_users,
    predict_kvcache,
)
from storlab.model.predict import Device
from storlab.model.queueing import Station, solve_closed
from storlab.suites.kvcache import objects, trial, users


def run(capsys, *argv):
    code = main(["plan", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_emulation_and_the_model_share_the_users_and_constants():
    assert users.mixed_users is mixed_users and users.User is not None
    assert objects.CHUNK_BYTES == CHUNK_BYTES and trial.GENERATION_S_PER_TOKEN == GENERATION_S_PER_TOKEN


def test_option_2_load_by_hand():
    # README, option 2 "Storage Throughput": llama3.1-8b, --num-users 100, --gpu-mem-gb 0, --cpu-mem-gb 4,
    # --max-concurrent-allocs 16, --generation-mode none, seed 42.
    option = kvcache_option("kvcache_2")
    assert (option.model, option.users, option.gpu_mem_bytes, option.cpu_mem_bytes) == ("llama3.1-8b", 100, 0, 4 * GIB)
    load = kvcache_load(option)
    # bytes per token: 32 layers x 8 KV heads x (4096 / 32 = 128) head dim x 2 (K, V) x 2 bytes = 131,072
    assert load.kv_bytes_per_token == 32 * 8 * 128 * 2 * 2 == 131_072
    # user 0 after random.seed(42): choice -> "document", random() 0.111 -> interactive, context randint(4096, 16384)
    random.seed(42)
    kind = random.choice(["chatbot", "coding", "document"])
    random.random()
    ctx = random.randint(4096, 16384)
    gen = random.randint(200, 800)
    u = load.users[0]
    assert (u.user.kind, u.user.context_tokens, u.user.generation_tokens) == (kind, ctx, gen) == ("document", 16245, 481)
    # its object: context uniform in [16245 // 4 = 4061, 16245], mean 10153 tokens, less a system prompt
    # (5, 9 or 6 words) one request in five: 0.2 x 20 / 3 = 1.333 tokens -> 10151.667 tokens x 131,072 bytes
    assert u.object_bytes == pytest.approx((10153 - 0.2 * 20 / 3) * 131_072) == pytest.approx(1.3306e9, rel=1e-4)
    # decode only below 10,000 context tokens: 4061..9999 of 4061..16245 -> 5939 / 12185
    assert u.decode_p == pytest.approx(5939 / 12185)
    # reads per request: the earlier turns (stationary turn index, P(k) ~ 0.8^(k-1) up to 50: mean
    # 0.8 / 0.2 less the cut at 50 = 3.99929) + decode's 1 + ceil(g / 32) for g uniform in 120..481
    turns = 4 - 50 * 0.8 ** 50 / (1 - 0.8 ** 50)
    assert mean_turns_before() == pytest.approx(turns)
    decode_reads = 1 + sum(math.ceil(g / 32) for g in range(120, 482)) / 362
    assert u.reads_per_request == pytest.approx(turns + 5939 / 12185 * decode_reads)
    assert u.generation_tokens == (120 + 481) / 2 and u.sleep_s == u.user.think_time_s      # generation "none"
    # spills: the CPU tier keeps 80 % of 4 GiB = 3.436 GB; the users' newest objects are 100 x the mean
    # object (686.5 MB, from the 100 users' draws) = 68.65 GB, their live conversations 4.999 x that
    mean_obj = sum(x.object_bytes for x in load.users) / 100
    assert load.memory_bytes == pytest.approx(0.8 * 4 * 2**30)
    decode_hit = 0.8 * 4 * 2**30 / (100 * mean_obj)
    earlier_hit = 0.8 * 4 * 2**30 / (100 * mean_obj * (1 + turns))
    assert load.write_spill == pytest.approx(1 - earlier_hit) and 0.98 < load.write_spill < 1.0
    reads = sum(x.reads_per_request for x in load.users) / 100
    assert load.read_hit_memory == pytest.approx(((reads - turns) * decode_hit + turns * earlier_hit) / reads)
    assert load.write_bytes_per_request == pytest.approx(mean_obj * load.write_spill)
    assert load.write_direct == 0.0         # with a CPU tier a new object lands there first; storage by demotion
    assert load.concurrency == 100 and load.request_bytes == 8 << 20
    # option 1 (no memory tiers): every object and every read reaches storage, written directly
    one = kvcache_load(BUILTINS[1])
    assert (one.memory_bytes, one.read_hit_memory, one.write_spill, one.write_direct) == (0, 0.0, 1.0, 1.0)
    assert one.read_bytes_per_request == pytest.approx(
        sum(x.reads_per_request * x.object_bytes for x in one.users) / 200)


DEVICE = Device(read_bw_bytes=1e9, write_bw_bytes=5e8, read_iops=1e6, write_iops=1e6, latency_s=100e-6,
                name="disk", sequential_latency_s=100e-6)


def test_one_device_closed_forms():
    load = kvcache_load(BUILTINS[1])
    fc = predict_kvcache(None, load, [DEVICE])
    # 200 users against ~12 s of storage per request and 0.6 s of think: the device is saturated
    demand = load.read_bytes_per_request / 1e9 + load.write_bytes_per_request / 5e8
    assert fc.storage_busy == pytest.approx(1.0, abs=1e-6)
    assert fc.requests_per_s == pytest.approx(1 / demand, rel=1e-6)
    assert fc.read_bw_bytes <= 1e9 and fc.read_bw_bytes == pytest.approx(fc.requests_per_s * load.read_bytes_per_request)
    assert fc.write_bw_bytes == pytest.approx(fc.requests_per_s * load.write_bytes_per_request)
    # read and write time share the device: read_bw / 1e9 + write_bw / 5e8 = 1
    assert fc.read_bw_bytes / 1e9 + fc.write_bw_bytes / 5e8 == pytest.approx(1.0, rel=1e-6)
    # tokens_per_s: tokens per request over the storage time per request (N / X less the think time)
    storage_s = 200 / fc.requests_per_s - load.sleep_s
    assert fc.storage_s_per_request == pytest.approx(storage_s)
    assert fc.tokens_per_s == pytest.approx(load.generation_tokens_per_request / storage_s)
    assert fc.limiting == "disk"
    # P95 of a read: at least the mean object's transfer, at most the whole request's storage time
    assert load.mean_object_bytes / 1e9 < fc.read_p95_s < storage_s
    assert load.mean_object_bytes / 5e8 < fc.write_p95_s < storage_s


def test_one_user_is_one_pass_through_the_device():
    load = kvcache_load(replace(BUILTINS[1], users=1))
    fc = predict_kvcache(None, load, [DEVICE])
    # one customer: X = 1 / (think + the request's unloaded storage time); tokens over that storage time
    calls = max(1.0, load.users[0].object_bytes / CHUNK_BYTES)
    unloaded = (load.read_bytes_per_request / 1e9 + load.write_bytes_per_request / 5e8
                + (load.read_objects_per_request + load.write_objects_per_request) * calls * 100e-6)
    assert fc.requests_per_s == pytest.approx(1 / (load.sleep_s + unloaded), rel=1e-3)
    assert fc.storage_s_per_request == pytest.approx(unloaded, rel=1e-3)
    assert fc.tokens_per_s == pytest.approx(load.generation_tokens_per_request / unloaded, rel=1e-3)
    # one user spends ~15 s of its 15.6 s cycle on the storage: the device is busy that share, and limits
    demand = load.read_bytes_per_request / 1e9 + load.write_bytes_per_request / 5e8
    assert fc.storage_busy == pytest.approx(fc.requests_per_s * demand) and fc.storage_busy > 0.95
    assert fc.limiting == "disk"
    # with a long think time the same user leaves the device mostly idle: the users limit
    slow = replace(load, sleep_s=100 * unloaded)
    idle = predict_kvcache(None, slow, [DEVICE])
    assert idle.storage_busy == pytest.approx(demand / (101 * unloaded), rel=1e-3)
    assert idle.limiting.startswith("users (think and generation time")
    # and the closed network agrees with queueing.solve_closed at n = 1
    sol = solve_closed([Station("s", unloaded)], load.sleep_s, 1)
    assert fc.requests_per_s == pytest.approx(sol.throughput, rel=1e-3)


def test_plan_perf_device_kvcache_json_validates(capsys):
    code, out, err = run(capsys, "perf", "device", "--workload", "kvcache_1", "--drive-read", "1GB/s",
                         "--drive-write", "500MB/s", "--json")
    assert code == 0, err
    doc = json.loads(out)          # the autouse fixture validated it against plan-1.schema.json
    from storlab.schemas import validate
    assert validate(doc) == "plan-1.schema.json" and doc["schema"] == "storlab.plan.perf/1"
    w = doc["workload"]
    assert w["kind"] == "kvcache" and w["name"] == "kvcache_1" and w["option"]["kv_bytes_per_token"] == 131_072
    assert 0 < w["read_bw_bytes"] <= 1e9 and w["tokens_per_s"] > 0 and w["read_p95_s"] > 0 and w["write_p95_s"] > 0
    assert w["limiting"]
    code, out, _ = run(capsys, "perf", "device", "--workload", "kvcache_3")
    assert code == 0 and "kvcache_3 (Large Model (70B))" in out and "327,680 bytes per token" in out
    assert "tokens_per_s" in out and "limited by" in out


@pytest.mark.parametrize("argv, message", [
    (("perf", "device", "--workload", "kvcache_4"), "--workload: 'kvcache_4' is not a KV-cache option; allowed: "
                                                   "kvcache_1, kvcache_2, kvcache_3"),
    (("perf", "device", "--workload", "kvcache_1", "--accelerators", "8"), "--accelerators is for a training"),
    (("perf", "device", "--workload", "kvcache_1", "--qd", "4"), "--qd draws the curve"),
    (("recommend", "--drives", "12", "--workload", "kvcache_1"), "--workload kvcache_1 needs --tokens-per-s N"),
    (("recommend", "--drives", "12", "--tokens-per-s", "5"), "--tokens-per-s needs --workload kvcache_N"),
    (("recommend", "--drives", "12", "--workload", "kvcache_2", "--accelerators", "4"), "--accelerators is for"),
    (("recommend", "--drives", "12", "--workload", "unet3d_h100", "--tokens-per-s", "5"), "--tokens-per-s is for"),
    (("recommend", "--drives", "12", "--workload", "kvcache_1", "--tokens-per-s", "-1"), "--tokens-per-s"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err


def test_recommend_keeps_the_layouts_reaching_the_tokens(capsys):
    argv = ("recommend", "--drives", "12", "--levels", "5,10", "--chunks", "256k", "--workload", "kvcache_1")
    code, out, err = run(capsys, *argv, "--tokens-per-s", "1e-6", "--json")
    assert code == 0, err
    doc = json.loads(out)
    tokens = [c["kvcache"]["tokens_per_s"] for c in doc["pareto"]]
    assert doc["workload"] == {"name": "kvcache_1", "kind": "kvcache", "tokens_per_s": 1e-6}
    assert doc["feasible"] == doc["candidates_considered"] and all(t > 1e-6 for t in tokens)
    # between the best and the worst layout's tokens/s: some layouts are dropped, each miss names it
    low, high = min(tokens), max(tokens)
    need = (low + high) / 2
    code, out, err = run(capsys, *argv, "--tokens-per-s", f"{need:.6g}", "--json")
    doc = json.loads(out)
    assert 0 < doc["feasible"] < doc["candidates_considered"]
    assert all(c["kvcache"]["tokens_per_s"] >= need for c in doc["pareto"])
    code, out, err = run(capsys, *argv, "--tokens-per-s", "1e9")
    assert code == 0 and "no candidate meets every need" in out and "kvcache_1 tokens/s" in out


# --- one honest comparison with a real run ---------------------------------------------------------

def _tmpfs_device(folder: str) -> Device:
    """tmpfs as the benchmark's own object code sees it: one 64 MiB object written (and fsync'd) and
    read back through suites/kvcache/objects.py, single-threaded; the bandwidth of each and the
    fixed time of one call (a 4 KiB object's read)."""
    import numpy as np
    contents, buf = objects.Contents(1), np.empty(CHUNK_BYTES, dtype=np.uint8)
    model = MODELS["llama3.1-8b"]
    times = {"w": [], "r": [], "small": []}
    for i in range(3):
        path = os.path.join(folder, f"cal{i}.npy")
        t0 = time.perf_counter()
        objects.write_object(path, "cal", model.object_shape(512), contents, buf)      # 64 MiB
        times["w"].append(time.perf_counter() - t0)
        times["r"].append(objects.read_object(path, buf)[1].total_s)
        os.unlink(path)
        small = os.path.join(folder, f"small{i}.npy")
        with open(small, "wb") as f:
            f.write(b"x" * 4096)
        times["small"].append(objects.read_object(small, buf)[1].total_s)
        os.unlink(small)
    size = 512 * model.kv_bytes_per_token
    latency = min(times["small"])
    read_bw, write_bw = size / min(times["r"]), size / min(times["w"])
    return Device(read_bw, write_bw, read_bw / 4096, write_bw / 4096, latency, name="tmpfs",
                  sequential_latency_s=latency)


def test_prediction_against_a_real_run_on_tmpfs(tmp_path, shm_dir):
    # option 1 scaled down: 4 users, 6 s, token counts x 0.01 (objects of 0.7 to 5 MB), one trial
    flags = ["--cache-dir", shm_dir, "--option", "1", "--users", "4", "--duration", "6s", "--scale", "0.01",
             "--trials", "1", "--inter-option-delay", "0"]
    out = tmp_path / "kv.json"
    p = subprocess.run([sys.executable, "-m", "storlab", "kvcache", *flags, "--json", str(out), "--no-store"],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "python")})
    assert p.returncode == 0, p.stderr
    measured = json.loads(out.read_text())["options"][0]
    device = _tmpfs_device(shm_dir)
    fc = predict_kvcache(None, kvcache_load(replace(BUILTINS[1], users=4, duration_s=6.0), scale=0.01), [device])
    print(f"\ntmpfs as measured: read {device.read_bw_bytes / 1e9:.2f} GB/s, write {device.write_bw_bytes / 1e9:.2f} "
          f"GB/s, one call {device.latency_s * 1e6:.0f} us")
    for key in ("read_bw_bytes", "tokens_per_s", "read_p95_s", "write_p95_s"):
        print(f"{key:>14}: measured {measured[key]:.4g}  predicted {getattr(fc, key):.4g}")
    # Loose, physical bounds: the users are think-bound (0.1-1.5 s think vs ms of storage), so the read
    # bandwidth is the users' object reads per second: within a factor 3 either way (a 6 s trial sees
    # conversations younger than the steady state's 4 earlier turns). tokens/s divides by the storage
    # time of Python's calls on a shared 2-core host: within a factor 10. The write P95 is not compared:
    # tmpfs's fsync writes nothing (the measured P95 is microseconds), the model's is the object's copy.
    assert measured["read_bw_bytes"] / 3 < fc.read_bw_bytes < measured["read_bw_bytes"] * 3
    assert measured["tokens_per_s"] / 10 < fc.tokens_per_s < measured["tokens_per_s"] * 10
    assert fc.read_bw_bytes < device.read_bw_bytes
