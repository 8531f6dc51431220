"""Recommendation: candidate enumeration, need filters and the Pareto set, checked on small inventories
whose winners can be worked out by hand."""
import pytest
from storlab.model.stack import DriveType, StackError
from storlab.planner.recommend import Inventory, Needs, _dominates, recommend

TB = 10**12
DRIVE = DriveType("2TB", capacity_bytes=2 * TB, mtbf_h=600_000, ber_per_bit=1e-15, seq_read_bw_bytes=100e6,
                  seq_write_bw_bytes=100e6, random_read_iops=100, random_write_iops=100)
K = 1024


def test_dominance():
    a = {"usable_bytes": 2, "seq_read_bw_bytes": 1, "seq_write_bw_bytes": 1, "random_read_iops": 1,
         "random_write_iops": 1, "mttdl_h": 1}
    b = dict(a, usable_bytes=1)
    assert _dominates(a, b) and not _dominates(b, a) and not _dominates(a, a)


def test_twelve_drives_one_enclosure_raid5_vs_raid6():
    # 12 drives, 12 bays, levels 5 and 6, one chunk: candidates R5/3, R5/4, R5/6, R5/12, R6/4, R6/6, R6/12.
    # R5/12 has the most capacity (11 data drives = 22 TB); R6/4 x 3 is the most reliable; RAID 6 of 12
    # is dominated by RAID 5 of 12 on capacity/speed but wins on MTTDL, so both stay.
    result = recommend(Inventory(DRIVE, 12, 12, levels=(5, 6), chunks=(64 * K,), rebuild_rate_bytes=50e6),
                       Needs(request_bytes=1024 * K))
    assert result.candidates_considered == 7
    names = {c.description.split(",")[0] for c in result.pareto}
    assert "R5/12" in names and "R6/4 x 3" in names
    best_capacity = max(result.pareto, key=lambda c: c.scores["usable_bytes"])
    assert best_capacity.scores["usable_bytes"] == 22 * TB
    assert any("highest usable capacity" in r for r in best_capacity.reasons)
    most_reliable = max(result.pareto, key=lambda c: c.scores["mttdl_h"])
    assert most_reliable.description.startswith("R6/4 x 3")
    assert any(r.startswith("highest MTTDL") for r in most_reliable.reasons)
    # no Pareto member is dominated by another
    for a in result.pareto:
        assert not any(_dominates(b.scores, a.scores) for b in result.pareto)


def test_needs_filter_and_report_misses():
    inventory = Inventory(DRIVE, 12, 12, levels=(5, 6), chunks=(64 * K,), rebuild_rate_bytes=50e6)
    # 21 TB usable leaves only R5/12 (22 TB): R6/12 = 20 TB, R5/6 x 2 = 20 TB.
    result = recommend(inventory, Needs(usable_bytes=21 * TB))
    assert result.feasible == 1 and [c.description.split(",")[0] for c in result.pareto] == ["R5/12"]
    impossible = recommend(inventory, Needs(usable_bytes=30 * TB))
    assert impossible.feasible == 0 and impossible.note
    assert all(any("usable capacity" in m for m in c.misses) for c in impossible.pareto)


def test_spares_and_controllers():
    # 26 drives over 2 controllers: 13 each; R6/12 uses 12 per controller, 2 drives left as spares.
    result = recommend(Inventory(DRIVE, 26, 12, controllers=2, levels=(6,), chunks=(512 * K,),
                                 rebuild_rate_bytes=50e6))
    r6_12 = [c for c in result.pareto if c.description.startswith("R6/12 x 2")]
    assert r6_12 and r6_12[0].spares == 2


def test_raid60_needs_two_spans_per_controller():
    result = recommend(Inventory(DRIVE, 24, 12, controllers=2, levels=(60,), chunks=(512 * K,), rebuild_rate_bytes=50e6))
    # 12 drives per controller: R60/6/12 only (R60/12 would need 24 per controller; R60/4/12 = 3 spans)
    assert {c.stack.raid.layout.text for c in result.pareto} <= {"R60/6/12", "R60/4/12"}
    with pytest.raises(StackError, match="no layout fits"):
        recommend(Inventory(DRIVE, 4, 12, levels=(60,), rebuild_rate_bytes=50e6))


def test_controller_cap_levels_sequential_scores():
    # A 500 MB/s write cap per controller makes every layout's sequential write at most 500 MB/s.
    result = recommend(Inventory(DRIVE, 12, 12, levels=(5, 6), chunks=(64 * K,), rebuild_rate_bytes=50e6,
                                 controller_write_bw_bytes=500e6))
    assert all(c.scores["seq_write_bw_bytes"] <= 500e6 * (1 + 1e-12) for c in result.pareto)


def test_controllers_handle_the_default_request_rate_unless_stated():
    # flash drives outrun a controller: each handles costs.CONTROLLER_REQUEST_RATE host requests/s
    # (60,000) unless --controller-iops states its own; two controllers handle twice that
    ssd = DriveType("ssd", 10**12, 1e6, seq_read_bw_bytes=500e6, random_read_iops=90_000, rotational=False)
    one = recommend(Inventory(ssd, 12, 12, levels=(5,), chunks=(64 * K,), rebuild_rate_bytes=50e6))
    assert max(c.scores["random_read_iops"] for c in one.pareto) == pytest.approx(60_000)
    stated = recommend(Inventory(ssd, 12, 12, levels=(5,), chunks=(64 * K,), rebuild_rate_bytes=50e6,
                                 controller_iops=250_000))
    assert max(c.scores["random_read_iops"] for c in stated.pareto) == pytest.approx(250_000)
    two = recommend(Inventory(ssd, 24, 12, controllers=2, levels=(5,), chunks=(64 * K,), rebuild_rate_bytes=50e6))
    assert max(c.scores["random_read_iops"] for c in two.pareto) == pytest.approx(120_000)


def test_inventory_validation():
    with pytest.raises(StackError, match="rebuild rate or an MTTR"):
        Inventory(DRIVE, 12, 12)
    with pytest.raises(StackError, match="unknown RAID level 7"):
        Inventory(DRIVE, 12, 12, levels=(7,), mttr_h=10)


def test_random_iops_are_sized_one_request_at_a_time_on_each_drive():
    # a spinning drive serves more with a deeper queue (plan perf's ceiling), but a layout is sized
    # as a spreadsheet sizes it: R5/12 random reads = 12 x 100, writes = 12 x 100 / 4
    result = recommend(Inventory(DRIVE, 12, 12, levels=(5,), chunks=(64 * K,), rebuild_rate_bytes=50e6),
                       Needs(request_bytes=1024 * K))
    r5 = next(c for c in result.pareto if c.description.startswith("R5/12,"))
    assert r5.scores["random_read_iops"] == pytest.approx(1200)
    assert r5.scores["random_write_iops"] == pytest.approx(300)
    assert not recommend(Inventory(DRIVE, 12, 12, levels=(5,), chunks=(64 * K,), rebuild_rate_bytes=50e6),
                         Needs(random_read_iops=1300)).feasible
