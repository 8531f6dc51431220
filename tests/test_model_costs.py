"""The named costs (storlab.model.costs): the textbook figures agree with what the geometry counts."""
from __future__ import annotations

import pytest
from storlab.model.costs import (
    DRIVE_REORDER_DEPTH,
    NEARLINE_RPM,
    NEARLINE_SEEK_S,
    SINGLE_TRACK_SEEK_S,
    random_service_s,
    reordered_positioning_fraction,
    rotation_s,
    write_penalty,
)
from storlab.model.geometry import analyse_alignment, geometry_of
from storlab.model.stack import stack_from_notation


@pytest.mark.parametrize("layout,level", [("R0/4", 0), ("R10/4", 10), ("R5/5", 5), ("R6/6", 6)])
def test_the_write_penalty_of_one_chunk_writes_is_the_geometry_s(layout, level):
    geometry = geometry_of(stack_from_notation(layout, 64 << 10))
    report = analyse_alignment(geometry, 4096, "random:4096")
    assert report.write_penalty == pytest.approx(write_penalty(level))


def test_a_nearline_drive_does_about_80_random_iops():
    assert rotation_s(NEARLINE_RPM) == pytest.approx(30 / 7200)
    assert 1 / random_service_s(4096, 150e6) == pytest.approx(1 / (NEARLINE_SEEK_S + 30 / 7200 + 4096 / 150e6))
    assert 75 < 1 / random_service_s(4096, 150e6) < 82


# --- command reordering (rotational position ordering) ------------------------------------------

def _simulated_soonest(queued: int, trials: int = 20000, seed: int = 7) -> float:
    """Mean positioning time of the soonest of `queued` random requests, by drawing them: both ends
    of a seek uniform on the stroke, seek = single track + b sqrt(distance) with the data sheet's
    average, then a uniform part of a revolution. Independent of the integration in costs."""
    import random
    rng = random.Random(seed)
    revolution = 2 * rotation_s(NEARLINE_RPM)
    # b from the average seek: E[sqrt(|U1 - U2|)] = 8 / 15
    b = (NEARLINE_SEEK_S - SINGLE_TRACK_SEEK_S) / (8 / 15)
    total = 0.0
    for _ in range(trials):
        total += min(SINGLE_TRACK_SEEK_S + b * abs(rng.random() - rng.random()) ** 0.5 + rng.random() * revolution
                     for _ in range(queued))
    return total / trials


def test_reordering_matches_drawing_the_requests():
    alone = _simulated_soonest(1)
    assert alone == pytest.approx(NEARLINE_SEEK_S + rotation_s(NEARLINE_RPM), rel=0.02)
    for q in (4, 16):
        assert reordered_positioning_fraction(q) == pytest.approx(_simulated_soonest(q) / alone, rel=0.03)


def _simulated_slowest(members: int, trials: int = 20000, seed: int = 11) -> list[float]:
    """Positioning times of the slowest of `members` random positionings, drawn as above."""
    import random
    rng = random.Random(seed)
    revolution = 2 * rotation_s(NEARLINE_RPM)
    b = (NEARLINE_SEEK_S - SINGLE_TRACK_SEEK_S) / (8 / 15)
    return sorted(max(SINGLE_TRACK_SEEK_S + b * abs(rng.random() - rng.random()) ** 0.5 + rng.random() * revolution
                      for _ in range(members)) for _ in range(trials))


def test_the_spread_of_a_positioning_and_of_the_slowest_of_several_matches_drawing_them():
    from storlab.model.costs import positioning_scv, slowest_positioning_spread
    alone = NEARLINE_SEEK_S + rotation_s(NEARLINE_RPM)
    one = _simulated_slowest(1)
    mean = sum(one) / len(one)
    variance = sum((t - mean) ** 2 for t in one) / len(one)
    assert positioning_scv() == pytest.approx(variance / mean ** 2, rel=0.05)
    for members in (1, 12):
        drawn = _simulated_slowest(members)
        p99 = drawn[int(0.99 * len(drawn))]
        spread = (p99 - sum(drawn) / len(drawn)) / alone
        assert slowest_positioning_spread(members) == pytest.approx(spread, abs=0.03)
    assert slowest_positioning_spread(12) < slowest_positioning_spread(1)


def test_reordering_starts_at_one_falls_with_the_queue_and_stops_at_the_depth():
    fractions = [reordered_positioning_fraction(q) for q in range(1, 33)]
    assert fractions[0] == 1.0
    assert all(a > b for a, b in zip(fractions, fractions[1:]))
    assert reordered_positioning_fraction(64) == reordered_positioning_fraction(DRIVE_REORDER_DEPTH)
    assert reordered_positioning_fraction(0.5) == 1.0
    # between whole queue lengths: in between
    assert fractions[2] > reordered_positioning_fraction(3.5) > fractions[3]


def test_a_nearline_drive_reordering_32_requests_serves_two_to_three_times_its_one_request_rate():
    # 79 IOPS alone; public QD1 -> QD32 measurements of 7.2K rpm drives show x 2.2 to x 2.9
    alone = 1 / (NEARLINE_SEEK_S + rotation_s(NEARLINE_RPM))
    assert 75 < alone < 82
    assert 2.0 < 1 / reordered_positioning_fraction(32) < 3.0
    assert 150 < alone / reordered_positioning_fraction(16) < 190
