"""Recommendation: enumerate candidate layouts for a drive inventory and keep the Pareto set.

Candidates: RAID level (5, 6, 10, 50, 60 by default), span (the divisors of the enclosure's bays that
the level allows, so groups tile enclosures, as the Dell study's "one group of twelve or two of six"),
chunk (64 KiB .. 1 MiB) and aggregation (controller RAID 50/60 per controller; single groups striped
by the host across every group). Drives that do not fill a group are left as hot spares.
Each candidate is scored on usable capacity, sequential read/write bandwidth at the request size,
random read/write IOPS and MTTDL (all to maximise). A candidate is kept if no other candidate is at
least as good on every score and better on one; the reason lists where it ranks first or second.
Hard needs (minimum capacity, bandwidth, IOPS, MTTDL, maximum annual loss probability) filter first.
A training workload (`plan recommend --workload NAME --accelerators N`) is one more hard need: the
layout must feed N accelerators at the workload's AU threshold (model/training.py); each candidate
carries the accelerators it is predicted to feed and the component that limits it.
A KV-cache option (`plan recommend --workload kvcache_N --tokens-per-s T`) is one likewise: the
layout's predicted tokens per second (model/kvcache.py) must reach T; each candidate carries its
tokens per second, read bandwidth and the component that limits it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..model.advice import DEFAULT_REBUILD_RATE_BYTES, PlanWarning, stack_warnings
from ..model.geometry import capacity_of, is_power_of_two
from ..model.kvcache import KvLoad, predict_kvcache
from ..model.notation import MAX_MIRROR_COPIES, RAID_LEVELS, parse_raid
from ..model.performance import MetricResult, performance_of
from ..model.quantities import HOURS_PER_YEAR
from ..model.reliability import reliability_of
from ..model.stack import Component, DriveType, Stack, StackError, stack_from_notation
from ..model.training import TrainingLoad, accelerators_fed, predict_training
from ..units import format_si_bytes, format_size

__all__ = ["Needs", "Inventory", "Candidate", "Recommendation", "recommend", "candidate_count", "OBJECTIVES",
           "DEFAULT_CHUNKS", "DEFAULT_LEVELS", "DEFAULT_REBUILD_RATE_BYTES", "MAX_INVENTORY_DRIVES", "MAX_BAYS",
           "MAX_CONTROLLERS", "MAX_CANDIDATES", "TrainingFit", "KvFit"]

DEFAULT_CHUNKS = (64 * 1024, 128 * 1024, 256 * 1024, 512 * 1024, 1024 * 1024)
DEFAULT_LEVELS = (5, 6, 10, 50, 60)
# Bounds of an inventory. Every candidate is scored with the alignment and path models (a few
# milliseconds each, growing with the number of groups), so these keep a recommendation to about a
# second: more drives than the p690 study's 1,568 behind one host, more bays than the largest 4U
# enclosures (102-106), more controllers than PCIe slots, more candidates than 3 x the default set.
MAX_INVENTORY_DRIVES = 2048
MAX_BAYS = 128
MAX_CONTROLLERS = 64
MAX_CANDIDATES = 256
# a candidate's accelerators are searched up to this many times the need (so "feeds 96" is a figure,
# not a bound, for needs up to a quarter of it), at most MAX_TRAINING_SEARCH
TRAINING_SEARCH_FACTOR = 4
MAX_TRAINING_SEARCH = 4096

# (key, label, formatter) - every objective is maximised
OBJECTIVES = (
    ("usable_bytes", "usable capacity", lambda v: format_si_bytes(v)),
    ("seq_read_bw_bytes", "sequential read", lambda v: f"{v / 1e6:.0f} MB/s"),
    ("seq_write_bw_bytes", "sequential write", lambda v: f"{v / 1e6:.0f} MB/s"),
    ("random_read_iops", "random read IOPS", lambda v: f"{v:.0f}"),
    ("random_write_iops", "random write IOPS", lambda v: f"{v:.0f}"),
    ("mttdl_h", "MTTDL", lambda v: f"{v / HOURS_PER_YEAR:.3g} years"),
)


@dataclass(frozen=True)
class Needs:
    usable_bytes: int | None = None
    seq_read_bw_bytes: float | None = None
    seq_write_bw_bytes: float | None = None
    random_read_iops: float | None = None
    random_write_iops: float | None = None
    min_mttdl_h: float | None = None
    max_annual_loss: float | None = None
    request_bytes: int = 1024 * 1024          # sequential request size the layout should suit
    random_request_bytes: int = 4096
    training: TrainingLoad | None = None       # feed `accelerators` of this workload at its AU threshold
    accelerators: int | None = None
    kvcache: KvLoad | None = None              # reach `tokens_per_s` of this KV-cache option
    tokens_per_s: float | None = None


@dataclass(frozen=True)
class Inventory:
    drive: DriveType
    drives: int
    bays_per_enclosure: int
    controllers: int = 1
    controller_read_bw_bytes: float | None = None
    controller_write_bw_bytes: float | None = None
    controller_iops: float | None = None        # host requests/s of one controller (None: the model's default)
    rebuild_rate_bytes: float | None = None
    mttr_h: float | None = None
    levels: tuple[int, ...] = DEFAULT_LEVELS
    chunks: tuple[int, ...] = DEFAULT_CHUNKS

    def __post_init__(self) -> None:
        for label, value, high in (("drives", self.drives, MAX_INVENTORY_DRIVES),
                                   ("bays", self.bays_per_enclosure, MAX_BAYS),
                                   ("controllers", self.controllers, MAX_CONTROLLERS)):
            if not 1 <= value <= high:
                raise StackError(f"inventory: {label} {value} is out of range; allowed: 1 to {high}")
        if self.controllers > self.drives:
            raise StackError(f"inventory: controllers {self.controllers} is more than the {self.drives} drives; "
                             f"allowed: 1 to {self.drives}")
        unknown = [level for level in self.levels if level not in RAID_LEVELS]
        if unknown:
            raise StackError(f"inventory: unknown RAID level {unknown[0]}")
        if self.rebuild_rate_bytes is None and self.mttr_h is None:
            raise StackError("inventory: give a rebuild rate or an MTTR to compare reliability")


@dataclass(frozen=True)
class Candidate:
    stack: Stack
    description: str
    drives_used: int
    spares: int
    scores: dict[str, float]
    annual_loss_probability: float
    misses: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    equivalent: tuple[str, ...] = ()
    warnings: tuple[PlanWarning, ...] = ()     # on the Pareto set: geometry, reliability, path
    training: "TrainingFit | None" = None      # with a training need: what the layout feeds
    kvcache: "KvFit | None" = None             # with a KV-cache need: the tokens/s it reaches


@dataclass(frozen=True)
class TrainingFit:
    """A candidate against a training need: the accelerators it feeds at the AU threshold (at most
    `bound`, the search's limit), the AU at the needed count, and what limits the storage there."""
    accelerators: int
    bound: int
    au_at_need: float
    limiting: str


@dataclass(frozen=True)
class KvFit:
    """A candidate against a KV-cache need: its predicted tokens per second and read bandwidth
    (model/kvcache.py) and what limits them."""
    tokens_per_s: float
    read_bw_bytes: float
    limiting: str


@dataclass(frozen=True)
class Recommendation:
    candidates_considered: int
    feasible: int
    pareto: tuple[Candidate, ...]
    note: str = ""

    @property
    def warnings(self) -> tuple[PlanWarning, ...]:
        """The document's warnings: unmet needs, then each Pareto candidate's, naming the candidate."""
        out = [PlanWarning("needs-unmet", self.note)] if self.note else []
        out += [PlanWarning(w.code, f"{c.description}: {w.message}") for c in self.pareto for w in c.warnings]
        return tuple(out)


def _spans(level: int, bays: int) -> list[int]:
    # a one-drive RAID 0 (R0/1, a JBOD LUN) is a valid stack but no layout to recommend
    minimum = max(2, RAID_LEVELS[level].min_span)
    spans = [s for s in range(minimum, bays + 1) if bays % s == 0]
    if level == 10:
        spans = [s for s in spans if s % 2 == 0]
    if level == 1:
        spans = [s for s in spans if s <= MAX_MIRROR_COPIES]
    return spans


def _controller_path(inventory: Inventory, groups_per_controller: int) -> Component | None:
    if (inventory.controllers == 1 and inventory.controller_read_bw_bytes is None
            and inventory.controller_write_bw_bytes is None and inventory.controller_iops is None):
        return None
    controller = Component("controller", kind="controller", count=inventory.controllers,
                           read_bw_bytes=inventory.controller_read_bw_bytes,
                           write_bw_bytes=inventory.controller_write_bw_bytes, iops=inventory.controller_iops,
                           groups=groups_per_controller, raid_engine=True)
    return Component("host", kind="host", children=(controller,))


def _candidates(inventory: Inventory) -> list[tuple[Stack, str, int]]:
    out: list[tuple[Stack, str, int]] = []
    per_controller = inventory.drives // inventory.controllers
    for level in inventory.levels:
        nested = RAID_LEVELS[level].nested
        for span in _spans(level, inventory.bays_per_enclosure):
            groups_per_controller = per_controller // span
            if groups_per_controller < (2 if nested else 1):
                continue
            used = groups_per_controller * span * inventory.controllers
            path = _controller_path(inventory, groups_per_controller)
            for chunk in inventory.chunks:
                if nested:
                    layout = parse_raid(f"R{level}/{span}/{groups_per_controller * span}")
                    count = inventory.controllers
                else:
                    layout = parse_raid(f"R{level}/{span}")
                    count = groups_per_controller * inventory.controllers
                inter = None
                if count > 1:
                    device_stripe = layout.data_drives_per_span * chunk * (layout.spans if nested else 1)
                    inter = device_stripe if is_power_of_two(device_stripe) else max(chunk, 1024 * 1024)
                stack = stack_from_notation(
                    layout, chunk, drive=inventory.drive, count=count, aggregate="stripe" if count > 1 else "none",
                    inter_chunk_bytes=inter, rebuild_rate_bytes=inventory.rebuild_rate_bytes, mttr_h=inventory.mttr_h,
                    path=path)
                how = (f"{layout.text} x {count}" if count > 1 else layout.text) + f", chunk {format_size(chunk)}"
                if count > 1:
                    how += f", host stripe {format_size(inter)}"
                out.append((stack, how, used))
    return out


def _sizing_iops(metric: MetricResult) -> float:
    """A random metric as recommend sizes it: one request at a time on each drive."""
    return metric.value if metric.one_at_a_time_value is None else metric.one_at_a_time_value


def _score(stack: Stack, needs: Needs) -> tuple[dict[str, float], float]:
    perf = performance_of(stack, seq_request_bytes=needs.request_bytes, random_request_bytes=needs.random_request_bytes)
    reliability = reliability_of(stack)
    scores = {
        "usable_bytes": float(capacity_of(stack).usable_bytes),
        "seq_read_bw_bytes": perf.value("seq_read"),
        "seq_write_bw_bytes": perf.value("seq_write"),
        # sized as a spreadsheet sizes them: one request at a time on each drive (a deeper queue,
        # which a spinning drive reorders, serves more: plan perf --qd shows how much)
        "random_read_iops": _sizing_iops(perf.metrics["random_read"]),
        "random_write_iops": _sizing_iops(perf.metrics["random_write"]),
        "mttdl_h": reliability.mttdl_h,
    }
    return scores, reliability.annual_loss_probability


def _warnings(stack: Stack, needs: Needs) -> tuple[PlanWarning, ...]:
    perf = performance_of(stack, seq_request_bytes=needs.request_bytes, random_request_bytes=needs.random_request_bytes)
    return tuple(stack_warnings(stack, perf=perf, request_bytes=needs.request_bytes))


def _training_fit(stack: Stack, needs: Needs) -> TrainingFit | None:
    if needs.training is None or needs.accelerators is None:
        return None
    bound = min(MAX_TRAINING_SEARCH, TRAINING_SEARCH_FACTOR * needs.accelerators)
    fed = accelerators_fed(stack, needs.training, max_accelerators=bound)
    at = predict_training(stack, needs.training, needs.accelerators)
    return TrainingFit(fed.fed, bound, at.au, at.limiting)


def _kv_fit(stack: Stack, needs: Needs) -> KvFit | None:
    if needs.kvcache is None or needs.tokens_per_s is None:
        return None
    fc = predict_kvcache(stack, needs.kvcache, tails=False)
    return KvFit(fc.tokens_per_s, fc.read_bw_bytes, fc.limiting)


def _misses(scores: dict[str, float], annual_loss: float, needs: Needs,
            training: TrainingFit | None = None, kvcache: KvFit | None = None) -> tuple[str, ...]:
    misses = []
    checks = (("usable_bytes", needs.usable_bytes), ("seq_read_bw_bytes", needs.seq_read_bw_bytes),
              ("seq_write_bw_bytes", needs.seq_write_bw_bytes), ("random_read_iops", needs.random_read_iops),
              ("random_write_iops", needs.random_write_iops), ("mttdl_h", needs.min_mttdl_h))
    labels = {key: (label, fmt) for key, label, fmt in OBJECTIVES}
    for key, wanted in checks:
        if wanted is not None and scores[key] < wanted:
            label, fmt = labels[key]
            misses.append(f"{label} {fmt(scores[key])} < {fmt(wanted)}")
    if needs.max_annual_loss is not None and annual_loss > needs.max_annual_loss:
        misses.append(f"annual loss probability {annual_loss:.3g} > {needs.max_annual_loss:.3g}")
    if training is not None and needs.training is not None and training.au_at_need < needs.training.au_threshold:
        misses.append(f"feeds {training.accelerators} {needs.training.name} accelerators < {needs.accelerators} "
                      f"(AU {training.au_at_need:.2f} at {needs.accelerators}; limited by {training.limiting})")
    if kvcache is not None and needs.kvcache is not None and needs.tokens_per_s is not None \
            and kvcache.tokens_per_s < needs.tokens_per_s:
        misses.append(f"{needs.kvcache.name} tokens/s {kvcache.tokens_per_s:.4g} < {needs.tokens_per_s:.4g} "
                      f"(limited by {kvcache.limiting})")
    return tuple(misses)


def _dominates(a: dict[str, float], b: dict[str, float]) -> bool:
    keys = [key for key, _, _ in OBJECTIVES]
    return all(a[k] >= b[k] for k in keys) and any(a[k] > b[k] for k in keys)


def _reasons(candidate: Candidate, front: list[Candidate]) -> tuple[str, ...]:
    reasons = []
    for key, label, fmt in OBJECTIVES:
        better = sorted({c.scores[key] for c in front}, reverse=True)
        rank = better.index(candidate.scores[key]) + 1
        if rank == 1:
            reasons.append(f"highest {label} ({fmt(candidate.scores[key])})")
        elif rank == 2:
            reasons.append(f"second-highest {label} ({fmt(candidate.scores[key])})")
    if not reasons:
        reasons.append("no other candidate is at least as good on every need")
    return tuple(reasons)


def candidate_count(inventory: Inventory) -> int:
    """How many layouts `recommend` would score (counted before any is built)."""
    per_controller = inventory.drives // inventory.controllers
    return sum(len(inventory.chunks) for level in inventory.levels for span in _spans(level, inventory.bays_per_enclosure)
               if per_controller // span >= (2 if RAID_LEVELS[level].nested else 1))


def recommend(inventory: Inventory, needs: Needs = Needs()) -> Recommendation:
    count = candidate_count(inventory)
    if count > MAX_CANDIDATES:
        raise StackError(f"inventory: {count} candidate layouts (levels x spans x chunks); allowed: at most "
                         f"{MAX_CANDIDATES}: give fewer --levels or --chunks")
    built = _candidates(inventory)
    if not built:
        raise StackError(f"no layout fits {inventory.drives} drives over {inventory.controllers} controller(s) "
                         f"with {inventory.bays_per_enclosure}-bay enclosures and levels "
                         f"{', '.join(map(str, inventory.levels))}")
    scored: list[Candidate] = []
    for stack, how, used in built:
        scores, annual_loss = _score(stack, needs)
        training = _training_fit(stack, needs)
        kvcache = _kv_fit(stack, needs)
        scored.append(Candidate(stack, how, used, inventory.drives - used, scores, annual_loss,
                                _misses(scores, annual_loss, needs, training, kvcache), training=training,
                                kvcache=kvcache))
    feasible = [c for c in scored if not c.misses]
    pool, note = (feasible, "") if feasible else (scored, "no candidate meets every need; showing the best trade-offs and what each misses")
    # identical scores: keep the first, list the others as equivalent
    unique: dict[tuple, list[Candidate]] = {}
    for c in pool:
        unique.setdefault(tuple(round(c.scores[k], 9) for k, _, _ in OBJECTIVES), []).append(c)
    representatives = []
    for same in unique.values():
        first = same[0]
        representatives.append(Candidate(first.stack, first.description, first.drives_used, first.spares,
                                         first.scores, first.annual_loss_probability, first.misses,
                                         equivalent=tuple(c.description for c in same[1:]), training=first.training,
                                         kvcache=first.kvcache))
    front = [c for c in representatives if not any(_dominates(o.scores, c.scores) for o in representatives)]
    front = [Candidate(c.stack, c.description, c.drives_used, c.spares, c.scores, c.annual_loss_probability,
                       c.misses, _reasons(c, front), c.equivalent, _warnings(c.stack, needs), c.training, c.kvcache)
             for c in front]
    front.sort(key=lambda c: (-c.scores["usable_bytes"], -c.scores["mttdl_h"]))
    return Recommendation(len(scored), len(feasible), tuple(front), note)
