"""One trial of one option on one rank: every simulated user in a thread of its own, sending its
requests through the rank's KV cache (tiers.py) for the option's duration, and what the rank
measured, with kv-cache.py's figures (per rank, before the ranks are summed).

A request does what kv-cache.py's request loop does (kv_cache/benchmark.py, process_requests):
read every earlier turn of its conversation still cached; write its own object (the prefill);
unless it is prefill only, read the object once and then once per 32 generated tokens (the
decode; a miss writes it instead); then sleep the generation time of the generation mode. Its
storage latency is the sum of those reads and writes; the rank's tokens per second is
kv-cache.py's storage throughput: generated tokens over the summed storage latency of the
requests.

Unlike kv-cache.py's users, which queue a request every think time whether or not the last one
was answered, a user here waits for its answer before its think time (so every user's requests
are the seed's alone, in order); the users are the workers (kv-cache.py runs min(users, 500)
workers over its queue).
"""
from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...jobs.kvcache_job import MODELS, KvOption
from ...signals import STOP
from .objects import Contents
from .tiers import KvCache
from .users import Request, RequestStream, mixed_users

__all__ = ["TrialSettings", "run_trial", "serve_request", "GENERATION_S_PER_TOKEN", "percentile_95"]

GENERATION_S_PER_TOKEN = {"none": 0.0, "fast": 0.002, "realistic": 0.030}


@dataclass(frozen=True)
class TrialSettings:
    seed: int                      # this rank's seed (the run's seed + rank)
    storage_capacity: int          # bytes of the storage tier
    scale: float = 1.0
    requests_per_user: int = 0     # 0: the duration decides


@dataclass
class _Tally:
    requests: int = 0
    tokens: int = 0
    storage_io_s: float = 0.0
    users_done: int = 0


def percentile_95(samples: list[float]) -> float | None:
    """np.percentile's 95th (linear interpolation), as kv-cache.py computes it; None without samples."""
    return float(np.percentile(np.asarray(samples), 95)) if samples else None


def serve_request(cache: KvCache, request: Request) -> float | None:
    """One request's storage work: its summed latency, or None when the trial stopped first."""
    latency = 0.0
    for key in request.previous:
        latency += cache.access(key)[1]
    written = cache.allocate(request.key, request.context_tokens)
    if written is None:
        return None
    latency += written
    if request.decode:
        tier, read = cache.access(request.key)
        latency += read
        if tier is None:
            written = cache.allocate(request.key, request.context_tokens)
            if written is None:
                return None
            latency += written
        else:
            for _ in range(request.decode_reads):
                latency += cache.access(request.key)[1]
    return latency


def run_trial(option: KvOption, settings: TrialSettings, folder: str, contents: Contents, *,
              rank: int = 0) -> dict[str, Any]:
    """Run the trial in `folder` (empty; emptied again at the end) and return this rank's record.
    A signal (KeyboardInterrupt) stops the users and keeps what they finished: the record says
    `complete: false, interrupted: true`. An I/O error of a user ends the trial: `error`."""
    model = MODELS[option.model]
    stop = threading.Event()
    cache = KvCache(folder, model, {"gpu": option.gpu_mem_bytes, "cpu": option.cpu_mem_bytes,
                                    "storage": settings.storage_capacity}, contents,
                    option.max_concurrent_allocs, stop.is_set)
    tally, lock = _Tally(), threading.Lock()
    generation_s = GENERATION_S_PER_TOKEN[option.generation_mode]
    errors: list[BaseException] = []
    all_done = threading.Event()

    def user_loop(stream: RequestStream) -> None:
        try:
            sent = 0
            while not settings.requests_per_user or sent < settings.requests_per_user:
                request = stream.next()
                if stop.wait(request.think_s):
                    return
                latency = serve_request(cache, request)
                if latency is None or stop.wait(request.generation_tokens * generation_s):
                    return
                with lock:
                    tally.requests += 1
                    tally.tokens += request.generation_tokens
                    tally.storage_io_s += latency
                sent += 1
        except Exception as e:       # an I/O error ends the trial; the record names it
            errors.append(e)
            stop.set()
        finally:
            with lock:
                tally.users_done += 1
                if tally.users_done == len(threads):
                    all_done.set()

    threads = [threading.Thread(target=user_loop, args=(RequestStream(u, settings.seed, settings.scale),),
                                name=f"kvcache-{u.user_id}", daemon=True)
               for u in mixed_users(option.users, settings.seed)]
    start = time.monotonic()
    interrupted = False
    try:
        for t in threads:
            t.start()
        deadline = start + option.duration_s
        while not all_done.is_set() and time.monotonic() < deadline:
            all_done.wait(min(0.1, max(0.0, deadline - time.monotonic())))
    except KeyboardInterrupt:      # a signal: the users stop, what they finished is kept
        interrupted = True
    with STOP.held():
        seconds = time.monotonic() - start
        stop.set()
        for t in threads:
            t.join()
        record = _record(cache, tally, seconds, rank, not interrupted and not errors)
        cache.remove_all()
    record["interrupted"] = interrupted
    if errors:
        record["error"] = f"{type(errors[0]).__name__}: {errors[0]}"
    return record


def _record(cache: KvCache, tally: _Tally, seconds: float, rank: int, complete: bool) -> dict[str, Any]:
    s = cache.stats
    read, written = s.read_bytes["storage"], s.write_bytes["storage"]
    return {
        "rank": rank, "host": socket.gethostname(), "seconds": seconds, "complete": complete,
        "requests": tally.requests, "tokens": tally.tokens, "storage_io_s": tally.storage_io_s,
        "storage_read_bytes": read, "storage_write_bytes": written, "storage_reads": s.storage_reads,
        "storage_writes": s.storage_writes, "storage_demoted_bytes": s.storage_demoted_bytes,
        "cpu_read_bytes": s.read_bytes["cpu"], "cpu_write_bytes": s.write_bytes["cpu"],
        "gpu_read_bytes": s.read_bytes["gpu"], "gpu_write_bytes": s.write_bytes["gpu"],
        "read_bw_bytes": read / seconds if seconds > 0 else 0.0,
        "write_bw_bytes": written / seconds if seconds > 0 else 0.0,
        "read_p95_s": percentile_95(s.read_device_s), "write_p95_s": percentile_95(s.write_device_s),
        "tokens_per_s": tally.tokens / tally.storage_io_s if tally.storage_io_s > 0 else 0.0,
        "hits": s.hits, "misses": s.misses, "evictions": s.evictions,
        "storage_entries": cache.counts()["storage"],
    }
