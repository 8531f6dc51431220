"""Throughput and bottleneck of a stack: sequential bandwidth and random IOPS from the drives, with the
write penalties of the geometry, then capped by every component on the hardware path.

Drive level (steady state, no cache hits; OSTEP's table extended to RAID 6, modelling-and-linux.md §2.2):
- sequential read  = data drives x drive sequential read rate;
- sequential write = all drives x drive write rate / write amplification (drive bytes moved per host
  byte: (d + p) / d for full stripes, more for partial stripes), i.e. d x rate for full stripes;
  behind a write-back cache (a stated one, or a RAID controller's by default:
  Stack.gathers_sequential_writes) a sequential stream reaches the drives as full stripes;
- random read IOPS = drives that hold data (all, with rotating parity or mirrors; N - p with dedicated
  parity) x drive IOPS / chunk pieces per request;
- random write IOPS = all drives x drive IOPS / drive operations per request (4 for a small RAID 5
  write, 6 for RAID 6, 2 for mirrors); RAID 3/4 are also capped by their one parity drive.
Path level: a component carries the sum of what its children carry; components below a RAID engine
(or every component, for md software RAID) carry the drive bytes including parity and RMW reads.
Two ways to share the load: `lockstep` (a striped volume: every group moves the same amount, so the
most loaded component per group sets the pace) and `independent` (separate streams per device: each
component passes min(its cap, what its children deliver), i.e. the max flow of the tree).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

from ..errors import UserError
from .costs import DRIVE_REORDER_DEPTH, reordered_positioning_fraction
from .geometry import AlignmentReport, Geometry, analyse_alignment, gathered_into_full_stripes, geometry_of
from .stack import IMPLIED_CONTROLLER, MAX_COMPONENT_DEPTH, Component, ComponentInstance, Stack, StackError, write_carried_groups

__all__ = [
    "DriveLevelRates", "ComponentLoad", "MetricResult", "PerfReport", "drive_level_rates", "performance_of",
    "mixed_iops", "with_cap_chain", "component_capacity_host", "METRICS", "SHARING_MODES",
]

METRICS = ("seq_read", "seq_write", "random_read", "random_write")
SHARING_MODES = ("lockstep", "independent")
_TIE = 1e-9
# A striped volume is said to lose to unequal paths when independent streams would carry more than
# this fraction above what its equal stripes get (below it, the difference is rounding).
_UNEQUAL_PATHS = 1e-6


@dataclass(frozen=True)
class DriveLevelRates:
    """What the drives of the whole stack can do, before any component cap."""
    seq_read_bw_bytes: float
    seq_write_bw_bytes: float
    random_read_iops: float
    random_write_iops: float
    seq_write: AlignmentReport
    random_write: AlignmentReport
    reorder_gain: float = 1.0       # random IOPS of a drive queued as deep as it reorders / its stated IOPS

    def value(self, metric: str) -> float:
        return {"seq_read": self.seq_read_bw_bytes, "seq_write": self.seq_write_bw_bytes,
                "random_read": self.random_read_iops, "random_write": self.random_write_iops}[metric]


def drive_level_rates(stack: Stack, geometry: Geometry, seq_request_bytes: int, random_request_bytes: int,
                      seq_pattern: str = "sequential", random_pattern: str = "random") -> DriveLevelRates:
    drive, layout = stack.drive, stack.raid.layout
    groups = stack.raid.groups
    drives_total = stack.raid.drives
    data_total = groups * layout.data_drives_per_span
    seq = analyse_alignment(geometry, seq_request_bytes, seq_pattern)
    if seq_pattern == "sequential" and stack.gathers_sequential_writes:
        seq = gathered_into_full_stripes(geometry, seq)
    rnd = analyse_alignment(geometry, random_request_bytes, random_pattern)
    seq_read = data_total * drive.seq_read_bw_bytes
    seq_write = min(data_total * drive.seq_write_bw_bytes,
                    drives_total * drive.seq_write_bw_bytes / seq.write_amplification)
    readers = drives_total - (groups * layout.level.parity_drives if layout.level.dedicated_parity else 0)
    # a spinning drive's stated IOPS are one request at a time; the most it serves is with its
    # queue as deep as it reorders (costs.reordered_positioning_fraction; predict's curve)
    gain = 1.0 / reordered_positioning_fraction(DRIVE_REORDER_DEPTH) if drive.rotational else 1.0
    read_iops, write_iops = drive.random_read_iops * gain, drive.random_write_iops * gain
    random_read = readers * read_iops / rnd.disk_reads_per_read
    random_write = drives_total * write_iops / rnd.disk_ops_per_write
    if layout.level.dedicated_parity:
        # each stripe write reads and writes its group's one parity drive (OSTEP: RAID 4 = R / 2)
        parity_drive_ops_per_request = 2 * rnd.stripe_writes_per_request
        random_write = min(random_write, groups * write_iops / parity_drive_ops_per_request)
    return DriveLevelRates(seq_read, seq_write, random_read, random_write, seq, rnd, gain)


def mixed_iops(read_iops: float, write_iops: float, read_fraction: float) -> float:
    """IOPS of a read/write mix: each host I/O takes 1/IOPS of the back end (harmonic mean); equals
    n I / (R + F W) when read_iops = n I and write_iops = n I / F."""
    if not 0.0 <= read_fraction <= 1.0:
        raise ValueError("read fraction must be between 0 and 1")
    return 1.0 / (read_fraction / read_iops + (1.0 - read_fraction) / write_iops)


@dataclass(frozen=True)
class ComponentLoad:
    """A component template's load at the predicted rate (worst instance), in the component's units."""
    name: str
    kind: str
    instances: int
    capacity: float | None          # seq: bytes/s on the component; random: host IOPS it lets through
    load: float                     # what its busiest instance carries, same units
    carries_parity: bool
    binding: bool                   # at its limit

    @property
    def headroom(self) -> float | None:
        return None if self.capacity is None else self.capacity - self.load

    @property
    def headroom_fraction(self) -> float | None:
        return None if self.capacity is None else (self.capacity - self.load) / self.capacity


@dataclass(frozen=True)
class MetricResult:
    metric: str
    unit: str                       # "bytes/s" or "IOPS" (host side)
    drives_value: float             # what the drives alone could do
    value: float                    # predicted, after every cap
    limiting: str                   # component path, or "drives"
    components: tuple[ComponentLoad, ...]
    # lockstep only: what the paths carry with independent streams, when more than `value`
    unequal_paths_value: float | None = None
    note: str = ""                  # both figures in words, when unequal_paths_value is set
    drives_note: str = ""           # how the drives' figure is reached (command reordering), in words
    one_at_a_time_value: float | None = None   # random metrics of drives that reorder: the value with one
                                               # request at a time on each drive (the textbook figure)


@dataclass(frozen=True)
class PerfReport:
    stack_name: str
    layout: str
    mode: str
    seq_request_bytes: int
    random_request_bytes: int
    drives: DriveLevelRates
    metrics: dict[str, MetricResult]

    def value(self, metric: str) -> float:
        return self.metrics[metric].value


def with_cap_chain(stack: Stack, caps: Iterable[tuple[str, float | None, float | None]]) -> Stack:
    """Put a chain of components (host side first) above all groups: ("pcie", read, write) ..."""
    caps = list(caps)
    if not caps:
        return stack
    if len(caps) > MAX_COMPONENT_DEPTH:
        raise StackError(f"caps: {len(caps)} chained components; allowed: at most {MAX_COMPONENT_DEPTH}")
    if stack.path is not None:
        raise StackError("the stack already has a hardware path; add components in its file instead")
    node: Component | None = None
    for name, read_bw, write_bw in reversed(caps):
        node = Component(name, kind="cap", read_bw_bytes=read_bw, write_bw_bytes=write_bw,
                         groups=stack.raid.groups if node is None else 0,
                         children=() if node is None else (node,))
    return replace(stack, path=node)


def component_capacity_host(instance: ComponentInstance, metric: str, amplification: float,
                             ops_per_request: float, request_bytes: int) -> float | None:
    """The most host traffic (bytes/s or IOPS) this one instance lets through."""
    template = instance.template
    direction = "read" if metric.endswith("read") else "write"
    factor = amplification if instance.carries_parity else 1.0
    bw = template.cap_bw_bytes(direction)
    limits: list[float] = []
    if metric.startswith("seq"):
        if bw is not None:
            limits.append(bw / factor)
    else:
        if bw is not None:
            limits.append(bw / (request_bytes * factor))
        iops = template.iops_limit()
        if iops is not None:
            limits.append(iops / (ops_per_request if instance.carries_parity else 1.0))
    cpu = template.cpu_capacity(request_bytes * factor)
    if cpu is not None:
        limits.append(cpu * request_bytes if metric.startswith("seq") else cpu)
    return min(limits) if limits else None


def mirror_shares(root: ComponentInstance, metric: str) -> dict[int, float]:
    """For a write metric, each mirrored instance (by id()) that carries a partner's writes beside
    its own: the groups it carries over its own. Of its capacity, 1 / share is left for the groups
    under it (stack.write_carried_groups)."""
    if not metric.endswith("write"):
        return {}
    carried = write_carried_groups(root)
    own = {id(i): len(i.all_group_ids()) for i in root.walk()}
    return {key: carried[key] / n for key, n in own.items() if n and carried[key] > n}


def _lockstep_flow(instances: list[ComponentInstance], caps_host: dict[int, float | None],
                   groups_under: dict[int, int], groups: int, drives_value: float
                   ) -> tuple[float, dict[int, float], str]:
    """Every group moves the same share: the rate is the minimum over components of
    cap x groups / groups under it; ties go to the component nearest the host, the drives are
    named only when strictly lowest."""
    limits = [(drives_value, -1, "drives")]
    for i in instances:
        cap, n = caps_host[id(i)], groups_under[id(i)]
        if cap is not None and n:
            limits.append((cap * groups / n, i.depth, i.path))
    value = min(limit for limit, _, _ in limits)
    tied = [(depth, path) for limit, depth, path in limits if limit <= value * (1 + _TIE) and depth >= 0]
    limiting = min(tied)[1] if tied else "drives"
    return value, {id(i): value * groups_under[id(i)] / groups for i in instances}, limiting


def _independent_flow(root: ComponentInstance, caps_host: dict[int, float | None], per_group: float
                      ) -> tuple[float, dict[int, float], str]:
    """Separate streams: each component passes min(its cap, what its children deliver), the max
    flow of the tree. A component that passes less than its children offer cuts each child in
    proportion, so every load is what really flows through it (a child under a tighter parent is
    not at its own limit). The limiting component is the one at its limit that cuts the most of
    what the drives under it could deliver; ties go to the one nearest the host."""
    offered: dict[int, float] = {}     # what an instance receives from below, its own cap not applied
    passed: dict[int, float] = {}      # min(cap, offered): what it passes if nothing above cuts it
    demand: dict[int, float] = {}      # what the drives under it deliver with no component at all
    order: list[ComponentInstance] = list(root.walk())          # parents before children
    for instance in reversed(order):                            # children before parents
        own = len(instance.group_ids) * per_group
        offered[id(instance)] = own + sum(passed[id(c)] for c in instance.children)
        demand[id(instance)] = own + sum(demand[id(c)] for c in instance.children)
        cap = caps_host[id(instance)]
        passed[id(instance)] = offered[id(instance)] if cap is None else min(cap, offered[id(instance)])
    flow: dict[int, float] = {id(root): passed[id(root)]}
    for instance in order:
        through, offer = flow[id(instance)], offered[id(instance)]
        ratio = through / offer if offer > 0 else 0.0
        for child in instance.children:
            flow[id(child)] = passed[id(child)] * ratio
    binding = []
    for position, instance in enumerate(order):
        cap = caps_host[id(instance)]
        through = flow[id(instance)]
        if cap is not None and through > 0 and through >= cap * (1 - _TIE):
            binding.append((demand[id(instance)] - through, instance.depth, position, instance.path))
    if not binding:
        return flow[id(root)], flow, "drives"
    most_cut = max(cut for cut, _, _, _ in binding)
    limiting = min((depth, position, path) for cut, depth, position, path in binding
                   if cut >= most_cut * (1 - _TIE))[2]
    return flow[id(root)], flow, limiting


def _solve_metric(stack: Stack, root: ComponentInstance | None, metric: str, drives_value: float,
                  amplification: float, ops_per_request: float, request_bytes: int, mode: str) -> MetricResult:
    unit = "bytes/s" if metric.startswith("seq") else "IOPS"
    groups = stack.raid.groups
    per_group = drives_value / groups
    if root is None:
        return MetricResult(metric, unit, drives_value, drives_value, "drives", ())
    if mode not in SHARING_MODES:
        raise UserError(f"mode must be one of {', '.join(SHARING_MODES)}, got {mode!r}")
    instances = list(root.walk())
    groups_under = {id(i): len(i.all_group_ids()) for i in instances}
    caps_host = {id(i): component_capacity_host(i, metric, amplification, ops_per_request, request_bytes)
                 for i in instances}
    mirrored = mirror_shares(root, metric)
    for key, share in mirrored.items():
        if caps_host[key] is not None:
            caps_host[key] /= share
    independent_value, independent_flow, independent_limiting = _independent_flow(root, caps_host, per_group)
    unequal_paths_value = None
    if mode == "lockstep":
        value, flow, limiting = _lockstep_flow(instances, caps_host, groups_under, groups, drives_value)
        if independent_value > value * (1 + _UNEQUAL_PATHS):
            unequal_paths_value = independent_value
    else:
        value, flow, limiting = independent_value, independent_flow, independent_limiting

    rows: dict[str, dict] = {}
    for i in instances:
        if metric.startswith("seq"):
            # bandwidth in the component's own bytes: parity and RMW reads included below the engine
            capacity = i.template.cap_bw_bytes("read" if metric == "seq_read" else "write")
            load = flow[id(i)] * (amplification if i.carries_parity else 1.0) * mirrored.get(id(i), 1.0)
        else:
            # IOPS are reported as host IOPS: the most the component lets through versus what it carries
            capacity = caps_host[id(i)]
            load = flow[id(i)]
        template = i.template
        binding = capacity is not None and load >= capacity * (1 - _TIE)
        row = rows.setdefault(template.name, {"kind": template.kind, "instances": 0, "capacity": capacity,
                                              "load": 0.0, "carries": i.carries_parity, "binding": False})
        row["instances"] += 1
        row["load"] = max(row["load"], load)
        row["binding"] = row["binding"] or binding
    components = tuple(ComponentLoad(name, r["kind"], r["instances"], r["capacity"], r["load"], r["carries"],
                                     r["binding"]) for name, r in rows.items())
    note = _unequal_paths_note(instances, independent_flow, caps_host, unit, value, unequal_paths_value, groups)
    return MetricResult(metric, unit, drives_value, value, limiting, components, unequal_paths_value, note)


def _unequal_paths_note(instances: list[ComponentInstance], independent_flow: dict[int, float],
                        caps_host: dict[int, float | None], unit: str, value: float,
                        unequal_paths_value: float | None, groups: int) -> str:
    """'buses 1,282 MB/s; a striped volume gets 1,024 MB/s because its stripes are equal': the paths
    together carry more than a striped volume can use, since every stripe waits for the slowest."""
    if unequal_paths_value is None:
        return ""
    at_limit = [i for i in instances
                if caps_host[id(i)] is not None and independent_flow[id(i)] >= caps_host[id(i)] * (1 - _TIE)]
    kinds = {i.template.kind for i in at_limit}
    kind = kinds.pop() if len(kinds) == 1 else ""
    what = _plural(kind) if kind and kind not in ("component", "cap") else "the paths"
    fmt = (lambda v: f"{v / 1e6:,.0f} MB/s") if unit == "bytes/s" else (lambda v: f"{v:,.0f} IOPS")
    return (f"{what} {fmt(unequal_paths_value)}; a striped volume gets {fmt(value)} because its stripes are equal "
            f"({groups} groups x {fmt(value / groups)}, the share of the slowest path)")


def _plural(noun: str) -> str:
    return noun + ("es" if noun.endswith(("s", "x", "sh", "ch")) else "s")


def _behind_implied_controller(m: MetricResult, iops: float, seq_request_bytes: int | None) -> MetricResult:
    """A metric through the RAID controller a stack implies (Stack.implied_controller_iops): every
    host request passes it, so it lets through `iops` requests/s (x the request for a bandwidth)."""
    capacity = iops * seq_request_bytes if seq_request_bytes is not None else iops
    value = min(m.value, capacity)
    binding = value >= capacity * (1 - _TIE)
    limiting = IMPLIED_CONTROLLER if capacity < m.value * (1 - _TIE) else m.limiting
    row = ComponentLoad(IMPLIED_CONTROLLER, "controller", 1, capacity, value, False, binding)
    return replace(m, value=value, limiting=limiting, components=(row,) + m.components)


def performance_of(stack: Stack, seq_request_bytes: int | None = None, random_request_bytes: int = 4096,
                   mode: str | None = None, seq_pattern: str = "sequential",
                   random_pattern: str = "random") -> PerfReport:
    """Predicted sequential bandwidth and random IOPS, the limiting component and every headroom.
    The sequential request defaults to one full stripe of the volume; the sharing mode defaults to
    lockstep for a striped volume and independent otherwise."""
    geometry = geometry_of(stack)
    seq_request = seq_request_bytes or geometry.full_stripe_bytes
    if mode is None:
        mode = "lockstep" if stack.volume.aggregate == "stripe" or stack.raid.layout.level.nested else "independent"
    drives = drive_level_rates(stack, geometry, seq_request, random_request_bytes, seq_pattern, random_pattern)
    root = stack.instances()
    metrics = {
        "seq_read": _solve_metric(stack, root, "seq_read", drives.seq_read_bw_bytes, 1.0, 1.0, seq_request, mode),
        "seq_write": _solve_metric(stack, root, "seq_write", drives.seq_write_bw_bytes,
                                   drives.seq_write.write_amplification, drives.seq_write.disk_ops_per_write,
                                   seq_request, mode),
        "random_read": _solve_metric(stack, root, "random_read", drives.random_read_iops, 1.0,
                                     drives.random_write.disk_reads_per_read, random_request_bytes, mode),
        "random_write": _solve_metric(stack, root, "random_write", drives.random_write_iops,
                                      drives.random_write.write_amplification,
                                      drives.random_write.disk_ops_per_write, random_request_bytes, mode),
    }
    implied = stack.implied_controller_iops()
    if implied is not None:
        metrics = {key: _behind_implied_controller(m, implied, seq_request if key.startswith("seq") else None)
                   for key, m in metrics.items()}
    if drives.reorder_gain != 1.0:
        # the conventional figure too: each drive at its stated IOPS, one request at a time
        for key in ("random_read", "random_write"):
            m = metrics[key]
            one = min(m.value, m.drives_value / drives.reorder_gain)
            why = (f"{DRIVE_REORDER_DEPTH} requests queued at each drive, which it reorders: x{drives.reorder_gain:.1f} "
                   f"its stated IOPS; one request at a time {one:,.0f} IOPS at most "
                   f"(docs/model.md, \"Command reordering\"; the curve, --qd, shows the depth between)")
            metrics[key] = replace(m, drives_note=why, one_at_a_time_value=one)
    return PerfReport(stack.name, stack.raid.layout.text, mode, seq_request, random_request_bytes, drives, metrics)
