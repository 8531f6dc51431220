"""Darshan's POSIX counters computed from a sequence of requests, with Darshan's own definitions.

The same function counts what a replay should do (the generated sequence) and what it did (the
engine's iolog of the replay), so the fidelity table compares like with like. Definitions follow
darshan-runtime/lib/darshan-posix.c (POSIX_RECORD_READ/WRITE) and darshan-common.h
(DARSHAN_BUCKET_INC), per file and per open file descriptor:
- SEQ: offset > the last byte accessed in that direction; CONSEC: offset == that last byte + 1
  (so CONSEC is a subset of SEQ); the last byte starts at 0 on open;
- RW_SWITCHES: a request whose direction differs from the previous one's;
- size bins by the bytes of the request: <= 100, <= 1 KiB, <= 10 KiB, <= 100 KiB, <= 1 MiB,
  <= 4 MiB, <= 10 MiB, <= 100 MiB, <= 1 GiB, more;
- a stride: offset - (last byte + 1) when the request jumps forward and the last byte is not 0.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from typing import Iterable

__all__ = ["BINS", "BIN_EDGES", "bin_index", "bin_bounds", "count_ops", "Op", "READ", "WRITE", "SYNC",
           "COUNT_KEYS"]

READ, WRITE, SYNC = "read", "write", "sync"
Op = tuple  # (direction, offset, length): direction READ, WRITE or SYNC (offset, length 0)

BINS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M", "100M_1G", "1G_PLUS")
# The largest size of each bin but the last (darshan-common.h: `__value < 101` ...).
BIN_EDGES = (100, 1024, 10240, 102400, 1048576, 4194304, 10485760, 104857600, 1073741824)

COUNT_KEYS = ("POSIX_READS", "POSIX_WRITES", "POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN",
              "POSIX_SEQ_READS", "POSIX_SEQ_WRITES", "POSIX_CONSEC_READS", "POSIX_CONSEC_WRITES",
              "POSIX_RW_SWITCHES", "POSIX_FSYNCS", "POSIX_MAX_BYTE_READ", "POSIX_MAX_BYTE_WRITTEN",
              *(f"POSIX_SIZE_READ_{b}" for b in BINS), *(f"POSIX_SIZE_WRITE_{b}" for b in BINS))


def bin_index(size: int) -> int:
    return bisect_left(BIN_EDGES, size)


def bin_bounds(index: int) -> tuple[int, int]:
    """Smallest and largest request size of a bin (the last bin: up to 1 GiB more, the engine's
    largest request being 1 GiB; a longer one is split)."""
    lo = 0 if index == 0 else BIN_EDGES[index - 1] + 1
    hi = BIN_EDGES[index] if index < len(BIN_EDGES) else 2 * BIN_EDGES[-1]
    return lo, hi


def count_ops(ops: Iterable[Op]) -> dict[str, int]:
    """Darshan's POSIX counters of one open file (one rank, one open) doing `ops` in order."""
    out: Counter = Counter()
    last = {READ: 0, WRITE: 0}
    prev_dir = None
    strides: Counter = Counter()
    accesses: Counter = Counter()
    out["POSIX_MAX_BYTE_READ"] = out["POSIX_MAX_BYTE_WRITTEN"] = 0
    for d, offset, length in ops:
        if d == SYNC:
            out["POSIX_FSYNCS"] += 1
            continue
        tag = "READS" if d == READ else "WRITES"
        if offset > last[d]:
            out[f"POSIX_SEQ_{tag}"] += 1
        if offset == last[d] + 1:
            out[f"POSIX_CONSEC_{tag}"] += 1
        if offset > 0 and offset > last[d] and last[d] != 0:
            strides[offset - last[d] - 1] += 1
        last[d] = offset + length - 1
        out[f"POSIX_{tag}"] += 1
        out["POSIX_BYTES_READ" if d == READ else "POSIX_BYTES_WRITTEN"] += length
        key = "POSIX_MAX_BYTE_READ" if d == READ else "POSIX_MAX_BYTE_WRITTEN"
        out[key] = max(out[key], offset + length - 1)
        out[f"POSIX_SIZE_{'READ' if d == READ else 'WRITE'}_{BINS[bin_index(length)]}"] += 1
        accesses[length] += 1
        if prev_dir is not None and prev_dir != d:
            out["POSIX_RW_SWITCHES"] += 1
        prev_dir = d
    result = {k: int(out.get(k, 0)) for k in COUNT_KEYS}
    result["strides"] = dict(strides)      # stride -> count (Darshan keeps the four most common)
    result["accesses"] = dict(accesses)    # size -> count (Darshan keeps the four most common)
    return result
