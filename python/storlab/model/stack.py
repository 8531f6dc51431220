"""Stack description: drive type, RAID layout, aggregation, file system and hardware path tree.

A stack is plain, immutable data built either in Python (the dataclasses below) or from a TOML file
(`load_stack`) / dict (`stack_from_dict`). Validation happens here and every problem is a one-line
`StackError` naming the table and key, so `storlab plan` can print it as is. The geometry,
reliability and performance modules only read a `Stack`.

Layering, bottom up: drives -> RAID groups (spans) of `raid.layout` with the intra-chunk `raid.chunk`
-> RAID devices (a RAID 50/60 device stripes its spans with `raid.span_chunk`) -> `raid.count`
copies of that layout -> the volume: host striping (`stripe`, with its own inter-chunk), concatenation
(`concat`) or the devices left separate (`none`) -> file system.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping

from ..errors import UserError
from ..jobs.tomlfile import TomlFileError, read_toml
from ..units import UnitError, parse_duration, parse_rate, parse_size
from .costs import CONTROLLER_KINDS, CONTROLLER_REQUEST_RATE
from .notation import MAX_DRIVES, NotationError, RaidNotation, parse_raid
from .quantities import mtbf_h_from_afr, parse_afr, parse_ber, parse_mtbf_h, parse_period_h

__all__ = [
    "StackError", "DriveType", "RaidSpec", "Volume", "Filesystem", "Component", "ComponentInstance",
    "Stack", "load_stack", "stack_from_dict", "stack_from_notation", "AGGREGATIONS", "RAID_ENGINES",
    "FILESYSTEMS", "DEFAULT_DRIVE", "ControllerCache", "cache_from_dict",
]

AGGREGATIONS = ("stripe", "concat", "none")
RAID_ENGINES = ("controller", "md")
FILESYSTEMS = ("xfs", "ext4", "btrfs", "none")

# Bounds of what a stack may state. Each is far beyond real hardware, and small enough that every
# model (alignment, the Markov chains, the path flows, the recommender) answers within a second
# in bounded memory; an input outside is refused with a one-line error naming the field and range.
MAX_DRIVE_BYTES = 10**15            # 1 PB: no single drive comes near (the largest are tens of TB)
MIN_MTBF_H, MAX_MTBF_H = 1.0, 1e9   # data sheets quote 10^5 .. 2.5 x 10^6 h; 10^9 h is 114,000 years
MAX_DRIVE_BW_BYTES = 1e12           # 1 TB/s per drive: a hundred times the fastest NVMe device
MAX_DRIVE_IOPS = 1e9                # a thousand times the fastest NVMe device
MAX_DRIVE_LATENCY_S = 1.0           # a drive's read latency: far beyond any data sheet's
MIN_SECTOR_BYTES, MAX_SECTOR_BYTES = 512, 64 * 1024
MAX_CHUNK_BYTES = 1 << 30           # 1 GiB chunk / inter-chunk: above what md, LVM or a controller takes
MAX_MTTR_H = 10 * 8760.0            # a rebuild of ten years is no rebuild
MAX_FS_BLOCK_BYTES = 64 * 1024      # xfs, ext4 and btrfs blocks are at most 64 KiB
MAX_COMPONENT_ROWS = 1000           # [[component]] rows of one stack file (templates, before count)
MAX_COMPONENT_DEPTH = 64            # levels of the path tree: host, drawer, planar, link ... are < 10
MAX_CORES = 4096                    # CPU cores of one component (a server): beyond any one machine


class StackError(UserError):
    """An invalid stack description; the message is one line naming what is wrong."""


@dataclass(frozen=True)
class DriveType:
    name: str
    capacity_bytes: int
    mtbf_h: float
    ber_per_bit: float = 1e-15               # unrecoverable read errors per bit read
    sector_bytes: int = 512
    seq_read_bw_bytes: float = 150e6         # bytes/s, one drive, large sequential reads
    seq_write_bw_bytes: float = 150e6
    random_read_iops: float = 80.0           # one drive, small random reads
    random_write_iops: float = 80.0
    rotational: bool = True
    read_latency_s: float | None = None      # the data sheet's read latency: one 4 KiB random read with
                                             # nothing else queued (an SSD's; None: 1 / random read IOPS)
    write_latency_s: float | None = None     # the same for a write (None: the read latency)
    write_cache: bool = True                 # a spinning drive's own write cache acknowledges writes from
                                             # its buffer and writes them out later (on as drives ship:
                                             # docs/model.md, "The drives' write cache"); where no RAID
                                             # controller is in front (Linux md, a bare drive)

    def __post_init__(self) -> None:
        where = f"drive {self.name!r}"
        if not 0 < self.capacity_bytes <= MAX_DRIVE_BYTES:
            raise StackError(f"{where}: capacity {self.capacity_bytes} bytes is out of range; "
                             f"allowed: 1 byte to 1 PB ({MAX_DRIVE_BYTES} bytes)")
        if not MIN_MTBF_H <= self.mtbf_h <= MAX_MTBF_H:
            raise StackError(f"{where}: mtbf {self.mtbf_h:g} h is out of range; "
                             f"allowed: {MIN_MTBF_H:g} h to {MAX_MTBF_H:g} h")
        if not 0 <= self.ber_per_bit < 1:
            raise StackError(f"{where}: ber must be a probability per bit below 1")
        if not (MIN_SECTOR_BYTES <= self.sector_bytes <= MAX_SECTOR_BYTES
                and self.sector_bytes & (self.sector_bytes - 1) == 0):
            raise StackError(f"{where}: sector {self.sector_bytes} bytes; allowed: a power of two from "
                             f"{MIN_SECTOR_BYTES} to {MAX_SECTOR_BYTES} bytes")
        for label, value, high, unit in (
                ("seq_read", self.seq_read_bw_bytes, MAX_DRIVE_BW_BYTES, "bytes/s"),
                ("seq_write", self.seq_write_bw_bytes, MAX_DRIVE_BW_BYTES, "bytes/s"),
                ("random_read_iops", self.random_read_iops, MAX_DRIVE_IOPS, "IOPS"),
                ("random_write_iops", self.random_write_iops, MAX_DRIVE_IOPS, "IOPS")):
            if not 0 < value <= high:
                raise StackError(f"{where}: {label} {value:g} is out of range; allowed: above 0 to {high:g} {unit}")
        for label, latency in (("read_latency", self.read_latency_s), ("write_latency", self.write_latency_s)):
            if latency is not None and not 0 < latency <= MAX_DRIVE_LATENCY_S:
                raise StackError(f"{where}: {label} {latency:g} s is out of range; allowed: above 0 "
                                 f"to {MAX_DRIVE_LATENCY_S:g} s")


# A 2 TB nearline SAS drive with the assumptions of the Dell reliability study (MTBF 600,000 h,
# BER 1e-15, 512-byte sectors); the rates are typical 7.2K rpm values, not from a study.
DEFAULT_DRIVE = DriveType("nearline SAS 2 TB 7.2K rpm", capacity_bytes=2 * 10**12, mtbf_h=600_000.0)


@dataclass(frozen=True)
class RaidSpec:
    """The RAID layout built `count` times (e.g. once per controller)."""
    layout: RaidNotation
    chunk_bytes: int                      # intra-chunk (segment): bytes per drive before the next drive
    span_chunk_bytes: int | None = None   # RAID 50/60: unit the controller stripes spans with
    count: int = 1
    engine: str = "controller"            # where parity is computed: a RAID controller or Linux md
    mttr_h: float | None = None           # time to rebuild one drive, given directly ...
    rebuild_rate_bytes: float | None = None   # ... or derived from the drive capacity at this rate

    def __post_init__(self) -> None:
        text = self.layout.text
        if not self.layout.is_resolved:
            raise StackError(f"{text}: total number of drives is not chosen (x); give the number of drives")
        if not 0 < self.chunk_bytes <= MAX_CHUNK_BYTES or self.chunk_bytes % 512:
            raise StackError(f"{text}: chunk {self.chunk_bytes} bytes; allowed: a multiple of 512 bytes "
                             f"from 512 bytes to 1 GiB")
        if self.span_chunk_bytes is not None:
            if not self.layout.level.nested:
                raise StackError(f"{text}: span_chunk only applies to RAID 50/60")
            if not 0 < self.span_chunk_bytes <= MAX_CHUNK_BYTES or self.span_chunk_bytes % 512:
                raise StackError(f"{text}: span_chunk {self.span_chunk_bytes} bytes; allowed: a multiple of "
                                 f"512 bytes from 512 bytes to 1 GiB")
        if self.count < 1:
            raise StackError(f"{text}: count must be at least 1")
        if self.count * self.layout.total_drives > MAX_DRIVES:
            raise StackError(f"{text} x {self.count}: {self.count * self.layout.total_drives} drives; "
                             f"allowed: at most {MAX_DRIVES} per stack")
        if self.engine not in RAID_ENGINES:
            raise StackError(f"{text}: engine must be one of {', '.join(RAID_ENGINES)}, got {self.engine!r}")
        if self.mttr_h is not None and not 0 < self.mttr_h <= MAX_MTTR_H:
            raise StackError(f"{text}: mttr {self.mttr_h:g} h is out of range; allowed: above 0 to {MAX_MTTR_H:g} h "
                             f"(ten years)")
        if self.rebuild_rate_bytes is not None and not 0 < self.rebuild_rate_bytes <= MAX_DRIVE_BW_BYTES:
            raise StackError(f"{text}: rebuild_rate {self.rebuild_rate_bytes:g} bytes/s is out of range; "
                             f"allowed: above 0 to {MAX_DRIVE_BW_BYTES:g} bytes/s")

    @property
    def effective_span_chunk_bytes(self) -> int:
        """A controller that takes one size uses it for both chunks (the H800 of the Dell study)."""
        return self.span_chunk_bytes if self.span_chunk_bytes is not None else self.chunk_bytes

    @property
    def spans_per_device(self) -> int:
        return self.layout.spans if self.layout.level.nested else 1

    @property
    def devices(self) -> int:
        """RAID devices (LUNs / md arrays) the host sees."""
        per_layout = 1 if self.layout.level.nested else self.layout.spans
        return self.count * per_layout

    @property
    def groups(self) -> int:
        """Span-sized RAID groups in total."""
        return self.count * self.layout.spans

    @property
    def drives(self) -> int:
        return self.groups * self.layout.span


@dataclass(frozen=True)
class Volume:
    """How the host combines the RAID devices."""
    aggregate: str = "none"                  # stripe | concat | none
    inter_chunk_bytes: int | None = None     # host stripe size; None = one device stripe width

    def __post_init__(self) -> None:
        if self.aggregate not in AGGREGATIONS:
            raise StackError(f"volume: aggregate must be one of {', '.join(AGGREGATIONS)}, got {self.aggregate!r}")
        if self.inter_chunk_bytes is not None:
            if self.aggregate != "stripe":
                raise StackError("volume: inter_chunk only applies to aggregate = \"stripe\"")
            if not 0 < self.inter_chunk_bytes <= MAX_CHUNK_BYTES or self.inter_chunk_bytes % 512:
                raise StackError(f"volume: inter_chunk {self.inter_chunk_bytes} bytes; allowed: a multiple of "
                                 f"512 bytes from 512 bytes to 1 GiB")


@dataclass(frozen=True)
class Filesystem:
    kind: str = "xfs"
    block_bytes: int = 4096

    def __post_init__(self) -> None:
        if self.kind not in FILESYSTEMS:
            raise StackError(f"filesystem: type must be one of {', '.join(FILESYSTEMS)}, got {self.kind!r}")
        if not 512 <= self.block_bytes <= MAX_FS_BLOCK_BYTES or self.block_bytes & (self.block_bytes - 1):
            raise StackError(f"filesystem: block {self.block_bytes} bytes; allowed: a power of two from 512 bytes "
                             f"to 64 KiB")


@dataclass(frozen=True)
class Component:
    """One component type of the hardware path; `count` instances of it under each parent instance."""
    name: str
    kind: str = "component"
    read_bw_bytes: float | None = None       # bytes/s it can carry towards the host; None = no limit
    write_bw_bytes: float | None = None      # bytes/s it can carry towards the drives
    iops: float | None = None                # operations/s it can carry; None = no limit
    count: int = 1
    groups: int = 0                          # RAID groups (spans) whose drives hang under each instance
    raid_engine: bool = False                # parity is added here: its host side carries host bytes,
                                             # everything below it carries parity and RMW reads too
    children: tuple["Component", ...] = ()
    # CPU work per request it passes (a file server's or NSD server's protocol and copy work, a
    # controller's command processing): seconds per request plus bytes / cpu_rate, on `cores`
    # cores at once. None: no CPU limit. Capacity = cores / (cpu_per_request + bytes / cpu_rate).
    cpu_per_request_s: float | None = None
    cpu_rate_bytes: float | None = None      # bytes/s one core copies/checksums/sends
    cores: int = 1
    # Write-back cache mirrored between partners: the mirrored instances under one parent instance
    # (a controller pair, a node pair) copy each other's cached writes, so each carries its own
    # writes and a partner's (write_carried_groups). Reads are not mirrored.
    mirror_writes: bool = False

    def __post_init__(self) -> None:
        if self.count < 1:
            raise StackError(f"component {self.name!r}: count must be at least 1")
        if self.groups < 0:
            raise StackError(f"component {self.name!r}: groups must not be negative")
        if not 1 <= self.cores <= MAX_CORES:
            raise StackError(f"component {self.name!r}: cores must be 1 to {MAX_CORES}, got {self.cores}")
        if self.cpu_per_request_s is not None and not 0 <= self.cpu_per_request_s <= 1.0:
            raise StackError(f"component {self.name!r}: cpu_per_request {self.cpu_per_request_s:g} s is out of "
                             "range; allowed: 0 to 1 s")
        for label, value in (("read", self.read_bw_bytes), ("write", self.write_bw_bytes), ("iops", self.iops),
                             ("cpu_rate", self.cpu_rate_bytes)):
            if value is not None and value <= 0:
                raise StackError(f"component {self.name!r}: {label} limit must be positive")
            if value is not None and not value <= MAX_RATE:
                raise StackError(f"component {self.name!r}: {label} limit {value:g} is out of range; "
                                 f"allowed: above 0 to {MAX_RATE:g}")

    def cap_bw_bytes(self, direction: str) -> float | None:
        return self.read_bw_bytes if direction == "read" else self.write_bw_bytes

    def cpu_time_s(self, request_bytes: float) -> float | None:
        """CPU seconds one request of this size costs it (None: no CPU cost given)."""
        if self.cpu_per_request_s is None and self.cpu_rate_bytes is None:
            return None
        return (self.cpu_per_request_s or 0.0) + (request_bytes / self.cpu_rate_bytes if self.cpu_rate_bytes else 0.0)

    def cpu_capacity(self, request_bytes: float) -> float | None:
        """Requests/s its cores carry at this request size (None: no CPU limit)."""
        t = self.cpu_time_s(request_bytes)
        return None if t is None or t <= 0 else self.cores / t

    @property
    def is_array_controller(self) -> bool:
        """An array-side controller (costs.CONTROLLER_KINDS, or the RAID engine whatever its kind)."""
        return self.raid_engine or self.kind in CONTROLLER_KINDS

    def iops_limit(self) -> float | None:
        """The requests/s it handles at most: its own `iops`; an array controller that states neither
        that nor a CPU cost, the model's default controller's (costs.CONTROLLER_REQUEST_RATE), as it
        takes the default controller time per request. None: no request-rate limit."""
        if self.iops is not None:
            return self.iops
        if self.is_array_controller and self.cpu_capacity(1) is None:
            return CONTROLLER_REQUEST_RATE
        return None


@dataclass(frozen=True)
class ComponentInstance:
    """One concrete component: its template, a path name such as 'p690/drawer[3]/planar[1]', its
    depth, the ids of the RAID groups directly under it and its child instances."""
    template: Component
    path: str
    depth: int
    group_ids: tuple[int, ...]
    children: tuple["ComponentInstance", ...]
    carries_parity: bool

    def walk(self) -> Iterator["ComponentInstance"]:
        yield self
        for child in self.children:
            yield from child.walk()

    def all_group_ids(self) -> tuple[int, ...]:
        ids = list(self.group_ids)
        for child in self.children:
            ids.extend(child.all_group_ids())
        return tuple(ids)


def write_carried_groups(root: ComponentInstance) -> dict[int, float]:
    """RAID groups whose writes each instance carries (by id()): the groups under it, and for a
    mirrored instance (`mirror_writes`) also a partner's copies. Each cached write is copied to one
    other mirrored instance under the same parent, so with n such siblings an instance carries its
    own groups plus 1 / (n - 1) of theirs: a pair carries both halves each; alone (its partner not
    in the stack, or idle) it carries its own."""
    own = {id(inst): len(inst.all_group_ids()) for inst in root.walk()}
    carried = {key: float(n) for key, n in own.items()}
    for inst in root.walk():
        mirrored = [id(c) for c in inst.children if c.template.mirror_writes]
        if len(mirrored) < 2:
            continue
        total = sum(own[key] for key in mirrored)
        for key in mirrored:
            carried[key] = own[key] + (total - own[key]) / (len(mirrored) - 1)
    return carried


@dataclass(frozen=True)
class ControllerCache:
    """A RAID controller's (or array's) cache, a component of the stack: its size, the rates it
    serves hits and absorbs writes at, and what it does with the traffic that misses.
    write_back: writes are acknowledged from the cache and drained to the members behind the
    host's back (coalesced into full stripes when sequential); False: write-through.
    read_ahead: a sequential read stream is prefetched, so its requests are served from the cache
    at the cache's latency while the members stream at their rate (the studies: out-of-cache
    reads "very similar to in-cache reads" with "a very intelligent read-ahead", 3PAR S400).
    latency_s: one request served from the cache with nothing queued (0: not stated).
    size_bytes None: not stated (a controller said to write through, or to read ahead, with no
    size given): no working set is taken to fit in it."""
    size_bytes: int | None
    read_bw_bytes: float
    write_bw_bytes: float
    write_back: bool = True
    iops: float | None = None
    latency_s: float = 0.0
    read_ahead: bool = False

    def __post_init__(self) -> None:
        if self.size_bytes is not None and self.size_bytes <= 0:
            raise StackError(f"cache: size must be positive, got {self.size_bytes!r}")
        for label in ("read_bw_bytes", "write_bw_bytes"):
            value = getattr(self, label)
            if not (value > 0 and math.isfinite(value)):
                raise StackError(f"cache: {label} must be a positive finite rate, got {value!r}")
        if self.iops is not None and not (self.iops > 0 and math.isfinite(self.iops)):
            raise StackError(f"cache: iops must be a positive finite number, got {self.iops!r}")
        if not (self.latency_s >= 0 and math.isfinite(self.latency_s)):
            raise StackError(f"cache: latency must be a finite time >= 0, got {self.latency_s!r}")


@dataclass(frozen=True)
class Stack:
    drive: DriveType
    raid: RaidSpec
    volume: Volume = field(default_factory=Volume)
    filesystem: Filesystem = field(default_factory=Filesystem)
    path: Component | None = None
    name: str = "stack"
    description: str = ""
    cache: ControllerCache | None = None

    def __post_init__(self) -> None:
        if self.path is not None and _count_instances(self.path) > MAX_COMPONENT_INSTANCES:
            raise StackError(f"path: the components expand to more than {MAX_COMPONENT_INSTANCES} instances; "
                             f"allowed: at most {MAX_COMPONENT_INSTANCES} (lower count = N)")
        if self.volume.aggregate != "none" and self.raid.devices < 2:
            raise StackError(f"volume: aggregate = {self.volume.aggregate!r} needs at least 2 RAID devices; "
                             f"{self.raid.layout.text} x {self.raid.count} makes 1")
        if self.path is not None:
            attached = count_groups(self.path)
            if attached != self.raid.groups:
                raise StackError(f"path: components carry {attached} RAID groups but the stack has "
                                 f"{self.raid.groups} ({self.raid.layout.text} x {self.raid.count}); "
                                 f"set groups = N on the components the drives hang under")

    @property
    def names_controller(self) -> bool:
        """Some component of its path is an array controller (a RAID notation names none)."""
        root = self.instances()
        return root is not None and any(inst.template.is_array_controller for inst in root.walk())

    def implied_controller_iops(self) -> float | None:
        """The host requests/s of the RAID controller the stack implies but does not name (parity by
        a controller, no array controller among its components: a RAID notation such as R5/9): its
        cache's stated `iops`, else the model's default controller's (costs.CONTROLLER_REQUEST_RATE).
        None where parity is md's or the stack names its controllers, whose own limits apply."""
        if self.raid.engine != "controller" or self.names_controller:
            return None
        return self.cache.iops if self.cache is not None and self.cache.iops is not None else CONTROLLER_REQUEST_RATE

    @property
    def gathers_sequential_writes(self) -> bool:
        """Whether a sequential stream's writes reach the members gathered into whole stripes (no
        read before the write): behind a stated write-back cache, and behind a RAID controller
        (engine "controller") whose cache the stack does not describe. A hardware RAID controller
        writes back by default (MegaRAID Storage Manager, the PERC family's: "WB: Write Back write
        policy (default)", write-through only while its battery is absent or charging), and the
        Engenio study advises to "coalesce smaller than even stripe width I/O's in write cache".
        In front of datasheet drives the undescribed cache also acknowledges writes
        (IMPLIED_WRITE_BACK, predict); its size is not stated. Linux md computes parity for each
        request in flight. A controller without a write-back cache is stated as
        one: a [cache] table with write_back = false (plan perf --write-through)."""
        if self.cache is not None:
            return self.cache.write_back
        return self.raid.engine == "controller"

    @property
    def mttr_h(self) -> float:
        """Hours to rebuild one failed drive: given, or capacity / rebuild rate."""
        if self.raid.mttr_h is not None:
            return self.raid.mttr_h
        if self.raid.rebuild_rate_bytes is not None:
            return self.drive.capacity_bytes / self.raid.rebuild_rate_bytes / 3600.0
        raise StackError("raid: give mttr or rebuild_rate to compute reliability")

    def instances(self) -> ComponentInstance | None:
        """Expand the path templates into instances, handing out group ids 0.. in tree order."""
        if self.path is None:
            return None
        next_group = [0]
        all_carry = self.raid.engine == "md"   # software RAID: parity crosses every component

        def expand(template: Component, prefix: str, index: int | None, depth: int,
                   parity_from_above: bool) -> ComponentInstance:
            label = template.name if index is None else f"{template.name}[{index}]"
            path = f"{prefix}/{label}" if prefix else label
            carries = all_carry or parity_from_above
            ids = tuple(range(next_group[0], next_group[0] + template.groups))
            next_group[0] += template.groups
            children = []
            for child in template.children:
                for i in range(child.count):
                    children.append(expand(child, path, i + 1 if child.count > 1 else None, depth + 1,
                                           carries or template.raid_engine))
            return ComponentInstance(template, path, depth, ids, tuple(children), carries)

        return expand(self.path, "", None, 0, False)


# Component instances a path tree may expand to (count multiplies down the tree).
MAX_COMPONENT_INSTANCES = 100_000


def _count_instances(component: Component, multiplier: int = 1) -> int:
    """Instances of the tree, stopping early once past the limit (a deep tree of large counts
    would otherwise be a number with thousands of digits)."""
    total = multiplier
    for child in component.children:
        if total > MAX_COMPONENT_INSTANCES:
            break
        total += _count_instances(child, multiplier * child.count)
    return total


def count_groups(component: Component, multiplier: int = 1) -> int:
    own = component.groups * multiplier
    return own + sum(count_groups(child, multiplier * child.count) for child in component.children)


# ----------------------------------------------------------------------------------------------
# Building from plain data (TOML)

_TOP_KEYS = {"name", "description", "drive", "raid", "volume", "filesystem", "component", "cache"}
_CACHE_KEYS = {"size", "bw", "read", "write", "iops", "latency", "write_back", "read_ahead"}
# A cache whose rates are not given serves at a rate that binds nothing: the path above it (the
# host ports, the controller's own limits) then sets the rate of hits.
UNSTATED_CACHE_RATE = 1e15
# The name of the RAID controller a stack implies but does not describe, as a component of a
# prediction or a ceiling (Stack.implied_controller_iops)
IMPLIED_CONTROLLER = "controller (implied)"
# The cache of a RAID controller the stack implies but does not describe (a RAID notation such as
# R5/9, parity by a controller): it writes back, as such a controller does by default
# (Stack.gathers_sequential_writes); its size, rates and latency are not stated.
IMPLIED_WRITE_BACK = ControllerCache(None, UNSTATED_CACHE_RATE, UNSTATED_CACHE_RATE)
_DRIVE_KEYS = {"name", "capacity", "mtbf", "afr", "ber", "sector", "seq_read", "seq_write", "seq",
               "random_iops", "random_read_iops", "random_write_iops", "rotational", "read_latency",
               "write_latency", "write_cache"}
_RAID_KEYS = {"layout", "drives", "chunk", "span_chunk", "count", "engine", "mttr", "rebuild_rate"}
_VOLUME_KEYS = {"aggregate", "inter_chunk"}
_FS_KEYS = {"type", "block"}
_COMPONENT_KEYS = {"name", "kind", "parent", "count", "bw", "read", "write", "iops", "groups", "raid_engine",
                   "cpu_per_request", "cpu_rate", "cores", "mirror_writes"}


def _check_keys(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    if not isinstance(table, Mapping):
        raise StackError(f"{where}: expected a table")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise StackError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")


def _convert(where: str, key: str, value: Any, parser: Any) -> Any:
    try:
        return parser(value)
    except (UnitError, NotationError, ValueError, TypeError) as e:
        message = str(e)
        raise StackError(f"{where}: {key}: {message}") from None


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected a whole number, got {value!r}")
    if not 0 <= value <= MAX_DRIVES:
        raise ValueError(f"{value} is out of range; allowed: 0 to {MAX_DRIVES}")
    return value


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a number, got {value!r}")
    number = float(value)
    if not (math.isfinite(number) and 0 < number <= MAX_RATE):
        raise ValueError(f"{value!r} is out of range; allowed: a number > 0 and <= {MAX_RATE:g}")
    return number


# The largest rate or IOPS figure a stack may state.
MAX_RATE = 1e18


def drive_from_dict(table: Mapping[str, Any], where: str = "[drive]") -> DriveType:
    _check_keys(table, _DRIVE_KEYS, where)
    if "capacity" not in table:
        raise StackError(f"{where}: capacity is required (e.g. capacity = \"2TB\")")
    if "mtbf" in table and "afr" in table:
        raise StackError(f"{where}: give mtbf or afr, not both")
    kwargs: dict[str, Any] = {"name": str(table.get("name", "drive"))}
    kwargs["capacity_bytes"] = _convert(where, "capacity", table["capacity"], lambda v: parse_size(v, "capacity"))
    if "afr" in table:
        kwargs["mtbf_h"] = mtbf_h_from_afr(_convert(where, "afr", table["afr"], parse_afr))
    else:
        kwargs["mtbf_h"] = _convert(where, "mtbf", table.get("mtbf", DEFAULT_DRIVE.mtbf_h), parse_mtbf_h)
    if "ber" in table:
        kwargs["ber_per_bit"] = _convert(where, "ber", table["ber"], parse_ber)
    if "sector" in table:
        kwargs["sector_bytes"] = _convert(where, "sector", table["sector"], lambda v: parse_size(v, "sector"))
    seq = table.get("seq")
    if "seq_read" in table or seq is not None:
        kwargs["seq_read_bw_bytes"] = _convert(where, "seq_read", table.get("seq_read", seq), parse_rate)
    if "seq_write" in table or seq is not None or "seq_read" in table:
        kwargs["seq_write_bw_bytes"] = _convert(where, "seq_write",
                                                table.get("seq_write", seq if seq is not None else table.get("seq_read")),
                                                parse_rate)
    random_iops = table.get("random_iops")
    for key, attr in (("random_read_iops", "random_read_iops"), ("random_write_iops", "random_write_iops")):
        value = table.get(key, random_iops)
        if value is not None:
            kwargs[attr] = _convert(where, key, value, _float)
    if "rotational" in table:
        kwargs["rotational"] = bool(table["rotational"])
    if "write_cache" in table:
        kwargs["write_cache"] = _convert(where, "write_cache", table["write_cache"], _bool)
    for key in ("read_latency", "write_latency"):
        if key in table:
            kwargs[f"{key}_s"] = _convert(where, key, table[key], lambda v, key=key: parse_duration(v, key))
    try:
        return DriveType(**kwargs)
    except StackError as e:
        raise StackError(f"{where}: {e}") from None


def raid_from_dict(table: Mapping[str, Any], where: str = "[raid]") -> RaidSpec:
    _check_keys(table, _RAID_KEYS, where)
    if "layout" not in table:
        raise StackError(f"{where}: layout is required (e.g. layout = \"R6/12\")")
    layout = _convert(where, "layout", table["layout"], parse_raid)
    if "drives" in table:
        total = _convert(where, "drives", table["drives"], _int)
        if layout.total_drives is not None and layout.total_drives != total:
            raise StackError(f"{where}: drives = {total} contradicts layout {layout.text}")
        layout = _convert(where, "drives", total, layout.with_total)
    if "chunk" not in table:
        raise StackError(f"{where}: chunk is required (e.g. chunk = \"512KiB\")")
    if "mttr" in table and "rebuild_rate" in table:
        raise StackError(f"{where}: give mttr or rebuild_rate, not both")
    kwargs: dict[str, Any] = {
        "layout": layout,
        "chunk_bytes": _convert(where, "chunk", table["chunk"], lambda v: parse_size(v, "chunk")),
        "count": _convert(where, "count", table.get("count", 1), _int),
        "engine": str(table.get("engine", "controller")),
    }
    if "span_chunk" in table:
        kwargs["span_chunk_bytes"] = _convert(where, "span_chunk", table["span_chunk"], lambda v: parse_size(v, "span_chunk"))
    if "mttr" in table:
        kwargs["mttr_h"] = _convert(where, "mttr", table["mttr"], lambda v: parse_period_h(v, "mttr", bare_unit_h=1.0))
    if "rebuild_rate" in table:
        kwargs["rebuild_rate_bytes"] = _convert(where, "rebuild_rate", table["rebuild_rate"], parse_rate)
    try:
        return RaidSpec(**kwargs)
    except StackError as e:
        raise StackError(f"{where}: {e}") from None


def _components_from_list(rows: Any) -> Component:
    """Build the tree from `[[component]]` rows that name their parent; one root."""
    if not isinstance(rows, list) or not rows:
        raise StackError("[[component]]: expected a list of tables")
    if len(rows) > MAX_COMPONENT_ROWS:
        raise StackError(f"[[component]]: {len(rows)} components; allowed: at most {MAX_COMPONENT_ROWS}")
    by_name: dict[str, dict[str, Any]] = {}
    parents: dict[str, str | None] = {}
    order: list[str] = []
    for i, row in enumerate(rows, 1):
        where = f"[[component]] #{i}"
        _check_keys(row, _COMPONENT_KEYS, where)
        if "name" not in row:
            raise StackError(f"{where}: name is required")
        name = str(row["name"])
        where = f"[[component]] {name!r}"
        if name in by_name:
            raise StackError(f"{where}: name used twice; component names must be unique")
        if "bw" in row and ("read" in row or "write" in row):
            raise StackError(f"{where}: give bw (both directions) or read/write, not both")
        both = row.get("bw")
        fields: dict[str, Any] = {
            "name": name,
            "kind": str(row.get("kind", "component")),
            "read_bw_bytes": None if row.get("read", both) is None else _convert(where, "read", row.get("read", both), parse_rate),
            "write_bw_bytes": None if row.get("write", both) is None else _convert(where, "write", row.get("write", both), parse_rate),
            "iops": None if "iops" not in row else _convert(where, "iops", row["iops"], _float),
            "count": _convert(where, "count", row.get("count", 1), _int),
            "groups": _convert(where, "groups", row.get("groups", 0), _int),
            "raid_engine": bool(row.get("raid_engine", False)),
            "cpu_per_request_s": None if "cpu_per_request" not in row else
            _convert(where, "cpu_per_request", row["cpu_per_request"], lambda v: parse_duration(v, "cpu_per_request")),
            "cpu_rate_bytes": None if "cpu_rate" not in row else _convert(where, "cpu_rate", row["cpu_rate"], parse_rate),
            "cores": _convert(where, "cores", row.get("cores", 1), _int),
            "mirror_writes": _convert(where, "mirror_writes", row.get("mirror_writes", False), _bool),
        }
        by_name[name] = fields
        parents[name] = None if row.get("parent") is None else str(row["parent"])
        order.append(name)
    roots = [n for n in order if parents[n] is None]
    for name in order:
        parent = parents[name]
        if parent is not None and parent not in by_name:
            raise StackError(f"[[component]] {name!r}: parent {parent!r} is not a component")
    if len(roots) != 1:
        listed = ", ".join(repr(r) for r in roots) or "none"
        raise StackError(f"[[component]]: exactly one component must have no parent (the host side); found {listed}")

    children_of: dict[str, list[str]] = {name: [] for name in order}
    for name in order:
        if parents[name] is not None:
            children_of[parents[name]].append(name)

    def build(name: str, seen: tuple[str, ...]) -> Component:
        if name in seen:
            raise StackError(f"[[component]] {name!r}: parent chain forms a loop")
        if len(seen) >= MAX_COMPONENT_DEPTH:
            raise StackError(f"[[component]] {name!r}: the path is more than {MAX_COMPONENT_DEPTH} components deep; "
                             f"allowed: at most {MAX_COMPONENT_DEPTH} levels")
        children = tuple(build(child, seen + (name,)) for child in children_of[name])
        try:
            return Component(children=children, **by_name[name])
        except StackError as e:
            raise StackError(f"[[component]] {name!r}: {e}") from None

    tree = build(roots[0], ())
    reachable = sum(1 for _ in _walk_templates(tree))
    if reachable != len(order):
        raise StackError("[[component]]: some components are not connected to the root (parent loop)")
    return tree


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def cache_from_dict(table: Mapping[str, Any], where: str = "[cache]") -> ControllerCache:
    """The [cache] table: size, bw or read/write, iops, latency, write_back, read_ahead. Without a
    size nothing is taken to fit in it (a controller said to write through, say)."""
    _check_keys(table, _CACHE_KEYS, where)
    size = None if "size" not in table else _convert(where, "size", table["size"], lambda v: parse_size(v, "size"))
    if size is not None and size <= 0:
        raise StackError(f"{where}: size: must be positive, got {table['size']!r}")
    bw = table.get("bw")
    rates = {key: UNSTATED_CACHE_RATE if table.get(key, bw) is None else
             _convert(where, key, table.get(key, bw), parse_rate) for key in ("read", "write")}
    return ControllerCache(
        size, rates["read"], rates["write"],
        write_back=_convert(where, "write_back", table.get("write_back", True), _bool),
        iops=None if "iops" not in table else _convert(where, "iops", table["iops"], _float),
        latency_s=0.0 if "latency" not in table else
        _convert(where, "latency", table["latency"], lambda v: parse_duration(v, "latency")),
        read_ahead=_convert(where, "read_ahead", table.get("read_ahead", False), _bool))


def _walk_templates(component: Component) -> Iterator[Component]:
    yield component
    for child in component.children:
        yield from _walk_templates(child)


def stack_from_dict(data: Mapping[str, Any], source: str = "stack") -> Stack:
    """Build and validate a Stack from the TOML structure documented in docs/model.md."""
    _check_keys(data, _TOP_KEYS, source)
    if "raid" not in data:
        raise StackError(f"{source}: a [raid] table is required")
    drive = drive_from_dict(data["drive"]) if "drive" in data else DEFAULT_DRIVE
    raid = raid_from_dict(data["raid"])
    volume_table = data.get("volume", {})
    _check_keys(volume_table, _VOLUME_KEYS, "[volume]")
    volume = Volume(
        aggregate=str(volume_table.get("aggregate", "none")),
        inter_chunk_bytes=None if "inter_chunk" not in volume_table else
        _convert("[volume]", "inter_chunk", volume_table["inter_chunk"], lambda v: parse_size(v, "inter_chunk")),
    )
    fs_table = data.get("filesystem", {})
    _check_keys(fs_table, _FS_KEYS, "[filesystem]")
    filesystem = Filesystem(
        kind=str(fs_table.get("type", "xfs")),
        block_bytes=_convert("[filesystem]", "block", fs_table.get("block", 4096), lambda v: parse_size(v, "block")),
    )
    path = _components_from_list(data["component"]) if "component" in data else None
    cache = cache_from_dict(data["cache"]) if "cache" in data else None
    return Stack(drive=drive, raid=raid, volume=volume, filesystem=filesystem, path=path,
                 name=str(data.get("name", source)), description=str(data.get("description", "")), cache=cache)


def load_stack(path: str | os.PathLike[str]) -> Stack:
    """Read a stack TOML file; errors name the file."""
    name = os.fspath(path)
    if not os.path.lexists(name):
        raise StackError(f"{name}: no such stack file")
    try:
        data = read_toml(name, "stack file")
    except TomlFileError as e:
        raise StackError(str(e)) from None
    try:
        stack = stack_from_dict(data, source=os.path.basename(name))
    except StackError as e:
        raise StackError(f"{name}: {e}") from None
    if "name" not in data:
        stack = replace(stack, name=os.path.splitext(os.path.basename(name))[0])
    return stack


def stack_from_notation(layout: str | RaidNotation, chunk_bytes: int = 512 * 1024, *,
                        drive: DriveType = DEFAULT_DRIVE, drives: int | None = None, count: int = 1,
                        span_chunk_bytes: int | None = None, aggregate: str | None = None,
                        inter_chunk_bytes: int | None = None, engine: str = "controller",
                        mttr_h: float | None = None, rebuild_rate_bytes: float | None = None,
                        filesystem: Filesystem | None = None, path: Component | None = None) -> Stack:
    """A stack from the short notation plus options (the CLI's `storlab plan ... R60/12/24`)."""
    notation = parse_raid(layout) if isinstance(layout, str) else layout
    if drives is not None:
        if notation.total_drives is not None and notation.total_drives != drives:
            raise StackError(f"{notation.text}: --drives {drives} contradicts the layout")
        notation = notation.with_total(drives)
    raid = RaidSpec(notation, chunk_bytes, span_chunk_bytes, count, engine, mttr_h, rebuild_rate_bytes)
    if aggregate is None:
        aggregate = "stripe" if raid.devices > 1 else "none"
    volume = Volume(aggregate, inter_chunk_bytes)
    return Stack(drive=drive, raid=raid, volume=volume, filesystem=filesystem or Filesystem(), path=path,
                 name=notation.text)
