"""Parsing and formatting of sizes, durations and rates.

Sizes: a bare number is bytes; single-letter suffixes (k, m, g, t, p) are binary (fio's
convention: 4k = 4096); explicit units say what they mean (4KiB = 4096, 1MB = 10^6, 1MiB = 2^20).
Durations: a bare number is seconds; ns, us, ms, s, m, h, d suffixes.
Every parse error is a UnitError naming the bad text and the accepted forms. NaN, infinities and
sizes beyond MAX_BYTES are refused here, so no caller sees them.
"""
from __future__ import annotations

import math
import re
from fractions import Fraction

from .errors import UserError

__all__ = [
    "UnitError", "parse_size", "parse_duration", "parse_rate", "parse_count",
    "format_size", "format_rate", "format_duration", "format_si_bytes", "MAX_BYTES", "MAX_DURATION_S",
    "MAX_COUNT", "finite_value",
]

# The largest byte count any size may name (1 EiB) and the longest duration any timing option may
# have (10 years); the engine refuses the same (storlab._core.MAX_BYTES / MAX_DURATION_S, kept
# equal by tests/test_units.py), so no value converts into an overflow or a panic there.
MAX_BYTES = 1 << 60
MAX_DURATION_S = 315_360_000.0
# The largest plain count (IOPS, files ...) parse_count accepts.
MAX_COUNT = 10**15


class UnitError(UserError):
    """A size, duration or rate that cannot be parsed."""


_SIZE_UNITS = {
    "": 1, "b": 1,
    # single letters are binary, as in fio and dd
    "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15,
}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")
SIZE_FORMS = "a byte count or a number with k, m, g, t (binary), KiB/MiB/GiB/TiB or KB/MB/GB/TB"


def parse_size(text: str | int, what: str = "size") -> int:
    """Parse a size such as '4k', '1m', '1.5GiB', '4096' into bytes."""
    if isinstance(text, bool):
        raise UnitError(f"{what}: expected a size, got {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise UnitError(f"{what}: size must not be negative, got {text}")
        return _size_in_range(text, text, what)
    if isinstance(text, float):
        text = repr(text)
    if not isinstance(text, str):
        raise UnitError(f"{what}: expected a size, got {text!r}")
    m = _SIZE_RE.match(text)
    if not m:
        raise UnitError(f"{what}: cannot read {text!r} as a size; use {SIZE_FORMS}")
    number, unit = m.group(1), m.group(2)
    key = unit.lower()
    # "B" alone and "k"/"K" both fine; "Kb" is read as KB (bytes), bits are not sizes here.
    if key not in _SIZE_UNITS:
        raise UnitError(f"{what}: unknown size unit {unit!r} in {text!r}; use {SIZE_FORMS}")
    # A float first, only to refuse huge values cheaply (Fraction("1e999999999") would build a
    # billion-digit integer); then exact arithmetic, so 2^53 + 1 bytes stays 2^53 + 1.
    if not float(number) * _SIZE_UNITS[key] <= MAX_BYTES:
        return _size_in_range(MAX_BYTES + 1, text, what)
    value = Fraction(number) * _SIZE_UNITS[key]
    if value.denominator != 1:
        raise UnitError(f"{what}: {text!r} is not a whole number of bytes")
    return _size_in_range(int(value), text, what)


def _size_in_range(value: int, shown: object, what: str) -> int:
    if value > MAX_BYTES:
        raise UnitError(f"{what}: {shown!r} is too large; allowed: up to {MAX_BYTES} bytes (1 EiB)")
    return value


_DURATION_UNITS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "": 1.0, "s": 1.0, "sec": 1.0,
    "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0,
}
_DURATION_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zµ]*)\s*$", re.IGNORECASE)
DURATION_FORMS = "a number of seconds or a number with ns, us, ms, s, m, h or d (e.g. 500ms, 10s, 2m)"


def parse_duration(text: str | int | float, what: str = "duration") -> float:
    """Parse a duration such as '500ms', '10s', '2m', '1.5' into seconds."""
    if isinstance(text, bool):
        raise UnitError(f"{what}: expected a duration, got {text!r}")
    if isinstance(text, (int, float)):
        return finite_value(float(text), text, what, "duration")
    if not isinstance(text, str):
        raise UnitError(f"{what}: expected a duration, got {text!r}")
    m = _DURATION_RE.match(text)
    if not m:
        raise UnitError(f"{what}: cannot read {text!r} as a duration; use {DURATION_FORMS}")
    unit = m.group(2).lower()
    if unit not in _DURATION_UNITS:
        raise UnitError(f"{what}: unknown duration unit {m.group(2)!r} in {text!r}; use {DURATION_FORMS}")
    return finite_value(float(m.group(1)) * _DURATION_UNITS[unit], text, what, "duration")


def finite_value(value: float, shown: object, what: str, kind: str) -> float:
    """A parsed number that is neither NaN nor infinite nor negative (a 400-digit number parses to inf)."""
    if not math.isfinite(value):
        raise UnitError(f"{what}: {shown!r} is not a finite {kind}")
    if value < 0:
        raise UnitError(f"{what}: {kind} must not be negative, got {shown!r}")
    return value


def parse_rate(text: str | int | float, what: str = "rate") -> float:
    """Parse a bandwidth such as '50MB/s', '1.2GiB/s' or '500m' into bytes per second."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return finite_value(float(text), text, what, "rate")
    if not isinstance(text, str):
        raise UnitError(f"{what}: expected a rate such as 50MB/s, got {text!r}")
    s = text.strip()
    for suffix in ("/s", "ps"):
        if s.lower().endswith(suffix):
            s = s[: -len(suffix)]
            break
    return float(parse_size(s, what))


def parse_count(text: str | int, what: str = "count") -> int:
    """Parse a non-negative integer, accepting k/m suffixes as decimal thousands/millions."""
    if isinstance(text, bool):
        raise UnitError(f"{what}: expected a whole number, got {text!r}")
    if isinstance(text, int):
        value = text
    else:
        m = re.match(r"^\s*([0-9]{1,20})\s*([kKmM]?)\s*$", str(text))
        if not m:
            raise UnitError(f"{what}: cannot read {text!r} as a whole number")
        value = int(m.group(1)) * {"": 1, "k": 1000, "m": 1000000}[m.group(2).lower()]
    if not 0 <= value <= MAX_COUNT:
        raise UnitError(f"{what}: {text!r} is out of range; allowed: 0 to {MAX_COUNT}")
    return value


def format_size(n: float) -> str:
    """Binary size for humans: 4096 -> '4 KiB', 1536 -> '1.5 KiB'."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if n == int(n) else f"{n:.3g} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def format_si_bytes(n: float) -> str:
    """Decimal size for humans: 1.5e9 -> '1.50 GB'."""
    n = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def format_rate(bytes_per_s: float) -> str:
    """Bandwidth in binary units per second: '1.23 GiB/s'."""
    n = float(bytes_per_s)
    for unit in ("B/s", "KiB/s", "MiB/s", "GiB/s", "TiB/s"):
        if abs(n) < 1024 or unit == "TiB/s":
            return f"{n:.0f} {unit}" if unit == "B/s" else f"{n:.2f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def format_duration(seconds: float) -> str:
    """Duration for humans, choosing ns/us/ms/s."""
    s = float(seconds)
    if s < 1e-6:
        return f"{s * 1e9:.0f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"
