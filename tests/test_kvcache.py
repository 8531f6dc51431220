"""`storlab kvcache`, MLPerf Storage v3.0's KV-cache benchmark: the models' KV sizes against the
published formula, the users kv-cache.py draws with seed 42, kv-cache.py's own one-user requests
moving through our tiers the bytes kv-cache.py moved for them, the .npy objects (numpy.load reads
them with the model's shape), the tiers' placement, the built-in options run scaled down on tmpfs
with the four headline figures, repeatable bytes from the seed, refusals in one line, the folder
under test left as it was, and Ctrl-C keeping the trials done."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from storlab import schemas
from storlab.jobs.kvcache_job import BUILTINS, MODELS, resolve_options
from storlab.suites.kvcache.objects import BLOCK_BYTES, CHUNK_BYTES, Contents, npy_header, write_object
from storlab.suites.kvcache.run import aggregate_option, aggregate_trial
from storlab.suites.kvcache.tiers import KvCache
from storlab.suites.kvcache.trial import serve_request
from storlab.suites.kvcache.users import SYSTEM_PROMPTS, RequestStream, kv_cache_py_requests, mixed_users

REPO = Path(__file__).resolve().parents[1]
REFERENCE = Path("/work/shared/reference/mlperf-storage-v3/kv_cache_benchmark")
# a runnable kv-cache.py (its kv_cache package whole), e.g. the copy benchmarks/vs_kvcache.py runs
PEER = Path(os.environ.get("STORLAB_KVCACHE_PEER", REFERENCE))
SCALED = ["--users", "2", "--duration", "2s", "--scale", "0.01", "--inter-option-delay", "0"]


def kvcache(tmp_path: Path, *flags: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess, dict | None]:
    out = tmp_path / "kv.json"
    if out.exists():
        out.unlink()
    p = subprocess.run([sys.executable, "-m", "storlab", "kvcache", *flags, "--json", str(out), "--no-store"],
                       capture_output=True, text=True, timeout=timeout, cwd=REPO)
    return p, (json.loads(out.read_text()) if out.exists() else None)


# -- the model and the users -------------------------------------------------------------------

def test_kv_bytes_per_token_is_layers_kv_heads_head_dim_k_and_v_fp16():
    # models.py: num_layers x kv_heads x (hidden / heads) x 2 x 2 bytes
    assert MODELS["llama3.1-8b"].kv_bytes_per_token == 32 * 8 * (4096 // 32) * 2 * 2 == 131_072
    assert MODELS["llama3.1-70b-instruct"].kv_bytes_per_token == 80 * 8 * (8192 // 64) * 2 * 2 == 327_680


def test_builtins_are_table_kvcache_1():
    rows = {n: (o.model, o.users, o.duration_s, o.gpu_mem_bytes, o.cpu_mem_bytes >> 30, o.max_concurrent_allocs,
                o.generation_mode) for n, o in BUILTINS.items()}
    assert rows == {1: ("llama3.1-8b", 200, 300.0, 0, 0, 16, "none"),
                    2: ("llama3.1-8b", 100, 300.0, 0, 4, 16, "none"),
                    3: ("llama3.1-70b-instruct", 70, 300.0, 0, 0, 4, "none")}


def test_users_are_the_draws_kv_cache_py_makes_after_random_seed():
    # kv-cache.py: random.seed(seed), then UserSimulator.generate_mixed_users draws, per user, the
    # type, the QoS level, then randint(context), randint(generation), uniform(think time)
    templates = {"chatbot": ((512, 4096), (50, 200), (0.1, 0.5)), "coding": ((4096, 25000), (100, 500), (0.2, 1.0)),
                 "document": ((4096, 16384), (200, 800), (0.3, 1.5))}
    random.seed(42)
    expected = []
    for _ in range(200):
        kind = random.choice(["chatbot", "coding", "document"])
        r = random.random()
        ctx, gen, think = templates[kind]
        expected.append((kind, "interactive" if r < 0.15 else "responsive" if r < 0.5 else "batch",
                         random.randint(*ctx), random.randint(*gen), random.uniform(*think)))
    got = [(u.kind, u.qos, u.context_tokens, u.generation_tokens, u.think_time_s) for u in mixed_users(200, 42)]
    assert got == expected
    assert [u.user_id for u in mixed_users(3, 42)] == ["user_0000", "user_0001", "user_0002"]


def test_requests_follow_the_users_ranges_and_conversations():
    user = mixed_users(1, 42)[0]
    stream = RequestStream(user, 42)
    requests = [stream.next() for _ in range(200)]
    for r in requests:
        assert user.context_tokens // 4 - 9 <= r.context_tokens <= user.context_tokens
        assert max(1, user.generation_tokens // 4) <= r.generation_tokens <= user.generation_tokens
        if r.context_tokens >= 10_000:            # prefill only (the system prompt's tokens come off after)
            assert not r.decode
        if r.context_tokens < 10_000 - max(SYSTEM_PROMPTS):
            assert r.decode
        turn = int(r.key.rsplit("_", 1)[1])
        assert len(r.previous) == turn - 1 and all(p.startswith(r.key.rsplit("_turn_", 1)[0]) for p in r.previous)
    turns = [int(r.key.rsplit("_", 1)[1]) for r in requests]
    firsts = turns.count(1)
    # a conversation goes on with probability 0.8: about 1 in 5 requests starts one
    assert 20 <= firsts <= 65


# -- the objects -------------------------------------------------------------------------------

@pytest.mark.parametrize("model", sorted(MODELS))
def test_npy_objects_load_with_numpy_in_the_models_shape(tmp_path, model):
    shape = MODELS[model].object_shape(5)
    path = tmp_path / "conv_user_0000_1_turn_1.npy"
    buf = np.empty(CHUNK_BYTES, dtype=np.uint8)
    timing = write_object(str(path), "conv_user_0000_1_turn_1", shape, Contents(42), buf)
    assert timing is not None and 0 <= timing.device_s <= timing.total_s
    array = np.load(path)
    assert array.shape == (MODELS[model].layers, 2, 5, 8, 128) and array.dtype == np.float16
    assert array.nbytes == 5 * MODELS[model].kv_bytes_per_token
    assert path.stat().st_size == len(npy_header(shape)) + array.nbytes
    # np.save's own header for an array of that shape and dtype
    probe = tmp_path / "probe.npy"
    np.save(probe, np.zeros(shape, dtype=np.float16))
    assert probe.read_bytes()[:len(npy_header(shape))] == npy_header(shape)


def test_no_4k_block_repeats_within_or_across_objects(tmp_path):
    contents, buf = Contents(42), np.empty(CHUNK_BYTES, dtype=np.uint8)
    shape = MODELS["llama3.1-8b"].object_shape(160)        # 20 MiB: wraps no buffer but spans chunks
    blocks = set()
    for key in ("a_turn_1", "b_turn_1"):
        path = tmp_path / f"{key}.npy"
        write_object(str(path), key, shape, contents, buf)
        data = path.read_bytes()[len(npy_header(shape)):]
        for i in range(0, len(data), BLOCK_BYTES):
            blocks.add(data[i:i + BLOCK_BYTES])
    assert len(blocks) == 2 * 160 * 131_072 // BLOCK_BYTES


# -- the tiers ---------------------------------------------------------------------------------

def test_storage_tier_deletes_its_least_recently_used_object_when_full(tmp_path):
    model = MODELS["llama3.1-8b"]
    size = 4 * model.kv_bytes_per_token
    cache = KvCache(str(tmp_path), model, {"gpu": 0, "cpu": 0, "storage": 2 * size}, Contents(1))
    for key in ("k1", "k2"):
        assert cache.allocate(key, 4) is not None
    assert cache.access("k1")[0] == "storage"          # k2 is now the least recently used
    cache.allocate("k3", 4)
    assert sorted(os.listdir(tmp_path)) == ["k1.npy", "k3.npy"]
    assert cache.stats.evictions == 1 and cache.access("k2") == (None, 0.0)
    assert cache.stats.write_bytes["storage"] == 3 * size and cache.stats.read_bytes["storage"] == size
    cache.remove_all()
    assert os.listdir(tmp_path) == []


def test_cpu_tier_fills_to_80_percent_then_demotes_to_storage(tmp_path):
    model = MODELS["llama3.1-8b"]
    size = 4 * model.kv_bytes_per_token
    cache = KvCache(str(tmp_path), model, {"gpu": 0, "cpu": 3 * size, "storage": 100 * size}, Contents(1))
    cache.allocate("k1", 4)
    cache.allocate("k2", 4)                            # 2 of 3: under 80 %
    assert cache.counts() == {"gpu": 0, "cpu": 2, "storage": 0} and os.listdir(tmp_path) == []
    cache.allocate("k3", 4)                            # 3 of 3 would be over 80 %: k1 moves down
    assert cache.counts() == {"gpu": 0, "cpu": 2, "storage": 1} and os.listdir(tmp_path) == ["k1.npy"]
    assert cache.stats.storage_demoted_bytes == size and cache.stats.write_bytes["cpu"] == 3 * size
    assert cache.access("k1")[0] == "storage" and cache.stats.read_device_s
    cache.remove_all()


def test_gpu_tier_spills_to_cpu_which_spills_to_storage(tmp_path):
    model = MODELS["llama3.1-8b"]
    size = 4 * model.kv_bytes_per_token
    cache = KvCache(str(tmp_path), model, {"gpu": 2 * size, "cpu": 2 * size, "storage": 100 * size}, Contents(1))
    for i in range(4):
        cache.allocate(f"k{i}", 4)
    # each memory tier keeps one object (two would pass 80 %); the oldest went all the way down
    assert cache.counts() == {"gpu": 1, "cpu": 1, "storage": 2}
    assert sorted(os.listdir(tmp_path)) == ["k0.npy", "k1.npy"]
    assert cache.stats.write_bytes == {"gpu": 4 * size, "cpu": 0, "storage": 0}
    assert cache.stats.storage_demoted_bytes == 2 * size and cache.stats.write_device_s == []
    cache.remove_all()


def test_aggregates_sum_over_ranks_mean_over_trials_and_take_the_worst_p95():
    def rank(r, bw, p95r, p95w, tps):
        return {"rank": r, "read_bw_bytes": bw, "write_bw_bytes": bw / 2, "tokens_per_s": tps, "read_p95_s": p95r,
                "write_p95_s": p95w, "storage_read_bytes": 10, "storage_write_bytes": 5, "requests": 1,
                "complete": True, "storage_entries": 1, "storage_reads": 1}
    t1 = aggregate_trial(1, [rank(0, 100.0, 0.1, 0.01, 10.0), rank(1, 300.0, 0.3, 0.02, 30.0)])
    t2 = aggregate_trial(2, [rank(0, 200.0, 0.2, 0.05, 20.0), rank(1, 200.0, 0.1, None, 20.0)])
    assert (t1["read_bw_bytes"], t1["read_p95_s"], t1["write_p95_s"], t1["tokens_per_s"]) == (400.0, 0.3, 0.02, 40.0)
    o = aggregate_option(BUILTINS[1], [t1, t2])
    assert (o["read_bw_bytes"], o["write_bw_bytes"], o["tokens_per_s"]) == (400.0, 200.0, 40.0)
    assert (o["read_p95_s"], o["write_p95_s"], o["cpu_tier_ranks"]) == (0.3, 0.05, [])


# -- the command -------------------------------------------------------------------------------

def test_builtins_scaled_down_report_the_four_metrics(tmp_path, shm_dir):
    p, doc = kvcache(tmp_path, "--cache-dir", shm_dir, "--trials", "2", *SCALED)
    assert p.returncode == 0, p.stderr
    schemas.validate(doc)
    assert doc["kind"] == "kvcache" and doc["ranks"] == 1 and doc["division"] == "open" and not doc["compliant"]
    assert [o["option"] for o in doc["options"]] == [1, 2, 3]
    for o in doc["options"]:
        assert len(o["trials"]) == 2 and all(t["complete"] for t in o["trials"])
        assert o["read_bw_bytes"] > 0 and o["tokens_per_s"] > 0 and o["read_p95_s"] > 0
        assert o["read_bw_bytes"] == pytest.approx(sum(t["read_bw_bytes"] for t in o["trials"]) / 2)
        assert o["read_p95_s"] == max(t["read_p95_s"] for t in o["trials"])
        for t in o["trials"]:
            r = t["ranks"][0]
            assert r["storage_read_bytes"] > 0 and r["read_bw_bytes"] == pytest.approx(
                r["storage_read_bytes"] / r["seconds"])
    for n in (1, 3):              # cpu-mem 0: every object is written to storage, fsync timed
        assert doc["options"][n - 1]["write_p95_s"] is not None
    assert os.listdir(shm_dir) == []                        # the fresh subfolder is gone
    assert "read MB/s" in p.stdout and "Large Model (70B)" in p.stdout


def test_seed_makes_the_byte_counts_repeatable(tmp_path, shm_dir):
    flags = ["--cache-dir", shm_dir, "--option", "1,3", "--trials", "1", "--users", "3", "--duration", "120s",
             "--requests-per-user", "3", "--scale", "0.01", "--inter-option-delay", "0"]

    def counts(*more):
        p, doc = kvcache(tmp_path, *flags, *more)
        assert p.returncode == 0, p.stderr
        return [(r["requests"], r["storage_read_bytes"], r["storage_write_bytes"], r["storage_reads"])
                for o in doc["options"] for r in o["trials"][0]["ranks"]]
    first = counts()
    assert all(c[0] == 9 for c in first) and all(c[1] > 0 for c in first)
    assert counts() == first
    assert counts("--seed", "7") != first


def kv_cache_py(tmp_path: Path, *flags: str) -> dict:
    """Run the kv-cache.py copy at PEER ($STORLAB_KVCACHE_PEER, else the reference copy) with GPU and
    CPU tiers off and model llama3.1-8b, its cache in a fresh folder under tmp_path (it refuses
    folders under /dev and deletes every .npy in its folder); its summary, or a skip saying why."""
    missing = [f for f in ("kv-cache.py", "kv_cache/benchmark.py", "kv_cache/config.py", "kv_cache/conversation.py")
               if not (PEER / f).exists()]
    if missing:
        pytest.skip(f"kv-cache.py cannot run here: {PEER} lacks {', '.join(missing)} (set STORLAB_KVCACHE_PEER "
                    "to a whole copy, e.g. the one benchmarks/vs_kvcache.py runs)")
    out, cache = tmp_path / "peer.json", tmp_path / "peer-cache"
    p = subprocess.run([sys.executable, "kv-cache.py", "--model", "llama3.1-8b", "--duration", "120", "--gpu-mem-gb", "0",
                        "--cpu-mem-gb", "0", "--generation-mode", "none", *flags, "--cache-dir", str(cache),
                        "--output", str(out)], capture_output=True, text=True, timeout=600, cwd=PEER)
    if p.returncode != 0:
        pytest.skip(f"kv-cache.py does not run here: {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.read_text())["summary"]


def replay_kv_cache_py(folder: str, seed: int, requests: int) -> tuple[int, int, int, int]:
    """kv-cache.py's one-user request stream (prefix caching off) served by our tiers, GPU and CPU
    off: (storage bytes written, read, writes, reads)."""
    cache = KvCache(folder, MODELS["llama3.1-8b"], {"gpu": 0, "cpu": 0, "storage": 8 << 30}, Contents(seed), 16)
    stream = kv_cache_py_requests(seed)
    for _ in range(requests):
        assert serve_request(cache, stream.next()) is not None
    s = cache.stats
    cache.remove_all()
    return s.write_bytes["storage"], s.read_bytes["storage"], s.storage_writes, s.storage_reads


def test_kv_cache_py_one_user_requests_through_our_tiers_move_its_bytes(shm_dir):
    # kv-cache.py (the copy benchmarks/vs_kvcache.py runs, docs/kvcache.md), twice each:
    # `--seed 39 --num-users 1 --disable-prefix-caching --max-requests 8`, GPU and CPU 0, wrote
    # 394,526,720 bytes in 8 objects and read 1,605,238,784 in 37 reads; its requests, served by our
    # tiers, must move exactly those (earlier turns re-read, decode reads one per 32 tokens plus one)
    stream = kv_cache_py_requests(39)
    first = [stream.next() for _ in range(3)]
    assert [(r.key, r.context_tokens, r.generation_tokens, len(r.previous)) for r in first] == [
        ("conv_user_0000_1_turn_1", 156, 56, 0), ("conv_user_0000_1_turn_2", 571, 27, 1),
        ("conv_user_0000_2_turn_1", 191, 70, 0)]
    assert replay_kv_cache_py(shm_dir, 39, 8) == (394_526_720, 1_605_238_784, 8, 37)
    assert os.listdir(shm_dir) == []


def test_kv_cache_py_run_here_moves_the_bytes_our_tiers_move_for_its_requests(tmp_path, shm_dir):
    # the same check against a live kv-cache.py, when one can run here
    s = kv_cache_py(tmp_path, "--seed", "39", "--num-users", "1", "--disable-prefix-caching", "--max-requests", "8")
    c = s["cache_stats"]
    theirs = (round(c["tier_storage_kv_bytes_written_gb"] * 2**30), round(c["tier_storage_kv_bytes_read_gb"] * 2**30),
              c["write_iops"], c["read_iops"])
    assert s["total_requests"] == 8 and replay_kv_cache_py(shm_dir, 39, 8) == theirs


def test_kv_cache_py_writes_objects_of_the_same_user_for_the_same_seed(tmp_path):
    # With one user and prefix caching and multi-turn off, kv-cache.py's first request is drawn from
    # its user alone: its one object's size must be one our user 0 (seed 42) can have.
    s = kv_cache_py(tmp_path, "--num-users", "1", "--seed", "42", "--max-requests", "1", "--disable-multi-turn",
                    "--disable-prefix-caching")
    stats = s["cache_stats"]
    user = mixed_users(1, 42)[0]
    tokens, rest = divmod(stats["total_write_bytes"], MODELS["llama3.1-8b"].kv_bytes_per_token)
    assert rest == 0 and max(1, user.context_tokens // 4) <= tokens <= user.context_tokens


@pytest.mark.parametrize("flags, message", [
    (["--option", "4"], "--option: '4' is not an option; allowed: 1, 2, 3"),
    (["--users", "0"], "--users: '0' is out of range"),
    (["--scale", "2"], "--scale"),
    (["--model", "gpt9"], "--model"),
    (["--trials", "x"], "--trials"),
])
def test_bad_values_are_one_line_and_exit_2(tmp_path, shm_dir, flags, message):
    p, doc = kvcache(tmp_path, "--cache-dir", shm_dir, *flags)
    assert p.returncode == 2 and doc is None
    assert message in p.stderr and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert os.listdir(shm_dir) == []


def test_a_cache_dir_that_is_a_file_missing_or_on_dev_is_refused(tmp_path):
    f = tmp_path / "file"
    f.write_text("data")
    for target in (f, tmp_path / "missing", Path("/dev")):
        p, _ = kvcache(tmp_path, "--cache-dir", str(target), *SCALED)
        assert p.returncode == 2 and "--cache-dir" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert f.read_text() == "data" and not (tmp_path / "missing").exists()


def test_files_already_in_the_cache_dir_are_left_alone(tmp_path, shm_dir):
    # kv-cache.py deletes every *.npy in its cache folder at start; storlab writes only into a fresh
    # subfolder of its own
    mine = Path(shm_dir) / "user_0000_req_000001.npy"
    np.save(mine, np.arange(10))
    p, _ = kvcache(tmp_path, "--cache-dir", shm_dir, "--option", "1", "--trials", "1", *SCALED)
    assert p.returncode == 0, p.stderr
    assert os.listdir(shm_dir) == [mine.name] and list(np.load(mine)) == list(range(10))


def test_ctrl_c_keeps_the_trials_done_and_removes_the_files(tmp_path, shm_dir):
    out = tmp_path / "kv.json"
    proc = subprocess.Popen([sys.executable, "-m", "storlab", "kvcache", "--cache-dir", shm_dir, "--option", "1",
                             "--trials", "3", "--users", "2", "--duration", "3s", "--scale", "0.01",
                             "--inter-option-delay", "0", "--json", str(out), "--no-store", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    deadline = time.monotonic() + 120
    while True:                    # the checkpoint after the first trial
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        try:
            if json.loads(out.read_text())["options"]:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    time.sleep(1.0)                # into the second trial
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    doc = json.loads(out.read_text())
    schemas.validate(doc)
    assert doc["complete"] is False and doc["stop_reason"] == "interrupted"
    trials = doc["options"][0]["trials"]
    assert trials[0]["complete"] and trials[0]["read_bw_bytes"] > 0
    assert len(trials) == 2 and not trials[1]["complete"]       # the one cut short is kept, marked
    assert "interrupted; the trials done are kept" in err
    assert os.listdir(shm_dir) == []


def test_precondition_writes_its_volume_first_and_removes_it(tmp_path, shm_dir):
    p, doc = kvcache(tmp_path, "--cache-dir", shm_dir, "--option", "1", "--trials", "1", "--precondition",
                     "--precondition-size", "8m", *SCALED)
    assert p.returncode == 0, p.stderr
    pre = doc["precondition"]
    size = pre["object_tokens"] * 131_072
    assert pre["object_tokens"] == round(2048 * 0.01) and 8 << 20 <= pre["bytes"] < (8 << 20) + 4 * size
    assert os.listdir(shm_dir) == []


def test_resolve_options_applies_overrides_to_every_option():
    opts = resolve_options((3, 1), {"users": 5, "model": None, "cpu_mem": 1 << 20})
    assert [(o.number, o.users, o.model, o.cpu_mem_bytes) for o in opts] == [
        (3, 5, "llama3.1-70b-instruct", 1 << 20), (1, 5, "llama3.1-8b", 1 << 20)]


# -- on a disk file system (ext4 on a loop device: its cached pages can be dropped) ---------------

@pytest.mark.root
@pytest.mark.loop
def test_on_ext4_the_storage_tier_evicts_at_its_capacity(tmp_path, ext4_dir):
    p, doc = kvcache(tmp_path, "--cache-dir", ext4_dir, "--option", "1", "--trials", "1", "--users", "2",
                     "--requests-per-user", "4", "--duration", "120s", "--scale", "0.005",
                     "--storage-capacity", "16m", "--inter-option-delay", "0")
    assert p.returncode == 0, p.stderr
    r = doc["options"][0]["trials"][0]["ranks"][0]
    assert r["requests"] == 8 and r["storage_read_bytes"] > 0 and r["read_p95_s"] > 0 and r["write_p95_s"] > 0
    assert r["evictions"] > 0 and doc["storage_capacity_bytes"] == 16 << 20
    assert sorted(os.listdir(ext4_dir)) == ["lost+found"]


@pytest.mark.root
@pytest.mark.loop
def test_a_full_file_system_ends_the_run_in_one_line_and_keeps_nothing(tmp_path, ext4_mount):
    small = ext4_mount(32 << 20)
    # told there is a gigabyte, the tier never evicts: the file system fills and a write fails
    p, doc = kvcache(tmp_path, "--cache-dir", small, "--option", "1", "--trials", "2", "--users", "2",
                     "--duration", "30s", "--scale", "0.02", "--storage-capacity", "1g", "--inter-option-delay", "0")
    assert p.returncode == 1, p.stderr
    assert doc["stop_reason"] == "error" and "rank 0: OSError" in doc["error"] and "No space left" in doc["error"]
    assert len(doc["options"][0]["trials"]) == 1 and not doc["options"][0]["trials"][0]["complete"]
    assert "storlab kvcache: error: rank 0: OSError" in p.stderr and "Traceback" not in p.stderr
    assert sorted(os.listdir(small)) == ["lost+found"]
