"""Reliability: the Markov chain against its closed forms and the published vectors of
modelling-and-linux.md §1.1, §1.2, §1.5 and §1.8 (N = 8, C = 16 TB, MTTF 1.2e6 h, 100 MB/s, BER 1e-15)."""
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storlab.model.markov import birth_death_chain, mean_time_to_absorption, solve_linear
from storlab.model.quantities import HOURS_PER_YEAR
from storlab.model.reliability import (
    erasure_annual_durability,
    erasure_window_loss,
    group_mttdl_h,
    loss_probability,
    mttdl_approx_h,
    mttdl_mirror_pair_exact_h,
    mttdl_raid5_exact_h,
    mttdl_raid6_exact_h,
    patterson_mttf_raid_h,
    reliability_of,
    series_mttdl_h,
    ure_probability,
)
from storlab.model.stack import DriveType, stack_from_notation

TB = 10**12
C = 16 * TB
MTBF_H = 1.2e6
MTTR_H = 16e12 / 100e6 / 3600          # 44.44 h: capacity / rebuild rate
YEAR = HOURS_PER_YEAR


def test_solve_linear_exact():
    # 2x + y = 5, x + 3y = 10  ->  x = 1, y = 3
    assert solve_linear([[Fraction(2), Fraction(1)], [Fraction(1), Fraction(3)]], [5, 10]) == [1, 3]


def test_two_state_chain_by_hand():
    # 0 -> 1 at rate 1, 1 -> 0 at rate 2, 1 -> absorbed at rate 3:
    # T1 = (1 + 2 T0) / 5, T0 = 1 + T1  ->  T0 = 2, T1 = 1
    assert mean_time_to_absorption([[0, 1], [2, 0]], [0, 3]) == [2.0, 1.0]


def test_ure_probability_superuser_vectors():
    # Reading 6 TB at BER 1e-14 -> 38 %, at 1e-15 -> 4.7 %; 3 TB at 1e-14 -> 21 %.
    assert ure_probability(6e12 * 8, 1e-14) == pytest.approx(0.3812, abs=5e-5)
    assert ure_probability(6e12 * 8, 1e-15) == pytest.approx(0.0469, abs=5e-5)
    assert ure_probability(3e12 * 8, 1e-14) == pytest.approx(0.2134, abs=5e-5)


def test_worked_example_ure_probabilities():
    assert ure_probability(7 * C * 8, 1e-15) == pytest.approx(0.59180, abs=5e-6)
    assert ure_probability(6 * C * 8, 1e-15) == pytest.approx(0.53606, abs=5e-6)


@pytest.mark.parametrize("m, h, approx_years, exact_years", [
    (1, 0.0, 66_047, 66_084),
    (1, 0.59180, 28.92, 28.94),
    (2, 0.0, 2.972e8, 2.974e8),
    (2, 0.53606, 123_157, 123_238),
])
def test_worked_example_mttdl(m, h, approx_years, exact_years):
    h = ure_probability((8 - m) * C * 8, 1e-15) if h else 0.0
    assert group_mttdl_h(8, m, MTBF_H, MTTR_H, h) / YEAR == pytest.approx(exact_years, rel=5e-4)
    assert mttdl_approx_h(8, m, MTBF_H, MTTR_H, h) / YEAR == pytest.approx(approx_years, rel=5e-4)


def _drive_16tb() -> DriveType:
    return DriveType("16TB", capacity_bytes=C, mtbf_h=MTBF_H, ber_per_bit=1e-15)


def test_worked_example_raid50_and_raid60_stacks():
    # RAID 50 = 3 x (RAID 5, N = 8): MTTDL 9.65 y; P(loss in 1 y) = 9.85 %; in 5 y = 40.5 %.
    r50 = reliability_of(stack_from_notation("R50/8/24", drive=_drive_16tb(), rebuild_rate_bytes=100e6),
                         period_h=5 * YEAR)
    assert r50.groups_in_series == 3
    assert r50.mttdl_years == pytest.approx(9.65, abs=0.005)
    assert r50.annual_loss_probability == pytest.approx(0.0985, abs=5e-5)
    assert r50.period_loss_probability == pytest.approx(0.405, abs=5e-4)
    # RAID 60 = 3 x (RAID 6, N = 8): MTTDL 41,079 y; P(loss in 1 y) = 2.43e-5.
    r60 = reliability_of(stack_from_notation("R60/8/24", drive=_drive_16tb(), rebuild_rate_bytes=100e6))
    assert r60.mttdl_years == pytest.approx(41_079, rel=2e-5)
    assert r60.annual_loss_probability == pytest.approx(2.43e-5, rel=2e-3)


def test_host_striped_groups_are_in_series_like_raid50():
    # Three R5/8 devices striped by LVM lose data like one RAID 50 of three spans.
    striped = reliability_of(stack_from_notation("R5/8", drive=_drive_16tb(), count=3, rebuild_rate_bytes=100e6))
    assert striped.mttdl_years == pytest.approx(9.65, abs=0.005)
    assert striped.bytes_at_risk_per_loss == 3 * 7 * C
    separate = reliability_of(stack_from_notation("R5/8", drive=_drive_16tb(), count=3, aggregate="none",
                                                  rebuild_rate_bytes=100e6))
    assert separate.mttdl_h == pytest.approx(striped.mttdl_h)
    assert separate.bytes_at_risk_per_loss == 7 * C      # one device's worth per loss event


def test_patterson_raid5_table():
    # D = 100 data disks, C = 1, MTTF 30,000 h, MTTR 1 h: G = 10 -> "820,000 hrs", G = 25 -> "346,000 hrs".
    assert patterson_mttf_raid_h(100, 10, 1, 30_000, 1) == pytest.approx(818_182, abs=1)
    assert patterson_mttf_raid_h(100, 25, 1, 30_000, 1) == pytest.approx(346_154, abs=1)
    # The exact chain agrees with the paper's approximation to within lambda/mu terms (0.1 %).
    for group_data, groups, reported in ((10, 10, 820_000), (25, 4, 346_000)):
        chain = series_mttdl_h([group_mttdl_h(group_data + 1, 1, 30_000, 1)] * groups)
        assert chain == pytest.approx(reported, rel=5e-3)


def test_backblaze_erasure_vector():
    # D = 4, P = 2, A = 0.10, R = 1 day -> 4.109e-10 per window; annual durability 0.999999850032187.
    assert erasure_window_loss(4, 2, 0.10, 1) == pytest.approx(4.109e-10, rel=1e-3)
    assert erasure_annual_durability(4, 2, 0.10, 1) == pytest.approx(0.999999850032187, abs=1e-13)


def test_raid10_is_pairs_in_series_and_raid0_has_no_redundancy():
    drive = DriveType("2TB", capacity_bytes=2 * TB, mtbf_h=600_000, ber_per_bit=1e-15)
    r10 = reliability_of(stack_from_notation("R10/8", drive=drive, mttr_h=24))
    h = ure_probability(2 * TB * 8, 1e-15)                    # the partner is read: C x 8 bits
    assert r10.groups_in_series == 4
    assert r10.mttdl_h == pytest.approx(mttdl_mirror_pair_exact_h(600_000, 24, h) / 4, rel=1e-12)
    r0 = reliability_of(stack_from_notation("R0/8", drive=drive, mttr_h=24))
    assert r0.mttdl_h == pytest.approx(600_000 / 8)


def test_three_way_mirror_tolerates_two():
    # N = 3, m = 2, h = 0: approx MTTF^3 / (3 * 2 * 1 * MTTR^2)
    assert mttdl_approx_h(3, 2, 1e5, 10) == pytest.approx(1e15 / (6 * 100))
    assert group_mttdl_h(3, 2, 1e5, 10) == pytest.approx(1e15 / 600, rel=2e-3)


def test_loss_probability_period():
    assert loss_probability(YEAR, YEAR) == pytest.approx(1 - 2.718281828459045 ** -1)


# --- the chain against its closed forms over a range of inputs -----------------------------------

params = dict(n=st.integers(3, 24), mtbf=st.floats(1e4, 5e6), mttr=st.floats(1, 500),
              h=st.floats(0, 0.99))


@settings(max_examples=80, deadline=None)
@given(**params)
def test_chain_matches_raid5_closed_form(n, mtbf, mttr, h):
    assert group_mttdl_h(n, 1, mtbf, mttr, h) == pytest.approx(mttdl_raid5_exact_h(n, mtbf, mttr, h), rel=1e-9)


@settings(max_examples=80, deadline=None)
@given(**params)
def test_chain_matches_raid6_closed_form(n, mtbf, mttr, h):
    n = max(n, 4)
    assert group_mttdl_h(n, 2, mtbf, mttr, h) == pytest.approx(mttdl_raid6_exact_h(n, mtbf, mttr, h), rel=1e-9)


@settings(max_examples=50, deadline=None)
@given(mtbf=st.floats(1e4, 5e6), mttr=st.floats(1, 500), h=st.floats(0, 0.99))
def test_chain_matches_mirror_closed_form(mtbf, mttr, h):
    assert group_mttdl_h(2, 1, mtbf, mttr, h) == pytest.approx(mttdl_mirror_pair_exact_h(mtbf, mttr, h), rel=1e-9)


@settings(max_examples=50, deadline=None)
@given(n=st.integers(4, 16), m=st.integers(1, 3), mtbf=st.floats(1e5, 5e6), mttr=st.floats(1, 100))
def test_general_m_fault_chain_approaches_the_product_formula(n, m, mtbf, mttr):
    # Error of the approximation is O(N lambda / mu) per tolerated failure.
    exact = group_mttdl_h(n, m, mtbf, mttr)
    assert exact == pytest.approx(mttdl_approx_h(n, m, mtbf, mttr), rel=5 * n * mttr / mtbf * m + 1e-9)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["R5/6", "R6/12", "R6/6", "R10/4", "R1/2", "R5/9"]), st.integers(1, 8))
def test_mttdl_falls_as_groups_are_added(layout, count):
    drive = DriveType("2TB", capacity_bytes=2 * TB, mtbf_h=600_000, ber_per_bit=1e-15)
    fewer = reliability_of(stack_from_notation(layout, drive=drive, count=count, rebuild_rate_bytes=50e6))
    more = reliability_of(stack_from_notation(layout, drive=drive, count=count + 1, rebuild_rate_bytes=50e6))
    assert more.mttdl_h < fewer.mttdl_h
    assert more.annual_loss_probability > fewer.annual_loss_probability


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(5, 14), st.floats(1e-16, 1e-13))
def test_ure_never_helps(m, n, ber):
    h = ure_probability((n - m) * 2e12 * 8, ber)
    assert group_mttdl_h(n, m, 600_000, 20, h) <= group_mttdl_h(n, m, 600_000, 20, 0.0)


def test_chain_shape():
    rates, absorb = birth_death_chain(6, 2, 0.5, 10.0, [0, 0, 0.25])
    assert rates[0][1] == 3 and rates[1][2] == Fraction(5, 2) and rates[1][0] == 10
    assert rates[2][1] == Fraction(15, 2) and absorb == [0, 0, 2 + Fraction(5, 2)]
    with pytest.raises(ValueError):
        birth_death_chain(2, 2, 1.0, 1.0)
