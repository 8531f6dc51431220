"""The KV cache of one rank across its tiers, as kv-cache.py's MultiTierCache (kv_cache/cache.py)
places, moves and counts objects: GPU, then CPU memory, then storage, each new object in the
fastest tier with room.

- A memory tier (GPU, CPU) takes objects until it is 80 % full; then its least recently used
  objects move down one tier (a demotion: read from memory, written to the next tier). An object
  over 95 % of a memory tier's budget skips it; an empty tier (under 5 % used) takes anything that
  fits that bound. A budget of 0 removes the tier.
- Storage is the last tier: it fills to its capacity, then its least recently used files are
  deleted.
- Memory tiers are emulated: an object in one is its name and size, and a read or write of it
  copies its bytes once through host memory (what kv-cache.py's CPU tier costs: np.copy). The GPU
  tier is the same emulation (no GPU here).

What is counted is what kv-cache.py counts: bytes per tier read and written by requests (a
demotion's write is counted apart, `storage_demoted_bytes`), device latencies of storage reads
and writes (objects/timing), hits and misses.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ...jobs.kvcache_job import ModelShape
from .objects import CHUNK_BYTES, Contents, read_object, write_object

__all__ = ["TIERS", "TierStats", "KvCache"]

TIERS = ("gpu", "cpu", "storage")
MEMORY_FILL, MEMORY_MAX_OBJECT, MEMORY_EMPTY = 0.80, 0.95, 0.05    # kv-cache.py's eviction settings


@dataclass
class Entry:
    tier: str
    tokens: int
    size: int
    last_access: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    alive: bool = True


@dataclass
class TierStats:
    """What one rank's cache counted in one trial (bytes are the objects' array bytes, as
    kv-cache.py counts them; the .npy header is not counted)."""
    read_bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    write_bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    storage_reads: int = 0
    storage_writes: int = 0
    storage_demoted_bytes: int = 0
    read_device_s: list[float] = field(default_factory=list)
    write_device_s: list[float] = field(default_factory=list)
    hits: int = 0
    misses: int = 0
    evictions: int = 0


class KvCache:
    """One rank's tiers for one trial; storage objects are files in `folder`."""

    def __init__(self, folder: str, model: ModelShape, budgets: dict[str, int], contents: Contents,
                 max_concurrent_allocs: int = 0, stop: Callable[[], bool] = lambda: False) -> None:
        self.folder = folder
        self.model = model
        self.limits = {t: budgets[t] for t in TIERS}
        self.order = [t for t in TIERS if t == "storage" or self.limits[t] > 0]
        self.usage = dict.fromkeys(TIERS, 0)
        self.contents = contents
        self.stop = stop
        self.entries: dict[str, Entry] = {}
        self.lock = threading.Lock()
        self.allocations = threading.Semaphore(max_concurrent_allocs) if max_concurrent_allocs > 0 else None
        self.stats = TierStats()
        self._local = threading.local()

    # -- buffers and one tier's I/O ------------------------------------------------------------
    def _buffer(self) -> np.ndarray:
        buf = getattr(self._local, "buf", None)
        if buf is None:
            buf = self._local.buf = np.empty(CHUNK_BYTES, dtype=np.uint8)
        return buf

    def path(self, key: str) -> str:
        return os.path.join(self.folder, f"{key}.npy")

    def _copy_through_memory(self, size: int) -> float:
        """An emulated memory tier's read or write: `size` bytes copied once. Seconds taken."""
        t0 = time.perf_counter()
        buf = self._buffer()
        half = buf.size // 2
        left = size
        while left > 0:
            n = min(half, left)
            np.copyto(buf[half:half + n], buf[:n])
            left -= n
        return time.perf_counter() - t0

    def _put(self, tier: str, key: str, tokens: int) -> tuple[float, float] | None:
        """Write the object into `tier`: (total s, device s), or None when stopped mid-way."""
        if tier != "storage":
            t = self._copy_through_memory(tokens * self.model.kv_bytes_per_token)
            return t, t
        timing = write_object(self.path(key), key, self.model.object_shape(tokens), self.contents, self._buffer(),
                              self.stop)
        return None if timing is None else (timing.total_s, timing.device_s)

    # -- placement -----------------------------------------------------------------------------
    def _oldest(self, tier: str) -> tuple[str, Entry] | None:
        """The least recently used object of `tier` (call with the lock held)."""
        candidates = [(e.last_access, k) for k, e in self.entries.items() if e.tier == tier]
        if not candidates:
            return None
        key = min(candidates)[1]
        return key, self.entries[key]

    def _make_room(self, tier: str, size: int, depth: int = 0) -> bool:
        """Reserve `size` bytes in `tier`, moving or deleting its least recently used objects;
        False when the tier cannot take it (the next tier is tried)."""
        limit, last = self.limits[tier], tier == "storage"
        if not last and (size > limit * MEMORY_MAX_OBJECT or depth > 10):
            return False
        target = limit if last else limit * MEMORY_FILL
        for _ in range(max(1000, len(self.entries) + 100)):
            with self.lock:
                if self.usage[tier] + size <= target or self.usage[tier] < limit * MEMORY_EMPTY:
                    self.usage[tier] += size
                    return True
                oldest = self._oldest(tier)
                if oldest is None:
                    if last:             # nothing left to delete: the file system has the last word
                        self.usage[tier] += size
                    return last
                in_tier = sum(e.size for e in self.entries.values() if e.tier == tier)
                if not last and in_tier < limit * 0.2 and size > target * 0.5:
                    return False
                victim_key, victim = oldest
            if last:
                self._delete(victim_key, victim)
            elif not self._demote(victim_key, victim, depth):
                return False
        if last:
            with self.lock:
                self.usage[tier] += size
        return last

    def _delete(self, key: str, entry: Entry) -> None:
        with entry.lock:
            with self.lock:
                if not entry.alive or entry.tier != "storage":
                    return
                entry.alive = False
                del self.entries[key]
                self.usage["storage"] -= entry.size
                self.stats.evictions += 1
            try:
                os.unlink(self.path(key))
            except FileNotFoundError:
                pass

    def _demote(self, key: str, entry: Entry, depth: int) -> bool:
        """Move `entry` one tier down (its room there reserved first)."""
        source = entry.tier
        below = self.order[self.order.index(source) + 1]
        if not self._make_room(below, entry.size, depth + 1):
            return False
        with entry.lock:
            with self.lock:
                if not entry.alive or entry.tier != source:
                    self.usage[below] -= entry.size      # someone else moved it: give the room back
                    return True
            self._copy_through_memory(entry.size)         # read it out of the memory tier
            if self._put(below, key, entry.tokens) is None:
                with self.lock:
                    self.usage[below] -= entry.size
                return False
            with self.lock:
                entry.tier = below
                self.usage[source] -= entry.size
                self.stats.evictions += 1
                if below == "storage":
                    self.stats.storage_demoted_bytes += entry.size
        return True

    # -- what a request does -------------------------------------------------------------------
    def allocate(self, key: str, tokens: int) -> float | None:
        """Write a new object (a prefill): the write's seconds (0 when it exists already), or None
        when the trial stopped before it was written."""
        with self.lock:
            if key in self.entries:
                return 0.0
        if self.allocations:
            self.allocations.acquire()
        try:
            size = tokens * self.model.kv_bytes_per_token
            tier = next((t for t in self.order if self._make_room(t, size)), "storage")
            timing = self._put(tier, key, tokens)
            if timing is None:
                with self.lock:
                    self.usage[tier] -= size
                return None
            with self.lock:
                self.entries[key] = Entry(tier, tokens, size, time.time())
                self.stats.write_bytes[tier] += size
                if tier == "storage":
                    self.stats.storage_writes += 1
                    self.stats.write_device_s.append(timing[1])
            return timing[0]
        finally:
            if self.allocations:
                self.allocations.release()

    def access(self, key: str) -> tuple[str | None, float]:
        """Read an object whole (a decode or an earlier turn): (its tier or None on a miss, seconds)."""
        with self.lock:
            entry = self.entries.get(key)
            if entry is None:
                self.stats.misses += 1
                return None, 0.0
            self.stats.hits += 1
            entry.last_access = time.time()
            self.stats.read_bytes[entry.tier] += entry.size
        with entry.lock:
            tier = entry.tier
            if not entry.alive:
                return tier, 0.0
            if tier != "storage":
                return tier, self._copy_through_memory(entry.size)
            _, timing = read_object(self.path(key), self._buffer())
        with self.lock:
            self.stats.storage_reads += 1
            self.stats.read_device_s.append(timing.device_s)
        return tier, timing.total_s

    def counts(self) -> dict[str, int]:
        """Objects held per tier now."""
        with self.lock:
            return {t: sum(1 for e in self.entries.values() if e.tier == t) for t in TIERS}

    def remove_all(self) -> None:
        """Delete every file this cache wrote (the trial's end)."""
        with self.lock:
            keys = [k for k, e in self.entries.items() if e.tier == "storage"]
            self.entries.clear()
            self.usage = dict.fromkeys(TIERS, 0)
        for key in keys:
            try:
                os.unlink(self.path(key))
            except FileNotFoundError:
                pass
