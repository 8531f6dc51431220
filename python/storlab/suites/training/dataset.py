"""The training dataset on disk: generated in parallel, described by a manifest, reused when it
matches, regenerated when it was left half-written, and never written outside its folder.

Layout (DLIO's names): FOLDER/train/[SUB/]PREFIX_I_of_N.FORMAT, I zero-padded, SUB = I mod
subfolders; the evaluation files (dataset.eval_files) likewise under FOLDER/valid/. Beside
them FOLDER/.storlab-dataset.json (the manifest: the parameters and, per file, its size and
where its samples lie) is written only once every file is complete; while files
are being written FOLDER/.storlab-dataset.partial exists. So:
- manifest present, same parameters, every file of its recorded size: reused;
- marker present, or manifest of other parameters, or a file missing or of another size: the
  dataset is regenerated (it is storlab's own: the manifest or the marker says so);
- a folder holding anything else (files storlab did not name) is refused, naming one of them.
Sample contents are random bytes (numpy's generator seeded per file from dataset.seed), so
compression or deduplication gain nothing, as in DLIO.
"""
from __future__ import annotations

import json
import os
import re
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

from ...errors import UserError
from ...jobs.workload import DatasetSpec
from .formats import FORMATS, FileLayout

__all__ = ["Dataset", "DatasetError", "prepare", "file_names", "drop_cached", "MANIFEST", "PARTIAL"]

MANIFEST = ".storlab-dataset.json"
PARTIAL = ".storlab-dataset.partial"
SPLITS = ("train", "valid")
MANIFEST_VERSION = 1


class DatasetError(UserError):
    """A dataset folder storlab may not use (it holds other files, or is not a folder)."""


@dataclass
class Dataset:
    """A complete dataset: its folder, parameters and per-file layout."""
    folder: str
    spec: DatasetSpec
    paths: list[str]                 # absolute, index = file number
    layouts: list[FileLayout]        # the training files, then the evaluation files
    generated: bool                  # written by this run (False: reused)
    regenerated_because: str | None = None
    seconds: float = 0.0

    def layout_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per file: data offset, sample stride and sample length, as arrays (computed once)."""
        if getattr(self, "_arrays", None) is None:
            lay = self.layouts
            self._arrays = tuple(np.array([getattr(x, k) for x in lay], dtype=np.int64)
                                 for k in ("data_offset", "stride", "length"))
        return self._arrays

    def files_on_disk(self) -> list[str]:
        """Every file of the dataset: the data files and the files they come with (index files)."""
        return [p for path in self.paths for p in (path, *companion_paths(self.spec, path))]

    @property
    def train_files(self) -> int:
        return self.spec.files

    @property
    def bytes(self) -> int:
        return sum(lay.size for lay in self.layouts)

    def record(self) -> dict[str, Any]:
        return {"folder": self.folder, "format": self.spec.format, "files": self.spec.files,
                "eval_files": self.spec.eval_files,
                "samples_per_file": self.spec.samples_per_file, "record_length": self.spec.record_length,
                "record_length_stdev": self.spec.record_length_stdev, "bytes": self.bytes,
                "generated": self.generated, "regenerated_because": self.regenerated_because,
                "generation_seconds": round(self.seconds, 3)}


def _params(spec: DatasetSpec) -> dict[str, Any]:
    d = asdict(spec)
    d.pop("folder")
    d.pop("record_length_resize")
    if spec.format != "parquet":
        d.pop("parquet")                # manifests written before parquet existed still match
    for key in ("file_size", "eval_files", "eval_subfolders"):
        if not d[key]:
            d.pop(key)                  # manifests written before these fields existed still match
    return d


def file_names(spec: DatasetSpec) -> list[str]:
    """Relative paths of the dataset's files, as DLIO names them: the training files, then
    the evaluation files."""
    ext = FORMATS[spec.format].extension
    out = []
    for split, n, subfolders in (("train", spec.files, spec.subfolders), ("valid", spec.eval_files, spec.eval_subfolders)):
        digits = len(str(n))
        sub_digits = len(str(subfolders)) if subfolders else 0
        for i in range(n):
            name = f"{spec.file_prefix}_{str(i).rjust(digits, '0')}_of_{n}.{ext}"
            if subfolders:
                out.append(os.path.join(split, str(i % subfolders).rjust(sub_digits, "0"), name))
            else:
                out.append(os.path.join(split, name))
    return out


def record_lengths(spec: DatasetSpec) -> list[int]:
    """Each file's sample length: the mean, or normal(mean, stdev) per file clipped to >= 1 byte
    and <= mean + 3 stdev (DLIO draws one size per file too), and so that a file's records stay
    within dataset.file_size when that is set."""
    total = spec.files + spec.eval_files
    if not spec.record_length_stdev:
        return [spec.record_length] * total
    rng = np.random.default_rng(spec.seed)
    draws = rng.normal(spec.record_length, spec.record_length_stdev, total)
    hi = spec.record_length + 3 * spec.record_length_stdev
    if spec.file_size:
        hi = min(hi, spec.file_size // spec.samples_per_file)
    return [int(min(hi, max(1, round(x)))) for x in draws]


# A file of a storlab dataset: a data file of any format, or a side file of one
_OURS = re.compile(r"^[^/]+_\d+_of_\d+\.(" + "|".join(
    re.escape(f.extension) + ("(" + "|".join(re.escape(x) for x in f.side_suffixes) + ")?" if f.side_suffixes else "")
    for f in FORMATS.values()) + ")$")


def companion_paths(spec: DatasetSpec, path: str) -> list[str]:
    """Files a data file of this format comes with (indexed_binary: its two index files)."""
    return FORMATS[spec.format].side_paths(path)


def _foreign_entry(folder: str) -> str | None:
    """The first entry of the folder that storlab's dataset layout does not explain, or None."""
    for entry in sorted(os.listdir(folder)):
        full = os.path.join(folder, entry)
        if entry in (MANIFEST, PARTIAL):
            continue
        if entry in SPLITS and os.path.isdir(full) and not os.path.islink(full):
            for root, dirs, files in os.walk(full):
                for d in dirs:
                    if os.path.islink(os.path.join(root, d)) or not d.isdigit():
                        return os.path.relpath(os.path.join(root, d), folder)
                for f in files:
                    if not _OURS.match(f) and not f.startswith(".tmp-"):
                        return os.path.relpath(os.path.join(root, f), folder)
            continue
        return entry
    return None


def _check_folder(folder: str) -> tuple[bool, dict[str, Any] | None, bool]:
    """(exists, manifest or None, partial marker present); refuses a folder holding other files."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return False, None, False
    if stat.S_ISLNK(st.st_mode):
        st = os.stat(folder)
    if not stat.S_ISDIR(st.st_mode):
        raise DatasetError(f"dataset.folder: {folder} is not a folder")
    manifest = None
    try:
        with open(os.path.join(folder, MANIFEST), encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        pass
    except (OSError, ValueError):
        manifest = {"broken": True}
    partial = os.path.exists(os.path.join(folder, PARTIAL))
    foreign = _foreign_entry(folder)
    if foreign is not None or (manifest is None and not partial and os.listdir(folder)):
        shown = foreign or sorted(os.listdir(folder))[0]
        raise DatasetError(f"dataset.folder: {folder} holds files storlab did not write (e.g. {shown}); "
                           "name an empty or new folder, or one holding a storlab dataset")
    return True, manifest, partial


def _matches(manifest: dict[str, Any], spec: DatasetSpec, folder: str, names: list[str]) -> str | None:
    """None when the manifest describes this dataset and the files agree; else why not."""
    if manifest.get("broken") or manifest.get("version") != MANIFEST_VERSION:
        return "the manifest is unreadable"
    if manifest.get("params") != _params(spec):
        diff = [k for k, v in _params(spec).items() if manifest.get("params", {}).get(k) != v]
        return f"its parameters differ ({', '.join(diff)})"
    files = manifest.get("files") or []
    if [f[0] for f in files] != names:
        return "its file list differs"
    for rel, size, *_ in files:
        path = os.path.join(folder, rel)
        side = FORMATS[spec.format].side_bytes(spec.samples_per_file)
        expected = [(path, size)] + [(c, side) for c in companion_paths(spec, path)]
        for p, want in expected:
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                return f"{os.path.relpath(p, folder)} is missing"
            if not stat.S_ISREG(st.st_mode) or st.st_size != want:
                return f"{os.path.relpath(p, folder)} is not of its recorded size"
    return None


def _safe_path(folder_real: str, rel: str) -> str:
    path = os.path.join(folder_real, rel)
    parent = os.path.realpath(os.path.dirname(path))
    if os.path.commonpath([parent, folder_real]) != folder_real:
        raise DatasetError(f"dataset.folder: {rel} would be written outside {folder_real}; refused")
    return path


def prepare(spec: DatasetSpec, *, threads: int = 0, comm: Any = None,
            notify: Callable[[str], None] | None = None, stop: threading.Event | None = None) -> Dataset:
    """The dataset of `spec`, reused or generated. Under MPI (`comm`: rank, size, barrier, bcast,
    gather) every rank calls this: rank 0 decides and marks, ranks write files i with
    i mod ranks == rank, rank 0 writes the manifest."""
    import time

    rank, ranks = (comm.rank, comm.size) if comm is not None else (0, 1)
    barrier = comm.barrier if comm is not None else (lambda: None)
    fmt = FORMATS[spec.format]
    missing = fmt.missing()
    if missing:
        others = [f.name for f in FORMATS.values() if not f.requires]
        raise DatasetError(f"dataset.format: {fmt.name} files are written with {missing}, which is not installed; "
                           f"pip install 'storlab[workload]' (or {fmt.package or missing}), or use {', '.join(others)}")

    folder = os.path.abspath(spec.folder)
    names = file_names(spec)
    lengths = record_lengths(spec)
    verdict = None
    if rank == 0:
        exists, manifest, partial = _check_folder(folder)
        why = None
        if manifest is not None and not partial:
            why = _matches(manifest, spec, folder, names)
            if why is None:
                verdict = "reuse"
        elif partial:
            why = "a previous generation did not finish"
        verdict = verdict or "generate"
        if verdict == "generate":
            _check_room(folder, spec, lengths)
            os.makedirs(folder, exist_ok=True)
            _mark_partial(folder)
            if why and notify:
                notify(f"dataset {folder}: regenerated: {why}")
        decision = {"verdict": verdict, "why": why}
    else:
        decision = None
    decision = comm.bcast(decision) if ranks > 1 else decision
    folder_real = os.path.realpath(folder)
    t0 = time.monotonic()
    if decision["verdict"] == "reuse":
        manifest = _read_manifest(folder)
        layouts = [FileLayout(*f[1:5]) for f in manifest["files"]]
        return Dataset(folder, spec, [os.path.join(folder, n) for n in names], layouts, False)
    mine = list(range(rank, len(names), ranks))
    write = fmt.writer_for(spec)
    layouts: dict[int, FileLayout] = {}
    workers = max(1, threads or min(8, os.cpu_count() or 1))
    if not fmt.streamed:                # each worker holds a file's samples in memory
        per_file = IN_MEMORY_COPIES * spec.samples_per_file * max(lengths)
        workers = max(1, min(workers, _memory_available() // max(1, per_file)))

    def one(i: int) -> None:
        if stop is not None and stop.is_set():
            return
        path = _safe_path(folder_real, names[i])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        rng = np.random.default_rng([spec.seed, i])
        tmp = os.path.join(os.path.dirname(path), f".tmp-{os.path.basename(path)}")
        companions = companion_paths(spec, path)
        tmp_companions = [os.path.join(os.path.dirname(c), f".tmp-{os.path.basename(c)}") for c in companions]
        lay = write(tmp, spec.samples_per_file, lengths[i], rng, tmp_companions)
        for target in (*companions, path):
            if os.path.islink(target):
                raise DatasetError(f"dataset.folder: {os.path.relpath(target, folder_real)} is a symbolic link; refused")
        for t, target in zip(tmp_companions, companions):
            os.replace(t, target)
        os.replace(tmp, path)           # the data file last: its index files are in place before it
        layouts[i] = lay

    pool = ThreadPoolExecutor(max_workers=workers)
    futures = [pool.submit(one, i) for i in mine]
    try:
        for fut in futures:
            fut.result()
    except BaseException:            # Ctrl-C or a failed file: stop queued files; the marker stays
        for fut in futures:
            fut.cancel()
        pool.shutdown(wait=True)
        raise
    pool.shutdown(wait=True)
    if stop is not None and stop.is_set():
        raise KeyboardInterrupt
    gathered = layouts
    if ranks > 1:
        gathered = {}
        for part in comm.gather(layouts) or []:
            gathered.update(part)
    if rank == 0:
        files = [[names[i], *asdict(gathered[i]).values()] for i in range(len(names))]
        _remove_stale(folder, {os.path.relpath(p, folder) for n in names
                               for p in (os.path.join(folder, n), *companion_paths(spec, os.path.join(folder, n)))})
        _write_manifest(folder, {"version": MANIFEST_VERSION, "params": _params(spec), "files": files})
        os.unlink(os.path.join(folder, PARTIAL))
    barrier()
    all_layouts = [gathered[i] for i in range(len(names))] if rank == 0 else \
        [FileLayout(*f[1:5]) for f in _read_manifest(folder)["files"]]
    return Dataset(folder, spec, [os.path.join(folder, n) for n in names], all_layouts, True,
                   decision["why"], time.monotonic() - t0)


IN_MEMORY_COPIES = 3          # a file's samples, its framed copy (tfrecord) and the writer's buffers


def _memory_available() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def _check_room(folder: str, spec: DatasetSpec, lengths: list[int]) -> None:
    """Refuse, before a byte is written, a dataset that cannot fit the file system (its free
    space plus what an earlier dataset here occupies), or a file too large to generate in memory."""
    fmt = FORMATS[spec.format]
    side = len(fmt.side_suffixes) * fmt.side_bytes(spec.samples_per_file)
    need = spec.samples_per_file * sum(lengths) + side * len(lengths)
    probe = folder
    while not os.path.exists(probe):    # a folder not made yet: the file system it would be on
        probe = os.path.dirname(probe)
    st = os.statvfs(probe)
    free = st.f_bavail * st.f_frsize
    for root, _dirs, files in (w for split in SPLITS for w in os.walk(os.path.join(folder, split))):
        for f in files:
            try:
                free += os.lstat(os.path.join(root, f)).st_blocks * 512
            except OSError:
                pass
    if need > free:
        raise DatasetError(f"dataset: {len(lengths)} files x {spec.samples_per_file} samples x {spec.record_length} B "
                           f"= {need} B do not fit the {free} B free in {folder}; use fewer dataset.files (--scale), "
                           "fewer dataset.samples_per_file, or another dataset.folder")
    if fmt.streamed:
        return
    per_sample = IN_MEMORY_COPIES * max(lengths)
    avail = _memory_available()
    if spec.samples_per_file * per_sample > avail:
        raise DatasetError(f"dataset.samples_per_file: {spec.samples_per_file} is not allowed: a {spec.format} file of "
                           f"{spec.samples_per_file} x {max(lengths)} B is generated in memory and {avail} B are "
                           f"available; use 1..{max(1, avail // per_sample)}, or the indexed_binary format")


def _remove_stale(folder: str, keep: set[str]) -> None:
    """Files of an earlier storlab dataset in this folder that the new one does not have."""
    for root, _dirs, files in (w for split in SPLITS for w in os.walk(os.path.join(folder, split))):
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), folder)
            if rel not in keep and (_OURS.match(f) or f.startswith(".tmp-")):
                os.unlink(os.path.join(folder, rel))


def _mark_partial(folder: str) -> None:
    try:
        os.unlink(os.path.join(folder, MANIFEST))
    except FileNotFoundError:
        pass
    with open(os.path.join(folder, PARTIAL), "w", encoding="utf-8") as f:
        f.write("storlab is generating this dataset; an interrupted generation is redone\n")


def _write_manifest(folder: str, manifest: dict[str, Any]) -> None:
    tmp = os.path.join(folder, f".tmp-{MANIFEST}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(folder, MANIFEST))


def _read_manifest(folder: str) -> dict[str, Any]:
    with open(os.path.join(folder, MANIFEST), encoding="utf-8") as f:
        return json.load(f)


def drop_cached(paths: list[str]) -> str:
    """Drop the page-cache pages of the dataset's files (fsync, then posix_fadvise DONTNEED on
    each: only these files, no root needed; tmpfs keeps its pages, which are the storage)."""
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            os.fsync(fd)            # dirty pages are not dropped: write them first
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return "fadvise"
