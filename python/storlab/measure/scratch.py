"""The scratch file: the default target of a run given none, and, for the default main job
(jobs/mainjob.py), how it is sized, laid out and measured on this host.

`Scratch` is a file in a temporary folder under the current directory, removed after the run.
For the main job, `prepare_main_job` probes the folder, sizes the file (1 GiB, shrunk to half the
free space on small disks), lays it out with real data before the first phase, as fio lays out
its files, so no phase reads holes or unwritten extents, and chooses the method:
- `direct`: O_DIRECT, when the scratch folder's file system accepts an aligned O_DIRECT write;
- `buffered`: where O_DIRECT is refused, buffered I/O with the out-of-cache method instead: the
  writes end with fsync (the flush is in the measured time), the page cache is dropped before each
  read phase and a read phase reads each byte at most once (one pass, or the time, whichever ends
  first), so no read is served from memory.
On a memory-backed file system (tmpfs, ramfs) there is no device behind the file and no cache to
keep out of: the phases stay time-based, the method line says the figures are memory speeds, and
`finish_main_job` leaves out the page-cache warnings, which could only repeat that. The one method
line is recorded in the result as `main_job` and printed under the table.
"""
from __future__ import annotations

import mmap
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

from ..devices.sysfs import read_mountinfo
from ..errors import TargetError
from ..units import format_size

__all__ = ["Scratch", "SCRATCH_SIZE_BYTES", "WANTED_BYTES", "MIN_BYTES", "MEMORY_FS", "fs_type",
           "direct_io_refusal", "prepare_main_job", "finish_main_job"]

SCRATCH_SIZE_BYTES = 256 << 20  # the scratch file of an ordinary job given no target and no size
WANTED_BYTES = 1 << 30          # the main job's: big enough that a device's own cache does not hold it all
MIN_BYTES = 64 << 20            # below this the main job refuses rather than measure a cache
FREE_SHARE = 0.5                # use at most this share of the free space
MEMORY_FS = frozenset({"tmpfs", "ramfs"})
# Warnings the method line of a memory-backed folder already states.
_STATED_ON_MEMORY_FS = frozenset({"likely_cached", "small_buffered_read"})
_LAYOUT_CHUNK = 1 << 20


@dataclass
class Scratch:
    """The default target: a file in a temporary folder under the current directory."""
    directory: str | None = None

    def path(self) -> str:
        if self.directory is None:
            self.directory = tempfile.mkdtemp(prefix="storlab-scratch-", dir=os.getcwd())
        return os.path.join(self.directory, "scratch.dat")

    def remove(self) -> None:
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None


def fs_type(directory: str) -> str | None:
    """File-system type of the mount holding `directory` (longest mount point prefix)."""
    real = os.path.realpath(directory)
    best, kind = "", None
    for m in read_mountinfo():
        inside = real == m.mount_point or real.startswith(m.mount_point.rstrip("/") + "/")
        if inside and len(m.mount_point) >= len(best):
            best, kind = m.mount_point, m.fs_type
    return kind


def direct_io_refusal(directory: str) -> str | None:
    """Why O_DIRECT cannot be used in `directory` (None: it can): opens a probe file with O_DIRECT
    and writes one aligned 4 KiB block, since some file systems accept the flag and refuse the I/O."""
    probe = os.path.join(directory, ".storlab-direct-probe")
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return "this platform has no O_DIRECT"
    buf = mmap.mmap(-1, 4096)    # page-aligned, as O_DIRECT needs
    try:
        fd = os.open(probe, os.O_CREAT | os.O_WRONLY | flag, 0o600)
    except OSError as e:
        return f"the file system refused O_DIRECT ({e.strerror})"
    try:
        os.pwrite(fd, buf, 0)
    except OSError as e:
        return f"the file system refused an O_DIRECT write ({e.strerror})"
    finally:
        os.close(fd)
        buf.close()
        os.unlink(probe)
    return None


def _scratch_size(directory: str) -> tuple[int, str | None]:
    """(bytes, note): 1 GiB, or half the free space in whole MiB when that is less (with a note)."""
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    usable = int(free * FREE_SHARE) // (1 << 20) * (1 << 20)
    if usable >= WANTED_BYTES:
        return WANTED_BYTES, None
    if usable < MIN_BYTES:
        raise TargetError(f"target: the scratch folder {directory} has {format_size(free)} free; the main job "
                          f"needs at least {format_size(2 * MIN_BYTES)}: free space or give --target and --size")
    return usable, f"shrunk from {format_size(WANTED_BYTES)}: {format_size(free)} free"


def _lay_out(path: str, size: int) -> None:
    """Write `size` bytes of incompressible data and flush them (not measured). No two 512-byte
    sectors of the file are alike: one random chunk is written over and over, each sector of it
    carrying its file offset (bytes 0..8) and a nonce of this layout (48..56), as the engine's
    scramble does (crates/storlab-core/src/buffer.rs), so deduplicating storage holds the whole
    file and the main job's reads are not served from a few shared blocks."""
    import numpy as np

    chunk = bytearray(os.urandom(_LAYOUT_CHUNK))
    words = np.frombuffer(chunk, dtype="<u8").reshape(-1, 64)     # one row per 512-byte sector
    words[:, 6] = int.from_bytes(os.urandom(8), "little")
    sector_offsets = np.arange(0, _LAYOUT_CHUNK, 512, dtype="<u8")
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    try:
        done = 0
        while done < size:
            words[:, 0] = sector_offsets + done
            done += os.pwrite(fd, memoryview(chunk)[:min(_LAYOUT_CHUNK, size - done)], done)
        os.fsync(fd)
    finally:
        os.close(fd)


def _set_method(job, size: int, direct: bool, out_of_cache: bool) -> None:
    """Every group of `job` on the laid-out file: O_DIRECT, or buffered and kept out of the cache
    (writes end with fsync, each byte read once, pages dropped before each read phase)."""
    for p in job.phases:
        for g in p.groups:
            v = g.values
            v["size"] = size
            v["direct"] = direct
            if out_of_cache:
                writes = v["rw"] in ("write", "randwrite")
                v["fsync_end"] = v["fsync_end"] or writes
                if not writes:
                    v["io_size"] = size     # one pass: no byte read twice, so none from memory
    if out_of_cache and job.run.get("cache", "off") == "off":
        job.run["cache"] = "auto"           # drop the written file's pages before each read phase


def _method_line(job, kind: str | None, refusal: str | None, out_of_cache: bool, size: int,
                 size_note: str | None) -> str:
    """The one line under the table saying how the main job measured."""
    times = sorted({g.values["time"] for p in job.phases for g in p.groups})
    each = "/".join(f"{t:g} s" for t in times)
    where = kind or "the scratch folder"
    if refusal is None:
        line = f"main job: O_DIRECT on {where}"
    else:
        line = f"main job: buffered, O_DIRECT refused on {where} ({refusal})"
        if out_of_cache:
            line += "; out of cache: writes end with fsync, page cache dropped before each read, each byte read once"
    line += f"; {format_size(size)} scratch file" + (f" ({size_note})" if size_note else "") + f", {each} per phase"
    if kind in MEMORY_FS:
        line += f"; {kind} keeps files in memory: these are memory speeds, not a device's"
    return line


def prepare_main_job(job, path: str) -> dict[str, Any]:
    """Probe the scratch folder, size and lay out the scratch file at `path`, set the method on
    every group of the main job `job` (direct, or buffered out of cache) and return the `main_job`
    record."""
    directory = os.path.dirname(path)
    kind = fs_type(directory)
    refusal = direct_io_refusal(directory)
    given = {g.values["size"] for p in job.phases for g in p.groups} - {None}
    size, size_note = (given.pop(), None) if given else _scratch_size(directory)
    _lay_out(path, size)
    memory = kind in MEMORY_FS
    out_of_cache = refusal is not None and not memory   # in memory there is no cache to keep out of
    _set_method(job, size, refusal is None, out_of_cache)
    return {"method": "direct" if refusal is None else "buffered", "fs_type": kind, "size_bytes": size,
            "direct_refused": refusal, "memory_backed": memory,
            "line": _method_line(job, kind, refusal, out_of_cache, size, size_note)}


def finish_main_job(doc: dict[str, Any]) -> None:
    """Leave out the warnings the method line already states (page-cache warnings on a memory-backed
    folder: the line says the figures are memory speeds)."""
    record = doc.get("main_job")
    if record and record["memory_backed"]:
        doc["warnings"] = [w for w in doc["warnings"] if w["code"] not in _STATED_ON_MEMORY_FS]
