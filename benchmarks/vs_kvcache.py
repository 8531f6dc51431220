#!/usr/bin/env python3
"""storlab kvcache beside kv-cache.py, MLPerf Storage v3.0's KV-cache benchmark (issue 37, "The KV
cache": the same bytes per trial as kv-cache.py with the same seed and options, and storage read
bandwidth >= 1.0x its own on the same device). CPU only: both tools' GPU tier is off (0 GB).

The peer is a runnable copy of kv-cache.py and its kv_cache package (PROVENANCE.txt in it says
which commit each file came from), outside this repository: --peer DIR, or $STORLAB_KVCACHE_PEER,
or /tmp/kvcache-peer. It is run as a program, as vs_fio runs fio; none of its code is imported.

1. Bytes per trial. kv-cache.py repeats its own bytes for a seed only with one user and prefix
   caching off: otherwise its one `random` is drawn from by every user thread and every worker as
   thread timing falls (with prefix caching on, two runs with seed 42, one user and 3 requests wrote
   3,177,054,208 and 3,177,840,640 bytes). In that case (--num-users 1 --disable-prefix-caching
   --max-requests N) the peer runs once, and storlab's tiers serve the same requests
   (storlab.suites.kvcache.users.kv_cache_py_requests, the draws kv-cache.py makes after
   random.seed) through the request path of `storlab kvcache` (trial.serve_request) in the same
   folder. Figures: storage bytes written and read, storlab / kv-cache.py (goal: exactly 1).
   `storlab kvcache` itself always draws the system prompts (prefix caching on) and each user from
   a generator of its own, so its bytes for a seed are its own and repeatable, not kv-cache.py's.

2. Storage read bandwidth. `storlab kvcache --option 1` and kv-cache.py with the same model,
   users, seed, memory budgets (GPU 0, CPU 0), allocations in flight, generation mode (none),
   storage capacity and duration, alternately (storlab first in odd rounds, kv-cache.py first in
   even ones) for --rounds rounds. Each tool's figure is its own: storage bytes read over the
   trial's seconds (storlab's read_bw_bytes; kv-cache.py's tier_storage_kv_bytes_read over its
   elapsed_time). The ratio is the median of the per-round ratios storlab / kv-cache.py (goal
   >= 1.0). Bytes per trial in these runs are shown, not judged: the trial is a duration, so the
   faster tool moves more, and kv-cache.py's users queue a request every think time whatever
   is in flight (its workers serve the queue by QoS priority) where storlab's users wait for
   their answer first.

--dir is the folder on the storage under test (kv-cache.py refuses folders under /dev, so a tmpfs
has to be mounted elsewhere); every run uses a fresh subfolder, removed afterwards.

    python3 benchmarks/vs_kvcache.py --dir /mnt/tmpfs [--peer DIR] [--rounds 3] [--users 2]
        [--duration 30] [--seed 42] [--storage-capacity-gib 4] [--bytes-requests 3] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

PEER_FILES = ("kv-cache.py", "config.yaml", "kv_cache/benchmark.py", "kv_cache/cache.py", "kv_cache/cli.py",
              "kv_cache/config.py", "kv_cache/conversation.py", "kv_cache/models.py", "kv_cache/workload.py")
MODEL = "llama3.1-8b"
GIB = 1 << 30


def peer_problem(peer: Path) -> str | None:
    """Why `peer` cannot be run, or None."""
    if not peer.is_dir():
        return f"no kv-cache.py copy at {peer} (give --peer DIR or STORLAB_KVCACHE_PEER)"
    missing = [f for f in PEER_FILES if not (peer / f).is_file()]
    if missing:
        return f"the kv-cache.py copy at {peer} lacks {', '.join(missing)}"
    p = subprocess.run([sys.executable, "kv-cache.py", "--help"], cwd=peer, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return f"kv-cache.py --help fails at {peer}: {(p.stderr.strip().splitlines() or ['?'])[-1]}"
    return None


def fresh(base: Path, name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"vs-kvcache-{name}-", dir=base))


def run_peer(peer: Path, folder: Path, seed: int, users: int, duration: float, capacity_gib: float,
             extra: list[str]) -> dict:
    """One kv-cache.py run; its storage figures."""
    out = folder / "peer.json"
    cache = folder / "cache"
    cmd = [sys.executable, "kv-cache.py", "--config", "config.yaml", "--seed", str(seed), "--model", MODEL,
           "--num-users", str(users), "--duration", str(int(duration)), "--gpu-mem-gb", "0", "--cpu-mem-gb", "0",
           "--max-concurrent-allocs", "16", "--generation-mode", "none", "--storage-capacity-gb", str(capacity_gib),
           "--cache-dir", str(cache), "--output", str(out), *extra]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=peer, capture_output=True, text=True, timeout=duration + 600)
    wall = time.monotonic() - t0
    if p.returncode != 0 or not out.exists():
        raise RuntimeError(f"kv-cache.py exit {p.returncode}: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    s = json.loads(out.read_text())["summary"]
    c = s["cache_stats"]
    read = round(c["tier_storage_kv_bytes_read_gb"] * GIB)
    written = round(c["tier_storage_kv_bytes_written_gb"] * GIB)
    return {"requests": s["total_requests"], "seconds": s["elapsed_time"], "wall_s": wall,
            "storage_read_bytes": read, "storage_write_bytes": written,
            "storage_reads": c["read_iops"], "storage_writes": c["write_iops"],
            "read_bw_bytes": read / s["elapsed_time"], "write_bw_bytes": written / s["elapsed_time"]}


def run_storlab(folder: Path, seed: int, users: int, duration: float, capacity_gib: float) -> dict:
    """One `storlab kvcache --option 1` trial with the peer's settings; its storage figures."""
    out = folder / "storlab.json"
    cmd = [sys.executable, "-m", "storlab", "kvcache", "--cache-dir", str(folder), "--option", "1", "--trials", "1",
           "--inter-option-delay", "0", "--seed", str(seed), "--model", MODEL, "--users", str(users),
           "--duration", f"{duration:g}s", "--gpu-mem", "0", "--cpu-mem", "0", "--max-concurrent-allocs", "16",
           "--generation-mode", "none", "--storage-capacity", f"{capacity_gib:g}g", "--json", str(out),
           "--no-store", "--quiet"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=duration + 600,
                       env={**os.environ, "PYTHONPATH": str(REPO / "python")})
    wall = time.monotonic() - t0
    if p.returncode != 0 or not out.exists():
        raise RuntimeError(f"storlab kvcache exit {p.returncode}: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    r = json.loads(out.read_text())["options"][0]["trials"][0]["ranks"][0]
    return {"requests": r["requests"], "seconds": r["seconds"], "wall_s": wall,
            "storage_read_bytes": r["storage_read_bytes"], "storage_write_bytes": r["storage_write_bytes"],
            "storage_reads": r["storage_reads"], "storage_writes": r["storage_writes"],
            "read_bw_bytes": r["read_bw_bytes"], "write_bw_bytes": r["write_bw_bytes"]}


def replay_storlab(folder: Path, seed: int, requests: int, capacity_gib: float) -> dict:
    """kv-cache.py's one-user request stream for `seed`, served by storlab's tiers in `folder`."""
    from storlab.jobs.kvcache_job import MODELS
    from storlab.suites.kvcache.objects import Contents
    from storlab.suites.kvcache.tiers import KvCache
    from storlab.suites.kvcache.trial import serve_request
    from storlab.suites.kvcache.users import kv_cache_py_requests

    cache = KvCache(str(folder), MODELS[MODEL], {"gpu": 0, "cpu": 0, "storage": int(capacity_gib * GIB)},
                    Contents(seed), max_concurrent_allocs=16)
    stream = kv_cache_py_requests(seed)
    try:
        for _ in range(requests):
            serve_request(cache, stream.next())
        s = cache.stats
        return {"storage_read_bytes": s.read_bytes["storage"], "storage_write_bytes": s.write_bytes["storage"],
                "storage_reads": s.storage_reads, "storage_writes": s.storage_writes}
    finally:
        cache.remove_all()


def mb(x: float) -> str:
    return f"{x / 1e6:,.1f} MB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer", default=os.environ.get("STORLAB_KVCACHE_PEER", "/tmp/kvcache-peer"),
                    help="the kv-cache.py copy (default: $STORLAB_KVCACHE_PEER or /tmp/kvcache-peer)")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="folder on the storage under test (not under /dev)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating bandwidth rounds (0: bytes only)")
    ap.add_argument("--users", type=int, default=2)
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of each bandwidth trial")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--storage-capacity-gib", type=float, default=4.0,
                    help="the storage tier's capacity in GiB, both tools (bounds what a trial leaves on the device)")
    ap.add_argument("--bytes-requests", type=int, default=3, help="requests of the one-user bytes check (0: skip it)")
    ap.add_argument("--json", help="write {\"rows\": [...], ...} to this file")
    args = ap.parse_args()

    peer = Path(args.peer).resolve()
    problem = peer_problem(peer)
    if problem:
        print(f"vs_kvcache: {problem}; nothing compared", file=sys.stderr)
        return 2
    base = Path(args.dir).resolve()
    if not base.is_dir() or str(base).startswith("/dev"):
        print(f"vs_kvcache: --dir {base} must be an existing folder outside /dev (kv-cache.py refuses /dev)",
              file=sys.stderr)
        return 2
    fs = subprocess.run(["stat", "-f", "-c", "%T", str(base)], capture_output=True, text=True).stdout.strip()
    print(f"kv-cache.py copy: {peer}; folder under test: {base} ({fs}); model {MODEL}, seed {args.seed}",
          file=sys.stderr)
    rows: list[dict] = []
    doc: dict = {"peer": str(peer), "dir": str(base), "fs": fs, "model": MODEL, "seed": args.seed}

    if args.bytes_requests > 0:
        folder = fresh(base, "bytes")
        try:
            p = run_peer(peer, folder, args.seed, 1, 600, args.storage_capacity_gib,
                         ["--disable-prefix-caching", "--max-requests", str(args.bytes_requests)])
            s = replay_storlab(fresh(folder, "storlab"), args.seed, args.bytes_requests, args.storage_capacity_gib)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        doc["bytes"] = {"kv_cache_py": p, "storlab": s}
        what = f"1 user, seed {args.seed}, {args.bytes_requests} requests, prefix caching off"
        for key, name in (("storage_write_bytes", "written"), ("storage_read_bytes", "read")):
            ratio = s[key] / p[key] if p[key] else None
            rows.append({"figure": f"vs_kvcache: storage bytes {name} per trial, storlab/kv-cache.py ({what})",
                         "value": ratio, "goal": "== 1 (same bytes)", "met": s[key] == p[key]})
            print(f"bytes {name} ({what}): storlab {s[key]:,}, kv-cache.py {p[key]:,}", file=sys.stderr)
        print(f"operations: storlab {s['storage_writes']} writes {s['storage_reads']} reads, kv-cache.py "
              f"{p['storage_writes']} writes {p['storage_reads']} reads", file=sys.stderr)

    rounds = []
    for r in range(args.rounds):
        order = ("storlab", "kv-cache.py") if r % 2 == 0 else ("kv-cache.py", "storlab")
        got = {}
        for tool in order:
            folder = fresh(base, "bw")
            try:
                if tool == "storlab":
                    got[tool] = run_storlab(folder, args.seed, args.users, args.duration, args.storage_capacity_gib)
                else:
                    got[tool] = run_peer(peer, folder, args.seed, args.users, args.duration,
                                         args.storage_capacity_gib, [])
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        s, p = got["storlab"], got["kv-cache.py"]
        ratio = s["read_bw_bytes"] / p["read_bw_bytes"] if p["read_bw_bytes"] else None
        rounds.append({"storlab": s, "kv_cache_py": p, "read_bw_ratio": ratio})
        print(f"round {r + 1}: read MB/s storlab {s['read_bw_bytes'] / 1e6:,.1f}, kv-cache.py "
              f"{p['read_bw_bytes'] / 1e6:,.1f} (ratio {ratio:.3f}); bytes read per trial {mb(s['storage_read_bytes'])}"
              f" / {mb(p['storage_read_bytes'])}, written {mb(s['storage_write_bytes'])} / "
              f"{mb(p['storage_write_bytes'])}; requests {s['requests']} / {p['requests']}", file=sys.stderr)
    doc["rounds"] = rounds
    if rounds:
        what = f"{args.users} users, {args.duration:g} s, seed {args.seed}, GPU 0 CPU 0, {fs}"
        ratio = statistics.median(x["read_bw_ratio"] for x in rounds if x["read_bw_ratio"] is not None)
        rows.append({"figure": f"vs_kvcache: storage read bandwidth, storlab/kv-cache.py ({what})",
                     "value": ratio, "goal": ">= 1.0", "met": ratio >= 1.0})
        for tool, key in (("storlab", "storlab"), ("kv-cache.py", "kv_cache_py")):
            rows.append({"figure": f"vs_kvcache: {tool} storage read MB/s, median ({what})",
                         "value": statistics.median(x[key]["read_bw_bytes"] for x in rounds) / 1e6,
                         "goal": "(figure)", "met": None})
            rows.append({"figure": f"vs_kvcache: {tool} storage bytes read per trial, median ({what})",
                         "value": statistics.median(x[key]["storage_read_bytes"] for x in rounds),
                         "goal": "(figure: duration-bound, not judged)", "met": None})
    doc["rows"] = rows
    for row in rows:
        met = {True: "met", False: "NOT met", None: ""}[row["met"]]
        value = f"{row['value']:.4g}" if isinstance(row["value"], float) else row["value"]
        print(f"{row['figure']}: {value} (goal {row['goal']}) {met}")
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
