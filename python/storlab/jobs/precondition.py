"""Preconditioning (`precondition_method`): the write phases run before a job so that a flash
device, or a file on one, is measured in steady state and not fresh out of the box. This module is
the method: the option's forms (the option table parses with it), fio's sprandom model and region
plan, and the verdict's line; precondition_job.py builds the phases, and the I/O benchmark
(measure/runner.py) runs them ahead of the job and reports them apart from its phases. Method and
sources: docs/precondition.md.

Every method ends with the same steady-state phase: 4 KiB random writes over the whole range until
the run's steady-state check (`ss`; SNIA's criterion when the run sets none) says flat, or for at
most `precondition_time`. What comes before it:
- `sequential`: SNIA PTS workload-independent preconditioning, the range written twice
  sequentially in 128 KiB requests;
- `sprandom[:OP[:REGIONS]]`: fio's sprandom, the range written once in regions, each followed by
  rewrites of the share of its blocks that steady state leaves invalid for over-provisioning OP.
"""
from __future__ import annotations

import math
import re
from typing import Any, Mapping

__all__ = ["MODES", "FORMS", "SEQUENTIAL_BS", "RANDOM_BS", "DEFAULT_OP", "DEFAULT_REGIONS", "DEFAULT_SS",
           "STEADY_KEYS", "PREFIX", "canonical", "parse", "invalid_shares", "sprandom_plan", "verdict_line"]

MODES = ("off", "sequential", "sprandom")
FORMS = "off, sequential, or sprandom[:OP[:REGIONS]] (OP between 0 and 1 exclusive, REGIONS 1 to 10000)"
SEQUENTIAL_BS = 128 << 10        # SNIA PTS: workload-independent preconditioning in 128 KiB writes
RANDOM_BS = 4 << 10              # SNIA PTS random 4 KiB writes; sprandom's block (fio: bs = the IU)
DEFAULT_OP = 0.15                # fio's spr_op
DEFAULT_REGIONS = 100            # fio's spr_num_regions
MAX_REGIONS = 10_000
# SNIA PTS steady state (a window of 5 rounds of 1 min; the data excursion max - min within 20 % of
# the window's mean) in fio's terms: every sample within 10 % of the mean, 60 s samples, 300 s window.
DEFAULT_SS = {"ss": "iops:10%", "ss_dur": 300.0, "ss_ramp": 0.0, "ss_interval": 60.0}
STEADY_KEYS = ("ss", "ss_dur", "ss_ramp", "ss_interval")
PREFIX = "precondition"          # every preconditioning phase's name starts with it
_FORM = re.compile(r"^(off|sequential|sprandom)(?::([^:]*))?(?::([^:]*))?$")


def parse(text: str, label: str = "precondition_method") -> tuple[str, float, int]:
    """(mode, over-provisioning, regions) of a `precondition_method` value; ValueError naming the
    option and its forms otherwise."""
    m = _FORM.match(str(text).strip().lower())
    bad = ValueError(f"{label}: {text!r} is not allowed; use {FORMS}")
    if not m or (m.group(1) != "sprandom" and m.group(2) is not None):
        raise bad
    mode, op_text, regions_text = m.groups()
    try:
        op = float(op_text) if op_text else DEFAULT_OP
        regions = int(regions_text) if regions_text else DEFAULT_REGIONS
    except ValueError:
        raise bad from None
    if not (0.0 < op < 1.0) or not (1 <= regions <= MAX_REGIONS):
        raise bad
    return mode, op, regions


def canonical(text: str, label: str = "precondition_method") -> str:
    """A `precondition_method` value as the option table keeps it: sprandom with both of its numbers."""
    mode, op, regions = parse(text, label)
    return f"sprandom:{op:g}:{regions}" if mode == "sprandom" else mode


def invalid_shares(op: float, regions: int) -> list[float]:
    """The share of each region's writes that steady state leaves invalid, oldest region first:
    fio's sprandom model (sprandom.c, after Desnoyers, "Analytic Models of SSD Write
    Performance", 2012). Write amplification WA = 0.5 / OP + 0.7; the block greedy garbage
    collection picks is valid 1 - 1/WA; validity levels spaced evenly from 1 down to it occupy
    space in inverse proportion to their validity; resampled to equal-sized regions and reversed."""
    gc_validity = 1.0 - 1.0 / (0.5 / op + 0.7)
    if regions == 1:
        return [0.0]
    validity = [1.0 + (gc_validity - 1.0) * i / (regions - 1) for i in range(regions)]
    space, acc = [], 0.0
    for v in validity:
        acc += 1.0 / v
        space.append(acc)
    resampled = []
    for i in range(regions):
        x = space[0] + (space[-1] - space[0]) * i / (regions - 1)
        j = next((k for k in range(regions - 1) if space[k] <= x <= space[k + 1]), regions - 2)
        f = (x - space[j]) / (space[j + 1] - space[j])
        resampled.append(validity[j] + f * (validity[j + 1] - validity[j]))
    # fio keeps the invalid share in 1/10000ths (PCT_PRECISION)
    return [round((1.0 - v) * 10_000) / 10_000 for v in reversed(resampled)]


def sprandom_plan(range_bytes: int, op: float, regions: int, bs: int = RANDOM_BS) -> list[tuple[int, int, int]]:
    """(first block, blocks, blocks invalidated) of each region of a range, in blocks of `bs`.
    As in fio, the writes total the physical capacity (the range plus OP of it) cut into `regions`
    equal regions; a region's share of invalid writes is rewritten at the start of the next, so the
    next holds that many fewer new blocks. Unlike fio, a region's new blocks are a contiguous run of
    the range (written in a random order) and its invalidated blocks are drawn from those."""
    blocks = range_bytes // bs
    per_region = (blocks + math.ceil(blocks * op)) // regions
    shares = invalid_shares(op, regions)
    plan: list[tuple[int, int, int]] = []
    first, carried = 0, 0
    for k in range(regions):
        new = blocks - first if k == regions - 1 else min(max(per_region - carried, 0), blocks - first)
        invalidated = min(round(shares[k] * per_region), new)
        plan.append((first, new, invalidated))
        first, carried = first + new, invalidated
    return plan


def verdict_line(record: Mapping[str, Any]) -> str:
    """The result's `precondition` in one line: what was written, and whether steady state was
    reached (printed under the run's table, and on stderr as the preconditioning ends)."""
    mib = record["bytes"] / (1 << 20)
    done = f"precondition {record['method']}: {mib:,.1f} MiB written in {record['seconds']:.1f} s"
    ss = record.get("steadystate")
    if ss is None:
        return f"{done}; stopped before its steady-state phase"
    check = f"{ss['ss']} over {ss['duration_s']:g} s"
    if record["reached"]:
        return f"{done}; steady state ({check}) reached after {record['reached_after_s']:.0f} s of {RANDOM_BS >> 10} KiB random writes"
    return f"{done}; steady state ({check}) not reached within the limit ({record['limit_s']:g} s)"
