"""Training emulation: accelerators that wait for batches read from a real dataset and sleep a
computation time per batch, measured as DLIO (MLPerf Storage's engine) measures them.

One emulated accelerator = a consumer thread and `reader.read_threads` reader threads. Reader
thread r reads the batches j with j mod R == r (PyTorch DataLoader workers), each at most
ceil(prefetch / R) batches ahead of the consumer (PyTorch's prefetch_factor, from DLIO's
prefetch_size). A sample read is one pread of its bytes at its offset (os.preadv releases the
GIL; the bytes land in a per-thread buffer and are dropped: decoding is not emulated, as the
compute is a sleep). read_threads = 0: the consumer reads its batch itself.

Per step, as DLIO 2.0's main loop and statscounter: load = wait for the batch; compute = a sleep
of computation_time (normal(mean, stdev) when a stdev is given); then every accelerator meets at
a barrier (DLIO: comm.barrier() after each step); proc = load + compute + barrier. A block is
the steps between checkpoints (one block per epoch without step checkpoints):
    AU(block)         = sum(compute[1:]) / (block wall time - proc[0])     (first step left out)
    samples/s(block)  = steps / block wall time x batch
per accelerator and epoch: step-weighted over blocks; the epoch's AU is the mean over all
accelerators, its samples/s their sum; the run's `au` and `samples_per_s` are means over epochs.
DLIO's "MB/s" = samples/s x record_length / 2^20 (MiB/s of the nominal record length).

Evaluation (DLIO's `evaluation`): after the training epochs it names, each accelerator reads
its share of the eval files (FOLDER/valid/) in batches of evaluation.batch_size and sleeps
evaluation.computation_time per batch, with no barrier between steps (DLIO's _eval has none).
Its AU and samples/s use the training formulas on the evaluation's one block, and are reported
apart (`evaluation`), as DLIO reports eval AU apart: training figures leave evaluation out.
Each evaluation is a row (phase "evaluation", its start and end since the run began) beside the
training epochs (phase "training"), and the time series carries its steps in series of their own
(`eval_au`, `eval_samples_per_s`, and `phase` per interval), never in training's `au`.

A dataset on objects (an s3:// dataset.folder, the storage seam storage.py) is read by
`_ObjectReader` instead: a sample that is its whole object is one GET of it, a sample inside a
larger object one ranged GET of its bytes (transfer_size does not split it: one request per
sample, as DLIO's object readers make), indexed_binary's index objects one GET each, and a
parquet row group the ranged GETs of its column chunks (the footer read with ranged GETs too).

Accelerators: `accelerators` per process (threads); under MPI every rank runs that many, the
barrier spans all of them, and rank 0 merges the figures.
"""
from __future__ import annotations

import io
import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ...jobs.workload import WorkloadSpec
from . import checkpoint as ckpt
from .dataset import Dataset, drop_cached
from .formats import FORMATS, read_index, read_parquet_ranges

__all__ = ["Trainer", "TrainingStopped", "percentiles", "au_of_block"]

_FD_CACHE = 32           # open files kept per reader thread when files hold several samples
_WAIT_POLL_S = 0.2       # how often a waiting thread looks for a stop
_MPI_STOP_S = 120.0      # how long a stopped rank waits for its accelerators to meet the others


class TrainingStopped(Exception):
    """A stop (Ctrl-C, SIGTERM, a failed peer) ended training; completed epochs are kept."""


@dataclass
class Block:
    start: float
    end: float = 0.0
    load: list[float] = field(default_factory=list)
    compute: list[float] = field(default_factory=list)
    proc: list[float] = field(default_factory=list)
    step_end: list[float] = field(default_factory=list)

    def au(self) -> float:
        return au_of_block(self.compute, self.proc, self.end - self.start)

    def throughput(self, batch: int) -> float:
        wall = self.end - self.start
        return len(self.compute) / wall * batch if wall > 0 else 0.0


def au_of_block(compute: list[float], proc: list[float], wall_s: float) -> float:
    """DLIO's AU of one block: compute of every step but the first over the block's wall time
    less the first step's time (0 when nothing was computed)."""
    total = math.fsum(compute[1:])
    if total == 0:
        return 0.0
    return total / (wall_s - proc[0])


def percentiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    a = np.asarray(values)
    return {"p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)),
            "p99": float(np.percentile(a, 99)), "max": float(a.max()), "mean": float(a.mean())}


class _Epoch:
    """The read plan of one epoch (or one evaluation) for one accelerator: its batches of
    (file, offset, length). The files are dataset files first .. first + count - 1."""

    def __init__(self, spec: WorkloadSpec, dataset: Dataset, epoch: int, accel: int, steps: int, batch: int,
                 first: int = 0, count: int = 0, salt: int = 0):
        d, r = spec.dataset, spec.reader
        count = count or d.files
        samples = count * d.samples_per_file
        seed = spec.seed + epoch if spec.train.seed_change_epoch else spec.seed
        rng = np.random.default_rng([seed, salt] if salt else seed)
        order = np.arange(count)
        if r.file_shuffle == "seed":
            order = rng.permutation(count)
        elif r.file_shuffle == "random":
            order = np.random.default_rng().permutation(count)
        per = steps * batch
        k = np.arange(accel * per, (accel + 1) * per) % samples
        if r.sample_shuffle == "seed":
            k = np.random.default_rng([seed, 7 + salt]).permutation(k)
        elif r.sample_shuffle == "random":
            k = np.random.default_rng().permutation(k)
        files = first + order[k // d.samples_per_file]
        within = k % d.samples_per_file
        base, stride, length = dataset.layout_arrays()
        self.file = files.astype(np.int64)
        self.offset = base[files] + within * stride[files]
        self.length = length[files]
        self.batch = batch
        self.steps = steps


class _Reader:
    """Reads samples: one pread per sample (or transfer_size pieces) into a reused buffer.

    indexed_binary (`indexed` = samples per file): before its first sample of a file the reader
    loads the file's offset and size index files, and reads each sample at the offset and of
    the size they give, as DLIO's IndexedBinaryReader does (a reader is made per epoch, as
    DLIO's DataLoader workers are, so the indexes are read again each epoch).

    parquet (`row_group` = rows per row group, -1 for the whole file; `columns_read` = which
    columns): before its first
    sample of a file the reader loads the file's footer, then reads a sample's row group as the
    byte ranges of the columns read; the following samples of the same row group are in memory
    (DLIO's row-group read mode), so they read nothing."""

    def __init__(self, paths: list[str], max_len: int, transfer: int, many_per_file: bool, indexed: int = 0,
                 row_group: int = 0, columns_read: list[bool] | None = None):
        self.paths = paths
        self.buf = memoryview(bytearray(max(1, transfer or max_len)))
        self.transfer = transfer
        self.many = many_per_file
        self.fds: dict[int, int] = {}
        self.indexed = indexed
        self.index: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.row_group = row_group
        self.columns_read = columns_read or []
        self.groups: dict[int, list[list[tuple[int, int]]]] = {}
        self.held: tuple[int, int] | None = None       # the row group in memory: (file, group)

    def read(self, f: int, offset: int, length: int) -> int:
        if self.row_group:
            return self._read_row_group(f, offset // length // self.row_group if self.row_group > 0 else -1)
        if self.indexed:
            if f not in self.index:
                self.index[f] = read_index(self.paths[f], self.indexed)
            offsets, sizes = self.index[f]
            k = offset // length            # the sample's number in its file (back to back)
            offset, length = int(offsets[k]), int(sizes[k])
        fd = self.fds.get(f)
        if fd is None:
            fd = os.open(self.paths[f], os.O_RDONLY | os.O_CLOEXEC)
            if self.many:
                if len(self.fds) >= _FD_CACHE:
                    os.close(self.fds.pop(next(iter(self.fds))))
                self.fds[f] = fd
        try:
            return self._read_range(fd, f, offset, length)
        finally:
            if not self.many:
                os.close(fd)

    def _read_range(self, fd: int, f: int, offset: int, length: int) -> int:
        """`length` bytes at `offset` of file f, in transfer_size pieces (or one call)."""
        done, step = 0, self.transfer or length
        while done < length:
            n = os.preadv(fd, [self.buf[:min(step, length - done)]], offset + done)
            if n <= 0:
                raise OSError(f"{self.paths[f]}: short read at {offset + done} (the dataset changed?)")
            done += n
        return done

    def _read_row_group(self, f: int, g: int) -> int:
        if self.held == (f, g):
            return 0
        if f not in self.groups:
            self.groups[f] = read_parquet_ranges(self.paths[f], self.columns_read)
        ranges = self.groups[f][g] if g >= 0 else [r for group in self.groups[f] for r in group]
        done = sum(self._pread(f, offset, size) for offset, size in ranges)
        self.held = (f, g)
        return done

    def _pread(self, f: int, offset: int, length: int) -> int:
        """One range read into the reused buffer (grown to the range when it is larger)."""
        if len(self.buf) < length and not self.transfer:
            self.buf = memoryview(bytearray(length))
        fd = os.open(self.paths[f], os.O_RDONLY | os.O_CLOEXEC)
        try:
            return self._read_range(fd, f, offset, length)
        finally:
            os.close(fd)

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


class _ObjectFile(io.RawIOBase):
    """An object as a read-only seekable file, each read one ranged GET (pyarrow reads a parquet
    footer through it)."""

    def __init__(self, place, key: str, size: int):
        super().__init__()
        self.place, self.key, self.size, self.pos = place, key, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = max(0, {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence])
        return self.pos

    def readinto(self, b) -> int:
        n = max(0, min(len(b), self.size - self.pos))
        if n:
            b[:n] = self.place.get(self.key, self.pos, n)
            self.pos += n
        return n


class _ObjectReader:
    """_Reader's reads as GETs of the dataset's objects (Dataset.paths are their keys)."""

    def __init__(self, dataset: Dataset, indexed: int = 0, row_group: int = 0, columns_read: list[bool] | None = None):
        self.place = dataset.place
        self.keys = dataset.paths
        self.sizes = [lay.size for lay in dataset.layouts]
        self.indexed = indexed
        self.index: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.row_group = row_group
        self.columns_read = columns_read or []
        self.groups: dict[int, list[list[tuple[int, int]]]] = {}
        self.held: tuple[int, int] | None = None

    def read(self, f: int, offset: int, length: int) -> int:
        if self.row_group:
            return self._read_row_group(f, offset // length // self.row_group if self.row_group > 0 else -1)
        if self.indexed:
            if f not in self.index:
                self.index[f] = tuple(np.frombuffer(self.place.get(k, 0, self.indexed * 8, whole=True), dtype="=i8")
                                      for k in FORMATS["indexed_binary"].side_paths(self.keys[f]))
            offsets, sizes = self.index[f]
            k = offset // length
            offset, length = int(offsets[k]), int(sizes[k])
        return self._get(f, offset, length)

    def _get(self, f: int, offset: int, length: int) -> int:
        data = self.place.get(self.keys[f], offset, length, whole=offset == 0 and length == self.sizes[f])
        if len(data) != length:
            raise OSError(f"{self.place.url}/{self.keys[f]}: {len(data)} bytes at {offset}, not {length} (the dataset changed?)")
        return length

    def _read_row_group(self, f: int, g: int) -> int:
        if self.held == (f, g):
            return 0
        if f not in self.groups:
            footer = io.BufferedReader(_ObjectFile(self.place, self.keys[f], self.sizes[f]), buffer_size=1 << 16)
            self.groups[f] = read_parquet_ranges(footer, self.columns_read)
        ranges = self.groups[f][g] if g >= 0 else [r for group in self.groups[f] for r in group]
        done = sum(self._get(f, offset, size) for offset, size in ranges)
        self.held = (f, g)
        return done

    def close(self) -> None:
        pass


def _reader(dataset: Dataset, max_len: int, transfer: int, many: bool, indexed: int, row_group: int,
            columns: list[bool]) -> _Reader | _ObjectReader:
    """The reader of the dataset's storage: files (pread) or objects (GET)."""
    if dataset.place is not None:
        return _ObjectReader(dataset, indexed, row_group, columns)
    return _Reader(dataset.paths, max_len, transfer, many, indexed, row_group, columns)


class Trainer:
    """Runs the epochs of a workload on a dataset with `local` accelerators in this process."""

    def __init__(self, spec: WorkloadSpec, dataset: Dataset, *, local: int, rank: int = 0, ranks: int = 1,
                 mpi_any: Callable[[bool], bool] | None = None, drop_cache: bool = False,
                 checkpoint_folder: str = "", notify: Callable[[str], None] | None = None):
        self.spec, self.dataset = spec, dataset
        self.local, self.rank, self.ranks = local, rank, ranks
        self.total = local * ranks
        self.steps = spec.steps_per_epoch(self.total)
        self.eval_steps = spec.eval_steps(self.total) if spec.evaluation.enabled else 0
        self.drop_cache = drop_cache
        self.checkpoint_folder = checkpoint_folder
        self.notify = notify or (lambda m: None)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self._mpi_any = mpi_any
        self._agreed = threading.Event()      # every rank knows of the stop: no barrier is met again
        self._barrier = threading.Barrier(local, action=self._barrier_action)
        self.max_len = max(lay.length for lay in dataset.layouts)
        self.epochs: list[dict[str, Any]] = []        # per epoch: per local accelerator its blocks
        self.checkpoints: list[dict[str, Any]] = []
        self._ckpt_shards: list[dict[str, Any]] = []
        self._ckpt_lock = threading.Lock()
        self.t_origin = 0.0
        self.bytes_read = [0] * local

    # -- the run ------------------------------------------------------------------------------------
    def run(self) -> None:
        """All epochs; raises TrainingStopped (after cleaning up) when stopped."""
        self.t_origin = time.monotonic()
        threads = [threading.Thread(target=self._accelerator, args=(i,), name=f"accel-{i}", daemon=True)
                   for i in range(self.local)]
        self._per_accel: list[list[list[Block]]] = [[] for _ in range(self.local)]
        self._evals: list[list[tuple[int, Block]]] = [[] for _ in range(self.local)]
        # each accelerator sets its own event when it ends: Thread.join interrupted by a signal
        # marks a running thread as ended (CPython < 3.13), so is_alive() cannot be trusted then
        self._done = [threading.Event() for _ in range(self.local)]
        for t in threads:
            t.start()
        try:
            for done in self._done:
                while not done.wait(_WAIT_POLL_S):
                    pass
        except BaseException:
            self._halt()
            # under MPI the accelerators first meet the other ranks once more, to tell them of the
            # stop (a rank leaving its barriers alone would leave the others waiting in theirs)
            deadline = time.monotonic() + (_MPI_STOP_S if self._mpi_any else 5)
            for done in self._done:
                while not done.is_set() and time.monotonic() < deadline:
                    try:
                        done.wait(_WAIT_POLL_S)
                    except KeyboardInterrupt:   # a second signal: the handler says it is waited out
                        pass
            raise
        if self.error is not None:
            raise self.error
        if self.stop.is_set():
            raise TrainingStopped()

    def _halt(self) -> None:
        """Stop: at once in one process; under MPI at the next barrier, which every rank meets."""
        self.stop.set()
        if self._mpi_any is None:
            self._barrier.abort()

    def _barrier_action(self) -> None:
        """Run by the last local accelerator to arrive: under MPI, meet the other ranks and learn
        whether any of them stops (an allreduce of the stop flag, the step barrier DLIO calls)."""
        stop = self.stop.is_set()
        if self._mpi_any is not None:
            stop = self._mpi_any(stop)
        if stop:
            self.stop.set()
            self._agreed.set()

    def _wait_barrier(self) -> None:
        if self._agreed.is_set():
            raise TrainingStopped()
        try:
            self._barrier.wait()
        except threading.BrokenBarrierError:
            self.stop.set()
            raise TrainingStopped() from None
        if self._agreed.is_set():
            raise TrainingStopped()

    def _accelerator(self, i: int) -> None:
        try:
            self._train(i)
            self._wait_barrier()        # the end: every accelerator of every rank meets here
        except TrainingStopped:
            self._tell_stop()
        except BaseException as e:      # an I/O error in this accelerator stops all of them
            if self.error is None:
                self.error = e
            self._halt()
            self._tell_stop()
        finally:
            self._done[i].set()

    def _tell_stop(self) -> None:
        """Under MPI, an accelerator that stopped between barriers meets the others once more,
        carrying the stop, so that every rank leaves at the same barrier."""
        if self._mpi_any is None or self._agreed.is_set():
            return
        self.stop.set()
        try:
            self._barrier.wait()
        except threading.BrokenBarrierError:
            pass

    def _train(self, i: int) -> None:
        spec = self.spec
        g = self.rank * self.local + i
        ck = spec.checkpoint
        for epoch in range(1, spec.train.epochs + 1):
            if self.drop_cache:
                self._wait_barrier()
                if i == 0:
                    drop_cached(self.dataset.files_on_disk())
            self._wait_barrier()
            plan = _Epoch(spec, self.dataset, epoch, g, self.steps, spec.reader.batch_size)
            blocks = self._epoch(i, plan, epoch, spec.train.computation_time, spec.train.computation_time_stdev,
                                 barrier=True, steps_between=ck.steps_between if ck.enabled else 0)
            self._per_accel[i].append(blocks)
            if ck.enabled and ck.after_epoch and epoch >= ck.after_epoch and \
                    (epoch - ck.after_epoch) % ck.epochs_between == 0 and not ck.steps_between:
                self._checkpoint(i, f"e{epoch}")
            self._wait_barrier()
            if i == 0:
                self.epochs.append({"epoch": epoch, "end": time.monotonic() - self.t_origin,
                                    "cache_dropped": self.drop_cache})
            if self.eval_steps and spec.evaluates_after(epoch):
                self._evaluate(i, g, epoch)

    def _evaluate(self, i: int, g: int, epoch: int) -> None:
        """DLIO's _eval after a training epoch: this accelerator's share of the eval files, in
        batches of evaluation.batch_size, a sleep of its computation time per batch, no barrier
        between steps; its AU and samples/s are computed as a training block's."""
        spec, ev = self.spec, self.spec.evaluation
        plan = _Epoch(spec, self.dataset, epoch, g, self.eval_steps, ev.batch_size, first=self.dataset.train_files,
                      count=spec.dataset.eval_files, salt=1)
        blocks = self._epoch(i, plan, epoch, ev.computation_time, ev.computation_time_stdev, barrier=False,
                             steps_between=0, salt=1)
        if blocks:
            self._evals[i].append((epoch, blocks[0]))

    def _epoch(self, i: int, plan: _Epoch, epoch: int, t_comp: float, t_sd: float, *, barrier: bool,
               steps_between: int, salt: int = 0) -> list[Block]:
        """The steps of one plan: wait for each batch, sleep its compute, meet at the barrier
        (training only); a checkpoint every steps_between steps ends a block."""
        spec = self.spec
        rng = np.random.default_rng([spec.seed, epoch, self.rank * self.local + i] + ([salt] if salt else []))
        nthreads = spec.reader.read_threads
        many = spec.dataset.samples_per_file > 1
        fmt = FORMATS[spec.dataset.format]
        indexed = spec.dataset.samples_per_file if fmt.indexed else 0
        # rows per row group read at once; -1: the whole file (parquet's read_mode default)
        pq = spec.dataset.parquet
        row_group = (pq.row_group_size if pq.read_mode == "row_group" else -1) if fmt.row_groups else 0
        columns = [c.read for c in spec.dataset.parquet.columns]
        ready = [threading.Event() for _ in range(plan.steps)]
        failures: list[BaseException] = []
        slots: list[threading.Semaphore] = []
        readers: list[threading.Thread] = []
        nbytes = [0]
        count_lock = threading.Lock()

        def read_batch(reader: _Reader, j: int) -> int:
            lo, hi = j * plan.batch, (j + 1) * plan.batch
            return sum(reader.read(int(f), int(o), int(n))
                       for f, o, n in zip(plan.file[lo:hi], plan.offset[lo:hi], plan.length[lo:hi]))

        def worker(r: int) -> None:
            reader = _reader(self.dataset, self.max_len, spec.reader.transfer_size, many, indexed, row_group, columns)
            mine = 0
            try:
                for j in range(r, plan.steps, nthreads):
                    while not slots[r].acquire(timeout=_WAIT_POLL_S):
                        if self.stop.is_set():
                            return
                    if self.stop.is_set():
                        return
                    mine += read_batch(reader, j)
                    ready[j].set()
            except BaseException as e:
                failures.append(e)
                self._halt()
            finally:
                reader.close()
                with count_lock:
                    nbytes[0] += mine

        if nthreads:
            factor = max(1, math.ceil(spec.reader.prefetch / nthreads))
            slots = [threading.Semaphore(factor) for _ in range(nthreads)]
            readers = [threading.Thread(target=worker, args=(r,), daemon=True) for r in range(nthreads)]
        own = None if nthreads else _reader(self.dataset, self.max_len, spec.reader.transfer_size, many, indexed, row_group,
                                            columns)
        blocks = [Block(time.monotonic())]          # DLIO starts the block before the loader
        for t in readers:
            t.start()
        try:
            t0 = time.monotonic()
            for j in range(plan.steps):
                if own is not None:
                    nbytes[0] += read_batch(own, j)
                else:
                    while not ready[j].wait(_WAIT_POLL_S):
                        if self.stop.is_set():
                            raise TrainingStopped()
                    slots[j % nthreads].release()
                if self.stop.is_set():
                    raise TrainingStopped()
                now = time.monotonic()
                block = blocks[-1]
                block.load.append(now - t0)
                c = max(0.0, float(rng.normal(t_comp, t_sd))) if t_sd > 0 else t_comp
                if c > 0:
                    time.sleep(c)
                block.compute.append(c)
                if barrier:
                    self._wait_barrier()
                now = time.monotonic()
                block.proc.append(now - t0)
                block.step_end.append(now - self.t_origin)
                if steps_between and (j + 1) % steps_between == 0 and j + 1 < plan.steps:
                    block.end = now
                    self._checkpoint(i, f"e{epoch}s{j + 1}")
                    blocks.append(Block(time.monotonic()))
                t0 = time.monotonic()
            blocks[-1].end = time.monotonic()
        finally:
            if failures:
                self.stop.set()
            for t in readers:
                t.join()
            if own is not None:
                own.close()
            self.bytes_read[i] += nbytes[0]
        if failures:
            raise failures[0]
        return [b for b in blocks if b.compute]

    # -- checkpoints during training ----------------------------------------------------------------
    def _checkpoint(self, i: int, tag: str) -> None:
        ck = self.spec.checkpoint
        g = self.rank * self.local + i
        writers = ckpt.writer_count(ck, self.total)
        self._wait_barrier()
        t0 = time.monotonic()
        sizes = ckpt.file_bytes(ck, g, writers) if g < writers else []
        if sizes:
            shard = ckpt.write_shard(self.checkpoint_folder, tag, g, sizes, ck.fsync)
            with self._ckpt_lock:
                self._ckpt_shards.append(shard)
        self._wait_barrier()
        if i == 0:
            wall = time.monotonic() - t0
            with self._ckpt_lock:
                shards, self._ckpt_shards = self._ckpt_shards, []
            if shards:
                rec = ckpt.summarize("write", len(self.checkpoints), shards, wall)
                rec["tag"] = tag
                self.checkpoints.append(rec)
            mine = range(self.rank * self.local, (self.rank + 1) * self.local)
            ckpt.remove(self.checkpoint_folder, tag, list(mine),
                        {r: len(ckpt.file_bytes(ck, r, writers)) if r < writers else 0 for r in mine})
        self._wait_barrier()

    # -- figures --------------------------------------------------------------------------------------
    def local_figures(self) -> dict[str, Any]:
        """This process's accelerators, per completed epoch (plain data, to gather under MPI)."""
        done = min(len(b) for b in self._per_accel) if self._per_accel else 0
        batch = self.spec.reader.batch_size
        accels = []
        for i, epochs in enumerate(self._per_accel):
            per_epoch = []
            for blocks in epochs[:done]:
                steps = [len(b.compute) for b in blocks]
                total = sum(steps)
                au = sum(b.au() * s for b, s in zip(blocks, steps)) / total if total else 0.0
                thr = sum(b.throughput(batch) * s for b, s in zip(blocks, steps)) / total if total else 0.0
                loads = [x for b in blocks for x in b.load]
                per_epoch.append({"au": au, "samples_per_s": thr, "steps": total,
                                  "seconds": sum(b.end - b.start for b in blocks),
                                  "load_s": loads,
                                  "step_end": [x for b in blocks for x in b.step_end],
                                  "compute": [x for b in blocks for x in b.compute]})
            evals = [{"epoch": epoch, "au": b.au(), "samples_per_s": b.throughput(self.spec.evaluation.batch_size),
                      "steps": len(b.compute), "seconds": b.end - b.start, "load_s": b.load,
                      "start_s": b.start - self.t_origin, "end_s": b.end - self.t_origin,
                      "step_end": b.step_end, "compute": b.compute}
                     for epoch, b in self._evals[i]]
            accels.append({"index": self.rank * self.local + i, "rank": self.rank, "epochs": per_epoch,
                           "evals": evals, "bytes_read": self.bytes_read[i]})
        return {"rank": self.rank, "accelerators": accels, "epochs_done": done,
                "checkpoints": self.checkpoints, "epoch_marks": self.epochs[:done]}


def merge(parts: list[dict[str, Any]], spec: WorkloadSpec, wall_s: float) -> dict[str, Any]:
    """The workload's figures from every process's local_figures (rank 0 under MPI)."""
    accels = sorted((a for p in parts for a in p["accelerators"]), key=lambda a: a["index"])
    done = min(p["epochs_done"] for p in parts)
    n = len(accels)
    batch = spec.reader.batch_size
    epochs = []
    for e in range(done):
        au = [a["epochs"][e]["au"] for a in accels]
        thr = [a["epochs"][e]["samples_per_s"] for a in accels]
        loads = [x for a in accels for x in a["epochs"][e]["load_s"]]
        epochs.append({"epoch": e + 1, "phase": "training", "au": float(np.mean(au)), "samples_per_s": float(np.sum(thr)),
                       "steps": accels[0]["epochs"][e]["steps"],
                       "seconds": max(a["epochs"][e]["seconds"] for a in accels),
                       "au_per_accelerator": [round(x, 6) for x in au],
                       "wait_s": percentiles(loads)})
    au = float(np.mean([e["au"] for e in epochs])) if epochs else 0.0
    sps = float(np.mean([e["samples_per_s"] for e in epochs])) if epochs else 0.0
    per_accel = []
    for a in accels:
        eps = a["epochs"][:done]
        per_accel.append({"index": a["index"], "rank": a["rank"],
                          "au": float(np.mean([x["au"] for x in eps])) if eps else 0.0,
                          "samples_per_s": float(np.mean([x["samples_per_s"] for x in eps])) if eps else 0.0,
                          "bytes_read": a["bytes_read"]})
    all_loads = [x for a in accels for ep in a["epochs"][:done] for x in ep["load_s"]]
    series = _timeseries(accels, done, n, batch, wall_s, spec)
    return {"evaluation": _merge_evals(accels, spec), "au": au, "au_std": float(np.std([e["au"] for e in epochs])) if epochs else 0.0,
            "samples_per_s": sps, "epochs": epochs, "per_accelerator": per_accel,
            "wait_s": percentiles(all_loads), "timeseries": series, "epochs_done": done,
            "bytes_read": sum(a["bytes_read"] for a in accels),
            "checkpoints": [c for p in parts for c in p["checkpoints"]]}


def _merge_evals(accels: list[dict[str, Any]], spec: WorkloadSpec) -> dict[str, Any] | None:
    """DLIO's eval figures, apart from training's: per evaluation the AU averaged over the
    accelerators and the samples/s summed; the run's figures are the means over evaluations."""
    if not spec.evaluation.enabled:
        return None
    done = min((len(a.get("evals", [])) for a in accels), default=0)
    evals = []
    for k in range(done):
        per = [a["evals"][k] for a in accels]
        sps = float(np.sum([x["samples_per_s"] for x in per]))
        evals.append({"epoch": per[0]["epoch"], "phase": "evaluation", "steps": per[0]["steps"],
                      "seconds": max(x["seconds"] for x in per),
                      "start_s": round(min(x.get("start_s", 0.0) for x in per), 6),
                      "end_s": round(max(x.get("end_s", 0.0) for x in per), 6),
                      "au": float(np.mean([x["au"] for x in per])),
                      "samples_per_s": sps, "mib_per_s": sps * spec.dataset.record_length / 2**20,
                      "au_per_accelerator": [round(x["au"], 6) for x in per],
                      "wait_s": percentiles([w for x in per for w in x["load_s"]])})
    au = float(np.mean([e["au"] for e in evals])) if evals else 0.0
    sps = float(np.mean([e["samples_per_s"] for e in evals])) if evals else 0.0
    return {"au": au, "au_std": float(np.std([e["au"] for e in evals])) if evals else 0.0,
            "samples_per_s": sps, "mib_per_s": sps * spec.dataset.record_length / 2**20,
            "passed": bool(evals) and au >= spec.au_threshold, "evaluations": evals,
            "batch_size": spec.evaluation.batch_size, "computation_time": spec.evaluation.computation_time}


def _timeseries(accels: list[dict[str, Any]], done: int, n: int, batch: int, wall_s: float,
                spec: WorkloadSpec) -> dict[str, Any]:
    """AU and samples/s per interval: compute time of the steps ending in it over interval x
    accelerators (a step's compute is counted where it ends). Training steps make `au` and
    `samples_per_s`; with evaluation on, its steps make `eval_au` and `eval_samples_per_s` apart
    (never added to training's), and `phase` names what ended in each interval: training,
    evaluation, training+evaluation or idle."""
    interval = max(0.1, round(wall_s / 60, 1)) if wall_s > 0 else 1.0
    bins = max(1, math.ceil(wall_s / interval))

    def binned(rows: list[dict[str, Any]], per_step: int) -> tuple[np.ndarray, np.ndarray]:
        comp, samples = np.zeros(bins), np.zeros(bins)
        for row in rows:
            idx = np.minimum((np.asarray(row["step_end"], dtype=float) / interval).astype(int), bins - 1)
            np.add.at(comp, idx, row["compute"])
            np.add.at(samples, idx, per_step)
        return comp, samples

    comp, samples = binned([ep for a in accels for ep in a["epochs"][:done]], batch)
    out: dict[str, Any] = {
        "interval_s": interval, "t_s": [round((k + 1) * interval, 3) for k in range(bins)],
        "au": [round(float(x), 4) for x in comp / (interval * max(1, n))],
        "samples_per_s": [round(float(x), 2) for x in samples / interval]}
    if spec.evaluation.enabled:
        rows = [ev for a in accels for ev in a.get("evals", []) if "step_end" in ev]
        e_comp, e_samples = binned(rows, spec.evaluation.batch_size)
        out["eval_au"] = [round(float(x), 4) for x in e_comp / (interval * max(1, n))]
        out["eval_samples_per_s"] = [round(float(x), 2) for x in e_samples / interval]
        out["phase"] = [("training+evaluation" if s and e else "training" if s else "evaluation" if e else "idle")
                        for s, e in zip(samples > 0, e_samples > 0)]
    return out
