#!/usr/bin/env python3
"""Random reads and RAID 5 small writes on spinning drives, drawn, beside `storlab.model.predict`
(docs/model.md, "Command reordering" and "Not modelled").

A seeded draw of the mechanism the model describes, with what the model leaves out put back: each
drive's head is where its last piece left it (the model draws every seek over the whole stroke),
each drive serves the soonest of its own queue (seek from its head, then a uniform part of a
revolution), and a request split over several drives waits for its last piece. The seek over a
fraction d of the stroke takes the single-track seek plus b sqrt(d), b such that the data sheet's
average seek holds for two uniform ends (costs.py). `requests` reads cycle with the host's time
between them. The writes: a RAID 5 read-modify-write with no cache to take it (md over drives
whose write cache is off, or a controller that writes through), reading the old data and parity
on two drives, then writing both where it read them; each sector keeps its place on its platter
and each spindle turns on its own, so a write served straight after its read waits for its sector
to come round. Deterministic for a seed; no device is touched.

    python3 benchmarks/model_drive_draw.py
"""
from __future__ import annotations

import dataclasses
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
# (parities, drives, requests) of the small writes: RAID 5 and RAID 6 (the RAID 6 layouts were
# drawn after the fork the model takes for writes was written against the RAID 5 ones)
WRITE_CASES = ((1, 6, (1, 4, 16, 64)), (1, 12, (1, 4, 16, 64)), (2, 8, (1, 4, 16, 64)), (2, 12, (1, 4, 16, 64)))
# b of the seek curve: the single-track seek plus b sqrt(d) averages the data sheet's seek over
# lengths of density 2 (1 - d), for which E[sqrt d] = 8 / 15
SEEK_B = (costs.NEARLINE_SEEK_S - costs.SINGLE_TRACK_SEEK_S) / (8 / 15)


def seek_s(distance: float) -> float:
    """A seek over `distance` of the stroke (none for none)."""
    return costs.SINGLE_TRACK_SEEK_S + SEEK_B * math.sqrt(distance) if distance else 0.0


def _cycle(requests: int, completions: int, events: list[tuple[float, int, int]], start, issue,
           finished) -> tuple[float, float]:
    """Keep `requests` in flight: at each operation done, its drive starts its next (`start`); when
    `finished(request, now)` gives the request's response time it is over, and the host issues the
    next after its own time. (mean, 99th percentile) of the responses, the first tenth left out."""
    host_s = costs.HOST_REQUEST_OVERHEAD_S
    responses: list[float] = []
    for _ in range(requests):
        issue(0.0)
    while len(responses) < completions:
        now, drive, request = heapq.heappop(events)
        start(drive, now)
        response = finished(request, now)
        if response is not None:
            responses.append(response + host_s)
            issue(now + host_s)
    kept = sorted(responses[completions // 10:])
    return sum(kept) / len(kept), kept[int(0.99 * len(kept))]


def draw(drives: int, requests: int, request_bytes: int, chunk_bytes: int = CHUNK, completions: int = 40_000,
         seed: int = 3) -> tuple[float, float]:
    """(mean, 99th percentile) response time (s) of `requests` random reads of `request_bytes` cycling over a RAID 0 of
    `drives` default drives with `chunk_bytes` chunks, each request aligned to its size."""
    rnd = random.Random(seed)
    revolution = 60.0 / costs.NEARLINE_RPM
    span = max(1, min(drives, request_bytes // chunk_bytes))
    piece_s = max(request_bytes // span, 1) / DRIVE.seq_read_bw_bytes
    heads = [rnd.random() for _ in range(drives)]
    waiting: list[list[tuple[int, float]]] = [[] for _ in range(drives)]      # (request, target)
    busy = [False] * drives
    events: list[tuple[float, int, int]] = []
    left: dict[int, int] = {}
    issued: dict[int, float] = {}
    serial = 0

    def positioning(drive: int, target: float) -> float:
        return seek_s(abs(heads[drive] - target)) + rnd.random() * revolution

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

    def finished(request: int, now: float) -> float | None:
        left[request] -= 1
        if left[request]:
            return None
        del left[request]
        return now - issued.pop(request)

    return _cycle(requests, completions, events, start, issue, finished)


def draw_writes(drives: int, requests: int, completions: int = 30_000, seed: int = 3,
                parities: int = 1) -> tuple[float, float]:
    """(mean, 99th percentile) response time (s) of `requests` random 4 KiB writes cycling over a
    RAID 5 (`parities` 1) or RAID 6 (2) of `drives` default drives, each a read-modify-write with no
    cache to take it: read the old data and its parities (on as many other drives), then, all in,
    write them back where they were read. A
    target is a place on the stroke and on the platter; each drive serves the soonest of its queue
    (reads and writes alike), its head where its last operation left it and its spindle at its own
    phase."""
    rnd = random.Random(seed)
    revolution = 60.0 / costs.NEARLINE_RPM
    piece_s = 4096 / DRIVE.seq_read_bw_bytes
    heads = [rnd.random() for _ in range(drives)]
    spindles = [rnd.random() for _ in range(drives)]        # each drive's platter angle at time 0
    waiting: list[list[tuple[int, tuple[float, float]]]] = [[] for _ in range(drives)]
    busy = [False] * drives
    events: list[tuple[float, int, int]] = []
    left: dict[int, int] = {}
    issued: dict[int, float] = {}
    reading: dict[int, bool] = {}
    places: dict[int, tuple[tuple[float, float], list[int]]] = {}
    serial = 0

    def positioning(drive: int, target: tuple[float, float], now: float) -> float:
        stroke, angle = target
        seek = seek_s(abs(heads[drive] - stroke))
        under_head = ((now + seek) / revolution + spindles[drive]) % 1.0
        return seek + (angle - under_head) % 1.0 * revolution

    def start(drive: int, now: float) -> None:
        queue = waiting[drive]
        busy[drive] = bool(queue)
        if queue:
            times = [positioning(drive, target, now) for _, target in queue[:costs.DRIVE_REORDER_DEPTH]]
            chosen = min(range(len(times)), key=times.__getitem__)
            request, target = queue.pop(chosen)
            heads[drive] = target[0]
            heapq.heappush(events, (now + times[chosen] + piece_s, drive, request))

    def enqueue(request: int, now: float) -> None:
        target, pair = places[request]
        left[request] = len(pair)
        for drive in pair:
            waiting[drive].append((request, target))
            if not busy[drive]:
                start(drive, now)

    def issue(now: float) -> None:
        nonlocal serial
        serial += 1
        chosen = rnd.sample(range(drives), 1 + parities)        # the data's drive and its parities'
        places[serial] = ((rnd.random(), rnd.random()), chosen)
        issued[serial], reading[serial] = now, True
        enqueue(serial, now)

    def finished(request: int, now: float) -> float | None:
        left[request] -= 1
        if left[request]:
            return None
        if reading[request]:            # the reads are in: write both back
            reading[request] = False
            enqueue(request, now)
            return None
        del left[request], reading[request], places[request]
        return now - issued.pop(request)

    return _cycle(requests, completions, events, start, issue, finished)


def write_rows() -> list[tuple[str, int, tuple[float, float], tuple[float, float]]]:
    """(layout, requests, model (mean, p99) s, drawn (mean, p99) s) of the RAID 5 and 6 small writes."""
    drive = dataclasses.replace(DRIVE, write_cache=False)
    out = []
    for parities, drives, depths in WRITE_CASES:
        layout = f"R{4 + parities}/{drives}"
        stack = stack_from_notation(layout, CHUNK, drive=drive, engine="md")
        for n in depths:
            p = predict(stack, Workload("randwrite", 4096, qd=n))
            out.append((layout, n, (p.latency_mean_s, p.latency_tail_s), draw_writes(drives, n, parities=parities)))
    return out


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
    print()
    print("RAID 5 and 6 under md, 64 KiB chunks, default 7.2K rpm drives with their write cache off; "
          "random 4 KiB writes")
    print("| layout | requests | mean ms, model / drawn | p99 ms, model / drawn |")
    print("|---|---|---|---|")
    for layout, n, model, drawn in write_rows():
        cells = [f"{m * 1e3:.1f} / {d * 1e3:.1f} ({m / d - 1:+.0%})" for m, d in zip(model, drawn)]
        print(f"| {layout} | {n} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
