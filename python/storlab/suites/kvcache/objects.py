"""One KV object on the storage tier: a `.npy` file in `np.save`'s layout (format 1.0 header, then
the float16 array of shape (layers, 2, tokens, kv_heads, head_dim) in C order), written and
fsync'd, read back whole after POSIX_FADV_DONTNEED has dropped its cached pages, as kv-cache.py's
NVMe backend does (kv_cache/backends.py).

The device time is what kv-cache.py times: the fsync for a write, the read of the dropped file for
a read. Unlike np.save and np.load, an object is never held whole in memory: it is written from
and read into one reused buffer of CHUNK_BYTES per thread, so a 3 GiB object costs 8 MiB of memory
and the contents are still unique per 4 KiB block (no block repeats within or across objects, as
kv-cache.py's XOR stamps make sure).
"""
from __future__ import annotations

import hashlib
import io
import os
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["CHUNK_BYTES", "BLOCK_BYTES", "Contents", "npy_header", "write_object", "read_object", "Timing"]

CHUNK_BYTES = 8 << 20              # one write or read call
BLOCK_BYTES = 4096                 # the unit that is unique on the device
NOISE_BYTES = 64 << 20             # the random bytes every object's contents are cut from


@dataclass(frozen=True)
class Timing:
    total_s: float
    device_s: float                # write: the fsync; read: the read of the dropped file


def npy_header(shape: tuple[int, ...]) -> bytes:
    """The header np.save writes before a C-ordered float16 array of `shape` (format 1.0)."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": np.dtype(np.float16).str, "fortran_order": False,
                                               "shape": tuple(int(x) for x in shape)})
    return buf.getvalue()


class Contents:
    """Contents of the objects: slices of one seeded noise buffer, each 4 KiB block XOR'd with a
    stamp drawn from the object's name and, in its first 8 bytes, with its block index."""

    def __init__(self, seed: int) -> None:
        self.noise = np.random.default_rng(seed).integers(0, 256, NOISE_BYTES, dtype=np.uint8)

    def fill(self, key: str, offset: int, out: np.ndarray) -> None:
        """The object's bytes from `offset` (a multiple of BLOCK_BYTES) into `out` (uint8, a
        multiple of BLOCK_BYTES long)."""
        digest = hashlib.sha256(key.encode()).digest()
        start = (int.from_bytes(digest[:8], "little") + offset) % NOISE_BYTES
        n = out.size
        first = min(n, NOISE_BYTES - start)
        out[:first] = self.noise[start:start + first]
        if first < n:
            out[first:] = self.noise[:n - first]
        stamp = np.random.default_rng(int.from_bytes(digest[8:16], "little")).integers(
            0, 256, BLOCK_BYTES, dtype=np.uint8)
        blocks = out.reshape(-1, BLOCK_BYTES)
        blocks ^= stamp
        index = np.arange(offset // BLOCK_BYTES, offset // BLOCK_BYTES + blocks.shape[0], dtype=np.uint64)
        blocks[:, :8] ^= index.view(np.uint8).reshape(-1, 8)


def write_object(path: str, key: str, shape: tuple[int, ...], contents: Contents, buf: np.ndarray,
                 stop: Callable[[], bool] = lambda: False) -> Timing | None:
    """Write the object `key` of `shape` to `path` (created; it must not exist) and fsync it.
    None when `stop()` turned true before it was whole (the file is removed). The timing leaves
    out making the contents, as kv-cache.py times only np.save and the fsync."""
    t0 = time.perf_counter()
    making = 0.0
    data_bytes = int(np.prod(shape)) * 2
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        _write_all(fd, memoryview(npy_header(shape)))
        done = 0
        while done < data_bytes:
            if stop():
                os.close(fd)
                fd = -1
                os.unlink(path)
                return None
            n = min(buf.size, data_bytes - done)
            padded = -(-n // BLOCK_BYTES) * BLOCK_BYTES
            t_fill = time.perf_counter()
            contents.fill(key, done, buf[:padded])
            making += time.perf_counter() - t_fill
            _write_all(fd, memoryview(buf)[:n])
            done += n
        t1 = time.perf_counter()
        os.fsync(fd)
        t2 = time.perf_counter()
    finally:
        if fd >= 0:
            os.close(fd)
    return Timing(t2 - t0 - making, t2 - t1)


def _write_all(fd: int, view: memoryview) -> None:
    while len(view):
        view = view[os.write(fd, view):]


def read_object(path: str, buf: np.ndarray) -> tuple[int, Timing]:
    """Drop the file's cached pages, then read it whole into `buf` a chunk at a time: (bytes read,
    timing)."""
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        t1 = time.perf_counter()
        total = 0
        view = memoryview(buf)
        while True:
            n = os.readv(fd, [view])
            if n == 0:
                break
            total += n
        t2 = time.perf_counter()
    finally:
        os.close(fd)
    return total, Timing(t2 - t0, t2 - t1)
