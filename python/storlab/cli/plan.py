"""`storlab plan`: model a storage stack (geometry, reliability, perf), recommend layouts, emit scripts.

Each subcommand takes a stack file (TOML, see docs/model.md) or the short RAID notation plus options,
computes a result object from storlab.model / storlab.planner, then renders it as text or, with --json,
as one JSON document on stdout (schema "storlab.plan.<command>/1").
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from typing import Any

from ..document import header, plan_schema
from ..model.advice import PlanWarning, stack_warnings
from ..model.geometry import geometry_report
from ..model.notation import NotationError
from ..model.performance import SHARING_MODES, performance_of, with_cap_chain
from ..model.quantities import HOURS_PER_YEAR, mtbf_h_from_afr, parse_afr, parse_ber, parse_mtbf_h, parse_period_h
from ..model.reliability import reliability_of
from ..model.stack import (
    AGGREGATIONS,
    DEFAULT_DRIVE,
    FILESYSTEMS,
    RAID_ENGINES,
    Filesystem,
    Stack,
    StackError,
    load_stack,
    stack_from_notation,
)
from ..planner.recommend import (
    DEFAULT_LEVELS,
    DEFAULT_REBUILD_RATE_BYTES,
    MAX_BAYS,
    MAX_CONTROLLERS,
    MAX_INVENTORY_DRIVES,
    OBJECTIVES,
    Inventory,
    Needs,
    recommend,
)
from ..planner.scripts import build_script
from ..units import format_si_bytes, format_size, parse_count, parse_rate, parse_size
from .main import UsageError
from .outputs import check_destination, write_output

DEFAULT_CHUNK = "512KiB"


# --- argument helpers ----------------------------------------------------------------------------

def _add_drive_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("drive")
    g.add_argument("--drive", metavar="SIZE", help="drive capacity, e.g. 2TB (default 2TB)")
    g.add_argument("--mtbf", metavar="HOURS", help="drive MTBF, e.g. 600000h (bare number = hours)")
    g.add_argument("--afr", metavar="RATE", help="annualised failure rate instead of MTBF, e.g. 0.73%%")
    g.add_argument("--ber", metavar="RATE", help="unrecoverable bit error rate per bit read, e.g. 1e-15")
    g.add_argument("--sector", metavar="SIZE", help="drive sector size (default 512)")
    g.add_argument("--drive-read", metavar="RATE", help="drive sequential read rate, e.g. 150MB/s")
    g.add_argument("--drive-write", metavar="RATE", help="drive sequential write rate (default = read)")
    g.add_argument("--drive-iops", metavar="N", help="drive random read IOPS (and write, unless given)")
    g.add_argument("--drive-write-iops", metavar="N", help="drive random write IOPS")
    g.add_argument("--ssd", action="store_true", help="non-rotational drives (scheduler none)")


def _add_stack_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("stack", metavar="STACK", help="stack file (.toml) or RAID notation such as R60/12/24 or R50/6/x")
    g = p.add_argument_group("layout (with a notation; override a file's values)")
    g.add_argument("--chunk", metavar="SIZE", help=f"intra-chunk (segment) size (default {DEFAULT_CHUNK})")
    g.add_argument("--span-chunk", metavar="SIZE", help="RAID 50/60: unit the controller stripes spans with (default = chunk)")
    g.add_argument("--drives", metavar="N", type=int, help="total drives, for a notation ending in /x")
    g.add_argument("--count", metavar="N", type=int, help="how many times the layout is built (e.g. one per controller)")
    g.add_argument("--aggregate", choices=AGGREGATIONS, help="how the host combines RAID devices")
    g.add_argument("--inter-chunk", metavar="SIZE", help="host stripe size (LVM --stripesize)")
    g.add_argument("--engine", choices=RAID_ENGINES, help="parity computed in a RAID controller or Linux md")
    g.add_argument("--fs", choices=FILESYSTEMS, help="file system on top (default xfs)")
    r = p.add_argument_group("rebuild")
    r.add_argument("--mttr", metavar="TIME", help="time to rebuild one drive, e.g. 24h")
    r.add_argument("--rebuild-rate", metavar="RATE", help="rebuild rate, e.g. 50MB/s (MTTR = capacity / rate)")
    _add_drive_options(p)
    p.add_argument("--json", action="store_true", help="write JSON to stdout")


def _drive_from_args(args: argparse.Namespace, base=DEFAULT_DRIVE):
    changes: dict[str, Any] = {}
    if args.drive:
        changes["capacity_bytes"] = parse_size(args.drive, "--drive")
    if args.mtbf and args.afr:
        raise UsageError("give --mtbf or --afr, not both")
    if args.mtbf:
        changes["mtbf_h"] = parse_mtbf_h(args.mtbf, "--mtbf")
    if args.afr:
        changes["mtbf_h"] = mtbf_h_from_afr(parse_afr(args.afr, "--afr"))
    if args.ber:
        changes["ber_per_bit"] = parse_ber(args.ber, "--ber")
    if args.sector:
        changes["sector_bytes"] = parse_size(args.sector, "--sector")
    if args.drive_read:
        changes["seq_read_bw_bytes"] = parse_rate(args.drive_read, "--drive-read")
        changes.setdefault("seq_write_bw_bytes", changes["seq_read_bw_bytes"])
    if args.drive_write:
        changes["seq_write_bw_bytes"] = parse_rate(args.drive_write, "--drive-write")
    if args.drive_iops:
        changes["random_read_iops"] = float(parse_count(args.drive_iops, "--drive-iops"))
        changes["random_write_iops"] = changes["random_read_iops"]
    if args.drive_write_iops:
        changes["random_write_iops"] = float(parse_count(args.drive_write_iops, "--drive-write-iops"))
    if args.ssd:
        changes["rotational"] = False
    if changes and "name" not in changes and base is DEFAULT_DRIVE:
        changes["name"] = "drive"
    return dataclasses.replace(base, **changes) if changes else base


def _probability(text: str, flag: str) -> float:
    """A probability in (0, 1], e.g. 1e-4; NaN and infinities refused."""
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{flag}: cannot read {text!r} as a probability; use e.g. 1e-4") from None
    if not 0 < value <= 1:
        raise UsageError(f"{flag}: {text!r} is out of range; allowed: a probability > 0 and <= 1")
    return value


def _whole_numbers(text: str, flag: str, low: int, high: int) -> tuple[int, ...]:
    """A comma-separated list of whole numbers, each within [low, high]."""
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"{flag}: expected comma-separated whole numbers, got {text!r}") from None
    for v in values:
        if not low <= v <= high:
            raise UsageError(f"{flag}: {v} is out of range; allowed: {low} to {high}")
    return values


def _looks_like_file(text: str) -> bool:
    """A path to a stack file, unless it reads as RAID notation (which also contains '/')."""
    if re.match(r"^\s*(?:r|raid)\s*-?\s*[0-9]+\s*(/|$)", text, re.IGNORECASE) and not os.path.exists(text):
        return False
    return True


def stack_from_args(args: argparse.Namespace) -> Stack:
    mttr_h = parse_period_h(args.mttr, "--mttr", bare_unit_h=1.0) if args.mttr else None
    rebuild = parse_rate(args.rebuild_rate, "--rebuild-rate") if args.rebuild_rate else None
    if mttr_h is not None and rebuild is not None:
        raise UsageError("give --mttr or --rebuild-rate, not both")
    chunk = parse_size(args.chunk, "--chunk") if args.chunk else None
    span_chunk = parse_size(args.span_chunk, "--span-chunk") if args.span_chunk else None
    inter = parse_size(args.inter_chunk, "--inter-chunk") if args.inter_chunk else None
    if _looks_like_file(args.stack):
        stack = load_stack(args.stack)
        raid_changes: dict[str, Any] = {}
        if chunk is not None:
            raid_changes["chunk_bytes"] = chunk
        if span_chunk is not None:
            raid_changes["span_chunk_bytes"] = span_chunk
        if args.engine:
            raid_changes["engine"] = args.engine
        if mttr_h is not None:
            raid_changes.update(mttr_h=mttr_h, rebuild_rate_bytes=None)
        if rebuild is not None:
            raid_changes.update(rebuild_rate_bytes=rebuild, mttr_h=None)
        for flag, value in (("--drives", args.drives), ("--count", args.count), ("--aggregate", args.aggregate)):
            if value is not None:
                raise UsageError(f"{flag} changes the layout; edit {args.stack} instead")
        volume = stack.volume
        if inter is not None:
            volume = dataclasses.replace(volume, inter_chunk_bytes=inter)
        filesystem = dataclasses.replace(stack.filesystem, kind=args.fs) if args.fs else stack.filesystem
        return dataclasses.replace(stack, drive=_drive_from_args(args, stack.drive),
                                   raid=dataclasses.replace(stack.raid, **raid_changes), volume=volume,
                                   filesystem=filesystem)
    return stack_from_notation(
        args.stack, chunk if chunk is not None else parse_size(DEFAULT_CHUNK), drive=_drive_from_args(args),
        drives=args.drives, count=args.count or 1, span_chunk_bytes=span_chunk, aggregate=args.aggregate,
        inter_chunk_bytes=inter, engine=args.engine or "controller", mttr_h=mttr_h, rebuild_rate_bytes=rebuild,
        filesystem=Filesystem(args.fs) if args.fs else None)


def _emit_json(command: str, payload: Any, warnings: list[PlanWarning] | tuple[PlanWarning, ...]) -> None:
    document = {**header("plan", schema=plan_schema(command)), **_plain(payload),
                "warnings": [dataclasses.asdict(w) for w in warnings]}
    json.dump(document, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name != "stack"}
        for name in ("efficiency", "write_penalty", "disk_ops_per_write", "mttdl_years", "headroom",
                     "headroom_fraction"):
            if hasattr(type(value), name) and isinstance(getattr(type(value), name), property):
                out[name] = getattr(value, name)
        return out
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value == float("inf"):
        return None
    return value


def _warning_lines(warnings: list[PlanWarning] | tuple[PlanWarning, ...]) -> list[str]:
    return ["warnings:", *(f"  {w.code}: {w.message}" for w in warnings)] if warnings else []


def _mb(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e6:,.0f} MB/s"


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


# --- geometry ------------------------------------------------------------------------------------

def run_geometry(args: argparse.Namespace) -> int:
    stack = stack_from_args(args)
    request = parse_size(args.request, "--request") if args.request else None
    report = geometry_report(stack, request, args.pattern)
    warnings = stack_warnings(stack, request_bytes=request)
    if args.json:
        _emit_json("geometry", report, warnings)
        return 0
    raid = stack.raid
    out = [f"{stack.name}: {raid.layout.text} x {raid.count}, chunk {format_size(raid.chunk_bytes)}",
           f"  {report.groups} group(s) of {raid.layout.span} drives ({report.data_drives_per_group} data + "
           f"{raid.layout.span - report.data_drives_per_group} redundancy), {report.drives} drives, "
           f"{report.devices} RAID device(s), aggregate {stack.volume.aggregate}",
           f"  stripe width: group {format_size(report.group_stripe_width_bytes)}, device "
           f"{format_size(report.device_full_stripe_bytes)}, volume full stripe {format_size(report.full_stripe_bytes)}",
           f"  file system stripe: su {format_size(report.fs_stripe_unit_bytes)}, sw {report.fs_stripe_width_units}",
           "  recommended request sizes (full-stripe multiples): "
           + ", ".join(format_size(r) for r in report.recommended_request_bytes),
           f"  capacity: raw {format_si_bytes(report.capacity.raw_bytes)}, usable "
           f"{format_si_bytes(report.capacity.usable_bytes)}, efficiency {_pct(report.capacity.efficiency)}"]
    a = report.alignment
    if a is not None:
        out += [f"alignment of {format_size(a.request_bytes)} writes, pattern {a.pattern} "
                f"({a.offsets_evaluated} offsets{', sampled' if a.sampled else ''}):",
                f"  stripe writes: full {_pct(a.full_stripe_fraction)}, partial {_pct(a.partial_stripe_fraction)}"
                f" (read-modify-write {_pct(a.rmw_fraction)}, reconstruct-write {_pct(a.rcw_fraction)})",
                f"  requests entirely full-stripe: {_pct(a.requests_all_full_fraction)}",
                f"  per write: {a.stripe_writes_per_request:.2f} stripes, {a.disk_reads_per_write:.2f} drive reads + "
                f"{a.disk_writes_per_write:.2f} drive writes; write penalty {a.write_penalty:.2f} "
                f"(drive ops per data chunk), {a.write_amplification:.2f} drive bytes per host byte",
                f"  per read: {a.disk_reads_per_read:.2f} drive reads"]
    if report.flags:
        out.append("flags:")
        out += [f"  {flag.code}: {flag.message}" for flag in report.flags]
    flagged = {(flag.code, flag.message) for flag in report.flags}
    out += _warning_lines([w for w in warnings if (w.code, w.message) not in flagged])
    print("\n".join(out))
    return 0


# --- reliability -----------------------------------------------------------------------------------

def _years(hours: float) -> str:
    years = hours / HOURS_PER_YEAR
    return f"{years:,.4g} years" if years < 1e6 else f"{years:.3e} years"


def run_reliability(args: argparse.Namespace) -> int:
    stack = stack_from_args(args)
    period_h = parse_period_h(args.period, "--period") if args.period else HOURS_PER_YEAR
    report = reliability_of(stack, period_h)
    warnings = stack_warnings(stack, reliability=report)
    if args.json:
        _emit_json("reliability", report, warnings)
        return 0
    g = report.group
    out = [f"{stack.name}: {report.layout} x {stack.raid.count}; MTBF {report.mtbf_h:,.0f} h, "
           f"MTTR {report.mttr_h:.2f} h, BER {report.ber_per_bit:g}",
           f"  reliability group: {g.drives} drives tolerating {g.fault_tolerance} failure(s); "
           f"{report.groups_in_series} group(s) in series",
           f"  critical rebuild reads {g.critical_rebuild_bits / 8 / 1e12:,.2f} TB; P(unrecoverable read error) "
           f"{_pct(g.critical_ure_probability)}",
           f"  MTTDL per group: {_years(g.mttdl_h)} (exact chain), {_years(g.mttdl_approx_h)} (closed-form approx), "
           f"{_years(g.mttdl_no_ure_h)} ignoring URE",
           f"  MTTDL of the volume: {_years(report.mttdl_h)} ({_years(report.mttdl_no_ure_h)} ignoring URE)",
           f"  P(data loss) in 1 year: {report.annual_loss_probability:.4g}; in {report.period_h / HOURS_PER_YEAR:g} "
           f"year(s): {report.period_loss_probability:.4g}",
           f"  data at risk per loss: {format_si_bytes(report.bytes_at_risk_per_loss)}; expected loss "
           f"{format_si_bytes(report.expected_bytes_lost_per_year)} per year",
           "  limits: exponential, independent failures; field data show 2 to 1,500x more double failures "
           "(Elerath & Pecht 2009)"]
    out += _warning_lines(warnings)
    print("\n".join(out))
    return 0


# --- perf ----------------------------------------------------------------------------------------

def _parse_caps(texts: list[str] | None) -> list[tuple[str, float | None, float | None]]:
    caps = []
    for text in texts or []:
        name, sep, rates = text.partition("=")
        if not sep or not name:
            raise UsageError(f"--cap {text!r}: write NAME=RATE or NAME=READ/WRITE, e.g. pcie=4GB/s or ctl=2GB/s/1.3GB/s")
        if rates.count("/s/") == 1:
            read_text, write_text = rates.split("/s/")
            caps.append((name, parse_rate(read_text + "/s", "--cap"), parse_rate(write_text, "--cap")))
        else:
            rate = parse_rate(rates, "--cap")
            caps.append((name, rate, rate))
    return caps


def run_perf(args: argparse.Namespace) -> int:
    stack = with_cap_chain(stack_from_args(args), _parse_caps(args.cap))
    request = parse_size(args.request, "--request") if args.request else None
    random_request = parse_size(args.random_request, "--random-request")
    report = performance_of(stack, request, random_request, args.mode)
    warnings = stack_warnings(stack, perf=report, request_bytes=request)
    if args.json:
        _emit_json("perf", report, warnings)
        return 0
    out = [f"{stack.name}: {report.layout} x {stack.raid.count}; sequential requests {format_size(report.seq_request_bytes)}, "
           f"random {format_size(report.random_request_bytes)}; sharing {report.mode}"]
    for metric in report.metrics.values():
        fmt = _mb if metric.unit == "bytes/s" else (lambda v: f"{v:,.0f} IOPS")
        out.append(f"  {metric.metric:<13} {fmt(metric.value):>16}   drives alone {fmt(metric.drives_value)}; "
                   f"limited by {metric.limiting}")
        if metric.note:
            out.append(f"      {metric.note}")
        for c in metric.components:
            if c.capacity is None:
                continue
            head = f"{fmt(c.headroom)} headroom ({_pct(c.headroom_fraction)})" if not c.binding else "at its limit"
            out.append(f"      {c.name:<18} x{c.instances:<4} load {fmt(c.load)} of {fmt(c.capacity)}: {head}")
    out += _warning_lines(warnings)
    print("\n".join(out))
    return 0


# --- recommend -----------------------------------------------------------------------------------

def run_recommend(args: argparse.Namespace) -> int:
    drive = _drive_from_args(args)
    for flag, value, high in (("--drives", args.drives, MAX_INVENTORY_DRIVES), ("--bays", args.bays, MAX_BAYS),
                              ("--controllers", args.controllers, MAX_CONTROLLERS)):
        if not 1 <= value <= high:
            raise UsageError(f"{flag}: {value} is out of range; allowed: 1 to {high}")
    levels = _whole_numbers(args.levels, "--levels", 0, 60) if args.levels else DEFAULT_LEVELS
    chunks = tuple(parse_size(x, "--chunks") for x in args.chunks.split(",")) if args.chunks else None
    if chunks is not None and not 1 <= len(chunks) <= 16:
        raise UsageError(f"--chunks: give 1 to 16 chunk sizes, got {len(chunks)}")
    mttr_h = parse_period_h(args.mttr, "--mttr", bare_unit_h=1.0) if args.mttr else None
    rebuild = parse_rate(args.rebuild_rate, "--rebuild-rate") if args.rebuild_rate else None
    if mttr_h is None and rebuild is None:
        rebuild = DEFAULT_REBUILD_RATE_BYTES
    inventory_kwargs: dict[str, Any] = dict(
        drive=drive, drives=args.drives, bays_per_enclosure=args.bays, controllers=args.controllers,
        controller_read_bw_bytes=parse_rate(args.controller_read, "--controller-read") if args.controller_read else None,
        controller_write_bw_bytes=parse_rate(args.controller_write, "--controller-write") if args.controller_write else None,
        rebuild_rate_bytes=rebuild, mttr_h=mttr_h, levels=levels)
    if chunks:
        inventory_kwargs["chunks"] = chunks
    needs = Needs(
        usable_bytes=parse_size(args.capacity, "--capacity") if args.capacity else None,
        seq_read_bw_bytes=parse_rate(args.seq_read, "--seq-read") if args.seq_read else None,
        seq_write_bw_bytes=parse_rate(args.seq_write, "--seq-write") if args.seq_write else None,
        random_read_iops=float(parse_count(args.read_iops, "--read-iops")) if args.read_iops else None,
        random_write_iops=float(parse_count(args.write_iops, "--write-iops")) if args.write_iops else None,
        min_mttdl_h=parse_period_h(args.min_mttdl, "--min-mttdl") if args.min_mttdl else None,
        max_annual_loss=_probability(args.max_annual_loss, "--max-annual-loss") if args.max_annual_loss else None,
        request_bytes=parse_size(args.request, "--request"),
    )
    result = recommend(Inventory(**inventory_kwargs), needs)
    if args.json:
        _emit_json("recommend", {"candidates_considered": result.candidates_considered, "feasible": result.feasible,
                                 "note": result.note, "pareto": [dict(_plain(c), layout=c.stack.raid.layout.text)
                                                                 for c in result.pareto]}, result.warnings)
        return 0
    out = [f"{result.candidates_considered} candidate layouts for {args.drives} x {format_si_bytes(drive.capacity_bytes)} "
           f"drives, {args.bays}-bay enclosures, {args.controllers} controller(s); {result.feasible} meet every need; "
           f"{len(result.pareto)} not beaten on every need:"]
    if result.note:
        out.append(f"  note: {result.note}")
    for c in result.pareto:
        scores = ", ".join(f"{label} {fmt(c.scores[key])}" for key, label, fmt in OBJECTIVES)
        out.append(f"- {c.description}" + (f" ({c.spares} spare drives)" if c.spares else ""))
        out.append(f"    {scores}")
        out.append(f"    why: {'; '.join(c.reasons)}")
        if c.misses:
            out.append(f"    misses: {'; '.join(c.misses)}")
        if c.equivalent:
            out.append(f"    same scores: {'; '.join(c.equivalent)}")
        out += [f"    warning: {w.code}: {w.message}" for w in c.warnings]
    print("\n".join(out))
    return 0


# --- script --------------------------------------------------------------------------------------

def run_script(args: argparse.Namespace) -> int:
    check_destination(args.output, "output")
    stack = stack_from_args(args)
    devices = [d for d in args.devices.split(",") if d] if args.devices else None
    script = build_script(stack, devices)
    if args.json:
        _emit_json("script", {"stack": None, "lines": list(script.lines)}, script.warnings)
        return 0
    if args.output and args.output != "-":
        write_output(script.text, args.output, "output")   # mode 0644: reviewed before it is run
        print(f"wrote {args.output} (dry-run text; review before running)")
    else:
        sys.stdout.write(script.text)
    for warning in script.warnings:
        print(f"storlab plan script: warning: {warning.code}: {warning.message}", file=sys.stderr)
    return 0


# --- registration --------------------------------------------------------------------------------

def register(subparsers: Any) -> None:
    plan = subparsers.add_parser("plan", help="model a storage stack, recommend layouts, emit build scripts",
                                 description="Model a storage stack: geometry, reliability, throughput; "
                                             "recommend layouts; emit the commands that build it.")
    plan.set_defaults(func=run, plan_command=None, _plan_parser=plan)
    sub = plan.add_subparsers(dest="plan_command", metavar="SUBCOMMAND")

    p = sub.add_parser("geometry", help="stripe widths, alignment of a request size, capacity, flags")
    _add_stack_options(p)
    p.add_argument("--request", metavar="SIZE", help="request size to analyse, e.g. 1MiB")
    p.add_argument("--pattern", default="sequential",
                   help="offsets: sequential[:start], aligned (random, aligned to the request) or random[:alignment]")
    p.set_defaults(plan_func=run_geometry)

    p = sub.add_parser("reliability", help="MTTDL (Markov, with URE), loss probability per year and period")
    _add_stack_options(p)
    p.add_argument("--period", metavar="TIME", help="period for the loss probability, e.g. 5y (default 1y)")
    p.set_defaults(plan_func=run_reliability)

    p = sub.add_parser("perf", help="predicted bandwidth / IOPS, limiting component and headroom")
    _add_stack_options(p)
    p.add_argument("--request", metavar="SIZE", help="sequential request size (default one full stripe)")
    p.add_argument("--random-request", metavar="SIZE", default="4KiB", help="random request size (default 4KiB)")
    p.add_argument("--mode", choices=SHARING_MODES, help="lockstep (striped volume) or independent streams")
    p.add_argument("--cap", action="append", metavar="NAME=RATE",
                   help="component limit above all drives, host side first; NAME=READ/WRITE for two rates")
    p.set_defaults(plan_func=run_perf)

    p = sub.add_parser("recommend", help="enumerate layouts for a drive inventory and show the Pareto set")
    p.add_argument("--drives", type=int, required=True, metavar="N", help="drives available")
    p.add_argument("--bays", type=int, default=12, metavar="N", help="bays per enclosure (default 12)")
    p.add_argument("--controllers", type=int, default=1, metavar="N", help="RAID controllers (default 1)")
    p.add_argument("--controller-read", metavar="RATE", help="read limit of one controller")
    p.add_argument("--controller-write", metavar="RATE", help="write limit of one controller")
    p.add_argument("--levels", metavar="LIST", help="RAID levels to consider (default 5,6,10,50,60)")
    p.add_argument("--chunks", metavar="LIST", help="chunk sizes to consider (default 64k,128k,256k,512k,1m)")
    p.add_argument("--capacity", metavar="SIZE", help="need: usable capacity, e.g. 60TB")
    p.add_argument("--seq-read", metavar="RATE", help="need: sequential read bandwidth")
    p.add_argument("--seq-write", metavar="RATE", help="need: sequential write bandwidth")
    p.add_argument("--read-iops", metavar="N", help="need: random read IOPS")
    p.add_argument("--write-iops", metavar="N", help="need: random write IOPS")
    p.add_argument("--min-mttdl", metavar="TIME", help="need: minimum MTTDL, e.g. 1000y")
    p.add_argument("--max-annual-loss", metavar="P", help="need: maximum probability of loss per year, e.g. 1e-4")
    p.add_argument("--request", metavar="SIZE", default="1MiB", help="sequential request size (default 1MiB)")
    p.add_argument("--mttr", metavar="TIME", help="time to rebuild one drive")
    p.add_argument("--rebuild-rate", metavar="RATE", help="rebuild rate (default 50MB/s)")
    _add_drive_options(p)
    p.add_argument("--json", action="store_true", help="write JSON to stdout")
    p.set_defaults(plan_func=run_recommend)

    p = sub.add_parser("script", help="emit mdadm / LVM / mkfs / queue commands that build the stack (dry-run text)")
    _add_stack_options(p)
    p.add_argument("--devices", metavar="LIST", help="comma-separated devices: drives (md) or controller LUNs")
    p.add_argument("--output", "-o", metavar="FILE", help="write the script to FILE instead of stdout")
    p.set_defaults(plan_func=run_script)


def run(args: argparse.Namespace) -> int:
    if args.plan_command is None:
        args._plan_parser.print_help()
        return 2
    try:
        return args.plan_func(args)
    except (StackError, NotationError) as e:
        raise UsageError(str(e)) from None
