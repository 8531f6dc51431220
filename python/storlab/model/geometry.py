"""Stripe geometry, alignment and capacity of a stack: stripe widths, full-stripe versus partial-stripe
(read-modify-write) writes for a request size and offset pattern, disk operations, write penalty, flags.

Rules (docs/model.md explains them):
- stripe width of one group = data drives x chunk (RAID 3/5: (drives - 1) x segment; RAID 6:
  (drives - 2) x segment; RAID 1/10: drives / 2 x segment, as in the Engenio study);
- a layer that stripes M members with unit u over members of full stripe W has a full stripe of
  M x lcm(u, W); with u = W this is the application stripe width M x W of the Engenio study;
- a partial-stripe write costs what Linux md does: the cheaper in reads of read-modify-write
  (read old data + old parity) and reconstruct-write (read the untouched data); a full-stripe write
  reads nothing.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Iterable

from ..errors import UserError
from ..jobs.model_values import parse_pattern
from ..units import format_size
from .notation import RaidNotation, parse_raid
from .stack import Stack

__all__ = [
    "stripe_width_bytes", "application_stripe_width_bytes", "layouts_for_request", "Flag", "Capacity",
    "StripingLevel", "Geometry", "AlignmentReport", "GeometryReport", "geometry_of", "analyse_alignment",
    "parse_pattern", "capacity_of", "geometry_flags", "is_power_of_two", "MAX_EVALUATED_OFFSETS",
    "MAX_EVALUATED_PIECES",
]

# More distinct offsets than this are sampled evenly rather than all evaluated.
MAX_EVALUATED_OFFSETS = 4096
# Chunk pieces the alignment analysis walks in all (offsets x pieces per request): bounds its time
# to well under a second. A request that alone splits into more pieces is refused.
MAX_EVALUATED_PIECES = 200_000


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.0f} %"


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def stripe_width_bytes(layout: RaidNotation | str, chunk_bytes: int) -> int:
    """Stripe width of one span (LUN): data drives x chunk (segment)."""
    notation = parse_raid(layout) if isinstance(layout, str) else layout
    return notation.data_drives_per_span * chunk_bytes


def application_stripe_width_bytes(layout: RaidNotation | str, chunk_bytes: int, luns: int) -> int:
    """Stripe width of an application on `luns` striped LUNs (Engenio: LUN stripe width x # luns)."""
    return stripe_width_bytes(layout, chunk_bytes) * luns


def layouts_for_request(request_bytes: int, data_drive_options: Iterable[int],
                        chunk_options: Iterable[int]) -> list[tuple[int, int]]:
    """(data drives, chunk) pairs whose stripe width equals the request exactly, e.g. a 1 MB
    maximum transfer (AIX LTG) fits 4 x 256 KB and 8 x 128 KB."""
    return sorted((d, c) for d in data_drive_options for c in chunk_options if d * c == request_bytes)


@dataclass(frozen=True)
class Flag:
    code: str
    message: str


@dataclass(frozen=True)
class StripingLevel:
    """One striping layer above the RAID groups: `members` members, `unit_bytes` each before the next."""
    name: str
    members: int
    unit_bytes: int
    member_full_stripe_bytes: int

    @property
    def full_stripe_bytes(self) -> int:
        return self.members * math.lcm(self.unit_bytes, self.member_full_stripe_bytes)


@dataclass(frozen=True)
class Geometry:
    """The layout numbers of a stack, and how volume offsets map onto RAID groups."""
    layout: RaidNotation
    chunk_bytes: int
    data_drives: int               # per group
    parity_drives: int             # per group (RAID 3/4/5/6)
    copies: int                    # per data chunk (mirrors)
    groups: int
    levels: tuple[StripingLevel, ...]   # top (host) first
    concatenated: bool             # volume is a concatenation (offsets stay on one device)

    @property
    def group_stripe_width_bytes(self) -> int:
        return self.data_drives * self.chunk_bytes

    @property
    def full_stripe_bytes(self) -> int:
        """Smallest aligned write that is full-stripe on every group it touches (the volume's period)."""
        return self.levels[0].full_stripe_bytes if self.levels else self.group_stripe_width_bytes

    @property
    def device_full_stripe_bytes(self) -> int:
        """Full stripe of one RAID device (a RAID 50/60 stripes its spans)."""
        for level in self.levels:
            if level.name == "spans":
                return level.full_stripe_bytes
        return self.group_stripe_width_bytes

    @property
    def has_parity(self) -> bool:
        return self.parity_drives > 0

    def map_extent(self, offset_bytes: int, length_bytes: int) -> dict[int, list[tuple[int, int]]]:
        """Split a volume extent into contiguous extents per RAID group id."""
        pieces: list[tuple[int, int, int]] = [(0, offset_bytes, length_bytes)]
        for level in self.levels:
            next_pieces: list[tuple[int, int, int]] = []
            for parent, off, length in pieces:
                for member, member_off, take in _split_striped(off, length, level.members, level.unit_bytes):
                    next_pieces.append((parent * level.members + member, member_off, take))
            pieces = next_pieces
        by_group: dict[int, list[tuple[int, int]]] = {}
        for group, off, length in pieces:
            extents = by_group.setdefault(group, [])
            if extents and extents[-1][0] + extents[-1][1] == off:
                extents[-1] = (extents[-1][0], extents[-1][1] + length)
            else:
                extents.append((off, length))
        return by_group


def _split_striped(offset: int, length: int, members: int, unit: int) -> list[tuple[int, int, int]]:
    """RAID 0 mapping of an extent: [(member, member offset, length)], contiguous pieces merged."""
    out: list[tuple[int, int, int]] = []
    last_end: dict[int, int] = {}
    position: dict[int, int] = {}
    while length > 0:
        unit_index, within = divmod(offset, unit)
        take = min(unit - within, length)
        member = unit_index % members
        member_off = (unit_index // members) * unit + within
        if last_end.get(member) == member_off:
            i = position[member]
            m, o, piece_len = out[i]
            out[i] = (m, o, piece_len + take)
        else:
            position[member] = len(out)
            out.append((member, member_off, take))
        last_end[member] = member_off + take
        offset += take
        length -= take
    return out


def geometry_of(stack: Stack) -> Geometry:
    raid = stack.raid
    layout = raid.layout
    group_sw = layout.data_drives_per_span * raid.chunk_bytes
    levels: list[StripingLevel] = []
    if layout.level.nested:
        levels.append(StripingLevel("spans", layout.spans, raid.effective_span_chunk_bytes, group_sw))
    device_full = levels[0].full_stripe_bytes if levels else group_sw
    if stack.volume.aggregate == "stripe":
        inter = stack.volume.inter_chunk_bytes or device_full
        levels.insert(0, StripingLevel("volume", raid.devices, inter, device_full))
    return Geometry(layout, raid.chunk_bytes, layout.data_drives_per_span, layout.level.parity_drives,
                    layout.copies, raid.groups, tuple(levels), stack.volume.aggregate == "concat")


# ----------------------------------------------------------------------------------------------
# Capacity

@dataclass(frozen=True)
class Capacity:
    raw_bytes: int
    usable_bytes: int

    @property
    def efficiency(self) -> float:
        return self.usable_bytes / self.raw_bytes


def capacity_of(stack: Stack) -> Capacity:
    """Raw = all drives; usable = data drives x capacity (before md/LVM metadata and rounding)."""
    drive = stack.drive.capacity_bytes
    raw = stack.raid.drives * drive
    usable = stack.raid.groups * stack.raid.layout.data_drives_per_span * drive
    return Capacity(raw, usable)


# ----------------------------------------------------------------------------------------------
# Alignment: what a request size and offset pattern cost on the drives

@dataclass(frozen=True)
class AlignmentReport:
    request_bytes: int
    pattern: str
    offsets_evaluated: int
    sampled: bool                       # too many distinct offsets: an even sample was evaluated
    stripe_writes_per_request: float
    full_stripe_fraction: float         # of stripe writes: covered every data chunk, no reads
    partial_stripe_fraction: float      # of stripe writes: not every data chunk fully written
    rmw_fraction: float                 # of stripe writes: partial, parity by read-modify-write
    rcw_fraction: float                 # of stripe writes: partial, parity by reconstruct-write
    requests_all_full_fraction: float   # of requests: every stripe it touched was full
    disk_reads_per_write: float
    disk_writes_per_write: float
    data_chunk_writes_per_write: float  # data chunks (pieces) the request writes
    disk_reads_per_read: float          # chunk pieces a read request touches
    write_amplification: float          # drive bytes moved (read + written) per host byte written

    @property
    def disk_ops_per_write(self) -> float:
        return self.disk_reads_per_write + self.disk_writes_per_write

    @property
    def write_penalty(self) -> float:
        """Drive operations per data chunk written (4 for a one-chunk RAID 5 write, 6 for RAID 6)."""
        return self.disk_ops_per_write / self.data_chunk_writes_per_write


def full_stripe_write_amplification(geometry: Geometry) -> float:
    """Drive bytes written per host byte when every stripe is written whole: the data with its
    share of parity and copies, nothing read first."""
    return (geometry.data_drives + geometry.parity_drives) * geometry.copies / geometry.data_drives


def gathered_into_full_stripes(geometry: Geometry, report: AlignmentReport) -> AlignmentReport:
    """The same writes gathered into whole stripes before they reach the drives, as a write-back
    cache drains a sequential stream (Stack.gathers_sequential_writes): each drive byte written
    once with its share of parity, no read before the write; reads are unchanged."""
    amplification = full_stripe_write_amplification(geometry)
    if report.write_amplification <= amplification:
        return report
    return dataclasses.replace(
        report, full_stripe_fraction=1.0, partial_stripe_fraction=0.0, rmw_fraction=0.0, rcw_fraction=0.0,
        requests_all_full_fraction=1.0, disk_reads_per_write=0.0,
        disk_writes_per_write=max(1.0, report.disk_reads_per_read) * amplification,
        write_amplification=amplification)


@dataclass
class _Tally:
    stripes: int = 0
    full: int = 0
    rmw: int = 0
    rcw: int = 0
    reads: int = 0
    writes: int = 0
    pieces: int = 0
    drive_bytes: int = 0
    all_full_requests: int = 0


def _stripe_write_cost(geometry: Geometry, chunk_ranges: dict[int, tuple[int, int]], tally: _Tally) -> bool:
    """Account one stripe write; chunk_ranges maps data chunk index -> [start, end) inside the chunk.
    Returns True if it was a full-stripe write."""
    d, p, chunk = geometry.data_drives, geometry.parity_drives, geometry.chunk_bytes
    k = len(chunk_ranges)
    written = sum(end - start for start, end in chunk_ranges.values())
    tally.stripes += 1
    tally.pieces += k
    if p == 0:      # RAID 0 and mirrors: every copy written, nothing read
        tally.writes += k * geometry.copies
        tally.drive_bytes += written * geometry.copies
        tally.full += 1 if k == d and written == d * chunk else 0
        return k == d and written == d * chunk
    if k == d and written == d * chunk:
        tally.full += 1
        tally.writes += d + p
        tally.drive_bytes += written + p * chunk
        return True
    # Parity must be rewritten over the union of the in-chunk rows touched.
    rows = _union([r for r in chunk_ranges.values()])
    rows_bytes = sum(end - start for start, end in rows)
    rmw_read_bytes = written + p * rows_bytes
    rcw_read_bytes = d * rows_bytes - written
    write_bytes = written + p * rows_bytes
    if rmw_read_bytes < rcw_read_bytes:          # md prefers RCW on a tie (rmw_level = 1)
        tally.rmw += 1
        tally.reads += k + p
        tally.drive_bytes += rmw_read_bytes + write_bytes
    else:
        tally.rcw += 1
        rcw_chunks = sum(1 for j in range(d)
                         if j not in chunk_ranges or _covered(rows, chunk_ranges[j]) < rows_bytes)
        tally.reads += rcw_chunks
        tally.drive_bytes += rcw_read_bytes + write_bytes
    tally.writes += k + p
    return False


def _union(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _covered(rows: list[tuple[int, int]], piece: tuple[int, int]) -> int:
    return sum(max(0, min(end, piece[1]) - max(start, piece[0])) for start, end in rows)


def _offsets(kind: str, argument: int | None, request_bytes: int, period_bytes: int,
             max_offsets: int = MAX_EVALUATED_OFFSETS) -> tuple[list[int], bool]:
    """Volume offsets to evaluate, each equally likely, and whether they are a sample."""
    if kind == "sequential":
        start = argument or 0
        count = period_bytes // math.gcd(request_bytes, period_bytes)
        candidates = range(count)
        to_offset = lambda i: start + i * request_bytes  # noqa: E731 - tiny local mapping
    else:
        alignment = request_bytes if kind == "aligned" else (argument or 4096)
        step = math.gcd(alignment, period_bytes)
        count = period_bytes // step
        candidates = range(count)
        to_offset = lambda i: i * step  # noqa: E731
    if count <= max_offsets:
        return [to_offset(i) for i in candidates], False
    stride = count / max_offsets
    return [to_offset(int(i * stride)) for i in range(max_offsets)], True


@functools.lru_cache(maxsize=256)
def analyse_alignment(geometry: Geometry, request_bytes: int, pattern: str = "sequential") -> AlignmentReport:
    """Cost of writes (and reads) of `request_bytes` at the offsets of `pattern`, averaged exactly over
    the offsets the pattern visits within one full-stripe period. Kept for the same arguments (the
    geometry and the report are frozen): a curve or an accelerator search predicts one request size
    at many concurrencies, and a large request costs up to a second to analyse."""
    if request_bytes <= 0:
        raise UserError("request size must be positive")
    pieces = -(-request_bytes // geometry.chunk_bytes) + 1   # chunks one request touches, at most
    if pieces > MAX_EVALUATED_PIECES:
        raise UserError(f"request: {request_bytes} bytes spans {pieces - 1} chunks of {geometry.chunk_bytes} "
                         f"bytes; allowed: at most {MAX_EVALUATED_PIECES} chunks "
                         f"({MAX_EVALUATED_PIECES * geometry.chunk_bytes} bytes with this chunk)")
    kind, argument = parse_pattern(pattern)
    budget = max(1, min(MAX_EVALUATED_OFFSETS, MAX_EVALUATED_PIECES // pieces))
    offsets, sampled = _offsets(kind, argument, request_bytes, geometry.full_stripe_bytes, budget)
    tally = _Tally()
    read_pieces = 0
    chunk = geometry.chunk_bytes
    group_sw = geometry.group_stripe_width_bytes
    for offset in offsets:
        all_full = True
        for extents in geometry.map_extent(offset, request_bytes).values():
            for group_offset, length in extents:
                stripes: dict[int, dict[int, tuple[int, int]]] = {}
                position, remaining = group_offset, length
                while remaining > 0:
                    stripe, within_stripe = divmod(position, group_sw)
                    chunk_index, within_chunk = divmod(within_stripe, chunk)
                    take = min(chunk - within_chunk, remaining)
                    stripes.setdefault(stripe, {})[chunk_index] = (within_chunk, within_chunk + take)
                    read_pieces += 1
                    position += take
                    remaining -= take
                for chunk_ranges in stripes.values():
                    all_full &= _stripe_write_cost(geometry, chunk_ranges, tally)
        tally.all_full_requests += all_full
    n = len(offsets)
    stripes = max(tally.stripes, 1)
    return AlignmentReport(
        request_bytes=request_bytes, pattern=pattern, offsets_evaluated=n, sampled=sampled,
        stripe_writes_per_request=tally.stripes / n,
        full_stripe_fraction=tally.full / stripes, partial_stripe_fraction=(tally.stripes - tally.full) / stripes,
        rmw_fraction=tally.rmw / stripes, rcw_fraction=tally.rcw / stripes,
        requests_all_full_fraction=tally.all_full_requests / n,
        disk_reads_per_write=tally.reads / n, disk_writes_per_write=tally.writes / n,
        data_chunk_writes_per_write=tally.pieces / n, disk_reads_per_read=read_pieces / n,
        write_amplification=tally.drive_bytes / (request_bytes * n),
    )


# ----------------------------------------------------------------------------------------------
# Flags and the full report

def geometry_flags(stack: Stack, geometry: Geometry, request_bytes: int | None = None) -> list[Flag]:
    flags: list[Flag] = []
    layout, raid = stack.raid.layout, stack.raid
    group_sw = geometry.group_stripe_width_bytes
    if not is_power_of_two(group_sw):
        flags.append(Flag("uneven", (
            f"{layout.text}: {geometry.data_drives} data drives x {format_size(raid.chunk_bytes)} = "
            f"{format_size(group_sw)} stripe, not a power of two: power-of-two requests never fill whole "
            f"stripes evenly; prefer 2, 4, 8 or 16 data drives per group")))
    if layout.level.nested and raid.effective_span_chunk_bytes < raid.chunk_bytes:
        flags.append(Flag("inter-chunk-smaller", (
            f"span chunk {format_size(raid.effective_span_chunk_bytes)} is smaller than the intra-chunk "
            f"{format_size(raid.chunk_bytes)}; use an inter-chunk at least the intra-chunk")))
    inter = stack.volume.inter_chunk_bytes
    if stack.volume.aggregate == "stripe" and inter is not None:
        if inter < raid.chunk_bytes:
            flags.append(Flag("inter-chunk-smaller", (
                f"host inter-chunk {format_size(inter)} is smaller than the intra-chunk "
                f"{format_size(raid.chunk_bytes)}; use an inter-chunk at least the intra-chunk")))
        if geometry.has_parity and inter % geometry.device_full_stripe_bytes:
            flags.append(Flag("inter-chunk-partial-stripe", (
                f"host inter-chunk {format_size(inter)} is not a multiple of the device full stripe "
                f"{format_size(geometry.device_full_stripe_bytes)}: each device receives partial stripes")))
    if stack.volume.aggregate == "stripe":
        lvm_unit = inter if inter is not None else geometry.device_full_stripe_bytes
        if not is_power_of_two(lvm_unit) or lvm_unit < 4096:
            flags.append(Flag("lvm-stripe-size", (
                f"host stripe size {format_size(lvm_unit)} cannot be an LVM stripe size (a power of two "
                f"of at least 4 KiB); choose a power-of-two inter-chunk")))
    if raid.engine == "md" and layout.level.number != 1 and (
            not is_power_of_two(raid.chunk_bytes) or raid.chunk_bytes < 4096):
        flags.append(Flag("md-chunk", f"md needs a power-of-two chunk of at least 4 KiB, got {format_size(raid.chunk_bytes)}"))
    if raid.engine == "md" and layout.level.number == 3:
        flags.append(Flag("md-level", "Linux md has no RAID 3; build it in a controller or use RAID 4/5"))
    if stack.filesystem.kind in ("xfs", "ext4"):
        unit = geometry.levels[0].unit_bytes if geometry.levels else raid.chunk_bytes
        if unit % stack.filesystem.block_bytes:
            flags.append(Flag("fs-stripe-unit", (
                f"stripe unit {format_size(unit)} is not a multiple of the {stack.filesystem.kind} block "
                f"{format_size(stack.filesystem.block_bytes)}")))
    if request_bytes is not None and geometry.has_parity:
        # even requests aligned to their own size: do they still leave partial stripes on some group?
        aligned = analyse_alignment(geometry, request_bytes, "aligned")
        if aligned.full_stripe_fraction < 1.0:
            gathered = ("; the write-back cache gathers a sequential stream's into full stripes, random ones pay"
                        if stack.gathers_sequential_writes else "")
            flags.append(Flag("partial-stripe-requests", (
                f"{format_size(request_bytes)} requests, even aligned to their size, write partial stripes "
                f"({_percent(aligned.partial_stripe_fraction)} of stripe writes need parity reads{gathered}); "
                f"group stripe {format_size(group_sw)}, volume full stripe {format_size(geometry.full_stripe_bytes)}")))
    return flags


@dataclass(frozen=True)
class GeometryReport:
    stack_name: str
    layout: str
    chunk_bytes: int
    data_drives_per_group: int
    parity_drives_per_group: int
    groups: int
    devices: int
    drives: int
    group_stripe_width_bytes: int
    device_full_stripe_bytes: int
    full_stripe_bytes: int
    fs_stripe_unit_bytes: int
    fs_stripe_width_units: int
    recommended_request_bytes: tuple[int, ...]
    capacity: Capacity
    flags: tuple[Flag, ...]
    alignment: AlignmentReport | None = None
    read_ahead_min_bytes: int = 0


def fs_stripe_of(geometry: Geometry) -> tuple[int, int]:
    """(stripe unit, number of units) the file system should use: the top striping layer, as the
    kernel reports it (LVM: stripe size x stripes; RAID 50/60 with span chunk = chunk: chunk x
    all data drives; one group: chunk x data drives)."""
    if not geometry.levels:
        return geometry.chunk_bytes, geometry.data_drives
    top = geometry.levels[0]
    if top.name == "spans" and top.unit_bytes == geometry.chunk_bytes:
        return geometry.chunk_bytes, geometry.data_drives * top.members
    return top.unit_bytes, top.members


def geometry_report(stack: Stack, request_bytes: int | None = None, pattern: str = "sequential") -> GeometryReport:
    geometry = geometry_of(stack)
    unit, width = fs_stripe_of(geometry)
    full = geometry.full_stripe_bytes
    alignment = analyse_alignment(geometry, request_bytes, pattern) if request_bytes else None
    # md's rule for RAID 4/5/6 read-ahead: cover two whole stripes (drivers/md/raid5.c).
    read_ahead = 2 * full if geometry.has_parity else full
    return GeometryReport(
        stack_name=stack.name, layout=stack.raid.layout.text, chunk_bytes=stack.raid.chunk_bytes,
        data_drives_per_group=geometry.data_drives, parity_drives_per_group=geometry.parity_drives,
        groups=stack.raid.groups, devices=stack.raid.devices, drives=stack.raid.drives,
        group_stripe_width_bytes=geometry.group_stripe_width_bytes,
        device_full_stripe_bytes=geometry.device_full_stripe_bytes, full_stripe_bytes=full,
        fs_stripe_unit_bytes=unit, fs_stripe_width_units=width,
        recommended_request_bytes=(full, 2 * full, 4 * full), capacity=capacity_of(stack),
        flags=tuple(geometry_flags(stack, geometry, request_bytes)), alignment=alignment,
        read_ahead_min_bytes=read_ahead,
    )


__all__ += ["geometry_report", "fs_stripe_of"]
