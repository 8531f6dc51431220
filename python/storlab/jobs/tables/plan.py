"""The options of `storlab plan` and its subcommands (docs/options-plan.md). Every flag of every plan
subcommand is a row here, defined once: a row shared by several subcommands (drive, layout, rebuild,
--request, --drives) has one meaning, help and default. The curve of `plan perf` and the sweep of
`plan profile` take lists of what `storlab run` (and `plan geometry`, --request) take one at a time:
list rows (`options.list_row`) of those rows.

The model's own value lists (layouts' aggregations, parity engines, file systems, sharing modes,
mirror read policies, modelled patterns, the drive bound, recommend's default levels) are written
here with their help; tests/test_cli_options.py keeps each equal to the model's.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any

from ...errors import UserError
from ...units import parse_rate, parse_size
from ..model_values import parse_afr, parse_ber, parse_mtbf_h, parse_pattern, parse_period_h
from ..options import BY_NAME, RW_CHOICES, Option, OptionError, list_row
from .shared import OUTPUT, CommandTable, command_row
from .workload import WORKLOAD_OPTIONS

__all__ = ["COMMANDS", "DEVICE_PROFILE", "DEFAULT_CHUNK", "DEFAULT_RECOMMEND_REQUEST", "BARE_DEVICE", "MAX_CURVE_REQUEST"]

DEFAULT_CHUNK = "512KiB"
DEFAULT_RECOMMEND_REQUEST = "1MiB"   # recommend has no layout yet, so no full stripe to default to
MAX_CURVE_REQUEST = 1 << 30          # a curve's request sizes: multiples of 512 bytes up to this
BARE_DEVICE = "device"      # plan perf's STACK for one bare device (its figures: --profile or the drive flags)
# each prediction solves a closed network of accelerators x read threads requests (one MVA step per
# request): this bounds --accelerators to a few seconds of recommend over ~100 layouts
MAX_PLAN_ACCELERATORS = 16384

# The model's values, with their help (the model's lists: model/stack.py, performance.py, predict.py,
# notation.py; planner/recommend.py's DEFAULT_LEVELS).
MAX_DRIVES = 100_000
DEFAULT_LEVELS = (5, 6, 10, 50, 60)
AGGREGATIONS = {"stripe": "striped into one volume (LVM/md RAID 0; see --inter-chunk)",
                "concat": "concatenated into one volume", "none": "each RAID device used on its own"}
RAID_ENGINES = {"controller": "a hardware RAID controller", "md": "Linux md, on the host's CPUs"}
FILESYSTEMS = {"xfs": "XFS", "ext4": "ext4", "btrfs": "Btrfs", "none": "no file system (raw volume)"}
SHARING_MODES = {"lockstep": "a striped volume: every group moves the same amount",
                 "independent": "separate streams per device"}
MIRROR_READ_POLICIES = {"balanced": "every copy (md raid1/raid10: the nearest or least busy)",
                        "per-thread": "one copy per reading thread (btrfs: the copy is chosen by the reader's pid)"}
MODELLED_PATTERNS = ("read", "write", "randread", "randwrite")


# --- value forms of plan's own rows ---------------------------------------------------------------

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


def _curve_request(value: int, label: str) -> int:
    """A request size of a curve: what the model's drives take, whole sectors."""
    if value % 512:
        raise OptionError(f"{label}: {value} bytes is out of range; allowed: multiples of 512 bytes up to 1 GiB")
    return value


# --- rows shared by several subcommands -----------------------------------------------------------

STACK = command_row("stack", "str", "stack file (.toml, docs/model.md) or RAID notation such as R60/12/24 or "
                    "R50/6/x", positional="1", metavar="STACK")
DRIVES = command_row("drives", "int", "number of drives: the total for a notation ending in /x; for "
                     "recommend, the drives available", minimum=1, maximum=MAX_DRIVES, metavar="N",
                     category="layout")
REQUEST = command_row("request", "size", "sequential request size to model: geometry analyses its "
                      "alignment (none without it); perf default: one full stripe; recommend default: 1 MiB",
                      minimum=1, unit="bytes", metavar="SIZE", category="workload")
MTTR = command_row("mttr", "period", "time to rebuild one drive, e.g. 24h (a bare number is hours)",
                   parse=_hours, unit="h", metavar="TIME", category="rebuild")
REBUILD_RATE = command_row("rebuild_rate", "rate", "rebuild rate, e.g. 50MB/s (MTTR = drive capacity / rate); "
                           "default: the stack file's, else 50 MB/s", minimum=1, unit="bytes/s",
                           metavar="RATE", category="rebuild")

DRIVE_OPTIONS: tuple[Option, ...] = (
    command_row("drive", "size", "drive capacity, e.g. 2TB (default 2TB)", minimum=1, unit="bytes",
                metavar="SIZE", category="drive"),
    command_row("mtbf", "period", "drive MTBF, e.g. 600000h (a bare number is hours)",
                parse=lambda raw, label: parse_mtbf_h(raw, label), unit="h", metavar="HOURS", category="drive"),
    command_row("afr", "fraction", "annualised failure rate instead of MTBF, e.g. 0.73% or 0.0073",
                parse=lambda raw, label: parse_afr(raw, label), metavar="RATE", category="drive"),
    command_row("ber", "probability", "unrecoverable bit error rate per bit read, e.g. 1e-15",
                parse=lambda raw, label: parse_ber(raw, label), metavar="RATE", category="drive"),
    command_row("sector", "size", "deprecated: changes nothing, since the URE probability does not depend on "
                "the sector size (docs/model.md, Reliability); removed in the next release", minimum=512,
                maximum=64 * 1024, unit="bytes", metavar="SIZE", category="drive"),
    command_row("drive_read", "rate", "drive sequential read rate, e.g. 150MB/s", minimum=1,
                unit="bytes/s", metavar="RATE", category="drive"),
    command_row("drive_write", "rate", "drive sequential write rate (default: the read rate)", minimum=1,
                unit="bytes/s", metavar="RATE", category="drive"),
    command_row("drive_iops", "count", "drive random read IOPS, one request at a time (and write, unless "
                "--drive-write-iops); a spinning drive serves more with a deeper queue, which it reorders",
                minimum=1, metavar="N", category="drive"),
    command_row("drive_write_iops", "count", "drive random write IOPS, one request at a time", minimum=1, metavar="N",
                category="drive"),
    command_row("ssd", "bool", "non-rotational drives (scheduler none)", default=False, category="drive"),
    command_row("drive_latency", "duration", "drive read latency from its data sheet: one 4 KiB random read "
                "with nothing queued, e.g. 80us (an SSD's; the drive then serves IOPS x latency requests at "
                "once; and write, unless --drive-write-latency); default: 1 / --drive-iops, one at a time",
                minimum=1e-9, maximum=1, unit="s", metavar="TIME", category="drive"),
    command_row("drive_write_latency", "duration", "drive write latency from its data sheet: one 4 KiB random "
                "write with nothing queued, e.g. 20us (an SSD's buffer takes it)", minimum=1e-9, maximum=1,
                unit="s", metavar="TIME", category="drive"),
    command_row("drive_write_cache", "choice", "a spinning drive's own write cache, where no RAID controller is "
                "in front (Linux md, a bare drive; default on, as drives ship)", category="drive",
                choices={"on": "the drive acknowledges a write from its buffer and writes it out later, "
                               "reordering what it holds",
                         "off": "a write waits for the media (hdparm -W0, sdparm --clear=WCE)"}),
)

LAYOUT_OPTIONS: tuple[Option, ...] = (
    command_row("chunk", "size", f"intra-chunk (segment) size (default {DEFAULT_CHUNK})", minimum=1,
                unit="bytes", metavar="SIZE", category="layout"),
    command_row("span_chunk", "size", "RAID 50/60: unit the controller stripes spans with (default: the chunk)",
                minimum=1, unit="bytes", metavar="SIZE", category="layout"),
    DRIVES,
    command_row("count", "int", "how many times the layout is built (e.g. one per controller)", minimum=1,
                maximum=MAX_DRIVES, metavar="N", category="layout"),
    command_row("aggregate", "choice", "how the host combines RAID devices", category="layout",
                choices=AGGREGATIONS),
    command_row("inter_chunk", "size", "host stripe size (LVM --stripesize)", minimum=1, unit="bytes",
                metavar="SIZE", category="layout"),
    command_row("parity", "choice", "where parity is computed", category="layout", deprecated=("--engine",),
                choices=RAID_ENGINES),
    command_row("fs", "choice", "file system on top (default xfs)", category="layout", choices=FILESYSTEMS),
    MTTR, REBUILD_RATE,
)

JSON = BY_NAME["json"]
STACK_OPTIONS: tuple[Option, ...] = (STACK, *LAYOUT_OPTIONS, *DRIVE_OPTIONS, JSON)

# The points of a curve (plan perf) or of a profile's sweep (plan profile): lists of the values
# `storlab run` (and plan geometry, --request) take one at a time, under the same names.
CURVE_REQUEST = list_row(REQUEST, "Each a multiple of 512 bytes. perf: the sequential ceiling takes the first "
                         "(default: one full stripe), the curve all of them (default: 4 KiB for random patterns, one "
                         "full stripe for sequential ones); profile default: 4k,64k,1m", minimum=512,
                         maximum=MAX_CURVE_REQUEST, parse=_curve_request, metavar="SIZES", category="curve")
CURVE_RW = list_row(BY_NAME["rw"], "The patterns the model knows. perf: giving --rw, --qd or --threads prints "
                    "the curve; profile default: randread,read (writes need --allow-destroy on a device)",
                    choices={p: RW_CHOICES[p] for p in MODELLED_PATTERNS}, category="curve")
CURVE_QD = list_row(BY_NAME["qd"], "perf default: 1; profile default: 1,4,16", category="curve")
CURVE_THREADS = list_row(BY_NAME["threads"], "perf default: 1", category="curve")

# A measured device (plan profile's JSON) for every member: plan perf models with it, diagnose
# predicts the volume with it (one meaning, one row)
DEVICE_PROFILE = command_row(
    "profile", "str", "device profile (JSON from `storlab plan profile`) used for every member: plan perf "
    "models it instead of the drive's datasheet figures; diagnose predicts the volume with it (its latency, "
    "queueing and parallelism) at the members' measured rates", metavar="FILE", category="curve")

# A RAID controller's request rate: plan perf's implied controller, plan recommend's controllers
CONTROLLER_IOPS = command_row(
    "controller_iops", "count", "host requests per second a RAID controller handles, cache hits or not (default: a "
    "named controller's own iops; else 60,000, the vendor's figure for 6 Gb/s SAS RAID-on-chip controllers)",
    minimum=1, metavar="N", category="cache")

# The controller cache of `plan perf`, as a stack file's [cache] table gives it (docs/model.md)
CACHE_OPTIONS: tuple[Option, ...] = (
    command_row("controller_cache", "size", "controller cache size: in-cache working sets are served from it, writes "
                "are acknowledged by it (overrides the stack file's [cache] size)", minimum=512, unit="bytes",
                metavar="SIZE", category="cache"),
    command_row("controller_cache_rate", "rate", "rate the cache serves hits and absorbs writes at (default: no limit of "
                "its own; the path above it binds)", minimum=1, unit="bytes/s", metavar="RATE", category="cache"),
    command_row("controller_cache_latency", "duration", "the controller's time for one request served from the "
                "cache, nothing queued (default: a named controller's own, else 0.2 ms, the model's default "
                "controller time)", minimum=0, maximum=1, unit="s", metavar="TIME", category="cache"),
    CONTROLLER_IOPS,
    command_row("read_ahead", "bool", "the controller prefetches sequential reads (served at the cache's "
                "latency, the members streaming behind)", default=False, category="cache"),
    command_row("write_through", "bool", "the controller does not write back (a RAID controller does by default, "
                "gathering a sequential stream into full stripes): every write waits for the members; needs no "
                "--controller-cache", default=False, category="cache"),
)

# A training or checkpoint workload (storlab workload's built-ins, DLIO YAML, storlab TOML) to size for
TRAINING_WORKLOAD = command_row(
    "workload", "str", "an AI-training or checkpoint workload, as `storlab workload` takes it: a built-in name "
    "(unet3d_h100, resnet50_h100, llama3_8b, ...), a DLIO workload YAML or a storlab workload TOML. perf: the "
    "accelerators the stack feeds at the workload's AU threshold, and the eval phase apart when the workload "
    "evaluates (a checkpoint: its write and read seconds), STACK may be 'device' for one bare device; recommend: "
    "layouts feeding --accelerators. kvcache_1, kvcache_2, kvcache_3: the KV-cache benchmark's options (storlab "
    "kvcache --option N): perf its read bandwidth, P95s and tokens/s; recommend: layouts reaching --tokens-per-s",
    metavar="NAME|FILE", category="training")
ACCELERATORS = command_row("accelerators", "int", "with --workload: perf predicts AU and pass or fail at this "
                           "many accelerators (a checkpoint: its ranks); recommend keeps the layouts that feed them",
                           minimum=1, maximum=MAX_PLAN_ACCELERATORS, metavar="N", category="training")
TOKENS_PER_S = command_row("tokens_per_s", "float", "with --workload kvcache_N: recommend keeps the layouts "
                           "whose predicted tokens per second (the benchmark's: generated tokens over the requests' "
                           "storage time) reach this", minimum=1e-9, maximum=1e12, metavar="N", category="training")
DATASET_SIZE = command_row(
    "dataset_size", "choice", "with --workload: the steps per epoch the prediction assumes (AU leaves the first "
    "step out, so a short epoch reads higher)", default="rule", category="training",
    choices={"rule": "MLPerf's dataset rule: at least 500 steps per epoch at every accelerator count (the "
                     "dataset grows with them)",
             "as-written": "the workload's dataset as given (the files of a trial run)"})
# one meaning: `storlab workload --search`'s bound
MAX_ACCELERATORS = next(o for o in WORKLOAD_OPTIONS if o.name == "max_accelerators")

COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("plan geometry", "stripe widths, alignment of a request size, capacity, flags", (
        *STACK_OPTIONS, REQUEST,
        command_row("pattern", "str", "offsets: sequential[:start], aligned (random, aligned to the request) or "
                    "random[:alignment]", default="sequential", parse=_pattern, metavar="PATTERN",
                    category="workload"))),
    CommandTable("plan reliability", "MTTDL (Markov, with URE), loss probability per year and period", (
        *STACK_OPTIONS,
        command_row("period", "period", "period for the loss probability, e.g. 5y (a bare number is years; "
                    "default 1y)", parse=_period_h, unit="h", metavar="TIME", category="workload"))),
    CommandTable("plan perf", "predicted bandwidth / IOPS, limiting component and headroom; the curve "
                 "over queue depth, threads and request size", (
        *STACK_OPTIONS,
        CURVE_REQUEST, CURVE_RW, CURVE_QD, CURVE_THREADS,
        command_row("working_set", "size", "bytes the curve's workload touches, against the controller cache "
                    "(--controller-cache or the stack file's [cache]; default: far beyond it)", minimum=512, unit="bytes",
                    metavar="SIZE", category="curve"),
        *CACHE_OPTIONS,
        command_row("mirror_read", "choice", "which copy of a mirror serves reads", category="curve",
                    choices=MIRROR_READ_POLICIES),
        DEVICE_PROFILE,
        command_row("random_request", "size", "random request size", default=4096, minimum=1, unit="bytes",
                    metavar="SIZE", category="workload"),
        command_row("mode", "choice", "how the load is shared (default: lockstep for a striped volume, else "
                    "independent)", category="workload", choices=SHARING_MODES),
        command_row("cap", "caps", "component limit above all drives, host side first (repeatable): NAME=RATE, "
                    "or NAME=READ/WRITE for two rates", default=(), parse=_caps, metavar="NAME=RATE",
                    category="workload"),
        TRAINING_WORKLOAD, ACCELERATORS, DATASET_SIZE, MAX_ACCELERATORS)),
    CommandTable("plan recommend", "enumerate layouts for a drive inventory and show the Pareto set", (
        dataclasses.replace(DRIVES, required=True),
        command_row("bays", "int", "bays per enclosure", default=12, minimum=1, maximum=MAX_DRIVES, metavar="N",
                    category="inventory"),
        command_row("controllers", "int", "RAID controllers", default=1, minimum=1, maximum=MAX_DRIVES,
                    metavar="N", category="inventory"),
        command_row("controller_read", "rate", "read limit of one controller", minimum=1, unit="bytes/s",
                    metavar="RATE", category="inventory"),
        command_row("controller_write", "rate", "write limit of one controller", minimum=1, unit="bytes/s",
                    metavar="RATE", category="inventory"),
        dataclasses.replace(CONTROLLER_IOPS, category="inventory"),
        command_row("levels", "list", "RAID levels to consider, comma-separated (default "
                    + ",".join(map(str, DEFAULT_LEVELS)) + ")", parse=_levels, metavar="LIST", category="inventory"),
        command_row("chunks", "list", "chunk sizes to consider, comma-separated (default 64k,128k,256k,512k,1m)",
                    parse=_chunks, metavar="LIST", category="inventory"),
        command_row("capacity", "size", "need: usable capacity, e.g. 60TB", minimum=1, unit="bytes",
                    metavar="SIZE", category="needs"),
        command_row("seq_read", "rate", "need: sequential read bandwidth", minimum=1, unit="bytes/s",
                    metavar="RATE", category="needs"),
        command_row("seq_write", "rate", "need: sequential write bandwidth", minimum=1, unit="bytes/s",
                    metavar="RATE", category="needs"),
        command_row("read_iops", "count", "need: random read IOPS", minimum=1, metavar="N", category="needs"),
        command_row("write_iops", "count", "need: random write IOPS", minimum=1, metavar="N", category="needs"),
        command_row("min_mttdl", "period", "need: minimum MTTDL, e.g. 1000y (a bare number is years)",
                    parse=_period_h, unit="h", metavar="TIME", category="needs"),
        command_row("max_annual_loss", "probability", "need: maximum probability of loss per year, e.g. 1e-4",
                    parse=_probability, metavar="P", category="needs"),
        REQUEST, MTTR, REBUILD_RATE, *DRIVE_OPTIONS, TRAINING_WORKLOAD, ACCELERATORS, TOKENS_PER_S, DATASET_SIZE,
        JSON)),
    CommandTable("plan profile", "measure a device or file (request size x queue depth, direct I/O) and fit "
                 "the model's figures for it: a device profile for `plan perf --profile` and diagnose", (
        command_row("target", "str", "block device or file to measure (read only unless --allow-destroy names "
                    "it)", positional="1", metavar="TARGET"),
        CURVE_RW, CURVE_REQUEST, CURVE_QD, BY_NAME["time"], BY_NAME["size"], BY_NAME["allow_destroy"],
        OUTPUT, JSON)),
    CommandTable("plan script", "emit mdadm / LVM / mkfs / queue commands that build the stack (dry-run "
                 "text)", (
        *STACK_OPTIONS,
        command_row("devices", "list", "comma-separated devices: drives (md) or controller LUNs", parse=_devices,
                    metavar="LIST", category="script"),
        OUTPUT)),
)
