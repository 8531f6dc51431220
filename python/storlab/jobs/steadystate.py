"""The rules of the steady-state options (fio's steadystate): the forms of `ss`, parsed and checked
where the option table can use it, and what a phase's ss, ss_dur, ss_ramp and ss_interval must
hold together; measure/steady.py applies them while a phase runs.

`ss` is METRIC:LIMIT. METRIC: iops, bw (bytes/s) or lat (mean completion latency), judged by their
largest deviation from the window's mean, or iops_slope, bw_slope, lat_slope by their least-squares
slope. LIMIT: a percentage of the window's mean (`0.3%`), or in the metric's units: IOPS, bytes/s
(`bw:10m` as fio reads sizes), a duration for lat (`lat:500us`; a bare number is microseconds, as
fio parses it).

These are per phase: the run's values (top of a job file, command-line flags) are the default of
every phase, and a `[[phase]]` may set its own (a fio stonewall group its jobs' values).
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from ..units import UnitError, parse_duration, parse_size

METRICS = ("iops", "iops_slope", "bw", "bw_slope", "lat", "lat_slope")
FORMS = ("iops:L, bw:L, lat:L or the same with _slope (iops_slope:L ...), L a percentage of the "
         "mean (0.3%) or in the metric's units (IOPS, bytes/s, a latency such as 500us)")
KEYS = ("ss", "ss_dur", "ss_ramp", "ss_interval")   # the options of one steady-state check
_SPEC = re.compile(r"^(iops|bw|lat)(_slope)?:\s*(\S+?)\s*(%?)$")
_NUMBER = re.compile(r"^[0-9]*\.?[0-9]+(?:e[-+]?\d+)?$")


def parse(text: str) -> tuple[str, float, bool]:
    """(metric, limit, limit is a percentage of the mean) of an `ss` value; the limit in the
    metric's units (IOPS, bytes/s, nanoseconds for lat) unless a percentage. ValueError naming
    the option and its forms otherwise."""
    m = _SPEC.match(text.strip().lower())
    if not m:
        raise ValueError(f"ss: {text!r} is not allowed; use {FORMS}")
    base, slope, raw, pct = m.group(1), m.group(2) or "", m.group(3), bool(m.group(4))
    try:
        number = bool(_NUMBER.match(raw))
        if base == "lat" and not pct:   # a duration, a bare number in microseconds (fio's check_str_time)
            limit = parse_duration(raw + "us" if number else raw, "ss") * 1e9
        elif number:
            limit = float(raw)
        elif base == "bw" and not pct:  # bytes/s, with fio's size suffixes
            limit = float(parse_size(raw, "ss"))
        else:
            raise ValueError
    except (ValueError, UnitError):
        raise ValueError(f"ss: {text!r} is not allowed; use {FORMS}") from None
    if limit <= 0:
        raise ValueError(f"ss: the limit of {text!r} must be above 0")
    return base + slope, limit, pct


def canonical(text: str, label: str = "ss") -> str:
    """An `ss` value as the option table keeps it: metric:limit[%], an absolute latency limit in
    microseconds (lat:500us)."""
    try:
        metric, limit, pct = parse(text)
    except ValueError as e:
        raise ValueError(str(e).replace("ss:", f"{label}:", 1)) from None
    if pct:
        return f"{metric}:{limit:.12g}%"
    if metric.startswith("lat"):
        return f"{metric}:{limit / 1000:.12g}us"
    return f"{metric}:{limit:.12g}"


def check(settings: Mapping[str, Any]) -> str | None:
    """Why a phase's steady-state options cannot be applied together, as `OPTION: REASON`; None
    when they can (or no `ss` is set)."""
    if not settings.get("ss"):
        return None
    duration, interval = float(settings.get("ss_dur") or 0.0), float(settings.get("ss_interval") or 1.0)
    if not duration:
        return ("ss_dur: steady state (ss) is judged over a window; give its length (ss_dur, e.g. 60s; "
                "fio's default 0 turns the check off)")
    if duration < 2 * interval - 1e-9:
        return (f"ss_dur: {duration:g} s holds fewer than 2 samples of ss_interval {interval:g} s; "
                f"allowed: at least 2 x ss_interval")
    return None
