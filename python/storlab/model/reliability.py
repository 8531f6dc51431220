"""Reliability of a stack: MTTDL per RAID group from an exact Markov chain with unrecoverable read
errors (URE) during the critical rebuild, groups in series, probability of loss over a period.

Model (modelling-and-linux.md §1.2): a group of N drives tolerating m failures; state k = failed
drives; failures at (N - k) lambda, one rebuild at a time at mu = 1 / MTTR; the rebuild in the
critical state (k = m) reads the N - m surviving drives and fails with probability
h = 1 - (1 - BER)^(bits read), which is data loss. RAID 3/4/5: m = 1; RAID 6: m = 2; n-way mirror
(RAID 1): m = n - 1; RAID 10 = stripe of 2-way mirrors (each pair a group); RAID 0: m = 0.
Groups whose loss loses the volume (RAID 50/60 spans, host-striped or concatenated devices) are in
series: 1/MTTDL = sum 1/MTTDL_g. P(loss within t) = 1 - exp(-t / MTTDL).
MTTDL assumes exponential, independent failures and immediate replacement; docs/model.md lists the
limits (field data show far more double failures).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from math import comb

from .markov import birth_death_chain, mean_time_to_absorption
from .notation import RaidNotation
from .quantities import HOURS_PER_YEAR
from .stack import Stack, StackError

__all__ = [
    "ure_probability", "critical_rebuild_bits", "group_mttdl_h", "mttdl_approx_h", "mttdl_raid5_exact_h",
    "mttdl_raid6_exact_h", "mttdl_mirror_pair_exact_h", "series_mttdl_h", "loss_probability",
    "patterson_mttf_raid_h", "erasure_window_loss", "erasure_annual_durability", "GroupReliability",
    "ReliabilityReport", "reliability_of", "reliability_group", "MAX_PERIOD_H",
]


def ure_probability(bits_read: float, ber_per_bit: float) -> float:
    """Probability of at least one unrecoverable read error in `bits_read` bits: 1 - (1 - BER)^bits."""
    if ber_per_bit <= 0 or bits_read <= 0:
        return 0.0
    return -math.expm1(bits_read * math.log1p(-ber_per_bit))


def critical_rebuild_bits(group_drives: int, fault_tolerance: int, capacity_bytes: int) -> float:
    """Bits read by a rebuild in the critical state: every surviving drive, (N - m) x C x 8
    (RAID 5: N - 1 drives; RAID 6 with two failed: N - 2; a mirror: the one remaining copy)."""
    return (group_drives - fault_tolerance) * capacity_bytes * 8.0


def group_mttdl_h(group_drives: int, fault_tolerance: int, mtbf_h: float, mttr_h: float,
                  critical_ure_probability: float = 0.0) -> float:
    """MTTDL of one group in hours, solved from the Markov chain (exact)."""
    if fault_tolerance == 0:
        return mtbf_h / group_drives
    h_by_state = [0.0] * fault_tolerance + [critical_ure_probability]
    rates, absorb = birth_death_chain(group_drives, fault_tolerance, 1.0 / mtbf_h, 1.0 / mttr_h, h_by_state)
    return mean_time_to_absorption(rates, absorb)[0]


# --- closed forms (used as tests of the chain and shown as "approx" in reports) ------------------

def mttdl_approx_h(group_drives: int, fault_tolerance: int, mtbf_h: float, mttr_h: float, h: float = 0.0) -> float:
    """lambda << mu approximation: mu^m / (N (N-1) ... (N-m+1) lambda^m ((N-m) lambda + mu h));
    with h = 0 this is MTTF^(m+1) / (N (N-1) ... (N-m) MTTR^m)."""
    lam, mu, n, m = 1.0 / mtbf_h, 1.0 / mttr_h, group_drives, fault_tolerance
    # In logarithms: lam**m underflows to 0 for wide mirrors (R1/64: (1/600000 h)^63), which
    # divided by zero; the quotient itself is finite or, past float range, infinite.
    log_falling = sum(math.log(n - i) for i in range(m))
    log_mttdl = m * (math.log(mu) - math.log(lam)) - log_falling - math.log((n - m) * lam + mu * h)
    return math.exp(log_mttdl) if log_mttdl < 709.0 else math.inf


def mttdl_raid5_exact_h(n: int, mtbf_h: float, mttr_h: float, h: float = 0.0) -> float:
    """(mu + (2N - 1) lambda) / (N lambda ((N - 1) lambda + mu h))."""
    lam, mu = 1.0 / mtbf_h, 1.0 / mttr_h
    return (mu + (2 * n - 1) * lam) / (n * lam * ((n - 1) * lam + mu * h))


def mttdl_raid6_exact_h(n: int, mtbf_h: float, mttr_h: float, h2: float = 0.0) -> float:
    """1/(N l) + (1 + mu/(N l))/((N-1) l) + [1 + mu (1-h2)(1 + mu/(N l))/((N-1) l)] / ((N-2) l + mu h2)."""
    lam, mu = 1.0 / mtbf_h, 1.0 / mttr_h
    a = 1 + mu / (n * lam)
    return 1 / (n * lam) + a / ((n - 1) * lam) + (1 + mu * (1 - h2) * a / ((n - 1) * lam)) / ((n - 2) * lam + mu * h2)


def mttdl_mirror_pair_exact_h(mtbf_h: float, mttr_h: float, h: float = 0.0) -> float:
    """(3 lambda + mu) / (2 lambda (lambda + mu h))."""
    lam, mu = 1.0 / mtbf_h, 1.0 / mttr_h
    return (3 * lam + mu) / (2 * lam * (lam + mu * h))


def patterson_mttf_raid_h(data_disks: int, group_data_disks: int, check_disks: int, mtbf_h: float, mttr_h: float) -> float:
    """Patterson, Gibson, Katz 1988: MTTF_disk^2 / ((D + C n_G) (G + C - 1) MTTR)."""
    groups = data_disks / group_data_disks
    return mtbf_h**2 / ((data_disks + check_disks * groups) * (group_data_disks + check_disks - 1) * mttr_h)


def series_mttdl_h(group_mttdls_h: list[float]) -> float:
    """Groups in series (any loss loses the volume): 1 / MTTDL = sum 1 / MTTDL_g."""
    return 1.0 / sum(1.0 / t for t in group_mttdls_h)


def loss_probability(period_h: float, mttdl_h: float) -> float:
    """P(data loss within the period) = 1 - exp(-t / MTTDL)."""
    return -math.expm1(-period_h / mttdl_h)


def erasure_window_loss(data_shards: int, parity_shards: int, annual_failure_rate: float, repair_days: float) -> float:
    """Backblaze's model: loss in one repair window = sum_{k=P+1}^{S} C(S,k) p^k (1-p)^(S-k),
    p = 1 - exp(-A R / 365). A per-period second opinion, not a Markov MTTDL."""
    shards = data_shards + parity_shards
    p = -math.expm1(-annual_failure_rate * repair_days / 365.0)
    return sum(comb(shards, k) * p**k * (1 - p) ** (shards - k) for k in range(parity_shards + 1, shards + 1))


def erasure_annual_durability(data_shards: int, parity_shards: int, annual_failure_rate: float, repair_days: float) -> float:
    return (1 - erasure_window_loss(data_shards, parity_shards, annual_failure_rate, repair_days)) ** (365.0 / repair_days)


# --- a stack -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GroupReliability:
    """One reliability group (a parity span, an n-way mirror, or one pair of a RAID 10)."""
    drives: int
    fault_tolerance: int
    critical_rebuild_bits: float
    critical_ure_probability: float
    mttdl_h: float              # exact chain, with URE
    mttdl_no_ure_h: float       # exact chain, URE ignored
    mttdl_approx_h: float       # closed-form approximation, with URE


def reliability_group(layout: RaidNotation, capacity_bytes: int, mtbf_h: float, mttr_h: float,
                      ber_per_bit: float) -> tuple[GroupReliability, int]:
    """The reliability group of one span and how many such groups one span holds."""
    if layout.level.number == 10:
        drives, groups_per_span = 2, layout.span // 2
    else:
        drives, groups_per_span = layout.span, 1
    m = layout.fault_tolerance_per_group
    bits = critical_rebuild_bits(drives, m, capacity_bytes) if m > 0 else 0.0
    h = ure_probability(bits, ber_per_bit)
    exact = group_mttdl_h(drives, m, mtbf_h, mttr_h, h)
    no_ure = group_mttdl_h(drives, m, mtbf_h, mttr_h, 0.0)
    approx = mttdl_approx_h(drives, m, mtbf_h, mttr_h, h) if m > 0 else mtbf_h / drives
    return GroupReliability(drives, m, bits, h, exact, no_ure, approx), groups_per_span


@dataclass(frozen=True)
class ReliabilityReport:
    stack_name: str
    layout: str
    mtbf_h: float
    mttr_h: float
    ber_per_bit: float
    group: GroupReliability
    groups_in_series: int
    mttdl_h: float
    mttdl_no_ure_h: float
    annual_loss_probability: float
    period_h: float
    period_loss_probability: float
    bytes_at_risk_per_loss: int       # striped volume: all of it; separate/concatenated: one device
    expected_bytes_lost_per_year: float

    @property
    def mttdl_years(self) -> float:
        return self.mttdl_h / HOURS_PER_YEAR


# The longest period a loss probability is asked for: beyond any service life, and beyond it the
# exponential model says nothing a reader can use.
MAX_PERIOD_H = 10_000 * HOURS_PER_YEAR


def reliability_of(stack: Stack, period_h: float = HOURS_PER_YEAR) -> ReliabilityReport:
    if not 0 <= period_h <= MAX_PERIOD_H:
        raise StackError(f"period {period_h / HOURS_PER_YEAR:g} years is out of range; allowed: 0 to "
                         f"{MAX_PERIOD_H / HOURS_PER_YEAR:,.0f} years")
    drive, raid = stack.drive, stack.raid
    mttr_h = stack.mttr_h
    group, per_span = reliability_group(raid.layout, drive.capacity_bytes, drive.mtbf_h, mttr_h, drive.ber_per_bit)
    in_series = raid.groups * per_span
    mttdl = group.mttdl_h / in_series          # identical groups in series
    usable = raid.groups * raid.layout.data_drives_per_span * drive.capacity_bytes
    striped = stack.volume.aggregate == "stripe"
    at_risk = usable if striped else usable // raid.devices
    return ReliabilityReport(
        stack_name=stack.name, layout=raid.layout.text, mtbf_h=drive.mtbf_h, mttr_h=mttr_h,
        ber_per_bit=drive.ber_per_bit, group=group, groups_in_series=in_series, mttdl_h=mttdl,
        mttdl_no_ure_h=group.mttdl_no_ure_h / in_series,
        annual_loss_probability=loss_probability(HOURS_PER_YEAR, mttdl), period_h=period_h,
        period_loss_probability=loss_probability(period_h, mttdl), bytes_at_risk_per_loss=at_risk,
        expected_bytes_lost_per_year=HOURS_PER_YEAR / mttdl * at_risk,
    )
