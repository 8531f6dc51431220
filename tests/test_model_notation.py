"""RAID notation: the study's RAID Type / Span / # of Drives convention and its one-line errors."""
import pytest
from storlab.model.notation import NotationError, parse_raid


@pytest.mark.parametrize("text, level, span, total, data_per_span, groups", [
    ("R5/6", 5, 6, 6, 5, 1),
    ("R6/12", 6, 12, 12, 10, 1),
    ("R60/12/24", 60, 12, 24, 10, 2),   # the study: two spans of twelve, ten data + two parity each
    ("R10/4", 10, 4, 4, 2, 1),
    ("R1/2", 1, 2, 2, 1, 1),
    ("R0/8", 0, 8, 8, 8, 1),
    ("R3/5", 3, 5, 5, 4, 1),
    ("R5/6/12", 5, 6, 12, 5, 2),        # two independent R5/6 groups
    ("raid6/10", 6, 10, 10, 8, 1),
])
def test_parse_published_forms(text, level, span, total, data_per_span, groups):
    notation = parse_raid(text)
    assert notation.level.number == level
    assert notation.span == span
    assert notation.total_drives == total
    assert notation.data_drives_per_span == data_per_span
    assert notation.spans == groups


def test_x_leaves_the_total_open_until_chosen():
    notation = parse_raid("R50/6/x")
    assert notation.total_drives is None and not notation.is_resolved
    with pytest.raises(NotationError, match="not chosen"):
        _ = notation.spans
    assert notation.with_total(24).spans == 4


def test_fault_tolerance_and_copies():
    assert parse_raid("R6/12").fault_tolerance_per_group == 2
    assert parse_raid("R5/6").fault_tolerance_per_group == 1
    assert parse_raid("R1/3").fault_tolerance_per_group == 2 and parse_raid("R1/3").copies == 3
    assert parse_raid("R10/8").fault_tolerance_per_group == 1 and parse_raid("R10/8").copies == 2
    assert parse_raid("R0/4").fault_tolerance_per_group == 0


@pytest.mark.parametrize("text, message", [
    ("R6/3", "R6/3: RAID 6 needs at least 4 drives per span"),
    ("R5/2", "R5/2: RAID 5 needs at least 3 drives per span"),
    ("R10/6/4", "R10/6/4: total 4 drives is less than the span of 6"),
    ("R10/5", "R10/5: RAID 10 needs an even number of drives per span (mirrored pairs)"),
    ("R7/5", "R7/5: unknown RAID level 7; use 0, 1, 3, 4, 5, 6, 10, 50 or 60"),
    ("R50/6/15", "R50/6/15: total 15 drives is not a multiple of the span of 6"),
    ("R60/12/12", "R60/12/12: RAID 60 needs at least 2 spans; 12 drives make 1 span of 12"),
    ("R60/12", "R60/12: RAID 60 needs the total number of drives (or x), e.g. R60/12/24"),
    ("R5", "R5: missing span; write level/span[/total], e.g. R5/6 or R60/12/24"),
])
def test_errors_are_one_line_and_name_the_problem(text, message):
    with pytest.raises(NotationError) as info:
        parse_raid(text)
    assert str(info.value) == message
    assert "\n" not in str(info.value)


def test_garbage_is_named():
    with pytest.raises(NotationError, match=r"^5\+1: not a RAID notation"):
        parse_raid("5+1")


def test_text_round_trips():
    for text in ("R5/6", "R6/12", "R60/12/24", "R50/6/x", "R5/6/12"):
        assert parse_raid(text).text == text
