"""The reliability quantities of the model: MTBF, AFR, bit error rate, periods in years (their written
forms are read by jobs/model_values.py, beside the option tables, which states the conventions: a
year is 8760 hours, AFR = 1 - exp(-8760 h / MTBF)).
"""
from __future__ import annotations

import math

from ..jobs.model_values import (
    HOURS_PER_YEAR,
    SECONDS_PER_HOUR,
    SECONDS_PER_YEAR,
    parse_afr,
    parse_ber,
    parse_mtbf_h,
    parse_period_h,
)

__all__ = [
    "HOURS_PER_YEAR", "SECONDS_PER_HOUR", "SECONDS_PER_YEAR",
    "parse_mtbf_h", "parse_afr", "parse_ber", "parse_period_h", "mtbf_h_from_afr", "afr_from_mtbf_h",
]


def mtbf_h_from_afr(afr: float) -> float:
    """MTBF in hours for an annualised failure rate, exponential model: AFR = 1 - exp(-8760/MTBF)."""
    return -HOURS_PER_YEAR / math.log1p(-afr)


def afr_from_mtbf_h(mtbf_h: float) -> float:
    return -math.expm1(-HOURS_PER_YEAR / mtbf_h)
