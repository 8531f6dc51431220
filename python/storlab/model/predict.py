"""Expected throughput and IOPS of a stack for one workload: what a run should measure, not a ceiling.

`performance.py` gives the ceiling of each metric; this module predicts the rate of one workload
(pattern, request size, queue depth, threads, working set) from:
- each member device's bandwidth, IOPS and unloaded latency (datasheet or measured), members may
  differ (a slow member);
- the RAID level and geometry: how a request splits into chunk pieces, full-stripe, partial-stripe
  and read-modify-write costs (`geometry.analyse_alignment`), which copies of a mirror serve reads;
- the outstanding requests (queue depth x threads) through Little's law: rate = outstanding / time
  per request, where the time is the unloaded latency plus the transfer on the slowest member touched;
- a controller cache: in-cache working sets are served at the cache's rate, out-of-cache ones by the
  members (reads hit in proportion cache / working set for random access, never for sequential
  sweeps but through read-ahead; write-back coalesces sequential writes into full stripes);
- every component of the hardware path (adapters, buses) with the load shares of `performance.py`:
  the workload is spread evenly over the RAID groups, so a component carries the share of the
  groups under it; one striped request splits over the groups its pieces land on, and each
  instance carries only its pieces, all at once (`groups_touched`);
- a write that reads first (read-modify-write) does its two passes in series; a cache answers the
  requests it serves (hits, write-back writes, read-ahead reads) at its own latency, the members
  working behind it; an array controller adds its time per request (costs.py);
- a volume of independent devices (aggregate none) keeps each thread on one device: the devices
  are separate queueing networks whose rates add.
The rate is the smallest of these capacities; the output names that limiting component (a resource
within 1 % of it before the queue depth, which always sits just below the resource a request waits on)
and every component's headroom (1 - rate / capacity). Each capacity is in host requests per second, so bandwidth
and IOPS limits compare directly; bandwidth = rate x request size.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

from .costs import (
    CONTROLLER_REQUEST_LATENCY_S,
    CONTROLLER_REQUEST_RATE,
    DATASHEET_IOPS_REQUEST_BYTES,
    DRIVE_REORDER_DEPTH,
    HBA_REQUEST_OVERHEAD_S,
    HOST_REQUEST_OVERHEAD_S,
    positioning_scv,
    reordered_positioning_fraction,
    reordered_time,
    revolution_of,
    slowest_positioning_spread,
    slowest_rotation_extra,
)
from .geometry import AlignmentReport, analyse_alignment, gathered_into_full_stripes, geometry_of
from .queueing import Station, solve_closed
from .stack import (
    IMPLIED_CONTROLLER,
    IMPLIED_WRITE_BACK,
    UNSTATED_CACHE_RATE,
    Component,
    ControllerCache,
    DriveType,
    Stack,
    StackError,
    count_groups,
    write_carried_groups,
)

__all__ = ["Device", "Workload", "ControllerCache", "ComponentCapacity", "Prediction", "predict",
           "WORKLOAD_PATTERNS", "MIRROR_READ_POLICIES", "member_name"]

WORKLOAD_PATTERNS = ("read", "write", "randread", "randwrite")
# balanced: reads spread over every copy (md raid1/raid10); per-thread: each thread reads one copy
# (btrfs's default 'pid' read policy), so one thread uses one copy of every mirror
MIRROR_READ_POLICIES = ("balanced", "per-thread")
# a resource within this headroom is named limiting before the queue depth (see predict); so is
# the busiest resource when twice the outstanding requests would gain less than QUEUE_DEPTH_GAIN
# (past the knee of the curve more depth only lengthens the queue)
QUEUE_DEPTH_MARGIN = 0.01
QUEUE_DEPTH_GAIN = 0.05
# several sequential streams on spinning drives: the rate if nothing read ahead of each stream is
# printed beside the prediction when it is below this share of it
STREAMS_SCATTER_SHOWN = 0.85


def _less_transfer(time_s: float, request_bytes: int, bw_bytes: float) -> float:
    """A data sheet's time of one request less the transfer of its `request_bytes`: its fixed time.
    Never below a hundredth of the time: figures whose transfer would exceed it (inconsistent, or
    taken at another size) still leave every request a fixed cost."""
    return max(time_s - request_bytes / bw_bytes, 0.01 * time_s)


@dataclass(frozen=True)
class Device:
    """One member device. latency_s is the time of one small request with nothing else queued.
    shared_time: reads and writes share one mechanism (a disk arm: their times add); False for
    limits kept per direction (the blkio throttle keeps separate read and write budgets).
    counts_every_request: the IOPS limit applies to sequential pieces too (a throttle counts every
    bio); a disk streams the contiguous pieces of a sequential workload without a seek, so only its
    bandwidth limits them.
    queues: requests wait for its service time (a drive, a controller: a queueing station of the
    model, docs/model.md "Concurrency"); False for a rate limiter such as the blkio throttle (a
    token bucket: a lone request passes at its latency, the budget caps the rate).
    parallelism: requests it serves at once (actuators, flash channels, the controller's queue
    slots); its IOPS and bandwidth are the device's totals.
    sequential_latency_s: the fixed time of a request that needs no seek (a contiguous piece of a
    sequential stream); None: latency_s. A profile measures both.
    write_latency_s: the fixed time of a random write where it differs from a read's (an SSD's data
    sheet states both: a write lands in its buffer); None: latency_s.
    look_ahead: after a read the device goes on reading the following sectors into its own buffer
    (a spinning drive's read look-ahead, on unless the caching mode page's DRA bit is set: SCSI
    Block Commands; Ruemmler and Wilkes, "An Introduction to Disk Drive Modeling", 1994), so a
    sequential stream's next piece on it is in the buffer when the request arrives, if the drive
    had the time. False for a rate limiter or a measured profile (what it measured holds it).
    from_datasheet: a stack's drive type (Device.from_drive): its figures are the drive's own, so a
    RAID controller the stack implies puts its write-back cache in front of it (predict). False for
    a measured device or an array seen from its host, whose figures hold what was in front of them.
    reorder_depth: how many queued random requests it chooses among, serving first the one it
    reaches soonest (a spinning drive's rotational position ordering, costs.DRIVE_REORDER_DEPTH):
    its positioning time (1 / IOPS) shrinks as its queue grows. 1: it serves in arrival order, or
    what it measured already holds its queueing (a profile, an array seen from its host).
    iops_request_bytes: the request size the IOPS figures were taken at, whose transfer they include
    (a data sheet's "random 4 KB read IOPS"): a random request's positioning is 1 / IOPS less that
    transfer (positioning_s). 0: the IOPS figures are positioning alone.
    request_bw_bytes: the rate one request transfers at with nothing else in flight, where that is
    below the device's bandwidth (one of its units: a memory-backed device copies one request on one
    CPU; a profile measures it, the slope of its QD1 line); None: the device's bandwidth (a disk, a
    flash device spreading a request over every channel). Its bandwidth still bounds the total.
    revolution_s: one revolution of a spinning drive (costs.revolution_of); a random request whose
    pieces land on several at once waits for the slowest to turn to its sector
    (costs.slowest_rotation_extra). 0: no rotation to wait for (flash, a measured device whose
    latency already holds it).
    write_cache: a spinning drive's own write cache acknowledges a write from its buffer and writes
    it out later, choosing among what it holds (DriveType.write_cache; predict applies it where no
    RAID controller is in front). False for a measured device (what it measured holds it) and flash
    (its data sheet's write figures already do)."""
    read_bw_bytes: float
    write_bw_bytes: float
    read_iops: float
    write_iops: float
    latency_s: float
    name: str = "device"
    shared_time: bool = True
    counts_every_request: bool = False
    queues: bool = True
    parallelism: int = 1
    sequential_latency_s: float | None = None
    write_latency_s: float | None = None
    look_ahead: bool = False
    from_datasheet: bool = False
    reorder_depth: int = 1
    iops_request_bytes: int = 0
    request_bw_bytes: float | None = None
    revolution_s: float = 0.0
    write_cache: bool = False

    def __post_init__(self) -> None:
        for label in ("read_bw_bytes", "write_bw_bytes", "read_iops", "write_iops", "latency_s"):
            value = getattr(self, label)
            if not (value > 0 and math.isfinite(value)):
                raise StackError(f"device {self.name!r}: {label} must be a positive finite number, got {value!r}")
        if self.parallelism < 1:
            raise StackError(f"device {self.name!r}: parallelism must be at least 1, got {self.parallelism!r}")
        if self.reorder_depth < 1:
            raise StackError(f"device {self.name!r}: reorder_depth must be at least 1, got {self.reorder_depth!r}")
        if self.request_bw_bytes is not None and not (self.request_bw_bytes > 0
                                                       and math.isfinite(self.request_bw_bytes)):
            raise StackError(f"device {self.name!r}: request_bw_bytes must be a positive finite rate")
        if self.iops_request_bytes < 0:
            raise StackError(f"device {self.name!r}: iops_request_bytes must be at least 0, "
                             f"got {self.iops_request_bytes!r}")
        if self.sequential_latency_s is not None and not (self.sequential_latency_s >= 0
                                                          and math.isfinite(self.sequential_latency_s)):
            raise StackError(f"device {self.name!r}: sequential_latency_s must be a finite time >= 0")

    def positioning_s(self, write: bool) -> float:
        """A random request's share of the IOPS figure. On one mechanism (shared_time) that is its
        fixed time before its transfer: 1 / IOPS less the transfer of the size the IOPS were taken at
        (_less_transfer). A device that keeps its limits per direction (a throttle) charges 1 / IOPS
        of its budget whatever the size."""
        iops, bw = (self.write_iops, self.write_bw_bytes) if write else (self.read_iops, self.read_bw_bytes)
        if not self.shared_time:
            return 1.0 / iops
        return _less_transfer(1.0 / iops, self.iops_request_bytes, bw)

    def request_rate(self, write: bool) -> float:
        """Bytes/s one request transfers at with nothing else in flight."""
        bw = self.write_bw_bytes if write else self.read_bw_bytes
        return bw if self.request_bw_bytes is None else min(bw, self.request_bw_bytes)

    def latency_for(self, sequential: bool, write: bool = False) -> float:
        """The fixed time of one request with nothing queued."""
        if sequential and self.sequential_latency_s is not None:
            return self.sequential_latency_s
        if write and self.write_latency_s is not None:
            return self.write_latency_s
        return self.latency_s

    @classmethod
    def from_drive(cls, drive: DriveType) -> "Device":
        """A stack's drive type. Its IOPS are a data sheet's, taken with 4 KiB requests
        (costs.DATASHEET_IOPS_REQUEST_BYTES), so they include that transfer: a random request's fixed
        time is 1 / IOPS less it (positioning_s; a spinning drive's seek and rotation,
        costs.random_service_s), one request at a time. A drive whose data sheet states a read
        latency (an SSD's: one 4 KiB read with nothing queued) serves IOPS x that latency requests at
        once (its flash channels and dies, Little's law at the IOPS figure), each with the stated
        latency's fixed time. A request of a sequential stream needs no seek on a spinning drive: its
        fixed time is the host's per-request overhead (costs.py); flash has no seek to save, so
        there every request, sequential or not, takes the fixed time and counts against the IOPS
        (counts_every_request). A spinning drive reads ahead of a sequential stream
        (look_ahead) and reorders the random requests queued at it (reorder_depth): its IOPS are
        those of one request at a time."""
        size = DATASHEET_IOPS_REQUEST_BYTES
        positioning = _less_transfer(1.0 / drive.random_read_iops, size, drive.seq_read_bw_bytes)
        parallelism = 1
        latency = positioning
        write_latency = None
        if drive.read_latency_s is not None:
            latency = _less_transfer(drive.read_latency_s, size, drive.seq_read_bw_bytes)
            parallelism = max(1, round(drive.random_read_iops * drive.read_latency_s))
        if drive.write_latency_s is not None:
            write_latency = _less_transfer(drive.write_latency_s, size, drive.seq_write_bw_bytes)
        return cls(drive.seq_read_bw_bytes, drive.seq_write_bw_bytes, drive.random_read_iops,
                   drive.random_write_iops, latency, drive.name,
                   counts_every_request=not drive.rotational,
                   sequential_latency_s=HOST_REQUEST_OVERHEAD_S + HBA_REQUEST_OVERHEAD_S if drive.rotational else None,
                   write_latency_s=write_latency,
                   look_ahead=drive.rotational, from_datasheet=True, parallelism=parallelism,
                   reorder_depth=DRIVE_REORDER_DEPTH if drive.rotational and parallelism == 1 else 1,
                   iops_request_bytes=size, revolution_s=revolution_of(positioning) if drive.rotational else 0.0,
                   write_cache=drive.rotational and drive.write_cache)


@dataclass(frozen=True)
class Workload:
    rw: str                         # read | write | randread | randwrite
    request_bytes: int
    qd: int = 1                     # outstanding requests per thread
    threads: int = 1
    working_set_bytes: int | None = None   # bytes the run touches (for the cache); None = far beyond it
    think_s: float = 0.0            # time a thread spends between its requests off the storage (opening
                                    # the next file, a computation): the think time of the closed network

    def __post_init__(self) -> None:
        if not (self.think_s >= 0 and math.isfinite(self.think_s)):
            raise StackError(f"workload: think time must be a finite time >= 0, got {self.think_s!r}")
        if self.rw not in WORKLOAD_PATTERNS:
            raise StackError(f"workload: rw must be one of {', '.join(WORKLOAD_PATTERNS)}, got {self.rw!r}")
        if self.request_bytes <= 0 or self.request_bytes % 512:
            raise StackError(f"workload: request must be a positive multiple of 512 bytes, got {self.request_bytes}")
        if self.qd < 1 or self.threads < 1:
            raise StackError("workload: qd and threads must be at least 1")

    @property
    def is_write(self) -> bool:
        return self.rw.endswith("write")

    @property
    def is_random(self) -> bool:
        return self.rw.startswith("rand")

    @property
    def outstanding(self) -> int:
        return self.qd * self.threads


@dataclass(frozen=True)
class ComponentCapacity:
    """The most host requests per second a component lets through, and its headroom at the rate."""
    name: str
    kind: str                       # member | concurrency | cache | path
    capacity_iops: float            # host requests/s
    headroom_fraction: float        # 1 - predicted rate / capacity
    why: str                        # which of its limits binds, in words

    @property
    def binding(self) -> bool:
        return self.headroom_fraction <= 1e-9


@dataclass(frozen=True)
class Prediction:
    workload: Workload
    iops: float                     # host requests/s expected
    bw_bytes: float                 # = iops x request size
    limiting: str                   # name of the component with the least headroom
    components: tuple[ComponentCapacity, ...]
    assumptions: tuple[str, ...]
    latency_mean_s: float = 0.0     # mean time of one request (Little: outstanding / rate, less the think time)
    latency_tail_s: float = 0.0     # 99th percentile estimate (queueing.TAIL_PERCENTILE)

    def component(self, name: str) -> ComponentCapacity:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)


@dataclass(frozen=True)
class _MemberLoad:
    """What one host request puts on one member, on average (uniform spread)."""
    read_ops: float
    write_ops: float
    read_bytes: float
    write_bytes: float


def _member_capacity(device: Device, load: _MemberLoad, sequential: bool,
                     cached_write_fraction: float | None = None) -> tuple[float, str, float, float]:
    """Host requests/s this member can carry with one request at a time, the limit that binds, the
    share of its time per host request that is positioning (seek and rotation: what reordering
    its queue shortens; 0 where its limits are kept per direction or a sequential piece needs none),
    and its seconds per host request of writes its own write cache drains. `cached_write_fraction`:
    the writes wait in the drive's write cache, which drains them choosing among a full queue, their
    positioning that fraction of one alone (reordered_positioning_fraction at the drive's depth);
    they are not positioning the host's queue shortens, and the host does not wait for them."""
    ops = 0.0 if sequential and not device.counts_every_request else 1.0
    write_positioning = ops * load.write_ops * device.positioning_s(write=True)
    if cached_write_fraction is not None:
        write_positioning *= cached_write_fraction
    terms = [("read IOPS", ops * load.read_ops * device.positioning_s(write=False)),
             ("write IOPS", write_positioning),
             ("read bandwidth", load.read_bytes / device.read_bw_bytes),
             ("write bandwidth", load.write_bytes / device.write_bw_bytes)]
    if device.shared_time:
        # one mechanism: a request's operations take turns. A random operation costs its
        # positioning (1 / IOPS less the transfer the IOPS figure includes, Device.positioning_s:
        # seek and rotation on a spinning drive, costs.random_service_s)
        # plus its transfer; a sequential piece its transfer only (or its IOPS share where the
        # device counts every request)
        combine = (lambda a, b: a + b) if not sequential else max
        read_t = combine(terms[0][1], terms[2][1])
        write_t = combine(terms[1][1], terms[3][1])
        total = read_t + write_t
        why = "time (reads and writes share it)"
        reorderable = terms[0][1] + (terms[1][1] if cached_write_fraction is None else 0.0)
        positioning = 0.0 if sequential or total == 0 else reorderable / total
        drained = write_t if cached_write_fraction is not None else 0.0
        return (math.inf if total == 0 else 1.0 / total), why, positioning, drained
    busiest = max(terms, key=lambda t: t[1])
    return (math.inf if busiest[1] == 0 else 1.0 / busiest[1]), busiest[0], 0.0, 0.0


@dataclass
class _RequestCost:
    """What one host request costs the members, before the cache: the pieces a read touches, the
    members that serve reads, and for writes the bytes moved per host byte and the operations."""
    members: list[Device]
    serving_read: float
    pieces: float
    write_amp: float
    write_ops: float
    write_reads: float
    gathered: AlignmentReport | None    # the same writes gathered into whole stripes (a write-back
                                        # cache draining a sequential stream); None: a bare device
    member_fraction: float = 1.0        # share of requests that reach the members (the rest hit the cache)
    read_set: list[int] | None = None   # members reads reach (a mirror read one copy per thread, or
                                        # the copies a run was seen to read); None: by serving_read
    read_shares: dict[int, float] | None = None   # share of the read bytes each member served, as recorded
    served_by_cache: bool = False       # the host sees the cache's latency (write-back, read-ahead); the
                                        # members work behind it and bound only the rate
    drives_write_back: bool = False     # random writes the drives' own write caches acknowledge (no
                                        # controller in front): the host waits for their reads only


def _request_cost(stack: Stack | None, workload: Workload, devices: list[Device] | None, mirror_read: str,
                  assumptions: list[str], read_members: tuple[int, ...] | Mapping[int, float] | None = None
                  ) -> _RequestCost:
    if stack is None:
        if not devices or len(devices) != 1:
            raise StackError("a bare device needs exactly one Device")
        return _RequestCost(list(devices), 1.0, 1.0, 1.0, 1.0, 0.0, None)
    n = stack.raid.drives
    if devices is None:
        members = [Device.from_drive(stack.drive)] * n
        drive = stack.drive
        for label, iops, rate in (("read", drive.random_read_iops, drive.seq_read_bw_bytes),
                                  ("write", drive.random_write_iops, drive.seq_write_bw_bytes)):
            if iops * DATASHEET_IOPS_REQUEST_BYTES > rate:
                assumptions.append(f"the drives' random {label} IOPS x 4 KiB ({iops * DATASHEET_IOPS_REQUEST_BYTES / 1e6:,.0f} "
                                   f"MB/s) exceed their sequential {label} rate ({rate / 1e6:,.0f} MB/s): small "
                                   f"requests are held to the rate (state both from the data sheet)")
        if not drive.rotational and drive.read_latency_s is None:
            assumptions.append("the SSDs' read latency is not stated: each serves one request at a time in "
                               "1 / IOPS; state its data sheet's QD1 read latency (--drive-latency, or the "
                               "stack's [drive] read_latency) and it serves IOPS x latency requests at once")
    elif len(devices) == 1:
        members = list(devices) * n
    elif len(devices) == n:
        members = list(devices)
    else:
        raise StackError(f"devices: {len(devices)} given; the stack has {n} members (give 1 or {n})")
    geometry = geometry_of(stack)
    level = stack.raid.layout.level
    pattern = "sequential"
    if workload.is_random:
        # random offsets are multiples of the request size, as storlab run and fio place them
        # (fio's blockalign defaults to the block size): a 64 KiB request on a 64 KiB chunk is one piece
        pattern = "aligned"
    alignment = analyse_alignment(geometry, workload.request_bytes, pattern)
    if level.mirrored:
        copies = geometry.copies
        used = copies if mirror_read == "balanced" else min(copies, workload.threads)
        serving_read = n * used / copies
        if mirror_read == "per-thread":
            assumptions.append(f"mirror reads: each thread reads one copy ({used} of {copies} used)")
    elif level.dedicated_parity or (level.parity_drives and not workload.is_random):
        # dedicated parity never serves reads; rotating parity serves random reads from every
        # member, but a sequential sweep skips each member's parity chunks, so its members deliver
        # data at (data drives / drives) of their rate: the data drives' worth in all
        serving_read = float(n - stack.raid.groups * level.parity_drives)
    else:
        serving_read = float(n)
    read_set = None
    read_shares = None
    if level.mirrored and isinstance(read_members, Mapping):
        total = sum(v for v in read_members.values() if v > 0)
        if total > 0:
            read_shares = {i: v / total for i, v in read_members.items() if v > 0}
        read_members = tuple(read_shares or ())
    if level.mirrored and read_members is not None:
        read_set = sorted(set(read_members))
        if not read_set or read_set[-1] >= n or read_set[0] < 0:
            raise StackError(f"read_members: member indices must be within 0..{n - 1}, got {list(read_members)}")
        serving_read = float(len(read_set))
        assumptions.append("mirror reads: the members seen to serve reads (" +
                           ", ".join(str(i) for i in read_set) + ")")
    elif level.mirrored and serving_read < n:
        step = int(round(n / serving_read))
        read_set = [i for i in range(n) if i % step == 0]
    return _RequestCost(members, serving_read, alignment.disk_reads_per_read, alignment.write_amplification,
                        alignment.disk_ops_per_write, alignment.disk_reads_per_write,
                        gathered_into_full_stripes(geometry, alignment),
                        read_set=read_set, read_shares=read_shares)


def _apply_cache(cost: _RequestCost, workload: Workload, cache: ControllerCache,
                 assumptions: list[str], iops_elsewhere: bool = False) -> tuple[float, str]:
    """What the cache lets reach the members (updates cost); returns the cache's own capacity
    (its `iops` not among its limits when `iops_elsewhere`: the controller it belongs to carries it)."""
    request = workload.request_bytes
    working = workload.working_set_bytes
    in_cache = working is not None and cache.size_bytes is not None and working <= cache.size_bytes
    rate = cache.write_bw_bytes if workload.is_write else cache.read_bw_bytes
    limits = [(rate / request, "bandwidth")]
    if cache.iops is not None and not iops_elsewhere:
        limits.append((cache.iops, "IOPS"))
    if workload.is_write:
        if not cache.write_back:
            assumptions.append("write-through cache: every write reaches the members")
        elif in_cache:
            cost.member_fraction = 0.0
            assumptions.append("in-cache writes: absorbed by the write-back cache")
        else:
            # acknowledged from the cache; the members' rate bounds the drain, behind the host
            cost.served_by_cache = True
            assumptions.append("out-of-cache writes: acknowledged by the write-back cache, which drains at "
                               "the members' rate")
    elif in_cache:
        cost.member_fraction = 0.0
        assumptions.append("in-cache reads: every read hits after the first pass")
    elif workload.is_random and working is None:
        assumptions.append("working set not given: taken as far beyond the cache (no hits)")
    elif workload.is_random and cache.size_bytes is None:
        assumptions.append("cache size not given: the working set taken as beyond it (no hits)")
    elif workload.is_random:
        cost.member_fraction = 1.0 - cache.size_bytes / working
        assumptions.append(f"random reads hit the cache in proportion {1 - cost.member_fraction:.0%}")
    elif cache.read_ahead:
        # the controller prefetches the stream: each request finds its data in the cache, the
        # members stream ahead of it at their rate. A sweep whose size is not given is taken as
        # larger than the cache, which is where read-ahead matters
        cost.served_by_cache = True
        assumptions.append("sequential sweep larger than the cache: read-ahead serves it from the cache at "
                           "the members' rate")
    else:
        assumptions.append("sequential sweep larger than the cache, no read-ahead: no hits")
    return min(limits)


def _gather_full_stripes(cost: _RequestCost) -> bool:
    """A sequential stream's writes gathered into whole stripes before they reach the members
    (geometry.gathered_into_full_stripes); True where that changes their cost."""
    g = cost.gathered
    if g is None or cost.write_amp <= g.write_amplification:
        return False
    cost.write_amp, cost.write_ops, cost.write_reads = g.write_amplification, g.disk_ops_per_write, g.disk_reads_per_write
    return True


def _serving(cost: _RequestCost, workload: Workload) -> float:
    """Members that share a request's work: all for writes, the readable copies for reads."""
    return float(len(cost.members)) if workload.is_write else cost.serving_read


@dataclass(frozen=True)
class _Reordering:
    """A member that reorders its queue: its capacity with one request at a time, the share of its
    time that is positioning, how deep it reorders, and the part of its time its write cache drains
    behind the host."""
    alone_capacity: float
    positioning_fraction: float
    depth: int
    drained_s: float = 0.0      # of its time per host request (1 / alone_capacity), the writes its own
                                # write cache drains: the host does not wait for them (background work)


def _member_ops_in_flight(cost: _RequestCost, workload: Workload) -> float:
    """Member operations one host request has in flight at once on the members that position for
    it (_extents): its extents for a read; for a write its reads, then its writes (a
    read-modify-write), at once otherwise; its reads alone where the drives' own write caches take
    its writes (they drain behind it)."""
    reads, writes = _extents(cost, workload)
    if workload.is_write and not cost.drives_write_back:
        return max(1.0, reads, writes)
    return max(1.0, reads)


def _extents(cost: _RequestCost, workload: Workload) -> tuple[float, float]:
    """Member operations per host request that each need a positioning, (reads, writes): one per
    member a request touches, not one per chunk piece. A member's pieces of one request lie in
    consecutive stripe rows, which are contiguous on it (a RAID 5/6 member skips its parity chunk
    between them), so it reads or writes them in one pass: a 1 MiB request over twelve drives with
    64 KiB chunks positions each drive once, with 64 or 128 KiB to move. A device that counts every
    request (a throttle counting bios) counts pieces instead (_member_capacities)."""
    if workload.is_write:
        count = float(len(cost.members))
        return min(cost.write_reads, count), min(cost.write_ops - cost.write_reads, count)
    return min(cost.pieces, _serving(cost, workload)), 0.0


def _member_servers(device: Device, load: _MemberLoad, sequential: bool, cap: float) -> int:
    """Requests a member serves at once for this workload: at most its parallelism, and no more than
    keep it at its capacity: by Little's law, its capacity in operations/s times the time one
    operation takes alone, its fixed time plus its transfer at the device's whole bandwidth (a flash
    device spreads one large request over all its channels). So a 1 MiB read on an SSD of six
    units is served one at a time at the full bandwidth, not six at once at a sixth of it each
    (queueing.py's multi-server station, with the operation's own service time)."""
    ops = load.read_ops + load.write_ops
    if device.parallelism == 1 or ops <= 0 or not math.isfinite(cap):
        return device.parallelism
    per_op = (device.latency_for(sequential, write=load.write_ops > load.read_ops)
              + (load.read_bytes / device.request_rate(False) + load.write_bytes / device.request_rate(True)) / ops)
    return max(1, min(device.parallelism, round(per_op * ops * cap)))


def _member_capacities(cost: _RequestCost, workload: Workload, reordering: dict[str, _Reordering],
                       written_share: float = 1.0, servers: dict[str, int] | None = None
                       ) -> list[tuple[str, str, float, str]]:
    """Each member's capacity in host requests/s, the work of a request spread evenly; a member that
    reorders its queue with as many queued as the workload could ever put on it (every outstanding
    request's operations; the queueing network finds how many it holds: predict's rate is never
    above it; random writes drained behind a write-back cache, a full queue), recorded in
    `reordering`. Random writes drained behind a write-back cache reach `written_share` of the
    members (separate devices with fewer threads than devices)."""
    if cost.member_fraction == 0:
        return []
    count, fraction, request = len(cost.members), cost.member_fraction, workload.request_bytes
    serving = _serving(cost, workload)
    extent_reads, extent_writes = _extents(cost, workload)
    if workload.is_write:
        total_bytes = request * cost.write_amp * fraction
        reads, writes = cost.write_reads * fraction, (cost.write_ops - cost.write_reads) * fraction
        read_share = reads / (reads + writes) if reads + writes else 0.0
        pieces = _MemberLoad(reads / count, writes / count, total_bytes * read_share / count,
                             total_bytes * (1 - read_share) / count)
        extents = dataclasses.replace(pieces, read_ops=extent_reads * fraction / count,
                                      write_ops=extent_writes * fraction / count)
    else:
        pieces = _MemberLoad(cost.pieces * fraction / serving, 0.0, request * fraction / serving, 0.0)
        extents = dataclasses.replace(pieces, read_ops=extent_reads * fraction / serving)
    out = []
    for i, device in enumerate(cost.members):
        if not workload.is_write and cost.read_set is not None and i not in cost.read_set:
            continue    # a copy this workload does not read
        # a disk positions once for each request's extent on it; a throttle counts every piece
        member_load = pieces if device.counts_every_request else extents
        if not workload.is_write and cost.read_shares:
            # the member carries its recorded share of the reads: share x (the volume's bytes and
            # pieces), so the volume's rate is at most its capacity / share
            share = cost.read_shares[i] * serving
            member_load = _MemberLoad(member_load.read_ops * share, 0.0, member_load.read_bytes * share, 0.0)
        # a read-modify-write whose writes the drive's own cache takes: it drains them choosing
        # among a full queue, as a controller's cache does (below), while the reads wait their turn
        drains_writes = cost.drives_write_back and not cost.served_by_cache
        cached_fraction = (reordered_positioning_fraction(device.reorder_depth, depth=device.reorder_depth)
                           if drains_writes else None)
        cap, why, positioning, drained = _member_capacity(device, member_load, not workload.is_random,
                                                          cached_fraction)
        if drains_writes:
            why += f", writes drained from its write cache reordered (seek and rotation x {cached_fraction:.2f})"
        name = member_name(i, device, count)
        if servers is not None:
            servers[name] = _member_servers(device, member_load, not workload.is_random, cap)
        if device.reorder_depth > 1 and positioning > 0 and math.isfinite(cap):
            in_flight = workload.outstanding * _member_ops_in_flight(cost, workload)
            if cost.served_by_cache and workload.is_random:
                # drained behind a write-back cache: whatever the host keeps outstanding, the cache
                # fills with pending writes and stays full under a sustained load, and the
                # controller keeps each drive's queue full from it (HP, "HP Smart Array Controller
                # technology": "The write cache will typically fill up and remain full most of the
                # time in high-workload environments"), so each drive reorders a full queue
                in_flight = float(device.reorder_depth)
            queued = min(device.reorder_depth, in_flight)
            reordering[name] = _Reordering(cap, positioning, device.reorder_depth, drained)
            if queued > 1:
                cap = 1.0 / reordered_time(1.0 / cap, positioning / cap, queued, device.reorder_depth)
                fraction = reordered_positioning_fraction(queued, depth=device.reorder_depth)
                why += f", {queued:.3g} queued reordered (seek and rotation x {fraction:.2f})"
        if cost.served_by_cache and workload.is_random and written_share < 1.0:
            # the volume's capacity: only the members of the devices the threads write drain
            cap *= written_share
        out.append((name, "member", cap, why))
    return out


def member_name(index: int, device: Device, count: int) -> str:
    """How the prediction names a member: 'member[2] sdc' in a stack, the device's name alone."""
    return f"member[{index}] {device.name}" if count > 1 else device.name


def _unloaded_parts(stack: Stack | None, cost: _RequestCost, workload: Workload,
                    cache: ControllerCache | None) -> tuple[float, float]:
    """Time of one request with nothing else in the system, as (the fixed latency and CPU time, its
    transfer on the slowest stage it crosses): members, cache and path components stream its bytes
    at once, so the slowest stage sets the transfer, not their sum."""
    request = workload.request_bytes
    stages: list[float] = []
    latency = 0.0
    serving = _serving(cost, workload)
    # members one request keeps busy at once: its read pieces, or its write operations (data,
    # parity, copies and read-modify-write reads land on different members)
    spread = cost.write_ops if workload.is_write else cost.pieces
    reached = cost.member_fraction > 0 and (not cost.served_by_cache or cost.drives_write_back)
    touched = min(serving, max(1.0, spread)) if reached else 0
    sequential = not workload.is_random
    if touched:
        per_touched = request * (cost.write_amp if workload.is_write else 1.0) / touched
        members = _reading_members(cost, workload)
        rates = [d.request_rate(workload.is_write) for d in members]
        # a write the drive's own cache takes is acknowledged once in its buffer: the time of a
        # piece that needs no positioning (Device.latency_for, sequential), then its transfer
        acknowledged = cost.drives_write_back and cost.served_by_cache
        latencies = [d.latency_for(sequential or acknowledged, workload.is_write) for d in members]
        if touched >= serving:      # every member takes part: the slowest finishes the request
            latency = max(latencies)
            stages.append(per_touched / min(rates))
        else:                       # one or a few members: the average member
            latency = sum(latencies) / len(members)
            if sequential and not workload.is_write and all(d.look_ahead for d in members):
                # a sequential read reaches a few members at a time, each in turn: while the others
                # serve, each member reads its next piece ahead into its buffer, so the stream takes
                # the serving members' combined rate, not one member's
                stages.append(request / (serving * min(rates)))
            else:
                stages.append(sum(per_touched / r for r in rates) / len(members))
        revolution = max(d.revolution_s for d in members)
        if workload.is_write and cost.write_reads > 0:
            # read-modify-write (or reconstruct-write): the old data and parity are read before the
            # new data and parity are written, two passes in series, each with its own positioning
            # (Chen et al., "RAID: High-Performance, Reliable Secondary Storage", 1994: a small
            # RAID 5 write is a read and a write of data and parity, the writes waiting on the reads)
            reads, writes = _extents(cost, workload)
            if cost.drives_write_back:
                # the drives' caches take the writes: the reads position (a read's fixed time), then
                # the writes are acknowledged from the buffers
                read_pass = max(d.latency_for(False, False) for d in members)
                ack = max(d.latency_for(True, True) for d in members)
                latency = read_pass + ack + slowest_rotation_extra(reads, revolution)
            else:
                latency *= 2
                if workload.is_random:
                    latency += slowest_rotation_extra(reads, revolution) + slowest_rotation_extra(writes, revolution)
        elif workload.is_random and not acknowledged:
            # a random request's pieces on several spinning drives at once: it ends with the slowest
            latency += slowest_rotation_extra(touched, revolution)
    if cache is not None:
        if cost.member_fraction == 0 or cost.served_by_cache:
            # served from the cache: the host's and the HBA's own time per request still apply
            # (costs.py), then the controller's (cache.latency_s)
            latency = HOST_REQUEST_OVERHEAD_S + HBA_REQUEST_OVERHEAD_S + cache.latency_s
        stages.append(request / (cache.write_bw_bytes if workload.is_write else cache.read_bw_bytes))
    stages += _path_transfer_times(stack, workload, cost, cache is not None)
    controller = _implied_controller_time(stack, cache, cost.members)
    return latency + _path_cpu_time(stack, workload) + controller, max(stages, default=0.0)


def _drives_write_back(stack: Stack | None, cache: ControllerCache | None, cost: _RequestCost,
                       workload: Workload) -> bool:
    """Random writes the members' own write caches acknowledge: every member has one
    (Device.write_cache) and no RAID controller is in front (Linux md, or a bare drive), whose
    cache would take them first or whose policy sets the drives' (controllers commonly turn the
    drives' caches off behind their own)."""
    if not (workload.is_write and workload.is_random and cache is None and cost.member_fraction > 0):
        return False
    if not cost.members or not all(d.write_cache for d in cost.members):
        return False
    return _no_controller_in_front(stack)


def _misses_revolution(stack: Stack | None, cache: ControllerCache | None, cost: _RequestCost,
                       workload: Workload) -> bool:
    """Sequential writes one at a time to spinning drives whose write cache is off, with no
    controller in front: each command arrives after the sector it starts at has passed (the drive
    reported the previous one only once it was on the media), so each waits about one revolution
    (Ruemmler and Wilkes, "An Introduction to Disk Drive Modeling", 1994, on immediate reporting).
    Two or more outstanding keep the next command queued at the drive, which then streams."""
    if not workload.is_write or workload.is_random or workload.outstanding > 1 or cache is not None:
        return False
    if cost.member_fraction == 0 or not cost.members:
        return False
    if not all(d.from_datasheet and d.revolution_s > 0 and not d.write_cache for d in cost.members):
        return False
    return _no_controller_in_front(stack)


def _no_controller_in_front(stack: Stack | None) -> bool:
    """The host reaches the drives with no RAID controller between: a bare device, or Linux md over
    drives the stack names no controller for."""
    return stack is None or (stack.raid.engine == "md" and not stack.names_controller)


def _positioning_spread(cost: _RequestCost, workload: Workload) -> float:
    """How far the 99th percentile of a random request's own positioning on spinning drives lies
    above its mean (costs.slowest_positioning_spread: the slowest of the drives it keeps busy at
    once; a read-modify-write's two passes each). 0 where no spinning drive positions for the host:
    sequential pieces, flash, measured devices, writes a write-back cache acknowledges."""
    if not workload.is_random or cost.served_by_cache or cost.member_fraction == 0:
        return 0.0
    spinning = [d for d in _reading_members(cost, workload) if d.revolution_s > 0]
    if not spinning:
        return 0.0
    positioning = max(d.positioning_s(workload.is_write and not cost.drives_write_back) for d in spinning)
    reads, writes = _extents(cost, workload)
    passes = [reads, writes] if workload.is_write and cost.write_reads > 0 else [max(reads, writes)]
    if cost.drives_write_back:
        passes = [reads]        # the writes are acknowledged from the drives' caches
    return math.sqrt(sum((positioning * slowest_positioning_spread(max(1, round(k)))) ** 2 for k in passes))


def _implies_controller(stack: Stack | None, devices: list[Device] | None) -> bool:
    """The stack's parity is a controller's that the stack does not name, in front of datasheet
    drives (`devices` None: the stack's drive type). Measured members (a profile, an array seen from
    its host) hold the time and the cache of what was in front of them; Linux md has no controller."""
    return (stack is not None and stack.raid.engine == "controller"
            and all(d.from_datasheet for d in devices or ()) and not stack.names_controller)


def _implied_controller_time(stack: Stack | None, cache: ControllerCache | None, members: list[Device]) -> float:
    """A controller cache is a controller's, and so is the parity of a RAID whose engine is a
    controller: where the stack names no controller (a RAID notation such as R5/9, or one given a
    --controller-cache), its requests still pass one, which takes the time every request spends in
    an array controller when nothing states it (costs.CONTROLLER_REQUEST_LATENCY_S, as a named
    controller does in _path_cpu_time). A cache that states its latency states it; without a cache,
    only the controller of _implies_controller."""
    if cache is None:
        implied = _implies_controller(stack, members)
    else:
        implied = cache.latency_s == 0 and (stack is None or not stack.names_controller)
    return CONTROLLER_REQUEST_LATENCY_S if implied else 0.0


# Why a controller that states no request rate is limited where it is (_path_capacities, predict)
DEFAULT_CONTROLLER_IOPS_WHY = "IOPS (the model's default controller: costs.CONTROLLER_REQUEST_RATE)"


def _implied_controller_rate(stack: Stack | None, cache: ControllerCache | None, members: list[Device]
                             ) -> float | None:
    """The host requests/s of the controller a stack implies (_implied_controller_time): its cache's
    stated `iops` (--controller-iops), else the model's default controller's
    (costs.CONTROLLER_REQUEST_RATE). None where no implied controller is crossed."""
    if _implied_controller_time(stack, cache, members) == 0:
        return None
    return cache.iops if cache is not None and cache.iops is not None else CONTROLLER_REQUEST_RATE


def _path_cpu_time(stack: Stack | None, workload: Workload) -> float:
    """CPU seconds a request costs on its way: each level of the path with a CPU cost (a file
    server, an NSD server, a controller) works on it before passing it on. A request crosses one
    instance per level, so the costs add along a branch from the host to its groups, never across
    siblings (two controllers of a pair are two branches); the slowest branch is taken. An array
    controller that states no CPU cost takes costs.CONTROLLER_REQUEST_LATENCY_S.
    A write through a mirrored instance (`mirror_writes`) is acknowledged only once its partner
    holds the copy: the instance handles the write and then the copy (sending it, taking the
    partner's acknowledgement), two handlings in series, so its time per request counts twice (the
    bytes cross to the partner as they arrive, so the transfer is not repeated)."""
    root = None if stack is None else stack.instances()
    if root is None:
        return 0.0

    def slowest(inst, above: float) -> float:
        template = inst.template
        t = template.cpu_time_s(workload.request_bytes)
        if t is None and template.is_array_controller:
            t = CONTROLLER_REQUEST_LATENCY_S
        here = above + (t or 0.0) * (2 if workload.is_write and template.mirror_writes else 1)
        best = here if inst.group_ids else 0.0
        return max([best] + [slowest(child, here) for child in inst.children])

    return slowest(root, 0.0)


def _reading_members(cost: _RequestCost, workload: Workload) -> list[Device]:
    """The members a workload's requests reach: all for writes, the copies read for reads."""
    if workload.is_write or cost.read_set is None:
        return cost.members
    return [cost.members[i] for i in cost.read_set]


def _stations(resources: list[tuple[str, str, float, str]], cost: _RequestCost, workload: Workload,
              member_parallelism: dict[str, int], servers_of: dict[str, int],
              fans_of: dict[str, int], reordering: dict[str, _Reordering] | None = None,
              background: dict[str, float] | None = None) -> list[Station]:
    """The queueing stations of the network: the bottleneck resource only (the others are crossed
    below their limit and, streaming, overlap with it: their time is in the unloaded delay). A
    member set that small requests reach one member at a time is one station per member (each
    request queues at the member it lands on); a striped request that keeps every member busy
    queues once, at the slowest. Rate limiters (queues=False) are no stations. A member that
    reorders its queue is a station of its demand with one request at a time, whose positioning
    shortens as its queue grows (queueing.Station). `background` receives, for each station whose
    drives drain writes from their own caches behind the host, those writes' seconds per host request
    (its busy share from them is the rate times that: _with_background)."""
    reordering = reordering or {}
    background = {} if background is None else background

    def member_station(station_name: str, member: str, cap: float, servers: int, members_per_request: float,
                       visit_share: float = 1.0, fork: int = 1) -> Station:
        how = reordering.get(member)
        if how is None or servers != 1:
            return Station(station_name, servers / cap, servers)
        alone = 1.0 / how.alone_capacity
        # the host waits for its own operations there; writes the drive's cache drains are not its
        demand = alone - how.drained_s
        positioning = alone * how.positioning_fraction
        if how.drained_s > 0:
            background[station_name] = how.drained_s
        # each request queued at the station puts this many operations on each of its members
        per_request = _member_ops_in_flight(cost, workload) / max(1.0, members_per_request)
        # a spinning drive's service: its positioning varies (costs.positioning_scv), its transfer not
        scv = positioning_scv() * (positioning / demand) ** 2
        return Station(station_name, demand, 1, positioning, how.depth, per_request,
                       service_scv=scv, visit_share=visit_share, fork=fork)

    finite = [r for r in resources if math.isfinite(r[2])]
    if not finite:
        return []
    name, kind, cap, _ = min(finite, key=lambda r: r[2])
    if kind == "member":
        members = [r for r in finite if r[1] == "member" and r[0] in member_parallelism]
        if not members:
            return []
        if cost.served_by_cache and workload.is_random:
            # random writes a write-back cache acknowledges: the host waits for a free cache slot, not
            # in the members' queues; with the cache full of dirty stripes the controller destages
            # many at once and keeps every member busy, so the members bound the rate by their
            # capacity (a component of the prediction), whatever the host keeps outstanding
            return []
        # members one request keeps busy at once: a read's pieces (beyond that contiguous on them),
        # a write's drives (a read-modify-write reads and writes the same ones; where the drives'
        # caches take its writes, its reads: _member_ops_in_flight)
        busy = _member_ops_in_flight(cost, workload) if workload.is_write else cost.pieces
        spread = min(busy, float(len(members)))
        if not workload.is_random:
            # a sequential stream visits the stripe groups in turn, never two requests on one
            # group while another idles: the set works as one station at its capacity
            servers = member_parallelism.get(name)
            return [] if servers is None else [Station(name, servers / cap, servers)]
        if spread <= 1.0 and len(members) > 1:
            return [member_station(n, n, c, member_parallelism[n], 1.0, 1.0 / len(members)) for n, _, c, _ in members]
        # a request forks over `spread` members and joins at the slowest: the member set works as
        # members / spread independent groups, each at the pace of the slowest member and each
        # visited by 1 / groups of the requests (so each one's demand is 1 / the set's capacity)
        servers = member_parallelism.get(name)
        if servers is None:
            return []
        groups = max(1, round(len(members) / max(1.0, spread)))
        # a request's pieces queue at each drive on its own, each drive serving its queue in its own
        # order (queueing._ReorderingQueue): a read's pieces, and a read-modify-write's operations on
        # each of its two or three drives (its reads, then its writes: taken as one visit of both;
        # benchmarks/model_drive_draw.py draws both). Other writes (whole stripes, a mirror's
        # copies) keep their drives as one team: no draw covers them, and the fork of a wide
        # stripe is not followed well past a dozen drives (docs/model.md, "Writes split over drives")
        fork = max(1, round(spread)) if not workload.is_write or cost.write_reads > 0 else 1
        return [member_station(name if groups == 1 else f"{name} (stripe group {g + 1} of {groups})",
                               name, cap, servers, spread, 1.0 / groups, fork) for g in range(groups)]
    servers = servers_of.get(name, 1)
    # a request whose pieces cross `fan` of the equal instances at once uses them together (a
    # fork-join over the stripe): servers / fan such teams, each busy (servers / fan) / cap per
    # request; fan = 1 is one instance per request, fan = servers one team of all
    fan = max(1, min(servers, fans_of.get(name, 1)))
    teams = max(1, servers // fan)
    # a path component moves a request of one size at its rate, or spends its CPU time on it: the
    # same time for every request
    return [Station(name, teams / cap, teams, service_scv=0.0)]


def _path_factor(inst, workload: Workload, cost: _RequestCost, cached: bool) -> float:
    """Bytes an instance carries per host byte: host bytes above the RAID engine, member bytes
    (parity, RMW) below it, and behind a cache only what reaches the members."""
    if not inst.carries_parity:
        return 1.0
    factor = cost.write_amp if workload.is_write else 1.0
    return factor * cost.member_fraction if cached else factor


def groups_touched(stack: Stack, request_bytes: int) -> int:
    """RAID groups one aligned request's pieces land on: at each striping level above the groups
    (the volume's inter-chunk over the devices, a RAID 50/60's span chunk over its spans) the
    request splits into min(members, request / unit) pieces. A volume that does not stripe
    (aggregate none or concat) keeps a request on one device."""
    touched, size = 1, float(request_bytes)
    for level in geometry_of(stack).levels:
        pieces = min(level.members, max(1, math.ceil(size / level.unit_bytes)))
        touched *= pieces
        size /= pieces
    return touched


def _instance_share(inst, touched: int) -> float:
    """Share of one request's bytes an instance carries: the request's pieces spread over the
    `touched` groups, of which at most the groups under the instance pass through it (a 256 MB
    request striped over 112 arrays puts 1/112 of it on each array's adapter, all at once)."""
    under = len(inst.all_group_ids())
    return min(under, touched) / touched


def _path_transfer_times(stack: Stack | None, workload: Workload, cost: _RequestCost, cached: bool) -> list[float]:
    """Seconds one request spends crossing each bandwidth-limited path component (one instance):
    its share of the request's bytes at the instance's rate (the instances carrying the other
    pieces work at the same time, so the slowest of them sets the time)."""
    root = None if stack is None else stack.instances()
    if root is None:
        return []
    touched = groups_touched(stack, workload.request_bytes)
    times = []
    for inst in root.walk():
        bw = inst.template.cap_bw_bytes("write" if workload.is_write else "read")
        if bw is not None and inst.all_group_ids():
            share = _instance_share(inst, touched)
            times.append(workload.request_bytes * share * _path_factor(inst, workload, cost, cached) / bw)
    return times


def _path_capacities(stack: Stack | None, workload: Workload, cost: _RequestCost, cached: bool,
                     servers_of: dict[str, int] | None = None,
                     fans_of: dict[str, int] | None = None) -> list[tuple[str, str, float, str]]:
    """Each path component's capacity in host requests/s; it carries the share of the groups under
    it. `servers_of` receives how many equal instances share the load (groups / groups under it),
    `fans_of` how many of them one request's pieces cross at once."""
    root = None if stack is None else stack.instances()
    if root is None:
        return []
    groups = stack.raid.groups
    touched = groups_touched(stack, workload.request_bytes)
    fans_of = {} if fans_of is None else fans_of
    # a mirrored write cache carries its partner's writes too: the groups it carries, not its own
    carried = write_carried_groups(root) if workload.is_write else None
    out = []
    for inst in root.walk():
        under = len(inst.all_group_ids()) if carried is None else carried[id(inst)]
        factor = _path_factor(inst, workload, cost, cached)
        if not under or factor == 0:
            continue
        limits = []
        bw = inst.template.cap_bw_bytes("write" if workload.is_write else "read")
        if bw is not None:
            limits.append((bw / (workload.request_bytes * factor) * groups / under, "bandwidth"))
        # a mirrored write costs its instance two handlings (its own and the copy's) and a
        # partner's copy one: its request work is the groups it carries with its own counted twice
        handled = under
        if workload.is_write and inst.template.mirror_writes:
            handled = under + len(inst.all_group_ids())
        iops = inst.template.iops_limit()
        if iops is not None:
            ops = (cost.write_ops if workload.is_write else cost.pieces) if inst.carries_parity else 1.0
            limits.append((iops / ops * groups / handled, "IOPS" if inst.template.iops is not None
                           else DEFAULT_CONTROLLER_IOPS_WHY))
        cpu = inst.template.cpu_capacity(workload.request_bytes * factor)
        if cpu is not None:
            limits.append((cpu * groups / handled, f"CPU ({inst.template.cores} core(s))"))
        if limits:
            cap, why = min(limits)
            out.append((inst.path, "path", cap, why))
            if servers_of is not None:
                cores = inst.template.cores if why.startswith("CPU") else 1
                servers_of[inst.path] = max(1, round(groups / under)) * cores
                fans_of[inst.path] = min(max(1, round(groups / under)), max(1, math.ceil(touched / under)))
    return out


def _bound_devices(stack: Stack | None, stations: list[Station], member_names: set[str]
                   ) -> list[list[Station]] | None:
    """A volume of independent devices (aggregate none) keeps each thread on one device, as a
    benchmark with one target per thread does (Xdd, MPTIO, PIORAW, storlab with several targets):
    the devices are independent queueing networks, not one pool that every request may wait in
    (two threads on two arrays run at twice one thread's rate). Returns the stations of each
    device's network, or None when the volume stripes or a station is shared by the devices."""
    if stack is None or stack.volume.aggregate != "none" or stack.raid.devices < 2:
        return None
    k = stack.raid.devices
    members = [st for st in stations if _station_member(st.name, member_names)]
    others = [st for st in stations if st not in members]
    if any(st.servers % k for st in others):
        return None         # a station above the devices (one host bus, one server): shared
    per_device = [dataclasses.replace(st, servers=st.servers // k) for st in others]
    if members:
        keep = members[:max(1, len(members) // k)]
        per_device += [dataclasses.replace(st, demand_s=st.demand_s * k, positioning_s=st.positioning_s * k)
                       for st in keep]
    return [per_device] * k


# A station's busy share from background work is held below this (the fixed point of
# _solve_with_background never reaches a station busy with it alone)
BACKGROUND_BUSY_MAX = 0.95
BACKGROUND_ITERATIONS = 100


def _with_background(stations: list[Station], busy: Mapping[str, float]) -> list[Station]:
    """The stations as the host's requests see them beside background work (writes a drive's own
    cache drains): a station busy a share `u` with it serves them as if `1 / (1 - u)` times slower
    (the closed class of a mixed network beside an open one: Lazowska, Zahorjan, Graham and
    Sevcik, "Quantitative System Performance", 1984, chapter 7)."""
    if not busy:
        return stations
    out = []
    for st in stations:
        u = busy.get(st.name, 0.0)
        out.append(st if u <= 0 else dataclasses.replace(st, demand_s=st.demand_s / (1.0 - u),
                                                         positioning_s=st.positioning_s / (1.0 - u)))
    return out


def _solve_with_background(once, background: Mapping[str, float]):
    """Solve the network (`once(busy)`) with each station's background work in proportion to the
    rate it finds: seconds per host request at each station (`background`), so its busy share is
    the rate times them; the rate and the shares are iterated to their fixed point (halving the
    step: the rate falls as the shares rise)."""
    solution = once({})
    if not background or solution.throughput <= 0:
        return solution
    rate = solution.throughput
    for _ in range(BACKGROUND_ITERATIONS):
        busy = {name: min(BACKGROUND_BUSY_MAX, rate * seconds) for name, seconds in background.items()}
        solution = once(busy)
        if abs(solution.throughput - rate) <= 1e-9 * rate:
            break
        rate = 0.5 * (rate + solution.throughput)
    return solution


def _overlap(stations: list[Station], transfer_s: float, delay_s: float) -> float:
    """How much of a request's wait at the one station it queues at can run beside its own
    transfer elsewhere: its slowest stage's time beyond its service at the station (a stream on its
    own adapter into a shared controller keeps moving while it waits for its share), at most the
    delay it is part of. With several stations the waits are not all beside that one transfer: none."""
    if len(stations) != 1:
        return 0.0
    return min(delay_s, max(0.0, transfer_s - stations[0].demand_s))


def _station_member(name: str, member_names: set[str]) -> bool:
    return name in member_names or name.split(" (stripe group")[0] in member_names


def _solve_bound(devices: list[list[Station]], delay: float, workload: Workload, transfer_s: float):
    """The devices' networks solved apart, thread i on device i mod k, each with its qd
    outstanding; their throughputs add (the solution reported is the sum's)."""
    k = len(devices)
    solutions = []
    for d, stations in enumerate(devices):
        threads = workload.threads // k + (1 if d < workload.threads % k else 0)
        if threads:
            solutions.append(solve_closed(stations, delay, threads * workload.qd,
                                          _overlap(stations, transfer_s, delay)))
    x = sum(sol.throughput for sol in solutions)
    busiest = max(solutions, key=lambda sol: sol.response_s)
    return dataclasses.replace(busiest, customers=workload.outstanding, throughput=x,
                               response_s=workload.outstanding / x if x else busiest.response_s)


def _independent_branches(stack: Stack | None, cache: ControllerCache | None,
                          read_members) -> list[tuple[Component, int, int]] | None:
    """A volume of separate devices (aggregate none) under a host-side root that states no limit:
    the subtrees under the root, each as (its template with count 1, its first group, its groups).
    Threads on different branches share nothing that binds, so each branch is a queueing network of
    its own and their rates add whatever the others carry (two controller pairs of one array, one
    pair loaded more than the other). None when the branches are all alike (the symmetric solution
    is already theirs), when the root or a cache with limits of its own is shared by them, or when
    a branch holds part of a device."""
    if stack is None or stack.path is None or stack.volume.aggregate != "none" or read_members is not None:
        return None
    root = stack.path
    if (root.read_bw_bytes is not None or root.write_bw_bytes is not None or root.iops is not None
            or root.cpu_time_s(1) is not None or root.groups):
        return None
    if cache is not None and (cache.iops is not None
                              or min(cache.read_bw_bytes, cache.write_bw_bytes) < UNSTATED_CACHE_RATE):
        return None
    branches, first, spans = [], 0, stack.raid.layout.spans
    for child in root.children:
        for i in range(child.count):
            one = dataclasses.replace(child, count=1, name=child.name if child.count == 1 else f"{child.name}[{i + 1}]")
            groups = count_groups(one)
            if groups % spans:
                return None
            if groups:
                branches.append((one, first, groups, child))
            first += groups
    if len({(child, groups) for _, _, groups, child in branches}) < 2:
        return None
    return [(one, start, groups) for one, start, groups, _ in branches]


def _predict_branches(stack: Stack, workload: Workload, devices: list[Device] | None,
                      branches: list[tuple[Component, int, int]], cache: ControllerCache | None,
                      mirror_read: str) -> Prediction:
    """Each independent branch predicted on its own with the threads that land on it (thread i on
    device i mod k, as for separate devices), the rates added. A component's capacity is scaled so
    that its headroom is its own branch's; names other than path components carry their branch."""
    groups_per_device = stack.raid.groups // stack.raid.devices
    k = stack.raid.devices
    per_group = stack.raid.layout.span
    parts: list[tuple[str, int, Prediction]] = []
    for template, first, groups in branches:
        low, high = first // groups_per_device, (first + groups) // groups_per_device
        threads = sum(1 for i in range(workload.threads) if low <= i % k < high)
        if not threads:
            continue
        sub = dataclasses.replace(stack, path=dataclasses.replace(stack.path, children=(template,)),
                                  raid=dataclasses.replace(stack.raid, count=groups // stack.raid.layout.spans))
        sub_devices = devices
        if devices is not None and len(devices) > 1:
            sub_devices = devices[first * per_group:(first + groups) * per_group]
        prediction = predict(sub, dataclasses.replace(workload, threads=threads), sub_devices, cache=cache,
                             mirror_read=mirror_read)
        parts.append((f"{stack.path.name}/{template.name}", threads, prediction))
    rate = sum(p.iops for _, _, p in parts)
    components, assumptions = [], []
    for branch, _, p in parts:
        scale = rate / p.iops if p.iops > 0 else 1.0
        for c in p.components:
            name = c.name if c.kind == "path" else f"{branch}: {c.name}"
            components.append(ComponentCapacity(name, c.kind, c.capacity_iops * scale, c.headroom_fraction, c.why))
        assumptions += [a for a in p.assumptions if a not in assumptions]
    assumptions.append(f"the {len(parts)} branches under {stack.path.name} share no limit: each is a queueing "
                       "network of its own with the threads on its devices, and their rates add")
    slowest = min(parts, key=lambda part: part[2].iops / part[1])[2]
    mean = max(0.0, workload.outstanding / rate - workload.think_s) if rate > 0 else slowest.latency_mean_s
    return Prediction(workload, rate, rate * workload.request_bytes, slowest.limiting, tuple(components),
                      tuple(assumptions), latency_mean_s=mean,
                      latency_tail_s=max(mean, max(p.latency_tail_s for _, _, p in parts)))


def predict(stack: Stack | None, workload: Workload, devices: list[Device] | None = None, *,
            cache: ControllerCache | None = None, mirror_read: str = "balanced",
            read_members: tuple[int, ...] | Mapping[int, float] | None = None) -> Prediction:
    """Expected rate of `workload` on `stack` (None: one bare device, `devices[0]`). `devices`
    gives each member (in group order) or one for all; default: the stack's drive type.
    `read_members`: for a mirror, the members a run was seen to read (diagnose records them),
    or a mapping member -> bytes it read (each then carries its recorded share); overrides
    `mirror_read`."""
    if mirror_read not in MIRROR_READ_POLICIES:
        raise StackError(f"mirror_read must be one of {', '.join(MIRROR_READ_POLICIES)}, got {mirror_read!r}")
    assumptions: list[str] = []
    if cache is None and stack is not None:
        cache = stack.cache         # the stack's own [cache] component
        if cache is None and workload.is_write and _implies_controller(stack, devices):
            # the controller the stack does not describe writes back by default
            # (Stack.gathers_sequential_writes), acknowledging at its own time
            cache = IMPLIED_WRITE_BACK
            assumptions.append("the RAID controller's write-back cache, on by default and not described here, "
                               "acknowledges writes and drains them to the drives (--write-through says it has none)")
    branches = _independent_branches(stack, cache, read_members)
    if branches is not None:
        return _predict_branches(stack, workload, devices, branches, cache, mirror_read)
    cost = _request_cost(stack, workload, devices, mirror_read, assumptions, read_members)
    resources: list[tuple[str, str, float, str]] = []
    controller_rate = _implied_controller_rate(stack, cache, cost.members)
    if cache is not None:
        cap, why = _apply_cache(cost, workload, cache, assumptions, iops_elsewhere=controller_rate is not None)
        resources.append(("cache", "cache", cap, why))
    if controller_rate is not None:
        stated = cache is not None and cache.iops is not None
        resources.append((IMPLIED_CONTROLLER, "path", controller_rate,
                          "IOPS" if stated else DEFAULT_CONTROLLER_IOPS_WHY))
    # a write-back cache (the one given, or the undescribed one of a RAID controller) gathers a
    # sequential stream's writes into full stripes before they reach the members
    gathers = cache.write_back if cache is not None else stack is not None and stack.gathers_sequential_writes
    if (gathers and workload.is_write and not workload.is_random and cost.member_fraction > 0
            and _gather_full_stripes(cost)):
        assumptions.append("write-back coalesces sequential writes into full stripes" if cache is not None else
                           "the RAID controller's write-back cache, on by default and not described here, gathers "
                           "sequential writes into full stripes (a [cache] table with write_back = false says it "
                           "has none)")
    if _drives_write_back(stack, cache, cost, workload):
        cost.drives_write_back = True
        cost.served_by_cache = cost.write_reads == 0
        assumptions.append("the drives' own write caches, on as drives ship, acknowledge random writes from their "
                           "buffers and drain them choosing among a full queue"
                           + ("; the host waits for the read-modify-write's reads" if cost.write_reads else "")
                           + " (--drive-write-cache off, or a [drive] table's write_cache = false, says they wait "
                             "for the media)")
    reordering: dict[str, _Reordering] = {}
    # separate devices (aggregate none) with fewer threads than devices: thread i writes device i
    written_share = 1.0
    if stack is not None and stack.volume.aggregate == "none" and stack.raid.devices > workload.threads:
        written_share = workload.threads / stack.raid.devices
    member_servers: dict[str, int] = {}
    members = _member_capacities(cost, workload, reordering, written_share, member_servers)
    resources += members
    servers_of: dict[str, int] = {}
    fans_of: dict[str, int] = {}
    resources += _path_capacities(stack, workload, cost, cache is not None, servers_of, fans_of)
    count = len(cost.members)
    parallelism = {name: member_servers.get(name, d.parallelism)
                   for name, d in ((member_name(i, d, count), d) for i, d in enumerate(cost.members)) if d.queues}
    background: dict[str, float] = {}
    stations = _stations(resources, cost, workload, parallelism, servers_of, fans_of, reordering, background)
    fixed, transfer = _unloaded_parts(stack, cost, workload, cache)
    if _misses_revolution(stack, cache, cost, workload):
        # a drive that writes through takes the next piece of a stream only once the last is on
        # the media; with nothing queued behind it, the next sector has just passed the head
        fixed += max(d.revolution_s for d in cost.members)
        assumptions.append("the drives write through (no write cache): with one request outstanding each "
                           "sequential write waits a revolution for its sector, which a second one queued "
                           "behind it would not")
    unloaded = fixed + transfer
    # a thread's time between requests is a delay of the closed network like the unloaded latency
    delay = max(0.0, unloaded - sum(st.demand_s for st in stations)) + workload.think_s
    overlap = _overlap(stations, transfer, delay)
    components = list(resources)
    network = None
    bound = _bound_devices(stack, stations, set(parallelism))

    def solve(load: Workload):
        def once(busy: dict[str, float]):
            if bound:
                return _solve_bound([_with_background(b, busy) for b in bound], delay, load, transfer)
            return solve_closed(_with_background(stations, busy), delay, load.outstanding, overlap)
        return _solve_with_background(once, background)

    if unloaded > 0 or stations:
        network = solve(workload)
        if bound:
            assumptions.append(f"each thread works on its own device (thread i on device i mod {len(bound)}): "
                               "the devices' queues are independent")
        why = (f"{workload.outstanding} outstanding / {unloaded * 1e3:.3g} ms per request unloaded"
               + (f" + {workload.think_s * 1e3:.3g} ms between requests" if workload.think_s else "")
               + (f", queueing at {', '.join(st.name for st in stations)}" if stations else ""))
        components.append(("queue depth", "concurrency", network.throughput, why))
    rate = min(cap for _, _, cap, _ in components)
    out = tuple(ComponentCapacity(name, kind, cap, 1.0 - rate / cap if math.isfinite(cap) else 1.0, why)
                for name, kind, cap, why in components)
    # the limiting component: least headroom; on a tie the one nearest the host (path, cache), then
    # members. The queue depth only when every other component keeps more than 1 % headroom: a
    # request's own latency always puts the queue-depth bound a little below the resource it
    # waits on, and more outstanding requests would then gain nothing
    order = {"path": 0, "cache": 1, "member": 2, "concurrency": 3}
    resources_out = [c for c in out if c.kind != "concurrency"]
    tightest = min(out, key=lambda c: (round(c.headroom_fraction, 9), order[c.kind]))
    if tightest.kind == "concurrency" and resources_out:
        busiest = min(resources_out, key=lambda c: (round(c.headroom_fraction, 9), order[c.kind]))
        twice = Workload(workload.rw, workload.request_bytes, 2 * workload.qd, workload.threads,
                         workload.working_set_bytes, workload.think_s)
        doubled = min([solve(twice).throughput, *(c.capacity_iops for c in resources_out)])
        if busiest.headroom_fraction <= QUEUE_DEPTH_MARGIN or doubled <= rate * (1 + QUEUE_DEPTH_GAIN):
            tightest = busiest
    limiting = tightest.name
    if (controller_rate is not None and (cache is None or cache.iops is None)
            and (limiting == IMPLIED_CONTROLLER or not all(d.revolution_s > 0 for d in cost.members))):
        assumptions.append(f"the RAID controller the layout implies handles at most {controller_rate:,.0f} requests/s, "
                           "the vendor's figure for 6 Gb/s SAS RAID-on-chip controllers (the next generation states "
                           "200,000): --controller-iops or a [cache] table's iops states yours, a stack file's "
                           "[[component]] names it")
    think = workload.think_s
    mean = max(unloaded, workload.outstanding / rate - think) if rate > 0 and math.isfinite(rate) else unloaded
    in_network = network.response_s - think if network else 0.0
    tail = max(mean, (network.tail_s - think) * (mean / in_network)) if network and in_network > 0 else mean
    own = _positioning_spread(cost, workload)
    if own > 0:
        # a request's own positioning varies too, independently of the waits
        tail = mean + math.hypot(tail - mean, own)
    written_back = workload.is_write and (cost.served_by_cache or gathers)
    if (not workload.is_random and not written_back and workload.threads > 1 and cost.member_fraction > 0
            and any(d.revolution_s > 0 for d in cost.members)):
        # several sequential streams on spinning drives: each streams only while something reads
        # ahead of it (or, writing with no write-back cache, while the drives' own write cache
        # gathers it); the prediction assumes so, and says what is left if nothing does
        scattered = predict(stack, dataclasses.replace(workload, rw="randwrite" if workload.is_write else "randread"),
                            devices, cache=cache, mirror_read=mirror_read, read_members=read_members).iops
        helper = ("the drives' write cache gathers it" if workload.is_write
                  else "the drives' look-ahead or the controller reads ahead of it")
        if scattered < STREAMS_SCATTER_SHOWN * rate:
            assumptions.append(
                f"{workload.threads} sequential streams share the drives: each streams as long as {helper}; if "
                f"nothing does, each stream's pieces wait for a seek between the others' and the rate falls to "
                f"{scattered * workload.request_bytes / 1e6:,.1f} MB/s (random {'writes' if workload.is_write else 'reads'} "
                f"of this size; firmware decides, the data sheets state neither)")
    return Prediction(workload, rate, rate * workload.request_bytes, limiting, out, tuple(assumptions),
                      latency_mean_s=mean, latency_tail_s=tail)
