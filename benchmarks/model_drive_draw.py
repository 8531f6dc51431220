#!/usr/bin/env python3
"""Random reads on spinning drives, drawn, beside `storlab.model.predict` (docs/model.md,
"Command reordering" and "Not modelled").

A seeded draw of the mechanism the model describes, with what the model leaves out put back: each
drive's head is where its last piece left it (the model draws every seek over the whole stroke),
each drive serves the soonest of its own queue (seek from its head, then a uniform part of a
revolution), and a request split over several drives waits for its last piece. The seek over a
fraction d of the stroke takes the single-track seek plus b sqrt(d), b such that the data sheet's
average seek holds for two uniform ends (costs.py). `requests` reads cycle with the host's time
between them. Deterministic for a seed; no device is touched.

    python3 benchmarks/model_drive_draw.py
"""
from __future__ import annotations

import heapq
import math
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "python")]
from storlab.model import costs  # noqa: E402
from storlab.model.predict import Workload, predict  # noqa: E402
from storlab.model.stack import DriveType, stack_from_notation  # noqa: E402

DRIVE = DriveType("nearline", 10**12, 1e6)      # the model's default drive: 150 MB/s, 80 IOPS, 7.2K rpm
CHUNK = 64 * 1024
DRIVES = 12
CASES = ((4096, (1, 4, 16, 64)), (256 * 1024, (1, 4, 16, 64)), (1024 * 1024, (1, 4, 16, 64)))


def draw(drives: int, requests: int, request_bytes: int, chunk_bytes: int = CHUNK, completions: int = 40_000,
         seed: int = 3) -> tuple[float, float]:
    """(mean, 99th percentile) response time (s) of `requests` random reads of `request_bytes` cycling over a RAID 0 of
    `drives` default drives with `chunk_bytes` chunks, each request aligned to its size."""
    rnd = random.Random(seed)
    revolution = 60.0 / costs.NEARLINE_RPM
    b = (costs.NEARLINE_SEEK_S - costs.SINGLE_TRACK_SEEK_S) / (8 / 15)    # E[sqrt d] = 8 / 15
    span = max(1, min(drives, request_bytes // chunk_bytes))
    piece_s = max(request_bytes // span, 1) / DRIVE.seq_read_bw_bytes
    host_s = costs.HOST_REQUEST_OVERHEAD_S
    heads = [rnd.random() for _ in range(drives)]
    waiting: list[list[tuple[int, float]]] = [[] for _ in range(drives)]      # (request, target)
    busy = [False] * drives
    events: list[tuple[float, int, int]] = []
    left: dict[int, int] = {}
    issued: dict[int, float] = {}
    responses: list[float] = []
    serial = 0

    def positioning(drive: int, target: float) -> float:
        distance = abs(heads[drive] - target)
        return (costs.SINGLE_TRACK_SEEK_S + b * math.sqrt(distance) if distance else 0.0) + rnd.random() * revolution

    def start(drive: int, now: float) -> None:
        queue = waiting[drive]
        busy[drive] = bool(queue)
        if queue:
            times = [positioning(drive, target) for _, target in queue[:costs.DRIVE_REORDER_DEPTH]]
            chosen = min(range(len(times)), key=times.__getitem__)
            request, target = queue.pop(chosen)
            heads[drive] = target
            heapq.heappush(events, (now + times[chosen] + piece_s, drive, request))

    def issue(now: float) -> None:
        nonlocal serial
        serial += 1
        first = rnd.randrange(drives // span) * span if drives % span == 0 else rnd.randrange(drives)
        target = rnd.random()
        left[serial], issued[serial] = span, now
        for k in range(span):
            drive = (first + k) % drives
            waiting[drive].append((serial, target))
            if not busy[drive]:
                start(drive, now)

    for _ in range(requests):
        issue(0.0)
    while len(responses) < completions:
        now, drive, request = heapq.heappop(events)
        start(drive, now)
        left[request] -= 1
        if not left[request]:
            del left[request]
            responses.append(now - issued.pop(request) + host_s)
            issue(now + host_s)
    kept = sorted(responses[completions // 10:])
    return sum(kept) / len(kept), kept[int(0.99 * len(kept))]


def rows() -> list[tuple[int, int, tuple[float, float], tuple[float, float]]]:
    """(request bytes, requests, model (mean, p99) s, drawn (mean, p99) s) for every case."""
    stack = stack_from_notation(f"R0/{DRIVES}", CHUNK, drive=DRIVE, engine="md")
    out = []
    for request_bytes, depths in CASES:
        for n in depths:
            p = predict(stack, Workload("randread", request_bytes, qd=n))
            out.append((request_bytes, n, (p.latency_mean_s, p.latency_tail_s), draw(DRIVES, n, request_bytes)))
    return out


def main() -> int:
    print(f"R0/{DRIVES}, {CHUNK // 1024} KiB chunks, default 7.2K rpm drives; random reads aligned to their size")
    print("| request | drives per request | requests | mean ms, model / drawn | p99 ms, model / drawn |")
    print("|---|---|---|---|---|")
    for request_bytes, n, model, drawn in rows():
        span = max(1, min(DRIVES, request_bytes // CHUNK))
        cells = [f"{m * 1e3:.1f} / {d * 1e3:.1f} ({m / d - 1:+.0%})" for m, d in zip(model, drawn)]
        print(f"| {request_bytes // 1024} KiB | {span} | {n} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
