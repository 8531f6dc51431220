"""The rule of the `ss` option (fio's steadystate): its forms, parsed and checked where the option
table can use it; measure/steady.py applies it while a phase runs."""
from __future__ import annotations

import re

METRICS = ("iops", "iops_slope", "bw", "bw_slope")
FORMS = "iops:L, iops_slope:L, bw:L or bw_slope:L, L a number or a percentage of the mean (0.3%)"
_SPEC = re.compile(r"^(iops|iops_slope|bw|bw_slope):\s*([0-9]*\.?[0-9]+(?:e[-+]?\d+)?)\s*(%?)$")


def parse(text: str) -> tuple[str, float, bool]:
    """(metric, limit, limit is a percentage of the mean) of an `ss` value; ValueError naming
    the option and its forms otherwise."""
    m = _SPEC.match(text.strip().lower())
    if not m:
        raise ValueError(f"ss: {text!r} is not allowed; use {FORMS}")
    limit = float(m.group(2))
    if limit <= 0:
        raise ValueError(f"ss: the limit of {text!r} must be above 0")
    return m.group(1), limit, bool(m.group(3))


def canonical(text: str, label: str = "ss") -> str:
    """An `ss` value as the option table keeps it: metric:limit[%]."""
    try:
        metric, limit, pct = parse(text)
    except ValueError as e:
        raise ValueError(str(e).replace("ss:", f"{label}:", 1)) from None
    return f"{metric}:{limit:g}{'%' if pct else ''}"
