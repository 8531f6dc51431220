"""How the model's inputs are written, read as values like any option's: the reliability quantities
units.py does not cover (MTBF, AFR, bit error rate, periods in years) and a pattern of request offsets.
They sit with the option tables (jobs/tables/plan.py reads `storlab plan`'s flags with them) and the
model reads its stack files with the same functions (model/quantities.py, model/geometry.py).

Conventions (stated once, used everywhere in the model):
- a year is 8760 hours (365 days), the convention of AFR = 8760 / MTBF and of the published MTTDL
  vectors the tests reproduce;
- a bare MTBF number is hours (drive data sheets quote hours); a bare period number is years;
- AFR and MTBF are related by the exponential model AFR = 1 - exp(-8760 h / MTBF).
"""
from __future__ import annotations

import re

from ..errors import UserError
from ..units import UnitError, finite_value, parse_duration, parse_size

__all__ = [
    "HOURS_PER_YEAR", "SECONDS_PER_HOUR", "SECONDS_PER_YEAR",
    "parse_mtbf_h", "parse_afr", "parse_ber", "parse_period_h", "parse_pattern",
]

HOURS_PER_YEAR = 8760.0
SECONDS_PER_HOUR = 3600.0
SECONDS_PER_YEAR = HOURS_PER_YEAR * SECONDS_PER_HOUR

_NUMBER_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*$")
_YEARS_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(y|yr|yrs|year|years)\s*$", re.IGNORECASE)


def _plain_number(text: str | int | float) -> float | None:
    if isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        return float(text)
    m = _NUMBER_RE.match(str(text))
    return float(m.group(1)) if m else None


def parse_period_h(text: str | int | float, what: str = "period", bare_unit_h: float = HOURS_PER_YEAR) -> float:
    """Parse a period such as '5y', '1.5 years', '44h', '30d' into hours; a bare number is years
    unless `bare_unit_h` says otherwise."""
    number = _plain_number(text)
    if number is not None:
        value_h = number * bare_unit_h
    else:
        m = _YEARS_RE.match(str(text))
        if m:
            value_h = float(m.group(1)) * HOURS_PER_YEAR
        else:
            try:
                value_h = parse_duration(text, what) / SECONDS_PER_HOUR
            except UnitError:
                raise UnitError(f"{what}: cannot read {text!r} as a period; use e.g. 5y, 30d, 44h") from None
    return finite_value(value_h, text, what, "period")


def parse_mtbf_h(text: str | int | float, what: str = "mtbf") -> float:
    """Parse a drive MTBF such as '600000h', '1.2e6', '137y' into hours (a bare number is hours)."""
    value_h = parse_period_h(text, what, bare_unit_h=1.0)
    if value_h <= 0:
        raise UnitError(f"{what}: must be positive, got {text!r}")
    return value_h


def parse_afr(text: str | int | float, what: str = "afr") -> float:
    """Parse an annualised failure rate such as '0.73%' or 0.0073 into a fraction in (0, 1)."""
    s = str(text).strip()
    if s.endswith("%"):
        number = _plain_number(s[:-1])
        value = None if number is None else number / 100.0
    else:
        value = _plain_number(text)
    if value is None:
        raise UnitError(f"{what}: cannot read {text!r} as a failure rate; use e.g. 0.73% or 0.0073")
    if not 0.0 < value < 1.0:
        raise UnitError(f"{what}: must be between 0 and 100 %, got {text!r}")
    return value


def parse_ber(text: str | int | float, what: str = "ber") -> float:
    """Parse an unrecoverable bit error rate per bit read: 1e-15, '10^-15', '1 in 10^15'."""
    s = str(text).strip().lower().replace(" ", "")
    value = _plain_number(s)
    if value is None:
        m = re.match(r"^(?:1in)?10\^(-?[0-9]+)$", s)
        if m:
            exponent = int(m.group(1))
            value = 10.0 ** (exponent if s.startswith("10^") else -abs(exponent))
    if value is None:
        raise UnitError(f"{what}: cannot read {text!r} as a bit error rate; use e.g. 1e-15 or 10^-15")
    if not 0.0 <= value < 1.0:
        raise UnitError(f"{what}: a bit error rate is a probability per bit below 1, got {text!r}")
    return value


# Offsets of requests: where a sequence of requests starts, or what random offsets align to

_PATTERN_RE = re.compile(r"^(sequential|seq|aligned|random)(?::(.+))?$", re.IGNORECASE)


def parse_pattern(text: str) -> tuple[str, int | None]:
    """'sequential[:start]', 'aligned' (random, aligned to the request) or 'random[:alignment]'."""
    m = _PATTERN_RE.match(str(text).strip())
    if not m:
        raise UserError(f"pattern: cannot read {text!r}; use sequential[:start], aligned or random[:alignment]")
    kind = m.group(1).lower()
    kind = "sequential" if kind == "seq" else kind
    argument = m.group(2)
    if kind == "aligned" and argument:
        raise UserError("pattern: aligned takes no argument (it aligns to the request size)")
    value = None if argument is None else parse_size(argument, "pattern")
    if kind == "random" and value == 0:
        raise UserError("pattern: random alignment must be positive")
    return kind, value
