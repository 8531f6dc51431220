"""`storlab plan`: model a storage stack (geometry, reliability, perf), recommend layouts, emit scripts.

Each subcommand takes a stack file (TOML, see docs/model.md) or the short RAID notation plus options,
computes a result object from storlab.model / storlab.planner, then renders it as text
(output/plan_text.py) or, with --json [PATH], as one JSON document (output/plan_document.py, schema
"storlab.plan.<command>/1") on stdout or into PATH. This module only wires them together: every flag
is a row of jobs/tables/plan.py (reference: docs/options-plan.md); a workload is read as
`storlab workload` reads it and turned into the model's loads by model/training_load.py.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import stat
import sys
from typing import Any, Sequence

from ..errors import UserError
from ..jobs.tables.plan import BARE_DEVICE, COMMANDS, DEFAULT_CHUNK, DEFAULT_RECOMMEND_REQUEST
from ..model.advice import PlanWarning, stack_warnings, with_default_rebuild
from ..model.cluster import is_cluster_file
from ..model.geometry import geometry_report
from ..model.kvcache import is_kvcache_workload, kvcache_load, kvcache_option, predict_kvcache
from ..model.performance import performance_of, with_cap_chain
from ..model.predict import Device, Prediction, Workload, predict
from ..model.quantities import HOURS_PER_YEAR, mtbf_h_from_afr
from ..model.reliability import reliability_of
from ..model.stack import (
    DEFAULT_DRIVE,
    UNSTATED_CACHE_RATE,
    ControllerCache,
    Filesystem,
    Stack,
    load_stack,
    stack_from_notation,
)
from ..model.training_load import forecast_workload, training_load, workload_spec
from ..output import plan_text
from ..output.files import check_destination, write_output
from ..output.json import write_json
from ..output.plan_document import (
    cluster_point,
    curve_point,
    kvcache_payload,
    plain,
    plan_document,
    recommend_payload,
    workload_payload,
)
from ..planner.recommend import (
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
from ..units import parse_size
from .main import UsageError
from .options_cli import add_table_arguments, parse_table_args, takes_json_name

__all__ = ["COMMANDS", "register", "run", "stack_from_args"]


def _drive_from_args(args: argparse.Namespace, base=DEFAULT_DRIVE):
    changes: dict[str, Any] = {}
    if args.drive is not None:
        changes["capacity_bytes"] = args.drive
    if args.mtbf is not None and args.afr is not None:
        raise UsageError("give --mtbf or --afr, not both")
    if args.mtbf is not None:
        changes["mtbf_h"] = args.mtbf
    if args.afr is not None:
        changes["mtbf_h"] = mtbf_h_from_afr(args.afr)
    if args.ber is not None:
        changes["ber_per_bit"] = args.ber
    if args.sector is not None:
        print(f"warning: --sector is deprecated for plan {args.plan_command} and changes nothing: the URE "
              "probability does not depend on the sector size (docs/model.md, Reliability); it will be "
              "removed in the next release", file=sys.stderr)
    if args.drive_read is not None:
        changes["seq_read_bw_bytes"] = args.drive_read
        changes.setdefault("seq_write_bw_bytes", changes["seq_read_bw_bytes"])
    if args.drive_write is not None:
        changes["seq_write_bw_bytes"] = args.drive_write
    if args.drive_iops is not None:
        changes["random_read_iops"] = float(args.drive_iops)
        changes["random_write_iops"] = changes["random_read_iops"]
    if args.drive_write_iops is not None:
        changes["random_write_iops"] = float(args.drive_write_iops)
    if args.ssd:
        changes["rotational"] = False
    if args.drive_latency is not None:
        changes["read_latency_s"] = args.drive_latency
    if args.drive_write_latency is not None:
        changes["write_latency_s"] = args.drive_write_latency
    if args.drive_write_cache is not None:
        changes["write_cache"] = args.drive_write_cache == "on"
    if changes and "name" not in changes and base is DEFAULT_DRIVE:
        changes["name"] = "drive"
    return dataclasses.replace(base, **changes) if changes else base


def _looks_like_file(text: str) -> bool:
    """A path to a stack file, unless it reads as RAID notation (which also contains '/')."""
    if re.match(r"^\s*(?:r|raid)\s*-?\s*[0-9]+\s*(/|$)", text, re.IGNORECASE) and not os.path.exists(text):
        return False
    return True


def stack_from_args(args: argparse.Namespace) -> Stack:
    """The stack of a plan subcommand: a stack file with flags overriding it, or a notation with
    flags completing it (the flags already parsed by the table)."""
    mttr_h, rebuild = args.mttr, args.rebuild_rate
    if mttr_h is not None and rebuild is not None:
        raise UsageError("give --mttr or --rebuild-rate, not both")
    chunk, span_chunk, inter = args.chunk, args.span_chunk, args.inter_chunk
    if _looks_like_file(args.stack):
        if is_cluster_file(args.stack):
            raise UsageError(f"{args.stack}: a cluster file ([[node]] tables); plan perf reads it, plan "
                             f"{args.plan_command} needs a stack file of one host's devices")
        stack = load_stack(args.stack)
        raid_changes: dict[str, Any] = {}
        if chunk is not None:
            raid_changes["chunk_bytes"] = chunk
        if span_chunk is not None:
            raid_changes["span_chunk_bytes"] = span_chunk
        if args.parity:
            raid_changes["engine"] = args.parity
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
        inter_chunk_bytes=inter, engine=args.parity or "controller", mttr_h=mttr_h, rebuild_rate_bytes=rebuild,
        filesystem=Filesystem(args.fs) if args.fs else None)


def _emit_json(command: str, payload: Any, warnings: Sequence[PlanWarning], target: str) -> None:
    write_json(plan_document(command, payload, warnings), target, indent=2)


def _profile_devices(args: argparse.Namespace) -> list[Device] | None:
    """--profile: the measured device used for every member (model/profile.py)."""
    if not args.profile:
        return None
    from ..model.profile import load_profile

    return [load_profile(args.profile).device()]


# --- geometry, reliability -----------------------------------------------------------------------

def run_geometry(args: argparse.Namespace) -> int:
    stack = stack_from_args(args)
    report = geometry_report(stack, args.request, args.pattern)
    warnings = stack_warnings(stack, request_bytes=args.request)
    if args.json:
        _emit_json("geometry", report, warnings, args.json)
        return 0
    print("\n".join(plan_text.geometry_lines(stack, report, warnings)))
    return 0


def run_reliability(args: argparse.Namespace) -> int:
    stack = stack_from_args(args)
    period_h = args.period if args.period is not None else HOURS_PER_YEAR
    # neither --mttr nor --rebuild-rate nor the stack file's: the documented default rate
    rated, assumed = with_default_rebuild(stack)
    report = reliability_of(rated, period_h)
    warnings = stack_warnings(stack, reliability=None if assumed else report, drive_named=True)
    if args.json:
        _emit_json("reliability", report, warnings, args.json)
        return 0
    print("\n".join(plan_text.reliability_lines(stack, report, warnings,
                                                rated.raid.rebuild_rate_bytes if assumed else None)))
    return 0


# --- perf ----------------------------------------------------------------------------------------

def _curve(stack: Stack, args: argparse.Namespace, full_stripe: int) -> list[Prediction]:
    """The predictions at every point of the curve: patterns x request sizes x threads x depths."""
    devices = _profile_devices(args)
    points = []
    for rw in args.rw or ("read",):
        sizes = args.request or ((args.random_request,) if rw.startswith("rand") else (full_stripe,))
        for size in sizes:
            for threads in args.threads or (1,):
                for qd in args.qd or (1,):
                    w = Workload(rw, size, qd=qd, threads=threads, working_set_bytes=args.working_set)
                    points.append(predict(stack, w, devices, mirror_read=args.mirror_read or "balanced"))
    return points


def _with_cache(stack: Stack, args: argparse.Namespace) -> Stack:
    """The stack with the cache the flags give (--controller-cache and its companions over the stack file's
    [cache]). The companions alone describe the controller's cache without a size (--write-through: a
    controller that does not write back); --working-set needs a size, since only then does it matter."""
    given = {"--controller-cache-rate": args.controller_cache_rate,
             "--controller-cache-latency": args.controller_cache_latency,
             "--controller-iops": args.controller_iops,
             "--read-ahead": args.read_ahead or None, "--write-through": args.write_through or None}
    cache = stack.cache
    if args.working_set is not None and args.controller_cache is None and (cache is None or cache.size_bytes is None):
        raise UsageError("--working-set needs a controller cache size: give --controller-cache SIZE or a [cache] "
                         "table with a size in the stack file")
    if args.controller_cache is None and cache is None and all(v is None for v in given.values()):
        return stack
    changes: dict[str, Any] = {}
    if args.controller_cache is not None:
        changes["size_bytes"] = args.controller_cache
    if args.controller_cache_rate is not None:
        changes.update(read_bw_bytes=args.controller_cache_rate, write_bw_bytes=args.controller_cache_rate)
    if args.controller_cache_latency is not None:
        changes["latency_s"] = args.controller_cache_latency
    if args.controller_iops is not None:
        changes["iops"] = float(args.controller_iops)
    if args.read_ahead:
        changes["read_ahead"] = True
    if args.write_through:
        changes["write_back"] = False
    if cache is None:
        cache = ControllerCache(args.controller_cache, UNSTATED_CACHE_RATE, UNSTATED_CACHE_RATE)
    return dataclasses.replace(stack, cache=dataclasses.replace(cache, **changes))


def run_perf_cluster(args: argparse.Namespace) -> int:
    """plan perf on a cluster file: N clients over their links to K servers, at every point of the
    curve (threads are per client), naming the limiting link, switch or server and the single stream."""
    from ..model.cluster import load_cluster
    from ..model.network import ClusterLoad, predict_cluster

    for flag, value in (("--workload", args.workload), ("--profile", args.profile), ("--cap", args.cap),
                        ("--working-set", args.working_set), ("--controller-cache", args.controller_cache)):
        if value:
            raise UsageError(f"{flag} is not used with a cluster file ({args.stack}); a server's own stack file takes "
                             "it")
    points = []
    name = ""
    for rw in args.rw or ("read",):
        if rw not in ("read", "write"):
            raise UsageError(f"--rw: {rw} is not modelled for a cluster; allowed: read, write")
        for size in args.request or (1 << 20,):
            cluster = load_cluster(args.stack, rw, size)
            name = cluster.name
            for threads in args.threads or (1,):
                for qd in args.qd or (1,):
                    points.append(predict_cluster(cluster, ClusterLoad(rw, size, threads, qd)))
    if args.json:
        _emit_json("perf", {"stack_name": name, "cluster": [cluster_point(p) for p in points]}, [], args.json)
        return 0
    print("\n".join(plan_text.cluster_lines(name, points)))
    return 0


def run_perf(args: argparse.Namespace) -> int:
    if is_cluster_file(args.stack):
        return run_perf_cluster(args)
    if args.workload is not None:
        return run_perf_workload(args)
    for flag, value in (("--accelerators", args.accelerators), ("--max-accelerators", args.max_accelerators)):
        if value is not None:
            raise UsageError(f"{flag} needs --workload (the workload whose accelerators are predicted)")
    if args.stack == BARE_DEVICE and not os.path.exists(args.stack):
        raise UsageError(f"stack: {BARE_DEVICE!r} (one bare device) needs --workload; give a stack file or RAID notation")
    stack = _with_cache(with_cap_chain(stack_from_args(args), args.cap), args)
    seq_request = args.request[0] if args.request else None
    report = performance_of(stack, seq_request, args.random_request, args.mode)
    warnings = stack_warnings(stack, perf=report, request_bytes=seq_request)
    wants_curve = bool(args.rw or args.qd or args.threads or args.profile or args.working_set
                       or args.mirror_read or (args.request and len(args.request) > 1) or stack.cache is not None)
    points = _curve(stack, args, report.seq_request_bytes) if wants_curve else []
    if args.json:
        payload = dict(plain(report), curve=[curve_point(p) for p in points]) if points else report
        _emit_json("perf", payload, warnings, args.json)
        return 0
    print("\n".join(plan_text.perf_lines(stack, report, points, warnings)))
    return 0


def _workload_target(args: argparse.Namespace) -> tuple[Stack | None, list[Device] | None, str]:
    """(stack or None for one bare device, member devices, a name) for perf --workload."""
    devices = _profile_devices(args)
    if args.stack == BARE_DEVICE and not os.path.exists(args.stack):
        return None, devices or [Device.from_drive(_drive_from_args(args))], "one device"
    stack = with_cap_chain(stack_from_args(args), args.cap)
    layout = f"{stack.raid.layout.text} x {stack.raid.count}"
    return stack, devices, layout if stack.name == stack.raid.layout.text else f"{stack.name} ({layout})"


def run_perf_workload(args: argparse.Namespace) -> int:
    """plan perf --workload: the accelerators the stack feeds, or a checkpoint's seconds."""
    for flag, value in (("--rw", args.rw), ("--qd", args.qd), ("--threads", args.threads), ("--request", args.request),
                        ("--working-set", args.working_set)):
        if value:
            raise UsageError(f"{flag} draws the curve and is not used with --workload (the workload sets its requests, "
                             "concurrency and data set)")
    if is_kvcache_workload(args.workload):
        return run_perf_kvcache(args)
    spec, source = workload_spec(args.workload)
    if spec.mode == "generate":
        raise UsageError(f"--workload: {spec.name} only generates its dataset (no training, no checkpoint); "
                         "use a training or checkpoint workload")
    stack, devices, title = _workload_target(args)
    forecast = forecast_workload(spec, stack, devices, accelerators=args.accelerators, dataset_size=args.dataset_size,
                                 max_accelerators=args.max_accelerators, mirror_read=args.mirror_read or "balanced")
    warnings = stack_warnings(stack) if stack is not None else []
    if args.json:
        payload = {"stack_name": stack.name if stack else BARE_DEVICE,
                   "layout": stack.raid.layout.text if stack else BARE_DEVICE,
                   "workload": workload_payload(forecast, source)}
        _emit_json("perf", payload, warnings, args.json)
        return 0
    print("\n".join(plan_text.workload_lines(forecast, title, warnings)))
    return 0


def run_perf_kvcache(args: argparse.Namespace) -> int:
    """plan perf --workload kvcache_N: the KV-cache benchmark's figures for one rank on the stack."""
    for flag, value in (("--accelerators", args.accelerators), ("--max-accelerators", args.max_accelerators)):
        if value is not None:
            raise UsageError(f"{flag} is for a training or checkpoint workload; {args.workload} is a KV-cache option "
                             "(its users set the concurrency)")
    load = kvcache_load(kvcache_option(args.workload))
    stack, devices, title = _workload_target(args)
    forecast = predict_kvcache(stack, load, devices, mirror_read=args.mirror_read or "balanced")
    warnings = stack_warnings(stack) if stack is not None else []
    if args.json:
        payload = {"stack_name": stack.name if stack else BARE_DEVICE,
                   "layout": stack.raid.layout.text if stack else BARE_DEVICE,
                   "workload": kvcache_payload(forecast)}
        _emit_json("perf", payload, warnings, args.json)
        return 0
    print("\n".join(plan_text.kvcache_lines(forecast, title, warnings)))
    return 0


# --- profile -------------------------------------------------------------------------------------

PROFILE_DEFAULT_RW = ("randread", "read")
PROFILE_DEFAULT_REQUESTS = (4096, 64 << 10, 1 << 20)
PROFILE_DEFAULT_QDS = (1, 4, 16)
PROFILE_DEFAULT_TIME_S = 2.0
PROFILE_RAMP_S = 0.5
PROFILE_MAX_BYTES = 1 << 30


def _device_bytes(path: str) -> int:
    """A block device's size (a loop device may be far smaller than PROFILE_MAX_BYTES)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def run_profile(args: argparse.Namespace) -> int:
    """Measure each point through the ordinary engine (direct I/O, a ramp, the given time), fit."""
    from ..jobs.job import resolve_job
    from ..measure.runner import run_job
    from ..model.profile import ProfilePoint, fit_profile, profile_document, save_profile
    from ..units import format_size

    check_destination(args.output, "output")
    target = args.target
    if not os.path.exists(target):
        raise UsageError(f"target: {target} does not exist; give a block device or a file with data")
    mode = os.stat(target).st_mode
    if not (stat.S_ISBLK(mode) or stat.S_ISREG(mode)):
        # a profile is measured with O_DIRECT only (the device, not the page cache): the engine's
        # refusal would name --buffered, which plan profile does not take
        raise UsageError(f"target: {target} is not a block device or a regular file; plan profile measures "
                         "a device (or a file) with direct I/O only")
    rws = args.rw or PROFILE_DEFAULT_RW
    points: list[ProfilePoint] = []
    time_s = args.time or PROFILE_DEFAULT_TIME_S
    for rw in rws:
        for size in args.request or PROFILE_DEFAULT_REQUESTS:
            for qd in args.qd or PROFILE_DEFAULT_QDS:
                values: dict[str, Any] = {"target": [target], "rw": rw, "bs": size, "qd": qd, "direct": True,
                                          "engine": "psync" if qd == 1 else "io_uring", "time": time_s,
                                          "ramp": PROFILE_RAMP_S}
                if args.size:
                    values["size"] = args.size
                elif not os.path.isfile(target):
                    values["size"] = min(PROFILE_MAX_BYTES, _device_bytes(target))
                if args.allow_destroy:
                    values["allow_destroy"] = list(args.allow_destroy)
                job = resolve_job(values, None, jobfile_name="plan profile")
                doc = run_job(job, argv=sys.argv)
                phase = (doc.get("phases") or [{}])[-1]
                side = phase.get("write" if rw.endswith("write") else "read") or {}
                if doc.get("stop_reason") == "error":
                    raise UserError(f"profile: {rw} {format_size(size)} QD{qd} on {target} failed: {doc.get('error')}")
                if not doc.get("complete"):
                    print("storlab plan profile: interrupted; fitting the points measured so far", file=sys.stderr)
                    break
                lat = side.get("lat_ns") or {}
                point = ProfilePoint(rw, size, qd, float(side.get("iops") or 0.0), (lat.get("mean") or 0) / 1e9,
                                     (lat.get("p50") or 0) / 1e9)
                points.append(point)
                print(plan_text.profile_point_line(point), file=sys.stderr)
    profile = fit_profile(points, name=os.path.basename(target))
    if args.output:
        save_profile(profile, args.output)
    if args.json:
        write_json(profile_document(profile), args.json, indent=2)
        return 0
    print("\n".join(plan_text.profile_lines(target, len(points), time_s, profile, args.output)))
    return 0


# --- recommend -----------------------------------------------------------------------------------

def run_recommend(args: argparse.Namespace) -> int:
    drive = _drive_from_args(args)
    for flag, value, high in (("--drives", args.drives, MAX_INVENTORY_DRIVES), ("--bays", args.bays, MAX_BAYS),
                              ("--controllers", args.controllers, MAX_CONTROLLERS)):
        if not 1 <= value <= high:
            raise UsageError(f"{flag}: {value} is out of range; allowed: 1 to {high}")
    mttr_h, rebuild = args.mttr, args.rebuild_rate
    if mttr_h is not None and rebuild is not None:
        raise UsageError("give --mttr or --rebuild-rate, not both")
    if mttr_h is None and rebuild is None:
        rebuild = DEFAULT_REBUILD_RATE_BYTES
    inventory_kwargs: dict[str, Any] = dict(
        drive=drive, drives=args.drives, bays_per_enclosure=args.bays, controllers=args.controllers,
        controller_read_bw_bytes=args.controller_read, controller_write_bw_bytes=args.controller_write,
        controller_iops=None if args.controller_iops is None else float(args.controller_iops),
        rebuild_rate_bytes=rebuild, mttr_h=mttr_h)
    if args.levels:
        inventory_kwargs["levels"] = args.levels
    if args.chunks:
        inventory_kwargs["chunks"] = args.chunks
    needs = Needs(
        usable_bytes=args.capacity, seq_read_bw_bytes=args.seq_read, seq_write_bw_bytes=args.seq_write,
        random_read_iops=None if args.read_iops is None else float(args.read_iops),
        random_write_iops=None if args.write_iops is None else float(args.write_iops),
        min_mttdl_h=args.min_mttdl, max_annual_loss=args.max_annual_loss,
        request_bytes=args.request if args.request is not None else parse_size(DEFAULT_RECOMMEND_REQUEST),
        **_training_need(args),
    )
    result = recommend(Inventory(**inventory_kwargs), needs)
    if args.json:
        _emit_json("recommend", recommend_payload(result, needs, args.dataset_size), result.warnings, args.json)
        return 0
    print("\n".join(plan_text.recommend_lines(result, needs, drive, args.drives, args.bays, args.controllers,
                                              OBJECTIVES)))
    return 0


def _training_need(args: argparse.Namespace) -> dict[str, Any]:
    """recommend's training need: --workload with --accelerators (a KV-cache option: with
    --tokens-per-s), both or neither."""
    if args.workload is None:
        if args.accelerators is not None:
            raise UsageError("--accelerators needs --workload (the workload whose accelerators the layouts feed)")
        if args.tokens_per_s is not None:
            raise UsageError("--tokens-per-s needs --workload kvcache_N (the KV-cache option whose tokens/s the "
                             "layouts reach)")
        return {}
    if is_kvcache_workload(args.workload):
        option = kvcache_option(args.workload)
        if args.accelerators is not None:
            raise UsageError(f"--accelerators is for a training workload; {args.workload} is a KV-cache option: "
                             "give --tokens-per-s N")
        if args.tokens_per_s is None:
            raise UsageError(f"--workload {args.workload} needs --tokens-per-s N (the tokens per second the layouts "
                             "must reach)")
        return {"kvcache": kvcache_load(option), "tokens_per_s": args.tokens_per_s}
    if args.tokens_per_s is not None:
        raise UsageError(f"--tokens-per-s is for a KV-cache option (kvcache_N); {args.workload} is not one: "
                         "give --accelerators N")
    if args.accelerators is None:
        raise UsageError("--workload needs --accelerators N (the accelerators the layouts must feed)")
    spec, _ = workload_spec(args.workload)
    if not spec.train_enabled:
        raise UsageError(f"--workload: {spec.name} is a {spec.mode} workload; recommend sizes layouts for training "
                         "workloads (plan perf --workload times a checkpoint on a stack)")
    return {"training": training_load(spec, args.dataset_size), "accelerators": args.accelerators}


# --- script --------------------------------------------------------------------------------------

def run_script(args: argparse.Namespace) -> int:
    check_destination(args.output, "output")
    check_destination(args.json, "json")
    stack = stack_from_args(args)
    script = build_script(stack, args.devices)
    if args.json:
        _emit_json("script", {"stack": None, "lines": list(script.lines)}, script.warnings, args.json)
        if not args.output:
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

RUNNERS = {"geometry": run_geometry, "reliability": run_reliability, "perf": run_perf,
           "recommend": run_recommend, "script": run_script, "profile": run_profile}


def register(subparsers: Any) -> None:
    plan = subparsers.add_parser("plan", help="model a storage stack, recommend layouts, emit build scripts",
                                 description="Model a storage stack: geometry, reliability, throughput; "
                                             "recommend layouts; emit the commands that build it.")
    plan.set_defaults(func=run, plan_command=None, _plan_parser=plan)
    sub = plan.add_subparsers(dest="plan_command", metavar="SUBCOMMAND")
    for table in COMMANDS:
        name = table.command.split()[1]
        p = sub.add_parser(name, help=table.summary, description=table.summary)
        add_table_arguments(p, table.options, command="plan", json_takes=takes_json_name)
        p.set_defaults(plan_func=RUNNERS[name], _plan_table=table)


def run(args: argparse.Namespace) -> int:
    if args.plan_command is None:
        args._plan_parser.print_help()
        return 2
    parse_table_args(args, args._plan_table.options)
    check_destination(args.json, "json")
    return args.plan_func(args)
