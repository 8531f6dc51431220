"""`storlab plan`: model a storage stack (geometry, reliability, perf), recommend layouts, emit scripts.

Each subcommand takes a stack file (TOML, see docs/model.md) or the short RAID notation plus options,
computes a result object from storlab.model / storlab.planner, then renders it as text or, with
--json [PATH], as one JSON document (schema "storlab.plan.<command>/1") on stdout or into PATH.
Every flag comes from the option tables below (reference: docs/options-plan.md).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import sys
from typing import Any

from ..document import header, plan_schema
from ..errors import UserError
from ..jobs.options import BY_NAME, Option, OptionError
from ..model.advice import PlanWarning, stack_warnings
from ..model.geometry import geometry_report, parse_pattern
from ..model.notation import MAX_DRIVES
from ..model.performance import SHARING_MODES, performance_of, with_cap_chain
from ..model.predict import MIRROR_READ_POLICIES, WORKLOAD_PATTERNS, Device, Prediction, Workload, predict
from ..model.quantities import HOURS_PER_YEAR, mtbf_h_from_afr, parse_afr, parse_ber, parse_mtbf_h, parse_period_h
from ..model.reliability import reliability_of
from ..model.stack import (
    AGGREGATIONS,
    DEFAULT_DRIVE,
    FILESYSTEMS,
    RAID_ENGINES,
    Filesystem,
    Stack,
    load_stack,
    stack_from_notation,
)
from ..model.training import (
    AcceleratorPoint,
    CheckpointForecast,
    CheckpointLoad,
    EvaluationForecast,
    TrainingLoad,
    accelerators_fed,
    checkpoint_shard_bytes,
    checkpoint_writers,
    evaluation_load,
    predict_checkpoint,
    predict_evaluation,
    predict_training,
)
from ..output.files import check_destination, write_output
from ..output.json import write_json
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
from ..units import format_si_bytes, format_size, parse_rate, parse_size
from .main import UsageError
from .options_cli import OUTPUT, CommandTable, add_table_arguments, parse_table_args, takes_json_name
from .workload import WORKLOAD_OPTIONS

DEFAULT_CHUNK = "512KiB"
# bounds of a curve: points are the product of the lists, each at most MAX_CURVE_VALUES long
MAX_CURVE_VALUES = 32
MAX_CURVE_QD = 65536            # io_uring's largest ring
MAX_CURVE_THREADS = 4096
MAX_CURVE_REQUEST = 1 << 30
DEFAULT_RECOMMEND_REQUEST = "1MiB"   # recommend has no layout yet, so no full stripe to default to
MAX_ACCELERATORS = next(o for o in WORKLOAD_OPTIONS if o.name == "max_accelerators")   # one meaning: the search's bound


def _described(values: tuple[str, ...], **help: str) -> dict[str, str]:
    """Choices of a flag from the model's own list, each with its help; a value the model adds
    without help here (or help for one it dropped) fails at import, not in a user's hands."""
    if set(help) != set(values):
        raise RuntimeError(f"plan option choices {sorted(help)} differ from the model's {sorted(values)}")
    return {v: help[v] for v in values}


# --- option tables -------------------------------------------------------------------------------
# Every flag of every plan subcommand is a row here, defined once: a row shared by several
# subcommands (drive, layout, rebuild, --request, --drives) has one meaning, help and default.

def _period_h(raw: Any, label: str) -> float:
    return parse_period_h(raw, label)


def _hours(raw: Any, label: str) -> float:
    return parse_period_h(raw, label, bare_unit_h=1.0)


def _probability(raw: Any, label: str) -> float:
    """A probability in (0, 1], e.g. 1e-4; NaN and infinities refused."""
    try:
        value = float(raw)
    except ValueError:
        raise OptionError(f"{label}: cannot read {raw!r} as a probability; use e.g. 1e-4") from None
    if not 0 < value <= 1:
        raise OptionError(f"{label}: {raw!r} is out of range; allowed: a probability > 0 and <= 1")
    return value


def _levels(raw: Any, label: str) -> tuple[int, ...]:
    """A comma-separated list of RAID levels, each a whole number from 0 to 60."""
    items = [x.strip() for x in str(raw).split(",") if x.strip()]
    if not items or not all(re.fullmatch(r"[0-9]{1,3}", x) for x in items):
        raise OptionError(f"{label}: expected comma-separated whole numbers (RAID levels), got {raw!r}")
    values = tuple(int(x) for x in items)
    for v in values:
        if not 0 <= v <= 60:
            raise OptionError(f"{label}: {v} is out of range; allowed: 0 to 60")
    return values


def _chunks(raw: Any, label: str) -> tuple[int, ...]:
    """A comma-separated list of 1 to 16 chunk sizes."""
    chunks = tuple(parse_size(x, label) for x in str(raw).split(","))
    if not 1 <= len(chunks) <= 16:
        raise OptionError(f"{label}: give 1 to 16 chunk sizes, got {len(chunks)}")
    for c in chunks:
        if c < 1:
            raise OptionError(f"{label}: {c} is out of range; allowed: sizes >= 1 byte")
    return chunks


def _devices(raw: Any, label: str) -> list[str]:
    devices = [d for d in str(raw).split(",") if d]
    if not devices:
        raise OptionError(f"{label}: expected comma-separated device paths, got {raw!r}")
    return devices


def _pattern(raw: Any, label: str) -> str:
    try:
        parse_pattern(raw)     # the model's own reading of it; geometry_report reads it again
    except UserError as e:
        raise OptionError(f"{label}: {str(e).removeprefix('pattern: ')}") from None
    return str(raw)


def _caps(raw: Any, label: str) -> list[tuple[str, float | None, float | None]]:
    """Repeated NAME=RATE or NAME=READ/WRITE component limits, host side first."""
    caps = []
    for text in raw:
        name, sep, rates = text.partition("=")
        if not sep or not name:
            raise OptionError(f"{label} {text!r}: write NAME=RATE or NAME=READ/WRITE, e.g. pcie=4GB/s or "
                              "ctl=2GB/s/1.3GB/s")
        if rates.count("/s/") == 1:
            read_text, write_text = rates.split("/s/")
            caps.append((name, parse_rate(read_text + "/s", label), parse_rate(write_text, label)))
        else:
            rate = parse_rate(rates, label)
            caps.append((name, rate, rate))
    return caps


def _sizes(raw: Any, label: str) -> tuple[int, ...]:
    """A comma-separated list of 1 to MAX_CURVE_VALUES request sizes, e.g. 4k,64k,1m."""
    items = [x.strip() for x in str(raw).split(",") if x.strip()]
    if not 1 <= len(items) <= MAX_CURVE_VALUES:
        raise OptionError(f"{label}: give 1 to {MAX_CURVE_VALUES} sizes, got {len(items)}")
    sizes = tuple(parse_size(x, label) for x in items)
    for v in sizes:
        if not 512 <= v <= MAX_CURVE_REQUEST or v % 512:
            raise OptionError(f"{label}: {v} bytes is out of range; allowed: multiples of 512 bytes up to 1 GiB")
    return sizes


def _counts(raw: Any, label: str, high: int) -> tuple[int, ...]:
    """A comma-separated list of whole numbers from 1 to `high` (a curve's points)."""
    items = [x.strip() for x in str(raw).split(",") if x.strip()]
    if not 1 <= len(items) <= MAX_CURVE_VALUES or not all(re.fullmatch(r"[0-9]{1,9}", x) for x in items):
        raise OptionError(f"{label}: expected 1 to {MAX_CURVE_VALUES} comma-separated whole numbers, got {raw!r}")
    values = tuple(int(x) for x in items)
    for v in values:
        if not 1 <= v <= high:
            raise OptionError(f"{label}: {v} is out of range; allowed: 1 to {high}")
    return values


def _patterns(raw: Any, label: str) -> tuple[str, ...]:
    items = [x.strip() for x in str(raw).split(",") if x.strip()]
    for x in items:
        if x not in WORKLOAD_PATTERNS:
            raise OptionError(f"{label}: {x!r} is not a pattern; allowed: {', '.join(WORKLOAD_PATTERNS)}")
    if not items:
        raise OptionError(f"{label}: expected one or more of {', '.join(WORKLOAD_PATTERNS)}")
    return tuple(dict.fromkeys(items))


def _row(name: str, kind: str, help: str, **kw: Any) -> Option:
    """A plan option: command line only (no job file), so messages name its flag."""
    return Option(name, kind, help, core=False, job_key=False, **kw)


STACK = _row("stack", "str", "stack file (.toml, docs/model.md) or RAID notation such as R60/12/24 or "
             "R50/6/x", positional="1", metavar="STACK")
DRIVES = _row("drives", "int", "number of drives: the total for a notation ending in /x; for "
              "recommend, the drives available", minimum=1, maximum=MAX_DRIVES, metavar="N",
              category="layout")
REQUEST = _row("request", "size", "sequential request size to model: geometry analyses its "
               "alignment (none without it); perf default: one full stripe; recommend default: 1 MiB",
               minimum=1, unit="bytes", metavar="SIZE", category="workload")
MTTR = _row("mttr", "period", "time to rebuild one drive, e.g. 24h (a bare number is hours)",
            parse=_hours, unit="h", metavar="TIME", category="rebuild")
REBUILD_RATE = _row("rebuild_rate", "rate", "rebuild rate, e.g. 50MB/s (MTTR = drive capacity / rate); "
                    "default: the stack file's, else 50 MB/s", minimum=1, unit="bytes/s",
                    metavar="RATE", category="rebuild")

DRIVE_OPTIONS: tuple[Option, ...] = (
    _row("drive", "size", "drive capacity, e.g. 2TB (default 2TB)", minimum=1, unit="bytes",
         metavar="SIZE", category="drive"),
    _row("mtbf", "period", "drive MTBF, e.g. 600000h (a bare number is hours)",
         parse=lambda raw, label: parse_mtbf_h(raw, label), unit="h", metavar="HOURS", category="drive"),
    _row("afr", "fraction", "annualised failure rate instead of MTBF, e.g. 0.73% or 0.0073",
         parse=lambda raw, label: parse_afr(raw, label), metavar="RATE", category="drive"),
    _row("ber", "probability", "unrecoverable bit error rate per bit read, e.g. 1e-15",
         parse=lambda raw, label: parse_ber(raw, label), metavar="RATE", category="drive"),
    _row("sector", "size", "deprecated: changes nothing, since the URE probability does not depend on the "
         "sector size (docs/model.md, Reliability); removed in the next release", minimum=512,
         maximum=64 * 1024, unit="bytes", metavar="SIZE", category="drive"),
    _row("drive_read", "rate", "drive sequential read rate, e.g. 150MB/s", minimum=1,
         unit="bytes/s", metavar="RATE", category="drive"),
    _row("drive_write", "rate", "drive sequential write rate (default: the read rate)", minimum=1,
         unit="bytes/s", metavar="RATE", category="drive"),
    _row("drive_iops", "count", "drive random read IOPS (and write, unless --drive-write-iops)",
         minimum=1, metavar="N", category="drive"),
    _row("drive_write_iops", "count", "drive random write IOPS", minimum=1, metavar="N",
         category="drive"),
    _row("ssd", "bool", "non-rotational drives (scheduler none)", default=False, category="drive"),
)

LAYOUT_OPTIONS: tuple[Option, ...] = (
    _row("chunk", "size", f"intra-chunk (segment) size (default {DEFAULT_CHUNK})", minimum=1,
         unit="bytes", metavar="SIZE", category="layout"),
    _row("span_chunk", "size", "RAID 50/60: unit the controller stripes spans with (default: the chunk)",
         minimum=1, unit="bytes", metavar="SIZE", category="layout"),
    DRIVES,
    _row("count", "int", "how many times the layout is built (e.g. one per controller)", minimum=1,
         maximum=MAX_DRIVES, metavar="N", category="layout"),
    _row("aggregate", "choice", "how the host combines RAID devices", category="layout",
         choices=_described(AGGREGATIONS, stripe="striped into one volume (LVM/md RAID 0; see --inter-chunk)",
                            concat="concatenated into one volume", none="each RAID device used on its own")),
    _row("inter_chunk", "size", "host stripe size (LVM --stripesize)", minimum=1, unit="bytes",
         metavar="SIZE", category="layout"),
    _row("parity", "choice", "where parity is computed", category="layout", deprecated=("--engine",),
         choices=_described(RAID_ENGINES, controller="a hardware RAID controller",
                            md="Linux md, on the host's CPUs")),
    _row("fs", "choice", "file system on top (default xfs)", category="layout",
         choices=_described(FILESYSTEMS, xfs="XFS", ext4="ext4", btrfs="Btrfs",
                            none="no file system (raw volume)")),
    MTTR, REBUILD_RATE,
)

JSON = BY_NAME["json"]
# The points of a curve (plan perf) or of a profile's sweep (plan profile): lists of the values
# `storlab run` takes one at a time, under the same names
CURVE_REQUEST = _row("request", "list", "request size(s), comma-separated (e.g. 4k,64k,1m). perf: the "
                     "sequential ceiling takes the first (default: one full stripe), the curve all of them "
                     "(default: 4 KiB for random patterns, one full stripe for sequential ones); profile "
                     "default: 4k,64k,1m", parse=_sizes, metavar="SIZES", category="curve")
CURVE_RW = _row("rw", "list", "pattern(s), comma-separated: " + ", ".join(WORKLOAD_PATTERNS) + " (as storlab "
                "run names them). perf: giving --rw, --qd or --threads prints the curve; profile default: "
                "randread,read (writes need --allow-destroy on a device)", parse=_patterns, metavar="LIST",
                category="curve")
CURVE_QD = _row("qd", "list", "queue depth(s) per thread, comma-separated (e.g. 1,2,4,8,16,32). perf default: "
                "1; profile default: 1,4,16", parse=lambda raw, label: _counts(raw, label, MAX_CURVE_QD),
                metavar="LIST", category="curve")
STACK_OPTIONS: tuple[Option, ...] = (STACK, *LAYOUT_OPTIONS, *DRIVE_OPTIONS, JSON)

# A training or checkpoint workload (storlab workload's built-ins, DLIO YAML, storlab TOML) to size for
BARE_DEVICE = "device"      # plan perf's STACK for one bare device (its figures: --profile or the drive flags)
DEFAULT_MAX_ACCELERATORS = 4096
# each prediction solves a closed network of accelerators x read threads requests (one MVA step per
# request): this bounds --accelerators to a few seconds of recommend over ~100 layouts
MAX_PLAN_ACCELERATORS = 16384
TRAINING_WORKLOAD = _row("workload", "str", "an AI-training or checkpoint workload, as `storlab workload` takes it: "
                         "a built-in name (unet3d_h100, resnet50_h100, llama3_8b, ...), a DLIO workload YAML or a "
                         "storlab workload TOML. perf: the accelerators the stack feeds at the workload's AU "
                         "threshold, and the eval phase apart when the workload evaluates (a checkpoint: its write and "
                         "read seconds), STACK may be 'device' for one bare device; recommend: layouts feeding "
                         "--accelerators", metavar="NAME|FILE", category="training")
ACCELERATORS = _row("accelerators", "int", "with --workload: perf predicts AU and pass or fail at this many "
                    "accelerators (a checkpoint: its ranks); recommend keeps the layouts that feed them",
                    minimum=1, maximum=MAX_PLAN_ACCELERATORS, metavar="N", category="training")
DATASET_SIZE = _row("dataset_size", "choice", "with --workload: the steps per epoch the prediction assumes "
                    "(AU leaves the first step out, so a short epoch reads higher)", default="rule",
                    category="training",
                    choices={"rule": "MLPerf's dataset rule: at least 500 steps per epoch at every accelerator "
                                     "count (the dataset grows with them)",
                             "as-written": "the workload's dataset as given (the files of a trial run)"})

COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("plan geometry", "stripe widths, alignment of a request size, capacity, flags", (
        *STACK_OPTIONS, REQUEST,
        _row("pattern", "str", "offsets: sequential[:start], aligned (random, aligned to the request) or "
             "random[:alignment]", default="sequential", parse=_pattern, metavar="PATTERN", category="workload"))),
    CommandTable("plan reliability", "MTTDL (Markov, with URE), loss probability per year and period", (
        *STACK_OPTIONS,
        _row("period", "period", "period for the loss probability, e.g. 5y (a bare number is years; "
             "default 1y)", parse=_period_h, unit="h", metavar="TIME", category="workload"))),
    CommandTable("plan perf", "predicted bandwidth / IOPS, limiting component and headroom; the curve "
                 "over queue depth, threads and request size", (
        *STACK_OPTIONS,
        CURVE_REQUEST, CURVE_RW, CURVE_QD,
        _row("threads", "list", "thread count(s), comma-separated (default 1)",
             parse=lambda raw, label: _counts(raw, label, MAX_CURVE_THREADS), metavar="LIST", category="curve"),
        _row("working_set", "size", "bytes the curve's workload touches, for a controller cache (default: "
             "far beyond it)", minimum=512, unit="bytes", metavar="SIZE", category="curve"),
        _row("mirror_read", "choice", "which copy of a mirror serves reads", category="curve",
             choices=_described(MIRROR_READ_POLICIES,
                                balanced="every copy (md raid1/raid10: the nearest or least busy)",
                                **{"per-thread": "one copy per reading thread (btrfs: the copy is chosen "
                                                 "by the reader's pid)"})),
        _row("profile", "str", "device profile (JSON from `storlab plan profile`) used for every member "
             "instead of the drive's datasheet figures", metavar="FILE", category="curve"),
        _row("random_request", "size", "random request size", default=4096, minimum=1, unit="bytes",
             metavar="SIZE", category="workload"),
        _row("mode", "choice", "how the load is shared (default: lockstep for a striped volume, else "
             "independent)", category="workload",
             choices=_described(SHARING_MODES, lockstep="a striped volume: every group moves the same amount",
                                independent="separate streams per device")),
        _row("cap", "caps", "component limit above all drives, host side first (repeatable): NAME=RATE, "
             "or NAME=READ/WRITE for two rates", default=(), parse=_caps, metavar="NAME=RATE",
             category="workload"),
        TRAINING_WORKLOAD, ACCELERATORS, DATASET_SIZE, MAX_ACCELERATORS)),
    CommandTable("plan recommend", "enumerate layouts for a drive inventory and show the Pareto set", (
        dataclasses.replace(DRIVES, required=True),
        _row("bays", "int", "bays per enclosure", default=12, minimum=1, maximum=MAX_DRIVES, metavar="N",
             category="inventory"),
        _row("controllers", "int", "RAID controllers", default=1, minimum=1, maximum=MAX_DRIVES,
             metavar="N", category="inventory"),
        _row("controller_read", "rate", "read limit of one controller", minimum=1, unit="bytes/s",
             metavar="RATE", category="inventory"),
        _row("controller_write", "rate", "write limit of one controller", minimum=1, unit="bytes/s",
             metavar="RATE", category="inventory"),
        _row("levels", "list", "RAID levels to consider, comma-separated (default "
             + ",".join(map(str, DEFAULT_LEVELS)) + ")", parse=_levels, metavar="LIST", category="inventory"),
        _row("chunks", "list", "chunk sizes to consider, comma-separated (default 64k,128k,256k,512k,1m)",
             parse=_chunks, metavar="LIST", category="inventory"),
        _row("capacity", "size", "need: usable capacity, e.g. 60TB", minimum=1, unit="bytes",
             metavar="SIZE", category="needs"),
        _row("seq_read", "rate", "need: sequential read bandwidth", minimum=1, unit="bytes/s",
             metavar="RATE", category="needs"),
        _row("seq_write", "rate", "need: sequential write bandwidth", minimum=1, unit="bytes/s",
             metavar="RATE", category="needs"),
        _row("read_iops", "count", "need: random read IOPS", minimum=1, metavar="N", category="needs"),
        _row("write_iops", "count", "need: random write IOPS", minimum=1, metavar="N", category="needs"),
        _row("min_mttdl", "period", "need: minimum MTTDL, e.g. 1000y (a bare number is years)",
             parse=_period_h, unit="h", metavar="TIME", category="needs"),
        _row("max_annual_loss", "probability", "need: maximum probability of loss per year, e.g. 1e-4",
             parse=_probability, metavar="P", category="needs"),
        REQUEST, MTTR, REBUILD_RATE, *DRIVE_OPTIONS, TRAINING_WORKLOAD, ACCELERATORS, DATASET_SIZE, JSON)),
    CommandTable("plan profile", "measure a device or file (request size x queue depth, direct I/O) and fit "
                 "the model's figures for it: a device profile for `plan perf --profile` and diagnose", (
        _row("target", "str", "block device or file to measure (read only unless --allow-destroy names it)",
             positional="1", metavar="TARGET"),
        CURVE_RW, CURVE_REQUEST, CURVE_QD, BY_NAME["time"], BY_NAME["size"], BY_NAME["allow_destroy"],
        OUTPUT, JSON)),
    CommandTable("plan script", "emit mdadm / LVM / mkfs / queue commands that build the stack (dry-run "
                 "text)", (
        *STACK_OPTIONS,
        _row("devices", "list", "comma-separated devices: drives (md) or controller LUNs", parse=_devices,
             metavar="LIST", category="script"),
        OUTPUT)),
)


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


def _emit_json(command: str, payload: Any, warnings: list[PlanWarning] | tuple[PlanWarning, ...], target: str) -> None:
    document = {**header("plan", schema=plan_schema(command)), **_plain(payload),
                "warnings": [dataclasses.asdict(w) for w in warnings]}
    write_json(document, target, indent=2)


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
    report = geometry_report(stack, args.request, args.pattern)
    warnings = stack_warnings(stack, request_bytes=args.request)
    if args.json:
        _emit_json("geometry", report, warnings, args.json)
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
    period_h = args.period if args.period is not None else HOURS_PER_YEAR
    report = reliability_of(stack, period_h)
    warnings = stack_warnings(stack, reliability=report)
    if args.json:
        _emit_json("reliability", report, warnings, args.json)
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

def _curve(stack: Stack, args: argparse.Namespace, full_stripe: int) -> list[Prediction]:
    """The predictions at every point of the curve: patterns x request sizes x threads x depths."""
    devices: list[Device] | None = None
    if args.profile:
        from ..model.profile import load_profile
        devices = [load_profile(args.profile).device()]
    points = []
    for rw in args.rw or ("read",):
        sizes = args.request or ((args.random_request,) if rw.startswith("rand") else (full_stripe,))
        for size in sizes:
            for threads in args.threads or (1,):
                for qd in args.qd or (1,):
                    w = Workload(rw, size, qd=qd, threads=threads, working_set_bytes=args.working_set)
                    points.append(predict(stack, w, devices, mirror_read=args.mirror_read or "balanced"))
    return points


def _curve_lines(points: list[Prediction]) -> list[str]:
    out = [f"curve ({len(points)} points; mean and p99 latency; limited by: the component with the least headroom):",
           f"  {'rw':<9} {'request':>9} {'threads':>7} {'qd':>5} {'IOPS':>12} {'MB/s':>10} {'mean':>9} "
           f"{'p99':>9}  limited by"]
    for p in points:
        w = p.workload
        out.append(f"  {w.rw:<9} {format_size(w.request_bytes):>9} {w.threads:>7} {w.qd:>5} {p.iops:>12,.0f} "
                   f"{p.bw_bytes / 1e6:>10,.1f} {_ms(p.latency_mean_s):>9} {_ms(p.latency_tail_s):>9}  {p.limiting}")
    return out


def _ms(seconds: float) -> str:
    if seconds >= 1.0:
        return f"{seconds:.3g} s"
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} us"


def _curve_point(p: Prediction) -> dict[str, Any]:
    w = p.workload
    return {"rw": w.rw, "request_bytes": w.request_bytes, "qd": w.qd, "threads": w.threads,
            "working_set_bytes": w.working_set_bytes, "iops": p.iops, "bw_bytes": p.bw_bytes,
            "latency_mean_s": p.latency_mean_s, "latency_p99_s": p.latency_tail_s, "limiting": p.limiting,
            "components": [_plain(c) for c in p.components], "assumptions": list(p.assumptions)}


def run_perf(args: argparse.Namespace) -> int:
    if args.workload is not None:
        return run_perf_workload(args)
    for flag, value in (("--accelerators", args.accelerators), ("--max-accelerators", args.max_accelerators)):
        if value is not None:
            raise UsageError(f"{flag} needs --workload (the workload whose accelerators are predicted)")
    if args.stack == BARE_DEVICE and not os.path.exists(args.stack):
        raise UsageError(f"stack: {BARE_DEVICE!r} (one bare device) needs --workload; give a stack file or RAID notation")
    stack = with_cap_chain(stack_from_args(args), args.cap)
    seq_request = args.request[0] if args.request else None
    report = performance_of(stack, seq_request, args.random_request, args.mode)
    warnings = stack_warnings(stack, perf=report, request_bytes=seq_request)
    wants_curve = bool(args.rw or args.qd or args.threads or args.profile or args.working_set
                       or args.mirror_read or (args.request and len(args.request) > 1))
    points = _curve(stack, args, report.seq_request_bytes) if wants_curve else []
    if args.json:
        payload = dict(_plain(report), curve=[_curve_point(p) for p in points]) if points else report
        _emit_json("perf", payload, warnings, args.json)
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
    if points:
        out += _curve_lines(points)
    out += _warning_lines(warnings)
    print("\n".join(out))
    return 0


# --- training and checkpoint workloads (perf --workload, recommend --workload) -------------------

def workload_spec(name: str):
    """The workload `storlab workload NAME|FILE` would run (its own loader and translator)."""
    from .workload import builtins, load_spec

    if name not in builtins() and not name.endswith((".yaml", ".yml", ".toml")):
        raise UsageError(f"--workload: {name!r} is not a built-in workload or a DLIO .yaml / storlab .toml file; "
                         f"built-ins: {', '.join(builtins())}")
    spec, _, source = load_spec(argparse.Namespace(workload=name, set=[], accelerators=None, epochs=None, folder=None,
                                                   scale=None))
    return spec, source


def training_load(spec, dataset_size: str) -> TrainingLoad:
    """What the workload's emulation reads (measure/training.py), as the model's plain figures."""
    d, r, t = spec.dataset, spec.reader, spec.train
    return TrainingLoad(spec.name, d.record_length, r.batch_size, t.computation_time, r.read_threads, r.prefetch,
                        r.transfer_size, d.samples, spec.au_threshold, file_per_sample=d.samples_per_file == 1,
                        shuffled=d.samples_per_file == 1 or r.sample_shuffle != "off",
                        total_training_steps=t.total_training_steps, rule_sized=dataset_size == "rule")


def workload_evaluation(spec, training: TrainingLoad) -> tuple[TrainingLoad, int]:
    """The workload's evaluation as the model's load (measure/training.py's _evaluate: the eval
    files, the eval batch and compute) and the evaluations in a run of its epochs."""
    ev = spec.evaluation
    load = evaluation_load(training, batch=ev.batch_size, computation_s=ev.computation_time,
                           samples=spec.dataset.eval_files * spec.dataset.samples_per_file)
    return load, sum(1 for e in range(1, spec.train.epochs + 1) if spec.evaluates_after(e))


def checkpoint_load(spec, accelerators: int) -> CheckpointLoad:
    """One checkpoint of the workload over `accelerators` ranks, sharded as measure/checkpoint.py does."""
    ck = spec.checkpoint
    writers = checkpoint_writers(ck.ranks, ck.ranks_total, accelerators)
    if ck.is_transformer:       # DLIO's ranks write unequal shares: the model takes their mean
        files = [ck.rank_file_bytes(g, writers) for g in range(writers)]
        return CheckpointLoad(spec.name, writers, max(1, sum(map(sum, files)) // writers),
                              max(1, round(sum(map(len, files)) / writers)), ck.fsync, ck.ranks_total)
    return CheckpointLoad(spec.name, writers, checkpoint_shard_bytes(ck.model_size + ck.optimizer_size, ck.ranks_total),
                          ck.files_per_rank, ck.fsync, ck.ranks_total)


def _workload_target(args: argparse.Namespace) -> tuple[Stack | None, list[Device] | None, str]:
    """(stack or None for one bare device, member devices, a name) for perf --workload."""
    devices = None
    if args.profile:
        from ..model.profile import load_profile
        devices = [load_profile(args.profile).device()]
    if args.stack == BARE_DEVICE and not os.path.exists(args.stack):
        return None, devices or [Device.from_drive(_drive_from_args(args))], "one device"
    stack = with_cap_chain(stack_from_args(args), args.cap)
    layout = f"{stack.raid.layout.text} x {stack.raid.count}"
    return stack, devices, layout if stack.name == stack.raid.layout.text else f"{stack.name} ({layout})"


def _mib(bytes_per_s: float) -> str:
    return "unbounded" if not math.isfinite(bytes_per_s) else f"{bytes_per_s / 2**20:,.1f} MiB/s"


def _accelerator_point(point: AcceleratorPoint | None, load: TrainingLoad) -> dict[str, Any] | None:
    if point is None:
        return None
    return {"accelerators": point.accelerators, "au": point.au, "passed": point.passed,
            "samples_per_s": point.samples_per_s, "mib_per_s": point.samples_per_s * load.record_bytes / 2**20,
            "steps_per_epoch": point.steps, "epoch_s": point.epoch_s,
            "demand_bytes_per_s": point.demand_bytes_per_s, "delivered_bytes_per_s": point.delivered_bytes_per_s,
            "outstanding_reads": point.concurrency, "request_bytes": point.prediction.workload.request_bytes,
            "rw": point.prediction.workload.rw, "limiting": point.limiting}


def _point_line(point: AcceleratorPoint, load: TrainingLoad) -> str:
    return (f"  at {point.accelerators}: AU {point.au:.3f} ({'pass' if point.passed else 'fail'}), "
            f"{point.samples_per_s:,.1f} samples/s; demand {_mib(point.demand_bytes_per_s)}, delivered "
            f"{_mib(point.delivered_bytes_per_s)} at {point.concurrency} outstanding reads; storage limited by "
            f"{point.limiting}")


def _evaluation_payload(fc: EvaluationForecast) -> dict[str, Any]:
    point = {k: v for k, v in (_accelerator_point(fc.point, fc.load) or {}).items()
             if k not in ("steps_per_epoch", "epoch_s")}     # an evaluation's: seconds_per_evaluation, steps_per_evaluation
    return {**point, "seconds_per_evaluation": fc.point.epoch_s,
            "steps_per_evaluation": fc.point.steps, "evaluations_per_run": fc.evaluations,
            "seconds_per_run": fc.seconds_per_run, "note": fc.note or None}


def _duration(seconds: float) -> str:
    """A phase's length: ms or s as _ms gives them, whole seconds from 100 s on."""
    if not math.isfinite(seconds):
        return "unbounded"
    return f"{seconds:,.0f} s" if seconds >= 100 else _ms(seconds)


def _evaluation_lines(fc: EvaluationForecast) -> list[str]:
    p, ld = fc.point, fc.load
    if p.steps < 1:
        return [f"  at {p.accelerators}: nothing evaluated; {fc.note}"]
    out = [f"  at {p.accelerators}: eval AU {p.au:.3f} ({'pass' if p.passed else 'fail'}), {p.samples_per_s:,.1f} "
           f"samples/s, {p.samples_per_s * ld.record_bytes / 2**20:,.2f} MiB/s; demand {_mib(p.demand_bytes_per_s)}, "
           f"delivered {_mib(p.delivered_bytes_per_s)} at {p.concurrency} outstanding reads; storage limited by "
           f"{p.limiting}",
           f"    {_duration(p.epoch_s)} per evaluation ({p.steps} steps); {fc.evaluations} evaluation(s) per run: "
           f"{_duration(fc.seconds_per_run)}"]
    if fc.note:
        out.append(f"    note: {fc.note}")
    return out


def _checkpoint_payload(fc: CheckpointForecast) -> dict[str, Any]:
    return {"writers": fc.load.writers, "bytes_per_writer": fc.load.bytes_per_writer,
            "bytes_per_checkpoint": fc.load.bytes_total, "ranks_total": fc.load.ranks_total or fc.load.writers,
            "files_per_writer": fc.load.files_per_writer,
            **{f"{ph.kind}_{k}": v for ph in (fc.write, fc.read)
               for k, v in (("seconds", ph.seconds), ("gb_per_s", ph.gb_per_s), ("limiting", ph.limiting))},
            "assumptions": list(fc.assumptions)}


def _checkpoint_lines(fc: CheckpointForecast) -> list[str]:
    ld = fc.load
    out = [f"  checkpoint: {format_si_bytes(ld.bytes_total)} by {ld.writers} writer(s) "
           f"({format_si_bytes(ld.bytes_per_writer)} each, {ld.files_per_writer} file(s))"]
    for ph in (fc.write, fc.read):
        out.append(f"    {ph.kind:<5} {ph.seconds:,.2f} s, {ph.gb_per_s:,.3f} GB/s; limited by {ph.limiting}")
    return out


def run_perf_workload(args: argparse.Namespace) -> int:
    """plan perf --workload: the accelerators the stack feeds, or a checkpoint's seconds."""
    for flag, value in (("--rw", args.rw), ("--qd", args.qd), ("--threads", args.threads), ("--request", args.request),
                        ("--working-set", args.working_set)):
        if value:
            raise UsageError(f"{flag} draws the curve and is not used with --workload (the workload sets its requests, "
                             "concurrency and data set)")
    spec, source = workload_spec(args.workload)
    if spec.mode == "generate":
        raise UsageError(f"--workload: {spec.name} only generates its dataset (no training, no checkpoint); "
                         "use a training or checkpoint workload")
    stack, devices, title = _workload_target(args)
    kw = dict(mirror_read=args.mirror_read or "balanced")
    payload: dict[str, Any] = {"stack_name": stack.name if stack else BARE_DEVICE,
                               "layout": stack.raid.layout.text if stack else BARE_DEVICE}
    wl: dict[str, Any] = {"name": spec.name, "source": source, "kind": "training" if spec.train_enabled else "checkpoint",
                          "au_threshold": spec.au_threshold, "dataset_size": args.dataset_size}
    out: list[str] = []
    fed_count = None
    if spec.train_enabled:
        load = training_load(spec, args.dataset_size)
        fc = accelerators_fed(stack, load, devices, max_accelerators=args.max_accelerators or DEFAULT_MAX_ACCELERATORS,
                              **kw)
        fed_count = fc.fed
        rw = fc.trials[0].prediction.workload.rw if fc.trials else load.pattern
        wl.update({"load": {**_plain(load), "request_bytes": load.request_bytes, "calls_per_sample": load.calls_per_sample,
                            "rw": rw}, "accelerators_fed": fc.fed,
                   "at_fed": _accelerator_point(fc.at_fed, load), "beyond": _accelerator_point(fc.beyond, load),
                   "search_bound": fc.bound or None, "trials": [_accelerator_point(p, load) for p in fc.trials],
                   "assumptions": list(fc.assumptions)})
        out += [f"{spec.name} on {title}: AI training, AU threshold {_pct(spec.au_threshold)}",
                f"  per accelerator and step: {load.batch} x {format_size(load.record_bytes)} samples "
                f"({load.calls_per_sample} read call(s) of {format_size(load.request_bytes)} each, {rw}), "
                f"{max(1, load.read_threads)} read thread(s){'' if load.read_threads else ' (the accelerator reads)'}, "
                f"compute {load.computation_s:g} s",
                f"  accelerators fed: {fc.fed}" + (f" (bounded by {fc.bound})" if fc.bound else "")]
        for point in (fc.at_fed, fc.beyond):
            if point is not None:
                out.append(_point_line(point, load))
        if args.accelerators is not None:
            at = predict_training(stack, load, args.accelerators, devices, **kw)
            wl["at_accelerators"] = _accelerator_point(at, load)
            wl["passed"] = at.passed
            out.append(f"  --accelerators {args.accelerators}: AU {at.au:.3f} "
                       f"{'>=' if at.passed else '<'} {spec.au_threshold:g}: {'PASS' if at.passed else 'FAIL'}")
            if args.accelerators not in (fc.fed, fc.fed + 1):
                out.append(_point_line(at, load))
        out += [f"  assumption: {a}" for a in fc.assumptions]
    evaluation: list[str] = []
    if spec.train_enabled and spec.evaluation.enabled:
        ev_load, count = workload_evaluation(spec, load)
        ev_wl: dict[str, Any] = {"load": {**_plain(ev_load), "request_bytes": ev_load.request_bytes},
                                 "definition": "DLIO's eval figures, apart from training's: the eval files read after "
                                               "the epochs named, AU with the training formulas on one evaluation"}
        evaluation = [f"{spec.name} on {title}: evaluation (DLIO's eval, apart from training), after epoch "
                      f"{spec.evaluation.after_epoch} then every {spec.evaluation.epochs_between}",
                      f"  per accelerator and step: {ev_load.batch} x {format_size(ev_load.record_bytes)} samples, "
                      f"compute {ev_load.computation_s:g} s; {ev_load.samples} eval samples, no barrier between steps"]
        at = {"at_fed": max(1, fc.fed), **({"at_accelerators": args.accelerators} if args.accelerators is not None else {})}
        forecasts: dict[int, EvaluationForecast] = {}
        for key, n in at.items():
            if n not in forecasts:
                forecasts[n] = predict_evaluation(stack, ev_load, n, count, devices, **kw)
                evaluation += _evaluation_lines(forecasts[n])
            ev_wl[key] = _evaluation_payload(forecasts[n])
        if not fc.fed:
            evaluation.append("  (no accelerator holds the training threshold: at_fed shows the evaluation at 1)")
        wl["evaluation"] = ev_wl
    if spec.checkpoint.enabled:
        ranks = args.accelerators or (fed_count if spec.train_enabled and fed_count else None) \
            or spec.checkpoint.ranks_total or spec.accelerators
        ck = predict_checkpoint(stack, checkpoint_load(spec, ranks), devices, **kw)
        wl["checkpoint"] = _checkpoint_payload(ck)
        if not spec.train_enabled:
            out.append(f"{spec.name} on {title}: checkpoint over {ranks} rank(s)")
        out += _checkpoint_lines(ck)
    out += evaluation
    payload["workload"] = wl
    warnings = stack_warnings(stack) if stack is not None else []
    if args.json:
        _emit_json("perf", payload, warnings, args.json)
        return 0
    out += _warning_lines(warnings)
    print("\n".join(out))
    return 0


# --- profile -------------------------------------------------------------------------------------

PROFILE_DEFAULT_RW = ("randread", "read")
PROFILE_DEFAULT_REQUESTS = (4096, 64 << 10, 1 << 20)
PROFILE_DEFAULT_QDS = (1, 4, 16)
PROFILE_DEFAULT_TIME_S = 2.0
PROFILE_RAMP_S = 0.5
PROFILE_MAX_BYTES = 1 << 30


def run_profile(args: argparse.Namespace) -> int:
    """Measure each point through the ordinary engine (direct I/O, a ramp, the given time), fit."""
    from ..jobs.job import resolve_job
    from ..measure.runner import run_job
    from ..model.profile import ProfilePoint, fit_profile, profile_document, save_profile

    check_destination(args.output, "output")
    target = args.target
    if not os.path.exists(target):
        raise UsageError(f"target: {target} does not exist; give a block device or a file with data")
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
                    values["size"] = PROFILE_MAX_BYTES
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
                print(f"  {rw:<9} {format_size(size):>9} QD{qd:<4} {point.iops:>12,.0f} IOPS "
                      f"{point.iops * size / 1e6:>10,.1f} MB/s  mean {_ms(point.lat_mean_s)}", file=sys.stderr)
    profile = fit_profile(points, name=os.path.basename(target))
    if args.output:
        save_profile(profile, args.output)
    if args.json:
        write_json(profile_document(profile), args.json, indent=2)
        return 0
    out = [f"{target}: profile from {len(points)} points ({time_s:g} s each, direct I/O)",
           f"  read {_mb(profile.read_bw_bytes)}, {profile.read_iops:,.0f} IOPS; write {_mb(profile.write_bw_bytes)}, "
           f"{profile.write_iops:,.0f} IOPS",
           f"  per request: {_ms(profile.latency_s)} random, {_ms(profile.sequential_latency_s)} sequential; "
           f"parallelism {profile.parallelism}; {'queues' if profile.queues else 'rate limiter (no queue)'}",
           f"  fit error: mean {profile.mean_abs_error:.1%}, worst {profile.max_abs_error:.1%} over the points"]
    out += [f"  note: {n}" for n in profile.notes]
    if args.output:
        out.append(f"  wrote {args.output} (use: storlab plan perf STACK --profile {args.output})")
    print("\n".join(out))
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
        rebuild_rate_bytes=rebuild, mttr_h=mttr_h, levels=args.levels or DEFAULT_LEVELS)
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
        payload = {"candidates_considered": result.candidates_considered, "feasible": result.feasible,
                   "note": result.note, "pareto": [dict(_plain(c), layout=c.stack.raid.layout.text)
                                                   for c in result.pareto]}
        if needs.training is not None:
            payload["workload"] = {"name": needs.training.name, "accelerators": needs.accelerators,
                                   "au_threshold": needs.training.au_threshold, "dataset_size": args.dataset_size}
        _emit_json("recommend", payload, result.warnings, args.json)
        return 0
    out = [f"{result.candidates_considered} candidate layouts for {args.drives} x {format_si_bytes(drive.capacity_bytes)} "
           f"drives, {args.bays}-bay enclosures, {args.controllers} controller(s); {result.feasible} meet every need; "
           f"{len(result.pareto)} not beaten on every need:"]
    if needs.training is not None:
        out.insert(0, f"layouts feeding {needs.accelerators} {needs.training.name} accelerators at AU >= "
                      f"{_pct(needs.training.au_threshold)} (the workload's threshold):")
    if result.note:
        out.append(f"  note: {result.note}")
    for c in result.pareto:
        scores = ", ".join(f"{label} {fmt(c.scores[key])}" for key, label, fmt in OBJECTIVES)
        out.append(f"- {c.description}" + (f" ({c.spares} spare drives)" if c.spares else ""))
        out.append(f"    {scores}")
        out.append(f"    why: {'; '.join(c.reasons)}")
        if c.training is not None:
            t = c.training
            fed = f"{t.accelerators}" if t.accelerators < t.bound else f"{t.bound} or more"
            out.append(f"    accelerators: feeds {fed}; AU {t.au_at_need:.3f} at {needs.accelerators}; "
                       f"storage limited by {t.limiting}")
        if c.misses:
            out.append(f"    misses: {'; '.join(c.misses)}")
        if c.equivalent:
            out.append(f"    same scores: {'; '.join(c.equivalent)}")
        out += [f"    warning: {w.code}: {w.message}" for w in c.warnings]
    print("\n".join(out))
    return 0


def _training_need(args: argparse.Namespace) -> dict[str, Any]:
    """recommend's training need: --workload with --accelerators, both or neither."""
    if args.workload is None:
        if args.accelerators is not None:
            raise UsageError("--accelerators needs --workload (the workload whose accelerators the layouts feed)")
        return {}
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
