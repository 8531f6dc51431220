"""Warnings on a stack, as the seeds' authors would give them: a single-parity layout kept for
long-term storage (the Dell study), a controller with more drives behind it than it can carry (the
Dell study's H800), a host whose buses cannot drive the array (the Engenio O300 and 5884), and the
geometry flags (partial stripes, an inter-chunk below the intra-chunk, ...).

Every `storlab plan` document carries the warnings that apply to its stack as `warnings`, a list of
{code, message}; each message says what is wrong, the figure behind it and what to do instead.
The thresholds are the named constants below; docs/model.md ("Warnings") gives their reasons.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..units import format_si_bytes
from .geometry import MAX_EVALUATED_PIECES, geometry_flags, geometry_of
from .notation import RaidNotation, parse_raid
from .performance import PerfReport, component_capacity_host, mirror_shares, performance_of
from .quantities import HOURS_PER_YEAR
from .reliability import ReliabilityReport, reliability_of
from .stack import DEFAULT_DRIVE, ComponentInstance, Stack, stack_from_notation

__all__ = [
    "PlanWarning", "stack_warnings", "with_default_rebuild", "reliability_warnings", "path_warnings", "geometry_warnings",
    "DEFAULT_REBUILD_RATE_BYTES", "SINGLE_PARITY_MAX_SPAN", "REBUILD_URE_WARN_PROBABILITY",
    "HOST_BUS_HEADROOM", "HOST_KINDS", "BUS_KINDS", "CONTROLLER_KINDS",
]

# Rebuild rate assumed when a stack states neither an MTTR nor a rebuild rate (a nearline drive
# rebuilding under load); the warning says when it was assumed.
DEFAULT_REBUILD_RATE_BYTES = 50e6
# The widest single-parity group the Dell study kept (R5/6, "practical only for scratch space"); "a
# RAID 5 group with twelve drives is unlikely to be deployed for applications that require high
# reliability".
SINGLE_PARITY_MAX_SPAN = 6
# A single-parity rebuild this likely to meet an unreadable sector counts as "large drives": 1 % is
# reached by 5 x 250 GB at BER 1e-15 and is 7.7 % for the Dell study's R5/6 of 2 TB drives.
REBUILD_URE_WARN_PROBABILITY = 0.01
# Host buses should carry this much more than the array delivers, since they also carry the host's
# base I/O. Engenio: O300 at 1,024 / 800 = 1.28 "may not have enough I/O bandwidth", O350 at 1.60
# "may have enough", A350 at 1.93 "should have enough".
HOST_BUS_HEADROOM = 1.5
# Component kinds on the host side of the path (buses and what feeds them) and those that are a RAID
# controller or adapter; a component with raid_engine = true is a controller whatever its kind.
HOST_KINDS = frozenset({"host", "host bus", "bus", "pci", "pcie", "bridge", "link", "planar", "drawer", "slot"})
# Of those, the buses a host shares with its base I/O: they need the HOST_BUS_HEADROOM; the other
# host-side components (a p690's drawers, planars, links and PHBs) only need to carry the array.
BUS_KINDS = frozenset({"host bus", "bus", "pci", "pcie"})
CONTROLLER_KINDS = frozenset({"controller", "adapter", "raid adapter", "raid controller", "hba"})


@dataclass(frozen=True)
class PlanWarning:
    code: str
    message: str


def _mb(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e6:,.0f} MB/s"


def _years(hours: float) -> str:
    years = hours / HOURS_PER_YEAR
    return f"{years:,.0f} years" if years >= 10 else f"{years:.2g} years"




# --- reliability ---------------------------------------------------------------------------------

def with_default_rebuild(stack: Stack) -> tuple[Stack, bool]:
    """The stack, with the default rebuild rate if it states no MTTR (and whether it was assumed)."""
    if stack.raid.mttr_h is not None or stack.raid.rebuild_rate_bytes is not None:
        return stack, False
    return replace(stack, raid=replace(stack.raid, rebuild_rate_bytes=DEFAULT_REBUILD_RATE_BYTES)), True


def _double_parity_alternative(layout: RaidNotation, total_drives: int) -> tuple[RaidNotation, bool]:
    """R6/12 or R60 with the same drives, the Dell study's long-term layouts: a span of 12 when the
    drives divide into it, else the present span (at least RAID 6's four); and whether it uses the
    same drives (a group of three drives has no RAID 6 of its own: R6/4 is one drive more)."""
    for span in (12, max(layout.span, 4)):
        if total_drives % span:
            continue
        if layout.level.nested:
            if total_drives // span >= 2:
                return parse_raid(f"R60/{span}/{total_drives}"), True
        else:
            return parse_raid(f"R6/{span}"), True
    return parse_raid(f"R6/{max(layout.span, 4)}"), False


def reliability_warnings(stack: Stack, report: ReliabilityReport | None = None,
                         drive_named: bool = True) -> list[PlanWarning]:
    """A wide single-parity group, or single parity on large drives, kept for long-term storage.
    drive_named False: the stack's drive is the default nobody chose, so no verdict rests on its
    capacity, MTBF or BER; only the width rule, which needs no drive figure, is given."""
    layout = stack.raid.layout
    if layout.level.mirrored or layout.level.parity_drives != 1:
        return []
    if not drive_named:
        if layout.span <= SINGLE_PARITY_MAX_SPAN:
            return []
        return [PlanWarning("single-parity-long-term", (
            f"{layout.text}: {layout.span} drives per single-parity group (the Dell study kept at most "
            f"{SINGLE_PARITY_MAX_SPAN}, and RAID 5/50 for scratch space only); no drive was named, so no MTTDL "
            f"is given: name it (--drive, --mtbf, --ber or a [drive] table) and run plan reliability"))]
    rated, assumed = with_default_rebuild(stack)
    report = report if report is not None and not assumed else reliability_of(rated)
    ure = report.group.critical_ure_probability
    wide = layout.span > SINGLE_PARITY_MAX_SPAN
    large = ure >= REBUILD_URE_WARN_PROBABILITY
    if not (wide or large):
        return []
    alternative, same_drives = _double_parity_alternative(layout, stack.raid.drives)
    if alternative.level.nested:
        alt_stack = stack_from_notation(alternative, stack.raid.chunk_bytes, drive=stack.drive,
                                        mttr_h=rated.raid.mttr_h, rebuild_rate_bytes=rated.raid.rebuild_rate_bytes)
        alt_text = alternative.text
    else:
        groups = stack.raid.drives // alternative.span if same_drives else stack.raid.groups
        alt_stack = stack_from_notation(alternative, stack.raid.chunk_bytes, drive=stack.drive, count=max(groups, 1),
                                        mttr_h=rated.raid.mttr_h, rebuild_rate_bytes=rated.raid.rebuild_rate_bytes)
        alt_text = alternative.text + (f" x {groups}" if groups > 1 else "")
    alt = reliability_of(alt_stack)
    why = []
    if wide:
        why.append(f"{layout.span} drives per single-parity group (the Dell study kept at most "
                   f"{SINGLE_PARITY_MAX_SPAN})")
    if large:
        why.append(f"a rebuild reads {format_si_bytes(report.group.critical_rebuild_bits / 8)} with a {100 * ure:.1f} % chance "
                   f"of an unreadable sector")
    rebuild = f" (MTTR from an assumed {_mb(DEFAULT_REBUILD_RATE_BYTES)} rebuild)" if assumed else ""
    count = f" x {stack.raid.count}" if stack.raid.count > 1 else ""
    return [PlanWarning("single-parity-long-term", (
        f"{layout.text}{count} of {format_si_bytes(stack.drive.capacity_bytes)} drives: {'; '.join(why)}; MTTDL "
        f"{_years(report.mttdl_h)}, {100 * report.annual_loss_probability:.2g} % chance of loss a year{rebuild}. "
        f"Keep RAID 5/50 for scratch space; for long-term storage use R6/12 or R60: {alt_text} "
        f"{'of the same drives' if same_drives else 'with one drive more per group'} has an MTTDL of "
        f"{_years(alt.mttdl_h)}"))]


# --- hardware path -------------------------------------------------------------------------------

def _per_template(root: ComponentInstance) -> dict[str, list[ComponentInstance]]:
    out: dict[str, list[ComponentInstance]] = {}
    for instance in root.walk():
        out.setdefault(instance.template.name, []).append(instance)
    return out


def _side_capacity(root: ComponentInstance, caps: dict[int, float | None], keep: set[int], groups: int,
                   per_group: float, mode: str) -> float:
    """What the kept components carry with everything else unlimited; per_group = inf for no drives."""
    if mode == "lockstep":
        limits = [per_group * groups]
        for instance in root.walk():
            n = len(instance.all_group_ids())
            cap = caps[id(instance)]
            if id(instance) in keep and cap is not None and n:
                limits.append(cap * groups / n)
        return min(limits)

    def passed(instance: ComponentInstance) -> float:
        own = len(instance.group_ids) * per_group if instance.group_ids else 0.0   # 0 x inf is NaN
        offered = own + sum(passed(c) for c in instance.children)
        cap = caps[id(instance)]
        return min(cap, offered) if id(instance) in keep and cap is not None else offered
    return passed(root)


def path_warnings(stack: Stack, perf: PerfReport) -> list[PlanWarning]:
    """Controllers with more drives behind them than they carry; host buses that cannot drive the array;
    a striped volume over unequal paths."""
    root = stack.instances()
    warnings: list[PlanWarning] = []
    for metric in perf.metrics.values():
        if metric.note:
            warnings.append(PlanWarning("unequal-stripes", f"{metric.metric}: {metric.note}"))
    if root is None:
        return warnings
    groups = stack.raid.groups
    span = stack.raid.layout.span
    directions = [("seq_write", "sequential writes", perf.drives.seq_write.write_amplification),
                  ("seq_read", "sequential reads", 1.0)]
    # controllers: saturated in both directions, with a whole group of the drives under one instance
    # adding nothing in one of them. The rule is the Dell study's ("if the controllers are saturated,
    # the storage performance cannot be improved with additional hard drives"; limit the drives "to a
    # reasonable range", "twenty-four Nearline SAS drives for a single H800"). Its recommended 24
    # NL-SAS drives per H800 saturate the H800's writes (about 1,300 MB/s) while their reads stay
    # below the adapter's limit: drives that still add throughput in one direction are not wasted,
    # so a controller saturated in one direction only is not oversubscribed
    worst: dict[str, tuple[float, str]] = {}
    mirrored = {metric: mirror_shares(root, metric) for metric, _, _ in directions}
    for name, instances in _per_template(root).items():
        template = instances[0].template
        if not (template.raid_engine or template.kind in CONTROLLER_KINDS):
            continue
        for instance in instances:
            under = len(instance.all_group_ids())
            if not under:
                continue
            drives_under = under * span
            saturated: list[tuple[int, float, float, str]] = []
            for metric, words, amplification in directions:
                cap = component_capacity_host(instance, metric, amplification, 1.0, perf.seq_request_bytes)
                if cap is None:
                    break
                cap /= mirrored[metric].get(id(instance), 1.0)      # a partner's mirrored writes take the rest
                delivered = under * perf.drives.value(metric) / groups
                saturating = math.ceil(drives_under * cap / delivered)
                if saturating >= drives_under:
                    break
                saturated.append((drives_under - saturating, cap, delivered, words))
            if len(saturated) < len(directions):
                continue        # every drive still adds throughput in some direction
            surplus, cap, delivered, words = max(saturated)
            if surplus < span:
                continue
            saturating = drives_under - surplus
            ratio = delivered / cap
            if ratio > worst.get(name, (0.0, ""))[0]:
                worst[name] = (ratio, (
                    f"{instance.path} carries {_mb(cap)} of {words} but its {drives_under} drives could deliver "
                    f"{_mb(delivered)}: about {saturating} drives saturate it and the other {surplus} add no "
                    f"streaming throughput, and its other direction is saturated too (the Dell study: 24 NL-SAS "
                    f"drives per H800, which saturates at about 1,300 MB/s of writes); put some of the drives "
                    f"behind another adapter and stripe across the adapters with LVM"))
    warnings += [PlanWarning("controller-oversubscribed", message) for _, message in worst.values()]
    # host buses against the array: the host side alone versus the array side and drives alone
    instances = list(root.walk())
    host = {id(i) for i in instances if i.template.kind in HOST_KINDS}
    array = {id(i) for i in instances} - host
    # the 1.5 x rule is Engenio's for PCI buses shared with the host's base I/O: it judges what the
    # buses alone carry, never a Fibre Channel link or a bridge on the same side (those only need
    # to carry the array, the `short` test)
    buses = {id(i) for i in instances if i.template.kind in BUS_KINDS}
    if host:
        shortest: tuple[float, str] | None = None
        for metric, words, amplification in directions:
            caps = {id(i): component_capacity_host(i, metric, amplification, 1.0, perf.seq_request_bytes)
                    for i in instances}
            per_group = perf.drives.value(metric) / groups
            host_carries = _side_capacity(root, caps, host, groups, math.inf, perf.mode)
            array_delivers = _side_capacity(root, caps, array, groups, per_group, perf.mode)
            buses_carry = _side_capacity(root, caps, buses, groups, math.inf, perf.mode) if buses else math.inf
            short = host_carries < array_delivers * (1 - 1e-9)
            headroom_needed = buses_carry < array_delivers * HOST_BUS_HEADROOM
            if host_carries == math.inf or not (short or headroom_needed):
                continue
            if not short:
                host_carries = buses_carry
            ratio = host_carries / array_delivers
            if shortest is None or ratio < shortest[0]:
                names = _host_names(instances, host if short else buses)
                if short:
                    verdict = (f"the host side ({names}) carries {_mb(host_carries)} of {words}, less than the "
                               f"{_mb(array_delivers)} the array delivers: the host cannot drive the array")
                else:
                    verdict = (f"the host buses ({names}) carry {_mb(host_carries)} of {words}, only {ratio:.2f} x "
                               f"the {_mb(array_delivers)} the array delivers; buses shared with the host's base I/O "
                               f"need {HOST_BUS_HEADROOM:g} x")
                shortest = (ratio, (
                    f"{verdict} (Engenio: an O300's two 512 MB/s PCI buses \"may not have enough I/O bandwidth to "
                    f"drive maximum 5884 performance\"); use a host with faster or more buses, or spread the "
                    f"adapters over more of them"))
        if shortest is not None:
            warnings.append(PlanWarning("host-buses-short", shortest[1]))
    return warnings


def _host_names(instances: list[ComponentInstance], host: set[int]) -> str:
    names: list[str] = []
    for i in instances:
        if id(i) in host and i.template.name not in names and i.template.cap_bw_bytes("read") is not None:
            names.append(i.template.name)
    return ", ".join(names[:4]) + (" ..." if len(names) > 4 else "")


# --- geometry ------------------------------------------------------------------------------------

def geometry_warnings(stack: Stack, request_bytes: int | None = None) -> list[PlanWarning]:
    """The geometry flags (docs/model.md "Geometry") as warnings, for the request size if one is given."""
    return [PlanWarning(flag.code, flag.message) for flag in geometry_flags(stack, geometry_of(stack), request_bytes)]


def stack_warnings(stack: Stack, perf: PerfReport | None = None, request_bytes: int | None = None,
                   reliability: ReliabilityReport | None = None,
                   drive_named: bool | None = None) -> list[PlanWarning]:
    """Every warning on the stack: geometry (for the request size, if given), reliability and, for a
    stack with a hardware path, the path (from `perf`, or a performance report made here).
    drive_named: whether a reliability verdict may rest on the stack's drive; None: when a
    reliability report is given or the drive is not the default one (DEFAULT_DRIVE)."""
    if drive_named is None:
        drive_named = reliability is not None or stack.drive is not DEFAULT_DRIVE
    warnings = geometry_warnings(stack, request_bytes) + reliability_warnings(stack, reliability, drive_named)
    if perf is None and stack.path is not None:
        # one full stripe, as `plan perf` takes by default, but no more chunks than the alignment
        # analysis walks (a volume whose inter-chunk and device stripe have a huge lcm has a huge one)
        geometry = geometry_of(stack)
        most = MAX_EVALUATED_PIECES // 2 * geometry.chunk_bytes
        perf = performance_of(stack, seq_request_bytes=min(geometry.full_stripe_bytes, most))
    if perf is not None:
        warnings += path_warnings(stack, perf)
    return warnings
