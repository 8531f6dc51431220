"""Checkpoint I/O: each writer (an emulated accelerator, i.e. a rank) writes its shard of a
model checkpoint into its own files with fsync, and reads them back after the page cache is
dropped, as DLIO's checkpointing and MLPerf Storage v2.0's llama3 workloads do.

Shard per writer (CheckpointSpec.rank_file_bytes): with checkpoint.ranks_total = 0,
model_size + optimizer_size bytes (DLIO 2.0: every writing rank saves its whole tensors); with
ranks_total = R, (model + optimizer) / R (the checkpoint is sharded over R ranks); with a
[checkpoint.transformer], the files DLIO's rank writes in a world of R ranks (or of the writers
when R is 0), jobs/checkpoint_layout.py. Fewer writers than R write as the world's first ranks
(MLPerf's subset mode). Files: FOLDER/ckpt-TAG-rRANK-fJ.bin, removed at the end of the run (they
are storlab's, named by it); a folder holding other files is refused.

A checkpoint.folder that is an s3://BUCKET/PREFIX URL holds the same names as objects (the
storage seam, storage.py): each file is one PUT (a multipart upload above the part size), a
read-back one GET of each whole object (its size from one LIST of the shard's keys, before the
clock starts), nothing to drop from a page cache, the objects deleted at the end as the files are.
"""
from __future__ import annotations

import os
import re
import time
from typing import Any

from ...errors import UserError
from ...jobs.workload import CheckpointSpec, StorageSpec
from ...model.training import CHECKPOINT_CALL_BYTES, checkpoint_shard_bytes, checkpoint_writers
from .storage import ObjectPlace, place_of

__all__ = ["shard_bytes", "file_bytes", "check_folder", "open_folder", "write_shard", "read_shard", "remove", "CHUNK"]

CHUNK = CHECKPOINT_CALL_BYTES   # bytes per write or read call (16 MiB; the model times checkpoints with it)
_OURS = re.compile(r"^ckpt-[A-Za-z0-9_.-]+-r\d+-f\d+\.bin$")
_BUF: dict[str, bytearray] = {}


def shard_bytes(spec: CheckpointSpec, writers: int) -> int:
    """Bytes an even shard's writer writes (the model's rule, which plan perf --workload predicts with)."""
    return checkpoint_shard_bytes(spec.model_size + spec.optimizer_size, spec.ranks_total)


def file_bytes(spec: CheckpointSpec, rank: int, writers: int) -> list[int]:
    """Bytes of each file writer `rank` writes in one checkpoint ([] when it writes none)."""
    return spec.rank_file_bytes(rank, writers)


def writer_count(spec: CheckpointSpec, accelerators: int) -> int:
    return checkpoint_writers(spec.ranks, spec.ranks_total, accelerators)


def open_folder(folder: str, storage: StorageSpec | None = None) -> str | ObjectPlace:
    """The checkpoint folder as the writers use it, unchecked (ranks other than 0): an absolute
    path, or the objects of an s3:// URL."""
    return place_of(folder, storage) or os.path.abspath(folder)


def check_folder(folder: str, storage: StorageSpec | None = None) -> str | ObjectPlace:
    """The checkpoint folder, made if missing, refused when it holds files (objects) storlab did not name."""
    place = place_of(folder, storage)
    if place is not None:
        for key in sorted(place.list()):
            if not _OURS.match(key):
                raise UserError(f"checkpoint.folder: {place.url} holds objects storlab did not write (e.g. {key}); "
                                "name an empty or new prefix")
        return place
    folder = os.path.abspath(folder)
    if os.path.exists(folder):
        if not os.path.isdir(folder):
            raise UserError(f"checkpoint.folder: {folder} is not a folder")
        for entry in sorted(os.listdir(folder)):
            if not _OURS.match(entry):
                raise UserError(f"checkpoint.folder: {folder} holds files storlab did not write (e.g. {entry}); "
                                "name an empty or new folder")
    os.makedirs(folder, exist_ok=True)
    return folder


def _paths(folder: str, tag: str, rank: int, files: int) -> list[str]:
    return [os.path.join(folder, f"ckpt-{tag}-r{rank}-f{j}.bin") for j in range(files)]


def _random_bytes(size: int) -> bytes:
    """`size` bytes of the writers' random block, repeated."""
    block = _BUF.get("w")
    if block is None:
        block = _BUF.setdefault("w", bytearray(os.urandom(CHUNK)))
    whole, rest = divmod(size, CHUNK)
    return bytes(block) * whole + bytes(block[:rest])


def _keys(tag: str, rank: int, files: int) -> list[str]:
    return [f"ckpt-{tag}-r{rank}-f{j}.bin" for j in range(files)]


def write_shard(folder: str | ObjectPlace, tag: str, rank: int, sizes: list[int], fsync: bool) -> dict[str, Any]:
    """Write one writer's files (`sizes` bytes each); returns its bytes and seconds (open to
    fsync and close; for objects the PUTs, each object's bytes made before its PUT is timed)."""
    if isinstance(folder, ObjectPlace):
        seconds = 0.0
        for key, size in zip(_keys(tag, rank, len(sizes)), sizes):
            data = _random_bytes(size)
            t0 = time.monotonic()
            folder.put(key, data)
            seconds += time.monotonic() - t0
        return {"rank": rank, "bytes": sum(sizes), "files": len(sizes), "seconds": seconds}
    buf = _BUF.get("w")
    if buf is None:
        buf = _BUF.setdefault("w", bytearray(os.urandom(CHUNK)))
    view = memoryview(buf)
    t0 = time.monotonic()
    for path, size in zip(_paths(folder, tag, rank, len(sizes)), sizes):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            left = size
            while left:
                left -= os.write(fd, view[:min(left, CHUNK)])
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
    return {"rank": rank, "bytes": sum(sizes), "files": len(sizes), "seconds": time.monotonic() - t0}


def read_shard(folder: str | ObjectPlace, tag: str, rank: int, files: int) -> dict[str, Any]:
    if isinstance(folder, ObjectPlace):
        sizes = folder.list(f"ckpt-{tag}-r{rank}-")
        t0 = time.monotonic()
        total = sum(len(folder.get(key, 0, sizes[key], whole=True)) if key in sizes else len(folder.get(key))
                    for key in _keys(tag, rank, files))
        return {"rank": rank, "bytes": total, "files": files, "seconds": time.monotonic() - t0}
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    t0 = time.monotonic()
    total = 0
    for path in _paths(folder, tag, rank, files):
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            while True:
                n = os.readv(fd, [view])
                if not n:
                    break
                total += n
        finally:
            os.close(fd)
    return {"rank": rank, "bytes": total, "files": files, "seconds": time.monotonic() - t0}


def drop(folder: str | ObjectPlace, tag: str, ranks: list[int], files: int | dict[int, int]) -> None:
    """Drop the cached pages of these ranks' files (`files` per rank, or {rank: files}); objects
    have none on this host."""
    if isinstance(folder, ObjectPlace):
        return
    for rank in ranks:
        for path in _paths(folder, tag, rank, files[rank] if isinstance(files, dict) else files):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def remove(folder: str | ObjectPlace, tag: str, ranks: list[int], files: int | dict[int, int]) -> None:
    if isinstance(folder, ObjectPlace):
        folder.remove([k for rank in ranks for k in _keys(tag, rank, files[rank] if isinstance(files, dict) else files)])
        return
    for rank in ranks:
        for path in _paths(folder, tag, rank, files[rank] if isinstance(files, dict) else files):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def summarize(kind: str, index: int, shards: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    """One checkpoint write or read: bytes, seconds (first start to last end), GB/s (10^9 B/s,
    DLIO's "GB/second" is checkpoint size / duration), and the slowest rank."""
    total = sum(s["bytes"] for s in shards)
    slowest = max(shards, key=lambda s: s["seconds"])
    return {"kind": kind, "index": index, "writers": len(shards), "bytes": total,
            "seconds": round(wall_s, 6), "gb_per_s": round(total / wall_s / 1e9, 6) if wall_s > 0 else None,
            "bytes_per_s": total / wall_s if wall_s > 0 else None,
            "slowest_rank": slowest["rank"], "slowest_rank_seconds": round(slowest["seconds"], 6),
            "fastest_rank_seconds": round(min(s["seconds"] for s in shards), 6)}
