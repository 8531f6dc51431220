"""`--stack` comparison: the recorded md RAID 6 host against planned stacks (model package), every
difference listed, none when the plan matches."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from storlab.doctor.stack_check import compare_with_stack
from storlab.model.stack import stack_from_dict
from test_doctor_fixtures import raid6_host  # noqa: E402


def _plan(chunk="512KiB", layout="R6/10", fs="xfs", aggregate=None):
    data = {"raid": {"layout": layout, "chunk": chunk, "engine": "md"}, "filesystem": {"type": fs}}
    if aggregate:
        data["raid"]["count"] = 2
        data["volume"] = {"aggregate": aggregate}
    return stack_from_dict(data)


def _diffs(inv, stack):
    return [(d.item, d.device, d.planned, d.found) for d in compare_with_stack(inv, stack, ["md0"])]


def test_matching_plan_has_no_differences(tmp_path):
    inv, _ = raid6_host(tmp_path, bad=False)
    assert _diffs(inv, _plan()) == []


def test_wrong_fs_geometry_and_read_ahead_are_listed(tmp_path):
    inv, _ = raid6_host(tmp_path, bad=True)
    assert _diffs(inv, _plan()) == [
        ("file system stripe (unit x width)", "md0", "512 KiB x 8",
         "64 KiB x 4 (sunit=16 swidth=64 blks (4096-byte blocks))"),
        ("read-ahead", "md0", "at least 8 MiB", "128 KiB"),
    ]


def test_plan_with_other_chunk_level_and_fs(tmp_path):
    inv, _ = raid6_host(tmp_path, bad=False)
    items = {d[0]: d for d in _diffs(inv, _plan(chunk="256KiB", layout="R5/10", fs="ext4"))}
    assert items["md chunk"][2:] == ("256 KiB", "512 KiB")
    assert items["md level"][2:] == ("raid5", "raid6")
    assert items["file system type"][2:] == ("ext4", "xfs")
    assert items["stripe presented by the storage"][2] == "256 KiB x 9"


def test_planned_lvm_stripe_missing(tmp_path):
    inv, _ = raid6_host(tmp_path, bad=False)
    items = {d[0]: d for d in _diffs(inv, _plan(aggregate="stripe"))}
    assert items["md arrays"][2:] == ("2", "1 (md0)")
    assert items["volume aggregation"][2:] == ("stripe over 2 devices", "no striped LV")
