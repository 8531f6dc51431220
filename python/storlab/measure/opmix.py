"""The operation-mix phase of `storlab meta --mix` (after elbencho's and warp's mixed workloads):
each thread draws reads, writes, stats, deletes and listings of its own files at set percentages
and times every operation; the result has the keys of an engine meta phase plus `mix`, the
count, share, rate and latency of each operation (docs/meta.md).

The operations are system calls made from Python threads (os.open, os.pread, os.pwrite,
os.stat, os.unlink, os.scandir), as suites/io500/mdworkbench.py makes md-workbench's: the
engine's metadata run (crates/storlab-core/src/meta) runs one kind of operation per phase. A
delete re-creates its file at once (timed apart, as `recreate`), so the tree keeps every file
create made and the engine's later phases and clean-up find exactly what they expect.
`OpMixRun` offers the phase interface of the engine's `MetaRun` (start, wait, interrupt,
progress, result_json) so MetaBenchmark, its hooks and the MPI orchestrator drive it unchanged.

On an s3://BUCKET/PREFIX target `ObjectMixRun` draws the same mix over objects named as the files
(`ObjectMixLayout`: the keys under the prefix are the paths under the working folder), through
the engine's S3 client (storlab._core.ObjectStore, the GIL released in each request): read =
GET of the whole object, write = PUT, stat = a LIST of the key (S3 has no stat; a HEAD is not in
the client), delete = DELETE then a PUT re-creating it (timed apart as `recreate`, as locally),
list = LIST of the leaf's prefix. `make_objects` and `remove_objects` put and remove the objects
the mix draws from when no create phase made them.
"""
from __future__ import annotations

import array
import bisect
import json
import math
import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from . import stats

__all__ = ["DEFAULT_MIX_OPS", "MixLayout", "OpMixRun", "merge_mix", "ObjectMixLayout", "ObjectMixRun",
           "open_object_store", "make_objects", "remove_objects"]

DEFAULT_MIX_OPS = 10_000      # operations per thread when neither mix_ops nor mix_time is given
RECREATE = "recreate"         # the re-create that follows each delete: reported, not drawn
_FILE_MODE = 0o644


@dataclass(frozen=True)
class MixLayout:
    """Where the engine put each thread's files (crates/storlab-core/src/meta/names.rs):
    unique `{prefix}w{w}/d{a}/d{b}/{prefix}f{w}.{i}`, shared `shared/d{a}/d{b}/{prefix}f{w}.{i}`;
    item i lives in leaf i mod fanout^depth."""
    workdir: str
    dir_mode: str
    depth: int
    fanout: int
    prefix: str

    def leaf_dir(self, worker: int, item: int) -> str:
        root = f"{self.prefix}w{worker}" if self.dir_mode == "unique" else "shared"
        parts = [self.workdir, root]
        if self.depth:
            leaf = item % self.fanout ** self.depth
            parts += [f"d{(leaf // self.fanout ** level) % self.fanout}" for level in range(self.depth - 1, -1, -1)]
        return os.path.join(*parts)

    def file(self, worker: int, item: int) -> str:
        return os.path.join(self.leaf_dir(worker, item), f"{self.prefix}f{worker}.{item}")


@dataclass(frozen=True)
class ObjectMixLayout:
    """MixLayout's names as keys under an object store's prefix (`store`: storlab._core.ObjectStore):
    the working folder is the prefix, a leaf folder a key prefix ending in '/'."""
    store: Any
    dir_mode: str
    depth: int
    fanout: int
    prefix: str

    def leaf_dir(self, worker: int, item: int) -> str:
        return MixLayout("", self.dir_mode, self.depth, self.fanout, self.prefix).leaf_dir(worker, item) + "/"

    def file(self, worker: int, item: int) -> str:
        return MixLayout("", self.dir_mode, self.depth, self.fanout, self.prefix).file(worker, item)


def open_object_store(url: str, endpoint: str | None = None, insecure: bool = False, virtual_host: bool = False,
                      connections: int = 8) -> Any:
    """The objects of an s3:// target (storlab._core.ObjectStore); a bad URL, endpoint or missing
    credentials raise storlab's TargetError in one line."""
    from .. import _core
    from ..errors import from_core

    try:
        return _core.ObjectStore(url, endpoint=endpoint, insecure=insecure, virtual_host=virtual_host,
                                 connections=connections)
    except _core.CoreError as e:
        raise from_core(*e.args) from None


def _object_call(layout: ObjectMixLayout, fn: str, *args: Any) -> Any:
    from .. import _core
    from ..errors import from_core

    try:
        return getattr(layout.store, fn)(*args)
    except _core.CoreError as e:
        raise from_core(*e.args) from None


def make_objects(layout: ObjectMixLayout, items_per_worker: Sequence[int], data: bytes) -> None:
    """PUT every object the mix draws from (worker w's items 0..n-1), `data` each."""
    for w, n in enumerate(items_per_worker):
        for i in range(n):
            _object_call(layout, "put", layout.file(w, i), data)


def remove_objects(layout: ObjectMixLayout, items_per_worker: Sequence[int]) -> int:
    """DELETE the mix's objects (a thousand a request); how many were asked."""
    keys = [layout.file(w, i) for w, n in enumerate(items_per_worker) for i in range(n)]
    _object_call(layout, "delete_many", keys)
    return len(keys)


class MixFailure(Exception):
    """A failed operation: its one-line description (the path, the call, the OS error)."""


def _failed(op: str, path: str, step: str, e: OSError) -> MixFailure:
    return MixFailure(f"mix {op} of {path} failed at {step}: {e.strerror} (os error {e.errno})")


@dataclass
class ThreadTally:
    """One thread's counts and latencies (ns) per operation; only that thread writes them."""
    lat_ns: dict[str, array.array] = field(default_factory=dict)
    done: int = 0
    read_bytes: int = 0
    write_bytes: int = 0
    start_s: float = 0.0
    end_s: float = 0.0

    def record(self, op: str, started_ns: int) -> None:
        self.lat_ns.setdefault(op, array.array("q")).append(time.perf_counter_ns() - started_ns)


class OpMixRun:
    """One mix phase over the files create made (`items_per_worker`: how many each thread has)."""

    def __init__(self, values: Mapping[str, Any], layout: MixLayout, items_per_worker: Sequence[int],
                 rank: int = 0) -> None:
        self.mix: dict[str, float] = dict(values["mix"])
        self.ops = [op for op in self.mix if self.mix[op] > 0]
        total = 0.0
        self.thresholds = []       # cumulative percentages: a draw x in [0, 100) picks the first above x
        for op in self.ops:
            total += self.mix[op]
            self.thresholds.append(total)
        self.thresholds[-1] = math.inf
        self.layout = layout
        self.items = list(items_per_worker)
        self.limit_ops = values.get("mix_ops") or (None if values.get("mix_time") else DEFAULT_MIX_OPS)
        self.limit_s = values.get("mix_time")
        self.file_size = int(values["file_size"])
        self.fsync = bool(values["fsync_files"])
        self.seed = int(values["seed"])
        self.rank = rank
        self.data = random.Random(self.seed).randbytes(self.file_size)
        self.tallies = [ThreadTally() for _ in self.items]
        self.stop_event = threading.Event()
        self.error: str | None = None
        self.interrupted = False
        self.t0 = 0.0
        self.start_unix_s = 0.0
        self.threads: list[threading.Thread] = []
        self.barrier = threading.Barrier(len(self.items), action=self._released)

    # -- the phase interface of the engine's MetaRun ------------------------------------------------
    def start(self) -> None:
        self.threads = [threading.Thread(target=self._work, args=(w,), name=f"storlab-mix-{w}", daemon=True)
                        for w in range(len(self.items))]
        for t in self.threads:
            t.start()

    def wait(self, timeout_s: float) -> bool:
        end = time.monotonic() + timeout_s
        for t in self.threads:
            t.join(max(0.0, end - time.monotonic()))
        return not self.running

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self.threads)

    def interrupt(self) -> None:
        self.interrupted = True
        self.stop_event.set()

    def progress(self) -> tuple[str, int, int, float, int]:
        elapsed = time.perf_counter() - self.t0 if self.t0 else 0.0
        return ("mix", 0, sum(t.done for t in self.tallies), elapsed, len(self.items))

    def result_json(self) -> str:
        return json.dumps(self.result())

    # -- the threads ---------------------------------------------------------------------------------
    def _released(self) -> None:
        self.t0 = time.perf_counter()
        self.start_unix_s = time.time()

    def _work(self, w: int) -> None:
        tally = self.tallies[w]
        # a stream of its own per thread and rank, repeatable with --seed
        rng = random.Random(self.seed * 1_000_003 + self.rank * 65_537 + w)
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            return
        tally.start_s = time.perf_counter() - self.t0
        deadline = None if self.limit_s is None else self.t0 + self.limit_s
        files = self.items[w]
        try:
            while files and not self.stop_event.is_set():
                if self.limit_ops is not None and tally.done >= self.limit_ops:
                    break
                if deadline is not None and time.perf_counter() >= deadline:
                    break
                op = self.ops[bisect.bisect_right(self.thresholds, rng.random() * 100)]
                item = rng.randrange(files)
                getattr(self, "_" + op)(tally, w, item)
                tally.done += 1
        except MixFailure as e:
            if self.error is None:
                self.error = str(e)
            self.stop_event.set()
        tally.end_s = time.perf_counter() - self.t0

    @staticmethod
    def _open(op: str, path: str, flags: int) -> int:
        try:
            return os.open(path, flags, _FILE_MODE)
        except OSError as e:
            raise _failed(op, path, "open", e) from None

    def _read(self, tally: ThreadTally, w: int, item: int) -> None:
        path = self.layout.file(w, item)
        started = time.perf_counter_ns()
        fd = self._open("read", path, os.O_RDONLY)
        try:
            got = 0
            while got < self.file_size:
                chunk = os.pread(fd, self.file_size - got, got)
                if not chunk:
                    break
                got += len(chunk)
        except OSError as e:
            raise _failed("read", path, "read", e) from None
        finally:
            os.close(fd)
        tally.record("read", started)
        tally.read_bytes += got

    def _put(self, tally: ThreadTally, op: str, path: str, flags: int) -> None:
        """Open with `flags`, write the file's bytes from offset 0 (fsync with --fsync-files),
        close: a write, or the re-create after a delete; timed as `op`."""
        started = time.perf_counter_ns()
        fd = self._open(op, path, flags)
        view, done = memoryview(self.data), 0
        try:
            while done < self.file_size:
                done += os.pwrite(fd, view[done:], done)
            if self.fsync:
                os.fsync(fd)
        except OSError as e:
            raise _failed(op, path, "write", e) from None
        finally:
            os.close(fd)
        tally.record(op, started)
        tally.write_bytes += self.file_size

    def _write(self, tally: ThreadTally, w: int, item: int) -> None:
        self._put(tally, "write", self.layout.file(w, item), os.O_WRONLY)

    def _stat(self, tally: ThreadTally, w: int, item: int) -> None:
        path = self.layout.file(w, item)
        started = time.perf_counter_ns()
        try:
            os.stat(path, follow_symlinks=False)
        except OSError as e:
            raise _failed("stat", path, "stat", e) from None
        tally.record("stat", started)

    def _delete(self, tally: ThreadTally, w: int, item: int) -> None:
        path = self.layout.file(w, item)
        started = time.perf_counter_ns()
        try:
            os.unlink(path)
        except OSError as e:
            raise _failed("delete", path, "unlink", e) from None
        tally.record("delete", started)
        self._put(tally, RECREATE, path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)

    def _list(self, tally: ThreadTally, w: int, item: int) -> None:
        path = self.layout.leaf_dir(w, item)
        started = time.perf_counter_ns()
        try:
            with os.scandir(path) as entries:
                for _ in entries:
                    pass
        except OSError as e:
            raise _failed("list", path, "scandir", e) from None
        tally.record("list", started)

    # -- the result ----------------------------------------------------------------------------------
    def result(self) -> dict[str, Any]:
        seconds = max((t.end_s for t in self.tallies), default=0.0)
        stop_reason = "error" if self.error else "interrupted" if self.interrupted else "done"
        operations = {}
        for op in (*self.mix, RECREATE):
            values = [v for t in self.tallies for v in t.lat_ns.get(op, ())]
            operations[op] = (stats.histogram(values), (min(values), max(values)) if values else None)
        drawn = sum(stats.count(operations[op][0]) for op in self.mix)
        mix = {"asked": self.mix, "files_per_worker": self.items, "limit_ops": self.limit_ops,
               "limit_s": self.limit_s, "operations": _operation_rows(operations, seconds)}
        together = stats.merge(*(operations[op][0] for op in self.mix))
        ends = [operations[op][1] for op in self.mix if operations[op][1]]
        nbytes = sum(t.read_bytes + t.write_bytes for t in self.tallies)
        return {
            "name": "mix", "complete": stop_reason == "done", "stop_reason": stop_reason, "error": self.error,
            "ops": drawn, "seconds": seconds, "ops_per_s": drawn / seconds if seconds > 0 else 0.0,
            "lat_ns": _latency(together, ends), "lat_hist": {"scheme": stats.SCHEME, "buckets": together},
            "items_per_worker": [t.done for t in self.tallies], "stonewalled": False, "stonewall_s": None,
            "bytes": nbytes, "bw_bytes": nbytes / seconds if seconds > 0 else 0.0,
            "start_unix_s": self.start_unix_s,
            "workers": [{"id": w, "target": self.layout.leaf_dir(w, 0), "start_s": t.start_s, "end_s": t.end_s,
                         "ops": t.done, "stonewalled": False,
                         "read_bytes": t.read_bytes, "read_ops": len(t.lat_ns.get("read", ())),
                         "write_bytes": t.write_bytes,
                         "write_ops": len(t.lat_ns.get("write", ())) + len(t.lat_ns.get(RECREATE, ()))}
                        for w, t in enumerate(self.tallies)],
            "mix": mix,
        }


class ObjectMixRun(OpMixRun):
    """The mix over objects (ObjectMixLayout): each operation one or two S3 requests."""

    def _request(self, op: str, key: str, call: str, *args: Any) -> Any:
        from .. import _core

        try:
            return getattr(self.layout.store, call)(*args)
        except _core.CoreError as e:
            raise MixFailure(f"mix {op} of {key} failed: {e.args[1]}") from None

    def _read(self, tally: ThreadTally, w: int, item: int) -> None:
        key = self.layout.file(w, item)
        started = time.perf_counter_ns()
        got = len(self._request("read", key, "get", key, 0, self.file_size, True))   # empty objects too: a GET
        tally.record("read", started)
        tally.read_bytes += got

    def _put_object(self, tally: ThreadTally, op: str, key: str) -> None:
        started = time.perf_counter_ns()
        self._request(op, key, "put", key, self.data)
        tally.record(op, started)
        tally.write_bytes += self.file_size

    def _write(self, tally: ThreadTally, w: int, item: int) -> None:
        self._put_object(tally, "write", self.layout.file(w, item))

    def _stat(self, tally: ThreadTally, w: int, item: int) -> None:
        key = self.layout.file(w, item)
        started = time.perf_counter_ns()
        if self._request("stat", key, "size_of", key) is None:
            raise MixFailure(f"mix stat of {key} failed: no such object at {self.layout.store.url}")
        tally.record("stat", started)

    def _delete(self, tally: ThreadTally, w: int, item: int) -> None:
        key = self.layout.file(w, item)
        started = time.perf_counter_ns()
        self._request("delete", key, "delete", key)
        tally.record("delete", started)
        self._put_object(tally, RECREATE, key)

    def _list(self, tally: ThreadTally, w: int, item: int) -> None:
        prefix = self.layout.leaf_dir(w, item)
        started = time.perf_counter_ns()
        self._request("list", prefix, "list", prefix)
        tally.record("list", started)


def _latency(buckets: list[list[int]], ends: Sequence[Sequence[int]]) -> dict[str, Any]:
    """The summary of a histogram, clamped to the exact extremes when known; zeros when empty
    (as the engine reports a phase without operations)."""
    if not buckets:
        return dict.fromkeys(("min", "mean", "stddev", "p50", "p90", "p99", "p999", "max"), 0)
    lo = min(e[0] for e in ends) if ends else None
    hi = max(e[1] for e in ends) if ends else None
    return stats.summary(buckets, lo, hi)


def _operation_rows(operations: Mapping[str, tuple[list[list[int]], tuple[int, int] | None]],
                    seconds: float) -> dict[str, Any]:
    """Per operation, from its buckets and exact (min, max): ops, its share of the drawn ones
    (recreate: none, it is not drawn), rate over the phase's time, latency summary and buckets."""
    counts = {op: stats.count(buckets) for op, (buckets, _) in operations.items()}
    drawn = sum(n for op, n in counts.items() if op != RECREATE)
    return {op: {"ops": counts[op],
                 "share": None if op == RECREATE else (counts[op] / drawn if drawn else 0.0),
                 "ops_per_s": counts[op] / seconds if seconds > 0 else 0.0,
                 "lat_ns": _latency(buckets, [ends] if ends else []),
                 "lat_hist": {"scheme": stats.SCHEME, "buckets": buckets}}
            for op, (buckets, ends) in operations.items()}


def merge_mix(parts: Sequence[Mapping[str, Any]], seconds: float) -> dict[str, Any]:
    """The `mix` section over several ranks' mix phases: counts summed, histograms added
    (exact), extremes kept, shares and rates over the merged phase's `seconds`."""
    first = parts[0]
    operations = {}
    for op in first["operations"]:
        rows = [p["operations"][op] for p in parts if p["operations"][op]["ops"]]
        buckets = stats.merge(*(r["lat_hist"]["buckets"] for r in rows))
        ends = (min(r["lat_ns"]["min"] for r in rows), max(r["lat_ns"]["max"] for r in rows)) if rows else None
        operations[op] = (buckets, ends)
    return {"asked": first["asked"], "files_per_worker": [n for p in parts for n in p["files_per_worker"]],
            "limit_ops": first["limit_ops"], "limit_s": first["limit_s"],
            "operations": _operation_rows(operations, seconds)}
