"""Cache control: size the working set in or out of cache, drop the page cache between phases,
and judge whether a result could have come from the device at all.

- invalidation (on by default, fio's invalidate=1): after a phase's plan is built (files laid
  out) and before its clock starts, each target is fsynced and its cached pages dropped:
  posix_fadvise(DONTNEED) for a regular file, ioctl BLKFLSBUF for a block device. tmpfs and
  ramfs files are left alone and recorded as "not droppable" (their pages are the storage). What
  was done per target, and its residency before and after (mincore), is recorded;
- in-cache: the working set fits a declared controller cache, or a fraction of RAM;
- out-of-cache: it is a multiple of RAM plus the declared cache, and before every buffered read
  phase that follows writes (or any buffered read in `out` mode) the page cache is dropped:
  /proc/sys/vm/drop_caches when we may, otherwise posix_fadvise(DONTNEED) per target. Which was
  used, and how much of the targets stayed resident (mincore), is recorded.
- plausibility: a buffered read faster per thread than half of a measured single-thread memory
  copy, or faster than a declared ceiling, is flagged "likely served from cache".
"""
from __future__ import annotations

import fcntl
import functools
import mmap
import os
import stat
import time
from typing import Any, Iterable


@functools.lru_cache(maxsize=None)
def _libc() -> Any:
    """The C library's mincore, mmap, munmap and statfs, bound when first needed. The symbols are
    taken from the process itself (CDLL(None): the interpreter is linked against the C library),
    not looked up with ctypes.util.find_library, which runs `ldconfig -p` in a subprocess."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.statfs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    return libc

# <linux/fs.h>: _IO(0x12, 97), write back and drop a block device's buffer cache.
BLKFLSBUF = 0x1261
# statfs f_type of file systems whose pages are the storage itself (<linux/magic.h>).
_NOT_DROPPABLE_FS = {0x01021994: "tmpfs", 0x858458F6: "ramfs"}
# mincore over at most this much of a mapping at a time (a 1-byte vector entry per page).
_MINCORE_CHUNK_BYTES = 16 << 30
# Residency at or below this share of the target counts as "nothing cached".
COLD_FRACTION = 0.01

PAGE = mmap.PAGESIZE
MEMCPY_PROBE_BYTES = 64 << 20
# single-thread memory-copy rates of current servers and laptops are well above this (bytes/s): a
# per-thread read rate under half of it is no page-cache copy, and the 128 MiB probe is skipped
MEMCPY_FLOOR_BYTES = 2e9
_memcpy_rate: float | None = None


def working_set_bytes(mode: str, ram_bytes: int, cache_bytes: int, ram_fraction: float,
                      ram_multiple: float) -> int | None:
    """The working set a cache mode asks for (None: keep what the job says)."""
    if mode == "in":
        return cache_bytes if cache_bytes else int(ram_bytes * ram_fraction)
    if mode == "out":
        return int(ram_bytes * ram_multiple) + cache_bytes
    return None


def resident_bytes(path: str) -> int | None:
    """Bytes of a regular file or block device now in the page cache (mincore over a read-only
    mapping, chunk by chunk), or None where that cannot be measured."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISBLK(st.st_mode)):
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    import ctypes

    try:
        libc = _libc()
        size = st.st_size if stat.S_ISREG(st.st_mode) else os.lseek(fd, 0, os.SEEK_END)
        resident_pages = 0
        for start in range(0, size, _MINCORE_CHUNK_BYTES):
            length = min(_MINCORE_CHUNK_BYTES, size - start)
            addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, start)
            if addr in (None, ctypes.c_void_p(-1).value):
                return None
            try:
                vec = (ctypes.c_ubyte * ((length + PAGE - 1) // PAGE))()
                if libc.mincore(ctypes.c_void_p(addr), length, vec) != 0:
                    return None
                resident_pages += bytes(vec).translate(_LOW_BIT).count(1)  # bit 0: resident
            finally:
                libc.munmap(ctypes.c_void_p(addr), length)
        return min(resident_pages * PAGE, size)
    finally:
        os.close(fd)


_LOW_BIT = bytes(b & 1 for b in range(256))


def _fs_type_magic(path: str) -> int | None:
    """statfs f_type of the file system holding `path` (the first field of struct statfs)."""
    import ctypes

    buf = ctypes.create_string_buffer(256)
    if _libc().statfs(os.fsencode(path), buf) != 0:
        return None
    return ctypes.c_ulong.from_buffer(buf).value


def invalidate_target(path: str) -> dict[str, Any]:
    """fio's invalidate=1 for one target: fsync, then drop its cached pages. Returns
    {path, method: fadvise|blkflsbuf|none, reason, resident_before_bytes, resident_after_bytes}."""
    record: dict[str, Any] = {"path": path, "method": "none", "reason": None,
                              "resident_before_bytes": resident_bytes(path)}
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        record["reason"] = f"cannot stat: {e.strerror}"
    else:
        if stat.S_ISBLK(mode):
            record.update(_drop(path, "blkflsbuf", lambda fd: fcntl.ioctl(fd, BLKFLSBUF, 0)))
        elif stat.S_ISCHR(mode):
            record["reason"] = "a character device (/dev/null, /dev/zero, /dev/full): no page cache to drop"
        elif not stat.S_ISREG(mode):
            record["reason"] = "not a regular file or block device"
        elif (fs := _NOT_DROPPABLE_FS.get(_fs_type_magic(path) or 0)) is not None:
            record["reason"] = f"not droppable: {fs} (its pages are the storage)"
        else:
            record.update(_drop(path, "fadvise", lambda fd: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)))
    record["resident_after_bytes"] = resident_bytes(path)
    return record


def _drop(path: str, method: str, drop) -> dict[str, Any]:
    """fsync (so dirty pages can be dropped), then `drop`; the method, or none and why not."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        return {"method": "none", "reason": f"cannot open: {e.strerror}"}
    try:
        os.fsync(fd)
        drop(fd)
        return {"method": method, "reason": None}
    except OSError as e:
        what = "BLKFLSBUF" if method == "blkflsbuf" else "fsync or fadvise"
        return {"method": "none", "reason": f"{what} refused: {e.strerror}"}
    finally:
        os.close(fd)


def invalidation_targets(phase, settings: dict[str, Any]) -> tuple[list[str], str | None]:
    """The targets whose pages to drop before this phase, or (all of them, why not)."""
    paths = list(dict.fromkeys(p for g in phase.groups if through_page_cache(g.values)
                               for p in target_paths(g.values)))
    if not settings.get("invalidate", True):
        return paths, "invalidate off"
    if settings.get("cache") == "in":
        return paths, "cache in keeps the working set cached"
    return paths, None


def invalidate(paths: Iterable[str], skipped_because: str | None = None) -> dict[str, Any]:
    """Invalidate every target (or, when skipped, only measure residency and say why), as the
    phase's `invalidate` record."""
    if skipped_because is None:
        targets = [invalidate_target(p) for p in paths]
    else:
        targets = []
        for p in paths:
            resident = resident_bytes(p)
            targets.append({"path": p, "method": "none", "reason": skipped_because,
                            "resident_before_bytes": resident, "resident_after_bytes": resident})
    return {"enabled": skipped_because is None, "targets": targets,
            "resident_before_bytes": _total(t["resident_before_bytes"] for t in targets),
            "resident_after_bytes": _total(t["resident_after_bytes"] for t in targets)}


def _total(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def started_cold(result: dict[str, Any], span_bytes: int) -> bool:
    """Whether the phase's targets held (about) nothing in the page cache when it started: its
    invalidation or cache drop left at most COLD_FRACTION of the span resident."""
    for key in ("invalidate", "cache"):
        after = (result.get(key) or {}).get("resident_after_bytes")
        if after is not None and span_bytes > 0 and after <= COLD_FRACTION * span_bytes:
            if key == "cache" or all(t["method"] != "none" for t in result[key]["targets"]):
                return True
    return False


def drop_page_cache(paths: Iterable[str]) -> dict[str, Any]:
    """Drop cached pages of the targets; returns how, and residency before and after."""
    paths = list(dict.fromkeys(paths))
    before = [resident_bytes(p) for p in paths]
    os.sync()
    method = None
    if os.geteuid() == 0:
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            method = "drop_caches"
        except OSError:
            method = None
    if method is None:
        method = "fadvise"
        for p in paths:
            try:
                fd = os.open(p, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass
            finally:
                os.close(fd)
    after = [resident_bytes(p) for p in paths]
    return {"method": method, "resident_before_bytes": _total(before), "resident_after_bytes": _total(after)}


def memcpy_rate_bytes() -> float:
    """Single-thread memory-copy bandwidth of this host (bytes/s), measured once per process."""
    global _memcpy_rate
    if _memcpy_rate is None:
        src = bytearray(os.urandom(1 << 20)) * (MEMCPY_PROBE_BYTES >> 20)
        dst = bytearray(len(src))
        dst[:] = src  # fault the pages in first
        best = 0.0
        for _ in range(3):
            t0 = time.perf_counter()
            dst[:] = src  # a plain memcpy in CPython
            best = max(best, len(src) / (time.perf_counter() - t0))
        _memcpy_rate = best
    return _memcpy_rate


# No storage device completes a read this fast; the page cache (a memory copy) does.
DEVICE_MIN_READ_LATENCY_NS = 5_000


def likely_cached(bw_bytes: float, threads: int, ceiling_bytes: float | None,
                  p50_read_latency_ns: float | None = None) -> str | None:
    """Why a buffered read result is implausible for the device, or None."""
    if ceiling_bytes:
        if bw_bytes > ceiling_bytes:
            return f"faster than the declared ceiling of {ceiling_bytes / 1e6:,.0f} MB/s"
        return None
    if p50_read_latency_ns is not None and 0 < p50_read_latency_ns < DEVICE_MIN_READ_LATENCY_NS:
        return (f"half the reads completed within {p50_read_latency_ns / 1000:.1f} us, faster than any "
                f"storage device answers ({DEVICE_MIN_READ_LATENCY_NS / 1000:.0f} us)")
    per_thread = bw_bytes / max(threads, 1)
    if per_thread <= 0.5 * MEMCPY_FLOOR_BYTES:
        return None     # under half of any host's copy rate: no need to measure this host's
    rate = memcpy_rate_bytes()
    if per_thread > 0.5 * rate:
        return (f"{per_thread / 1e6:,.0f} MB/s per thread is more than half this host's memory-copy "
                f"rate ({rate / 1e6:,.0f} MB/s)")
    return None


def _reads(values: dict[str, Any]) -> bool:
    rw = values["rw"]
    return rw in ("read", "randread") or (rw in ("rw", "randrw") and values["rwmix_read"] > 0) \
        or values.get("rbw", "off") != "off"


def _writes(values: dict[str, Any]) -> bool:
    rw = values["rw"]
    # Trims change the data too: cached pages of a trimmed range are stale.
    return rw in ("write", "randwrite", "trim", "randtrim", "trimwrite") \
        or (rw in ("rw", "randrw") and values["rwmix_read"] < 100)


# Engines whose I/O goes through this host's kernel, so that its page cache can serve buffered
# reads: not null (no I/O), nor the network engines (nbd: the cache that matters is the server's).
PAGE_CACHE_ENGINES = ("psync", "io_uring")


def through_page_cache(values: dict[str, Any]) -> bool:
    """A group whose buffered reads this host's page cache may serve."""
    return values["engine"] in PAGE_CACHE_ENGINES


def target_paths(values: dict[str, Any]) -> list[str]:
    """The files a group touches (PATH.N for files=per_thread)."""
    if values.get("files") == "per_thread":
        base = values.get("participant_base", 0)
        return [f"{t}.{p}" for t in values["target"] for p in range(base, base + values["threads"])]
    return list(values["target"])


def apply_sizing(job, settings: dict[str, Any], ram_bytes: int | None) -> list[dict[str, str]]:
    """Set each group's size for cache=in|out where the job gave none; warn where a given size
    contradicts the mode. Returns warnings as {code, message}."""
    mode = settings.get("cache", "off")
    if mode not in ("in", "out") or not ram_bytes:
        return []
    ws = working_set_bytes(mode, ram_bytes, settings.get("cache_bytes") or 0,
                           (settings.get("cache_in_pct") or 50.0) / 100.0, settings.get("cache_out_multiple") or 2.0)
    warnings = []
    for phase in job.phases:
        for g in phase.groups:
            v = g.values
            files = max(len(target_paths(v)), 1)
            per_file = max(ws // files // v["bs"], 1) * v["bs"]
            if v["size"] is None:
                v["size"] = per_file
                continue
            total = v["size"] * files
            if (mode == "in" and total > ws) or (mode == "out" and total < ws):
                want = "fits in" if mode == "in" else "exceeds"
                warnings.append({"code": "cache_size_mismatch",
                                 "message": f"{phase.name}: cache={mode} wants a working set that {want} "
                                            f"{ws / 2**30:.1f} GiB, but size gives {total / 2**30:.1f} GiB; "
                                            f"leave --size out to let storlab size it"})
    return warnings


def should_drop(phase, mode: str, written: set[str]) -> list[str]:
    """Targets whose page cache to drop before this phase (empty: none)."""
    if mode not in ("out", "auto"):
        return []
    paths: list[str] = []
    for g in phase.groups:
        v = g.values
        if _reads(v) and not v["direct"] and through_page_cache(v):
            paths += target_paths(v)
    if mode == "auto":
        paths = [p for p in paths if p in written]
    return list(dict.fromkeys(paths))


def written_paths(phase) -> set[str]:
    return {p for g in phase.groups if _writes(g.values) for p in target_paths(g.values)}
