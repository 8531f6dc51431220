"""The named costs (storlab.model.costs): the textbook figures agree with what the geometry counts."""
from __future__ import annotations

import pytest
from storlab.model.costs import NEARLINE_RPM, NEARLINE_SEEK_S, random_service_s, rotation_s, write_penalty
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
