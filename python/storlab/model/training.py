"""Accelerators a stack feeds: an AI-training workload (storlab workload, DLIO, MLPerf Storage)
turned into the I/O it does, timed with `predict`, and the accelerator utilisation (AU) that
gives; and the seconds of a checkpoint's write and read (docs/model.md, "Training workloads").

Training. storlab workload's emulation (suites/training/training.py) reads, per accelerator and step, one
batch of B samples of R bytes: each sample is one read call of R bytes, or ceil(R / transfer)
calls of the transfer size. `read_threads` threads per accelerator each read whole batches, one
call at a time, so while the storage paces the run there are n x read_threads calls outstanding
(prefetch lets a thread run ahead of its consumer; it adds no concurrency). With one sample per
file each sample also opens and closes its file: a think time between calls. A call of a whole
sample is a random read; one larger than the stack's full stripe is a stream on each data member
after one positioning (`_sample_reads`). `predict` gives the
bandwidth D(n) the stack delivers at that concurrency and request size; a step of all n
accelerators needs n B R bytes, delivered in L = n B R / D(n), and each accelerator computes t.

AU as DLIO (and storlab) measures it, per epoch of S steps: the compute of every step but the
first over the epoch's wall time less the first step's. With reader threads (r >= 1) the epoch
opens with the k = min(r, S) batches the threads read together, all ready after k L; from then
storage or compute paces:
    wall = max(S L + t, k L + S t)        first step = k L + t
    AU   = (S - 1) t / (wall - first)     = min(1, (S - 1) t / ((S - k) L))
The first-step edge raises a short epoch's AU by (S - 1) / (S - k); at MLPerf's 500 steps or more
it is at most 1.4 % (8 readers). Without reader threads an accelerator reads its batch, then computes:
AU = t / (t + L). samples/s = n B S / wall. AU is 0 with no compute or one step (nothing counted).

Images and columns (MLPerf Storage v3.0's formats). A JPEG sample is read whole: R is the JPEG
file's bytes (the workload's record length encodes to fewer), one call per sample. A parquet
sample is a row: the reader reads a row group (or the whole file) once, a call per read column
chunk of C bytes, and the rows after it come from memory; so R is the bytes of a row's read
columns, and a call carries C / R samples (`call_bytes`; a call of C bytes, R / C calls per
sample on average). The formulas below hold with these R and C.

Evaluation (DLIO's eval, suites/training/training.py's _evaluate): after the training epochs it names,
each accelerator reads its share of the eval files in batches of the eval batch size Be and
computes te per batch, with the same reader threads and the same read calls, and no barrier
between steps. The measurement computes its AU and samples/s with the training formulas on the
evaluation's one block (the first step left out, the block opened before the readers start), so
the model does too: the epoch formulas above with Se = eval samples // Be // n steps (not capped
by total_training_steps, not grown by MLPerf's size rule: the eval files are as written),
Le = n Be R / D(n), and D(n) from `predict` at the same n x read_threads outstanding calls. The
seconds of one evaluation are its wall; a run evaluates after every epoch it names.

The search: the most accelerators whose AU holds the threshold, doubling then bisecting as
`storlab workload --search` does (suites/training/workload.py), so prediction and measurement look at the
same points.

Checkpoints (suites/training/checkpoint.py): each writer writes its shard in CHECKPOINT_CALL_BYTES calls
and fsyncs it; the read-back (after a cache drop) reads it in calls of the same size; `predict` at
one thread per writer gives the rate, the seconds are the checkpoint's bytes over it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

from .costs import FILE_OPEN_S
from .geometry import geometry_of
from .predict import ControllerCache, Device, Prediction, Workload, predict
from .stack import Stack, StackError

__all__ = ["TrainingLoad", "CheckpointLoad", "AcceleratorPoint", "TrainingForecast", "CheckpointForecast",
           "EvaluationForecast", "evaluation_load", "predict_evaluation", "epoch_figures", "predict_training",
           "accelerators_fed", "predict_checkpoint", "checkpoint_writers",
           "checkpoint_shard_bytes", "CHECKPOINT_CALL_BYTES", "RULE_STEPS", "SECTOR"]

CHECKPOINT_CALL_BYTES = 16 << 20    # bytes per write or read call of a checkpoint (suites/training/checkpoint.py)
RULE_STEPS = 500                    # MLPerf Storage's dataset rule: at least 500 steps per epoch
SECTOR = 512                        # the model's requests are whole sectors
STREAM_REQUEST_BYTES = 16 << 20     # a sample streamed over a stripe is predicted in requests up to this


def checkpoint_writers(ranks: str, ranks_total: int, accelerators: int) -> int:
    """Writers of a checkpoint: every accelerator (ranks "all") or rank zero, at most ranks_total
    when it is set (fewer writers than ranks_total: MLPerf's subset mode)."""
    n = 1 if ranks == "zero" else accelerators
    return min(n, ranks_total) if ranks_total else n


def checkpoint_shard_bytes(total_bytes: int, ranks_total: int) -> int:
    """Bytes one writer writes: the whole checkpoint (DLIO 2.0: each writing rank saves its whole
    tensors) or its 1 / ranks_total share."""
    return total_bytes // ranks_total if ranks_total else total_bytes


def _sectors(nbytes: float) -> int:
    return max(SECTOR, int(math.ceil(nbytes / SECTOR)) * SECTOR)


@dataclass(frozen=True)
class TrainingLoad:
    """What a training workload asks of the storage, in plain figures."""
    name: str
    record_bytes: int               # mean bytes per sample
    batch: int                      # samples per step and accelerator
    computation_s: float            # compute per step
    read_threads: int               # per accelerator; 0: the accelerator reads its batch, then computes
    prefetch: int                   # batches read ahead (bounds how far a thread runs ahead; no concurrency)
    transfer_bytes: int             # bytes per read call; 0: one call per sample
    samples: int                    # in the dataset
    au_threshold: float
    file_per_sample: bool           # every sample read opens and closes its file
    shuffled: bool = True           # samples read in a shuffled order (each call lands somewhere new)
    total_training_steps: int = 0   # caps the steps per epoch (0: every sample once)
    rule_sized: bool = False        # the dataset grows with the accelerators, to MLPerf's 500 steps or more
    call_bytes: int = 0             # bytes of one read call that carries several samples (a parquet column
                                    # chunk of a row group); 0: a call is a sample or a transfer-size piece

    def __post_init__(self) -> None:
        for label in ("record_bytes", "batch", "samples"):
            if getattr(self, label) < 1:
                raise StackError(f"training load: {label} must be at least 1, got {getattr(self, label)!r}")
        if not (self.computation_s >= 0 and math.isfinite(self.computation_s)):
            raise StackError(f"training load: computation_s must be a finite time >= 0, got {self.computation_s!r}")
        if not 0 < self.au_threshold <= 1:
            raise StackError(f"training load: au_threshold must be in (0, 1], got {self.au_threshold!r}")
        if self.read_threads < 0 or self.transfer_bytes < 0:
            raise StackError("training load: read_threads and transfer_bytes must be >= 0")

    def steps(self, accelerators: int) -> int:
        """Steps per epoch at n accelerators: samples // batch // n (storlab's and DLIO's), capped by
        total_training_steps; with rule_sized, at least MLPerf's 500."""
        steps = self.samples // self.batch // max(1, accelerators)
        if self.rule_sized:
            steps = max(steps, RULE_STEPS)
        if self.total_training_steps > 0:
            steps = min(steps, self.total_training_steps)
        return steps

    @property
    def calls_per_sample(self) -> int:
        t = self.transfer_bytes
        if self.call_bytes or not t or t >= self.record_bytes:
            return 1
        return math.ceil(self.record_bytes / t)

    @property
    def bytes_per_call(self) -> float:
        """Data bytes one read call carries: a column chunk (call_bytes), else a sample's share."""
        return float(self.call_bytes) if self.call_bytes else self.record_bytes / self.calls_per_sample

    @property
    def request_bytes(self) -> int:
        """Bytes of one read call, as the model's request (a whole number of sectors)."""
        return _sectors(self.bytes_per_call)

    @property
    def pattern(self) -> str:
        """A call of a whole sample lands at a new place (randread); the calls of one sample's pieces
        follow each other (read)."""
        return "randread" if self.calls_per_sample == 1 and self.shuffled else "read"

    def concurrency(self, accelerators: int) -> int:
        return accelerators * max(1, self.read_threads)

    def demand_bytes_per_s(self, accelerators: int) -> float:
        """What n accelerators read at AU 1: n B R / t (inf with no compute)."""
        if self.computation_s <= 0:
            return math.inf
        return accelerators * self.batch * self.record_bytes / self.computation_s


@dataclass(frozen=True)
class AcceleratorPoint:
    accelerators: int
    au: float
    passed: bool
    samples_per_s: float
    steps: int
    epoch_s: float
    demand_bytes_per_s: float       # what they read at AU 1
    delivered_bytes_per_s: float    # what the stack delivers at their concurrency (predict)
    concurrency: int
    limiting: str
    prediction: Prediction


@dataclass(frozen=True)
class TrainingForecast:
    load: TrainingLoad
    fed: int                        # most accelerators holding the threshold (0: not even one)
    at_fed: AcceleratorPoint | None
    beyond: AcceleratorPoint | None  # at fed + 1 (None when the search stopped at a bound)
    trials: tuple[AcceleratorPoint, ...]
    bound: str = ""                 # why the search stopped without a failing point, if so
    assumptions: tuple[str, ...] = field(default_factory=tuple)


def epoch_figures(load: TrainingLoad, accelerators: int, delivered_bytes_per_s: float) -> tuple[float, float, float]:
    """(AU, samples/s, epoch seconds) of one epoch at n accelerators when the storage delivers
    `delivered_bytes_per_s` to them together (the formulas of the module's docstring)."""
    n, t = accelerators, load.computation_s
    steps = load.steps(n)
    if steps < 1:
        return 0.0, 0.0, 0.0
    batch_s = n * load.batch * load.record_bytes / delivered_bytes_per_s if delivered_bytes_per_s > 0 else math.inf
    if load.read_threads == 0:
        wall = steps * (t + batch_s)
        first = t + batch_s
    else:
        k = min(load.read_threads, steps)
        wall = max(steps * batch_s + t, k * batch_s + steps * t)
        first = k * batch_s + t
    if not math.isfinite(wall):
        return 0.0, 0.0, math.inf
    compute = (steps - 1) * t
    au = 0.0 if compute <= 0 else min(1.0, compute / (wall - first))
    return au, n * load.batch * steps / wall if wall > 0 else 0.0, wall


PredictFn = Callable[[Workload], Prediction]


@dataclass(frozen=True)
class _ReadPlan:
    """How one read call is predicted: pattern, request size, the members as they serve it."""
    rw: str
    request_bytes: int
    bytes_per_request: float        # data bytes one predicted request carries
    devices: list[Device] | None
    note: str | None = None


def _sample_reads(stack: Stack | None, devices: list[Device] | None, load: TrainingLoad) -> _ReadPlan:
    """The pattern, request and member devices one read call is predicted with. A call of a whole
    sample lands somewhere new (randread: a positioning on each member it touches). A call larger
    than the stack's full stripe reaches each data member with several consecutive chunks, which a
    member reads with one positioning and a stream, not a positioning per chunk: it is predicted as
    a stream (read) of full-stripe requests of at most STREAM_REQUEST_BYTES (the page cache splits
    such a call into readahead requests anyway) on members whose read rate carries the one
    positioning per call."""
    plain = _ReadPlan(load.pattern, load.request_bytes, load.bytes_per_call, devices)
    if load.pattern != "randread" or stack is None:
        return plain
    geometry = geometry_of(stack)
    stripe = geometry.full_stripe_bytes
    if load.request_bytes <= stripe:
        return plain
    data_members = geometry.data_drives * geometry.groups
    per_member = load.request_bytes / data_members
    members = devices or [Device.from_drive(stack.drive)]
    # a positioning occupies a device that queues (a drive's arm, a controller); a rate limiter (the
    # blkio throttle) has none: its latency is a wait for budget, which the stream does not pay per call
    derated = [replace(d, read_bw_bytes=per_member / (per_member / d.read_bw_bytes + (d.latency_s if d.queues else 0.0)))
               for d in members]
    request = min(load.request_bytes, stripe * max(1, STREAM_REQUEST_BYTES // stripe))
    note = (f"a call of {load.request_bytes} bytes spans more than the full stripe ({stripe} bytes): each of the "
            f"{data_members} data members positions once "
            f"({(members[0].latency_s if members[0].queues else 0.0) * 1e3:.3g} ms) and streams "
            f"{per_member:.0f} bytes, a read rate of {derated[0].read_bw_bytes / 1e6:.4g} MB/s per member; "
            f"predicted as a stream of {request}-byte requests")
    return _ReadPlan("read", request, float(request), derated, note)


def _predictor(stack: Stack | None, devices: list[Device] | None, cache: ControllerCache | None,
               mirror_read: str, read_members) -> PredictFn:
    def run(w: Workload) -> Prediction:
        return predict(stack, w, devices, cache=cache, mirror_read=mirror_read, read_members=read_members)
    return run


def _point(load: TrainingLoad, n: int, run: PredictFn, working_set: int | None, plan: _ReadPlan) -> AcceleratorPoint:
    requests_per_sample = load.record_bytes / plan.bytes_per_request
    think = FILE_OPEN_S / requests_per_sample if load.file_per_sample else 0.0
    w = Workload(plan.rw, plan.request_bytes, qd=1, threads=load.concurrency(n),
                 working_set_bytes=working_set, think_s=think)
    p = run(w)
    # the data bytes the requests carry (a record need not be whole sectors)
    delivered = p.iops * plan.bytes_per_request
    au, sps, wall = epoch_figures(load, n, delivered)
    return AcceleratorPoint(n, au, au >= load.au_threshold, sps, load.steps(n), wall, load.demand_bytes_per_s(n),
                            delivered, w.threads, p.limiting, p)


def predict_training(stack: Stack | None, load: TrainingLoad, accelerators: int, devices: list[Device] | None = None, *,
                     cache: ControllerCache | None = None, mirror_read: str = "balanced",
                     read_members=None) -> AcceleratorPoint:
    """The predicted AU, samples/s and delivered bandwidth at `accelerators`."""
    if accelerators < 1:
        raise StackError(f"accelerators must be at least 1, got {accelerators!r}")
    plan = _sample_reads(stack, devices, load)
    return _point(load, accelerators, _predictor(stack, plan.devices, cache, mirror_read, read_members),
                  _working_set(load, accelerators), plan)


def _working_set(load: TrainingLoad, n: int) -> int:
    """Bytes an epoch reads (what a controller cache would have to hold)."""
    return load.steps(n) * n * load.batch * load.record_bytes


@dataclass(frozen=True)
class EvaluationForecast:
    """The eval phase at the accelerators training was sized for: its AU (DLIO's eval AU),
    samples/s, demand against delivery, and the seconds of one evaluation and of all of a run's."""
    load: TrainingLoad              # the evaluation's reads (eval batch, eval compute, eval samples)
    point: AcceleratorPoint         # epoch_s: the seconds of one evaluation
    evaluations: int                # evaluations in a run of the workload's epochs
    note: str = ""                  # why nothing is evaluated, when so

    @property
    def seconds_per_run(self) -> float:
        return self.evaluations * self.point.epoch_s


def evaluation_load(train: TrainingLoad, *, batch: int, computation_s: float, samples: int) -> TrainingLoad:
    """The evaluation's reads as a load: the training's records, readers and read calls, with the
    eval batch, the eval compute per batch and the eval files' samples (every one read once per
    evaluation: no total_training_steps cap, no size rule)."""
    return replace(train, name=f"{train.name} evaluation", batch=batch, computation_s=computation_s, samples=samples,
                   total_training_steps=0, rule_sized=False)


def predict_evaluation(stack: Stack | None, load: TrainingLoad, accelerators: int, evaluations: int,
                       devices: list[Device] | None = None, *, cache: ControllerCache | None = None,
                       mirror_read: str = "balanced", read_members=None) -> EvaluationForecast:
    """One evaluation at `accelerators` (the load from evaluation_load): the training prediction's
    machinery on the eval figures, AU with the same first-step edge the measurement uses."""
    point = predict_training(stack, load, accelerators, devices, cache=cache, mirror_read=mirror_read,
                             read_members=read_members)
    note = ""
    if point.steps < 1:
        note = (f"no evaluation step: {load.samples} eval samples hold fewer than one batch of {load.batch} for each "
                f"of {accelerators} accelerators (DLIO evaluates nothing then)")
    elif point.steps == 1 or load.computation_s <= 0:
        note = "AU 0: one step or no compute per batch, and AU leaves the first step out (as DLIO's does)"
    return EvaluationForecast(load, point, evaluations, note)


def accelerators_fed(stack: Stack | None, load: TrainingLoad, devices: list[Device] | None = None, *,
                     max_accelerators: int = 4096, cache: ControllerCache | None = None,
                     mirror_read: str = "balanced", read_members=None) -> TrainingForecast:
    """The most accelerators whose predicted AU holds the threshold: 1, 2, 4, ... until one fails,
    then bisection (suites/training/workload.py's search); bounded by max_accelerators and by the dataset
    (one step per epoch at least)."""
    if max_accelerators < 1:
        raise StackError(f"max_accelerators must be at least 1, got {max_accelerators!r}")
    plan = _sample_reads(stack, devices, load)
    run = _predictor(stack, plan.devices, cache, mirror_read, read_members)
    seen: dict[int, AcceleratorPoint] = {}

    def trial(n: int) -> AcceleratorPoint:
        if n not in seen:
            seen[n] = _point(load, n, run, _working_set(load, n), plan)
        return seen[n]

    cap, bound = max_accelerators, f"the search's bound of {max_accelerators} accelerators"
    if not load.rule_sized and load.samples // load.batch < cap:
        cap = load.samples // load.batch
        bound = (f"the dataset: {load.samples} samples hold one step of {load.batch} per accelerator for "
                 f"{cap} accelerators at most")
    lo, hi = 0, None
    n = 1
    while n <= cap:
        if trial(n).passed:
            lo, n = n, n * 2
        else:
            hi = n
            break
    if hi is None:
        hi = cap + 1            # past the bound counts as failing
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if trial(mid).passed:
            lo = mid
        else:
            hi = mid
    beyond = trial(lo + 1) if lo + 1 <= cap else None
    if beyond is not None:
        bound = ""
    at = trial(lo) if lo >= 1 else None
    reads = (f"one call of {load.request_bytes} bytes per {load.call_bytes / load.record_bytes:.4g} samples (a column "
             f"chunk of the rows read at once; {load.record_bytes} bytes of read columns per sample)"
             if load.call_bytes else f"{load.calls_per_sample} call(s) of {load.request_bytes} bytes per sample")
    notes = [f"reads: {reads}, {max(1, load.read_threads)} outstanding per accelerator ({plan.rw})",
             *([plan.note] if plan.note else []),
             "buffered reads: the page cache may split a call into readahead-sized requests; the model counts one "
             "request per call (the bytes are the same, a device limited in requests sees more)",
             "samples of the mean record length (a record-length spread is not modelled)",
             "no page-cache hits (MLPerf's dataset is 5 x the clients' memory; storlab workload drops the cache "
             "of a smaller one before each epoch)"]
    if load.file_per_sample:
        notes.append(f"one file per sample: {FILE_OPEN_S * 1e6:g} us to open and close it between reads")
    if load.rule_sized:
        notes.append(f"dataset sized by MLPerf's rule: at least {RULE_STEPS} steps per epoch at every count")
    return TrainingForecast(load, lo, at, beyond, tuple(seen[k] for k in sorted(seen)), bound, tuple(notes))


@dataclass(frozen=True)
class CheckpointLoad:
    """One checkpoint: writers, the bytes each writes (and reads back), files per writer."""
    name: str
    writers: int
    bytes_per_writer: int
    files_per_writer: int = 1
    fsync: bool = True
    ranks_total: int = 0

    def __post_init__(self) -> None:
        if self.writers < 1 or self.bytes_per_writer < 1 or self.files_per_writer < 1:
            raise StackError("checkpoint load: writers, bytes_per_writer and files_per_writer must be at least 1")

    @property
    def bytes_total(self) -> int:
        return self.writers * self.bytes_per_writer


@dataclass(frozen=True)
class CheckpointPhase:
    kind: str                       # write | read
    seconds: float
    gb_per_s: float                 # 10^9 bytes/s, DLIO's "GB/second"
    limiting: str
    prediction: Prediction


@dataclass(frozen=True)
class CheckpointForecast:
    load: CheckpointLoad
    write: CheckpointPhase
    read: CheckpointPhase
    assumptions: tuple[str, ...] = ()


def predict_checkpoint(stack: Stack | None, load: CheckpointLoad, devices: list[Device] | None = None, *,
                       cache: ControllerCache | None = None, mirror_read: str = "balanced",
                       read_members=None) -> CheckpointForecast:
    """Seconds and GB/s of one checkpoint write (all writers at once, fsync at the end) and of its
    read-back after a cache drop."""
    run = _predictor(stack, devices, cache, mirror_read, read_members)
    request = _sectors(min(CHECKPOINT_CALL_BYTES, load.bytes_per_writer))
    phases = []
    for kind in ("write", "read"):
        p = run(Workload(kind, request, qd=1, threads=load.writers, working_set_bytes=load.bytes_total))
        # each writer's stream is the same size: the phase ends when they all have (the rate is shared)
        seconds = load.bytes_total / p.bw_bytes if p.bw_bytes > 0 else math.inf
        phases.append(CheckpointPhase(kind, seconds, load.bytes_total / seconds / 1e9 if seconds > 0 else math.inf,
                                      p.limiting, p))
    notes = (f"{load.writers} writer(s), one stream each of {request}-byte calls, {load.files_per_writer} file(s) per writer",
             "write: the bytes reach the devices by the fsync (write-back caches in the host are not counted as done)",
             "read: after the page cache is dropped")
    return CheckpointForecast(load, phases[0], phases[1], notes)
