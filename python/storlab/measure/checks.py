"""Typed, actionable warnings about a measured phase: results that are not what they seem.

Each warning has a stable code (for filtering and tests) and a message that says what to do.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..document import DIRECTIONS
from ..units import format_size
from .cache import likely_cached, started_cold, through_page_cache


@dataclass(frozen=True)
class Finding:
    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


MIN_RELIABLE_SECONDS = 1.0


def check_phase(phase, result: dict[str, Any], env: dict[str, Any],
                settings: dict[str, Any] | None = None) -> list[Finding]:
    """Warnings for one phase, from its definition, its result, the host and the run settings."""
    settings = settings or {}
    out: list[Finding] = []
    ram = env.get("memory_bytes") or 0
    sizes = {t["path"]: t.get("size_bytes", 0) for t in result.get("targets", [])}
    # Groups on /dev/null, /dev/zero or /dev/full: no storage and no page cache behind them.
    memory = {t["path"] for t in result.get("targets", []) if t.get("type") == "char"}
    on_memory = [g for g in phase.groups if g.values["target"] and set(g.values["target"]) <= memory]
    read_bytes = (result.get("read") or {}).get("bytes", 0)
    phase_span = 0
    for g in phase.groups:
        v = g.values
        phase_span += sum(v["size"] or sizes.get(path, 0) for path in v["target"])
    # Cold cache (invalidated or dropped) and no byte read twice: nothing came from memory, and
    # a fast buffered read is the device plus readahead, not the page cache.
    cold_single_pass = started_cold(result, phase_span) and read_bytes <= phase_span
    for g in phase.groups:
        v = g.values
        reads = v["rw"] in ("read", "randread") or (v["rw"] in ("rw", "randrw") and v["rwmix_read"] > 0)
        if reads and not v["direct"] and through_page_cache(v) and ram and g not in on_memory:
            span = sum(v["size"] or sizes.get(path, 0) for path in v["target"])
            if cold_single_pass:
                continue
            if 0 < span < ram:
                out.append(Finding(
                    "small_buffered_read",
                    f"{g.name or phase.name}: buffered reads over {format_size(span)}, less than RAM "
                    f"({format_size(ram)}): reads may come from the page cache; use --direct or a "
                    f"size larger than RAM"))
    read = result.get("read")
    buffered_readers = [g for g in phase.groups if not g.values["direct"] and through_page_cache(g.values)
                        and g not in on_memory]
    if read and read.get("ops") and buffered_readers and not cold_single_pass:
        threads = sum(g.values["threads"] * len(g.values["target"]) for g in buffered_readers)
        why = likely_cached(read["bw_bytes"], threads, settings.get("bw_ceiling"), read["lat_ns"]["p50"])
        if why:
            out.append(Finding("likely_cached",
                               f"{phase.name}: reads likely served from cache: {why}; use --direct, "
                               f"--cache out, or a working set larger than RAM"))
    if result.get("complete") and result.get("seconds", 0) < MIN_RELIABLE_SECONDS:
        did_io = any(result.get(d, {}).get("ops") for d in DIRECTIONS)
        if did_io:
            out.append(Finding(
                "short_run",
                f"{phase.name}: measured for only {result['seconds']:.3f} s; results this short are "
                f"noisy: use --time 10s or a larger --size"))
        else:
            out.append(Finding(
                "nothing_measured",
                f"{phase.name}: no I/O completed after the ramp; shorten --ramp or run longer"))
    out += _memory_device_findings(phase.name, result.get("targets", []), on_memory)
    refused = [f for f in result.get("engine", {}).get("setup_flags", []) if "REFUSED" in f]
    for f in refused:
        out.append(Finding("uring_option_refused", f"{phase.name}: io_uring refused {f.split('_REFUSED')[0]}; "
                                                  "the run used the plain path instead"))
    return out


def _memory_device_findings(name: str, targets: list[dict[str, Any]], on_memory: list) -> list[Finding]:
    """A phase on the kernel's memory devices measures storlab itself, not storage; the fsyncs
    asked for there were skipped (a character device has nothing to flush)."""
    out = []
    if on_memory:
        paths = ", ".join(sorted({p for g in on_memory for p in g.values["target"]}))
        out.append(Finding("memory_device_target",
                           f"{name}: the target {paths} is a memory device: no storage is involved, "
                           f"the figures are the cost of storlab and the kernel's system calls"))
    skipped = sorted({t["path"] for t in targets if t.get("fsync_skipped")})
    if skipped:
        out.append(Finding("fsync_skipped",
                           f"{name}: fsync skipped on {', '.join(skipped)}: a character device has "
                           f"nothing to flush (fsync there fails with EINVAL, which fails fio's job)"))
    return out
