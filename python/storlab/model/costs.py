"""Per-request and per-byte costs the model uses when nothing measured is given, each a named
parameter with the source of its default (docs/model.md, "Costs").

A measured device profile (storlab.model.profile, `storlab plan profile`) replaces the device
figures here; the host and protocol figures apply to every request the model predicts.
"""
from __future__ import annotations

import functools
import math

__all__ = ["HOST_REQUEST_OVERHEAD_S", "HBA_REQUEST_OVERHEAD_S", "ARRAY_REQUEST_OVERHEAD_S",
           "CONTROLLER_REQUEST_LATENCY_S", "CONTROLLER_REQUEST_RATE", "CONTROLLER_KINDS",
           "NEARLINE_SEEK_S", "NEARLINE_RPM", "ENTERPRISE_SEEK_S", "ENTERPRISE_RPM", "rotation_s",
           "random_service_s", "SINGLE_TRACK_SEEK_S", "DRIVE_REORDER_DEPTH", "DATASHEET_IOPS_REQUEST_BYTES",
           "reordered_positioning_fraction",
           "reordered_time", "revolution_of", "slowest_rotation_extra", "positioning_scv",
           "slowest_positioning_spread",
           "GIGE_PAYLOAD_BYTES", "FC2_PAYLOAD_BYTES", "write_penalty", "FILE_OPEN_S"]

# The host's own time per request: system call, block layer, driver submit and completion. The
# testbed measures 50 us for one 4 KiB direct read at QD1 on an unthrottled loop device over
# tmpfs (docs/model.md, testbed validation): that path has no HBA, no wire and no media.
HOST_REQUEST_OVERHEAD_S = 50e-6

# An HBA and its link per request (command, interrupt, frame turnaround), beside the host's.
# Not stated by the studies on its own; 20 us is the order of a 2 Gb FC command round trip
# (a 2 KiB frame takes 10 us on a 2 Gb/s link, a command and its status one frame each).
HBA_REQUEST_OVERHEAD_S = 20e-6

# A RAID controller with a write-back cache, per request, host + HBA + FC + controller: the
# Engenio study's one-thread direct I/O on a 5884 (seed 000) gives rate = R / (L + R / B) with
# L = 0.27 ms for writes and 0.26 ms for reads (fitted from its 16K and 512K figures).
ARRAY_REQUEST_OVERHEAD_S = 0.27e-3
# The controller's own share of it, the time every request spends in an array controller (command
# decode, cache lookup, status) when the stack states none (`cpu_per_request` on the component):
# the 5884's L less the host's and the HBA's time. It is a delay, not a rate ceiling: the Engenio
# figures give one request at a time only; the ceiling is CONTROLLER_REQUEST_RATE below, or the
# stack's own (`iops`, or `cpu_per_request` with `cores`). Taken from seed 000's figures, so those
# figures are no evidence for it (docs/model.md, "Costs").
CONTROLLER_REQUEST_LATENCY_S = ARRAY_REQUEST_OVERHEAD_S - HOST_REQUEST_OVERHEAD_S - HBA_REQUEST_OVERHEAD_S
# The host requests per second an array controller's processor handles when the stack states no
# limit of its own (`iops`, or `cpu_per_request` with `cores`, on its component; `[cache] iops` or
# --controller-iops for the controller a RAID notation implies). The vendor's figure for the RAID-
# on-chip processors of its 6 Gb/s SAS, PCIe 2.0 controllers (the generation of the model's
# default 2 TB nearline drive): "up to 60,000 4 KB random IOPS", where the next generation (2012)
# states 200,000 (HP, "HP Smart Array Controllers and basic RAID performance factors", technology
# brief). Counted per host request, whatever it costs on the members. Not taken from any study
# figure; the studies' arrays state their own limits or are measured from their hosts.
CONTROLLER_REQUEST_RATE = 60_000.0
# The component kinds that are array-side controllers (an HBA or adapter in the host is not: its
# time is HBA_REQUEST_OVERHEAD_S); a component with raid_engine = true is one whatever its kind.
CONTROLLER_KINDS = frozenset({"controller", "raid controller", "raid adapter", "array", "controller node"})

# Opening and closing a file whose inode and path are cached, between two sample reads of a
# dataset with one sample per file (storlab workload opens each such file for its read, as a
# data loader does): two system calls and a path walk. Measured on the testbed: 4.4 us for
# Python's os.open + os.close of a cached file, on a loaded 2-core machine.
FILE_OPEN_S = 5e-6

# Spinning drives: average seek and spindle speed. 7.2K rpm nearline drives state 8.5 ms average
# read seek; 15K rpm enterprise drives 3.5 ms (vendors' data sheets, e.g. Seagate Constellation
# and Cheetah). With half a rotation on average: 12.7 ms and 5.5 ms per random request, i.e. 79
# and 182 IOPS, the figures the model's default drive (80 IOPS) stands for.
NEARLINE_SEEK_S = 8.5e-3
NEARLINE_RPM = 7200
ENTERPRISE_SEEK_S = 3.5e-3
ENTERPRISE_RPM = 15000

# A spinning drive with several requests queued serves first the one it reaches soonest, seek and
# rotation together (rotational position ordering: SCSI tagged queueing, SATA native command
# queueing; Seagate and Intel, "Serial ATA Native Command Queuing", 2003; the shortest-positioning-
# time-first policy of Seltzer, Chen and Ousterhout, "Disk Scheduling Revisited", 1990, and
# Worthington, Ganger and Patt, "Scheduling Algorithms for Modern Disk Drives", 1994). The model of
# it (reordered_positioning_fraction): a seek over d of the stroke takes SINGLE_TRACK_SEEK_S +
# b sqrt(d) (Ruemmler and Wilkes, "An Introduction to Disk Drive Modeling", 1994: the square root
# of short and medium seeks), b set so that the data sheet's average seek holds over the seek
# lengths data sheets weight it with (density 2 (1 - d): both ends uniform); after the seek the
# sector is a uniform part of a revolution away. Of q such requests the drive takes the soonest.
# Single-track seek: about 1 ms on nearline-class drives (Hitachi's drive specifications state
# 1.0 ms read, e.g. the 5K320's, full stroke 20 ms: the square-root profile from 1 ms and a 12 ms
# average gives 21.6 ms). The drive reorders at most DRIVE_REORDER_DEPTH requests: SATA's 32 NCQ
# tags; SAS drives accept more, RAID controllers commonly queue 32 or fewer to each drive.
# For a 7.2K rpm drive (8.5 ms average seek) this gives 79 IOPS at one request, 172 at 16 queued
# and 208 at 32 (x 2.2 and x 2.6); public CrystalDiskMark runs of 7.2K rpm desktop drives show
# x 2.2 to x 2.9 from QD1 to QD32.
SINGLE_TRACK_SEEK_S = 1.0e-3
DRIVE_REORDER_DEPTH = 32

# The request size of a data sheet's random IOPS and latency: drive data sheets, spinning and flash
# alike, state "random 4 KB read/write IOPS" (an SSD's at a deep queue, its latency "at QD1, usually
# for 4 kB transfers", as AnandTech's enterprise SSD reviews put it; the SNIA Solid State Storage
# Performance Test Specification's IOPS test reports 4 KiB random). So a stated IOPS figure
# already holds one 4 KiB transfer: a request's fixed time is 1 / IOPS less it (predict.Device).
# On a 7.2K rpm drive at 150 MB/s that is 27 us of 12.5 ms; on an SSD of 75,000 IOPS at 500 MB/s,
# 8 of 13 us.
DATASHEET_IOPS_REQUEST_BYTES = 4096

# Payload rates of links the studies use: a 2 Gb/s FC port carries about 200 MB/s of data
# (seed 001; 212.5 MB/s raw after 8b/10b, seed 000); gigabit Ethernet 1,000 Mb/s less the
# Ethernet, IP and TCP headers of 1,500-byte frames: about 117 MB/s (GPFS over GigE in seed 003
# gave about 200 MB/s over two links, not the 1,000 MB/s the fabric's sum suggests).
FC2_PAYLOAD_BYTES = 200e6
GIGE_PAYLOAD_BYTES = 117e6


def rotation_s(rpm: float) -> float:
    """Average rotational latency: half a revolution."""
    return 30.0 / rpm


def random_service_s(request_bytes: int, media_bytes_per_s: float, seek_s: float = NEARLINE_SEEK_S,
                     rpm: float = NEARLINE_RPM) -> float:
    """One random request on a spinning drive: seek, half a rotation, then the transfer."""
    return seek_s + rotation_s(rpm) + request_bytes / media_bytes_per_s


@functools.lru_cache(maxsize=None)
def _positioning_survival(seek_s: float, rpm: float, single_track_s: float,
                          points: int = 96, steps: int = 768) -> tuple[float, tuple[float, ...]]:
    """P(positioning time > t) of one random request on a grid of t (step, values): the seek over a
    length drawn with density 2 (1 - d), then a uniform part of a revolution."""
    revolution = 2 * rotation_s(rpm)
    lengths = [(k + 0.5) / points for k in range(points)]
    weights = [2 * (1 - d) / points for d in lengths]
    mean_sqrt = sum(w * math.sqrt(d) for w, d in zip(weights, lengths)) / sum(weights)
    b = max(0.0, seek_s - single_track_s) / mean_sqrt
    seeks = [single_track_s + b * math.sqrt(d) for d in lengths]
    total = sum(weights)
    end = max(seeks) + revolution
    step = end / steps
    survival = []
    for k in range(steps + 1):
        t = k * step
        done = sum(w * min(1.0, max(0.0, (t - s) / revolution)) for w, s in zip(weights, seeks)) / total
        survival.append(1.0 - done)
    return step, tuple(survival)


def _area(step: float, values: list[float] | tuple[float, ...]) -> float:
    """The trapezoid rule over values on a grid of `step`: the mean of a time from its survival
    function P(time > t)."""
    return step * (sum(values) - 0.5 * (values[0] + values[-1]))


@functools.lru_cache(maxsize=None)
def _expected_soonest(queued: int, seek_s: float, rpm: float, single_track_s: float) -> float:
    """Mean positioning time of the soonest of `queued` independent random requests."""
    step, survival = _positioning_survival(seek_s, rpm, single_track_s)
    return _area(step, [s ** queued for s in survival])


@functools.lru_cache(maxsize=None)
def slowest_positioning_spread(members: int, percentile: float = 0.99, seek_s: float = NEARLINE_SEEK_S,
                               rpm: float = NEARLINE_RPM, single_track_s: float = SINGLE_TRACK_SEEK_S) -> float:
    """How far the `percentile` of the slowest of `members` random positionings (one request's
    pieces on that many drives, each drawn from the seek and rotation distribution above) lies above
    its mean, as a fraction of one positioning's mean: 0.66 for one 7.2K rpm drive (a p99 near 21 ms
    where the mean is 12.7), 0.28 for the slowest of twelve (whose mean is itself higher)."""
    step, survival = _positioning_survival(seek_s, rpm, single_track_s)
    one = _area(step, survival)
    below = [1.0 - (1.0 - v) ** members for v in survival]          # P(slowest > t)
    mean = _area(step, below)
    quantile = next((k * step for k, v in enumerate(below) if v <= 1.0 - percentile), len(below) * step)
    return max(0.0, quantile - mean) / one


@functools.lru_cache(maxsize=None)
def positioning_scv(seek_s: float = NEARLINE_SEEK_S, rpm: float = NEARLINE_RPM,
                    single_track_s: float = SINGLE_TRACK_SEEK_S) -> float:
    """The squared coefficient of variation (variance / mean squared) of one random request's
    positioning, seek and rotation, from the same distribution reordering uses: about 0.1 for a
    7.2K rpm drive, far below an exponential time's 1 (a positioning is never much above a full
    stroke and a revolution)."""
    step, survival = _positioning_survival(seek_s, rpm, single_track_s)
    mean = _area(step, survival)
    second = step * sum(2 * k * step * v for k, v in enumerate(survival))
    return max(0.0, second - mean * mean) / (mean * mean)


def reordered_positioning_fraction(queued: float, seek_s: float = NEARLINE_SEEK_S, rpm: float = NEARLINE_RPM,
                                   single_track_s: float = SINGLE_TRACK_SEEK_S,
                                   depth: int = DRIVE_REORDER_DEPTH) -> float:
    """The positioning time (seek and rotation) of a random request on a spinning drive that chooses
    among `queued` requests (at most `depth`), as a fraction of one served alone: 1 at one request,
    falling as the queue grows (rotational position ordering, see SINGLE_TRACK_SEEK_S). Between
    whole queue lengths it is interpolated; a drive's stated IOPS scale it (the fraction depends on
    the seek and rotation's proportions only)."""
    q = min(float(depth), max(1.0, queued))
    low = int(math.floor(q))
    alone = _expected_soonest(1, seek_s, rpm, single_track_s)
    f_low = _expected_soonest(low, seek_s, rpm, single_track_s) / alone
    if q == low:
        return f_low
    f_high = _expected_soonest(low + 1, seek_s, rpm, single_track_s) / alone
    return f_low + (q - low) * (f_high - f_low)


def reordered_time(time_s: float, positioning_s: float, queued: float, depth: int = DRIVE_REORDER_DEPTH) -> float:
    """A drive's time per request, `positioning_s` of it seek and rotation, when it chooses among
    `queued` requests (reordered_positioning_fraction): the one formula of the queueing station and
    of a member's capacity."""
    return time_s - positioning_s * (1.0 - reordered_positioning_fraction(queued, depth=depth))


def revolution_of(positioning_s: float) -> float:
    """One revolution of a spinning drive whose random positioning (seek and half a rotation) takes
    `positioning_s`, in the nearline proportions reordering takes too (a 7.2K rpm drive's 8.5 ms seek
    and 4.2 ms half rotation): 8.3 ms at 79 IOPS; 3.6 ms at 182 IOPS, where a 15K rpm drive turns in 4."""
    half = rotation_s(NEARLINE_RPM)
    return 2 * half * positioning_s / (NEARLINE_SEEK_S + half)


def slowest_rotation_extra(members: float, revolution_s: float) -> float:
    """How much longer the slowest of `members` spinning drives takes to reach its sector than one
    drive on average, when a request's pieces land on them at once at the same offset (one stripe
    row: the seeks are alike) and their spindles are not synchronised: each waits a uniform part of
    a revolution, the slowest k / (k + 1) of one, one drive half (Chen et al., "RAID:
    High-Performance, Reliable Secondary Storage", 1994, on spindle synchronisation: without it a
    request spread over several disks waits for the one whose sector is farthest). 0 for one."""
    k = max(1.0, members)
    return revolution_s * (k - 1.0) / (2.0 * (k + 1.0))


def write_penalty(level: int, copies: int = 2) -> int:
    """Drive operations per small (one-chunk) random write, the classic figures: RAID 0: 1;
    mirror: one write per copy; RAID 3/4/5/50: 4 (read data and parity, write both); RAID 6/60:
    6 (two parities). The model counts them per request from the geometry
    (geometry.analyse_alignment); this is the textbook figure it reproduces."""
    if level == 0:
        return 1
    if level in (1, 10):
        return copies
    if level in (3, 4, 5, 50):
        return 4
    if level in (6, 60):
        return 6
    raise ValueError(f"write_penalty: RAID level {level} is not one the model knows")
