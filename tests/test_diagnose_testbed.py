"""storlab diagnose on emulated stacks with known limits (tests/testbed): throttled loop devices in
btrfs RAID 0, one member four times slower than the others, four members behind one shared limit,
xfs with a wrong stripe unit over a RAID 0, and a healthy stack. Each diagnosis runs inside the
throttling cgroup with a 45 s budget; the checks are the findings the stack's construction implies
and the 15 % agreement of the volume with its prediction. Also: a SIGTERM mid-way keeps what was
measured and leaves nothing behind, and a device holding data is only read."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from testbed import REPO_ROOT, Limits, Testbed, testbed_unavailable
from testbed.stacks import build_stack

pytestmark = [pytest.mark.root, pytest.mark.loop, pytest.mark.slow]

MiB = 1 << 20
MEMBER_BYTES = 256 * MiB
BUDGET = "45s"
FAST = Limits(read_bps=40 * MiB, write_bps=40 * MiB, read_iops=1000, write_iops=1000)
SLOW = Limits(read_bps=10 * MiB, write_bps=10 * MiB, read_iops=250, write_iops=250)   # a quarter


@pytest.fixture
def bed():
    why = testbed_unavailable()
    if why:
        pytest.skip(why)
    with Testbed() as b:
        yield b


def _start(bed: Testbed, target: str, *extra: str) -> tuple[subprocess.Popen, str]:
    out = str(bed.workdir / f"diagnose-{len(bed.children)}.json")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python"))
    cmd = [sys.executable, "-m", "storlab.cli.main", "diagnose", target, "--budget", BUDGET, "--json", out,
           "--no-store", *extra]
    return bed.popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), out


def _diagnose(bed: Testbed, target: str, *extra: str) -> tuple[dict, str]:
    child, out = _start(bed, target, *extra)
    started = time.monotonic()
    text, err = child.communicate(timeout=240)
    assert child.returncode == 0, err[-2000:]
    # the budget bounds the probes; laying out the probe file and discovery come on top
    assert time.monotonic() - started < 45 + 30
    with open(out) as f:
        return json.load(f), text


def _rows(doc: dict, layer: str, workload: str = "seq-read") -> list[dict]:
    return [r for r in doc["layers"] if r["layer"] == layer and r["workload"] == workload]


def _warnings(doc: dict) -> list[dict]:
    return [f for f in doc["findings"] if f["severity"] == "warning"]


def _folder(target_file: str) -> str:
    return os.path.dirname(target_file)


def test_a_member_four_times_slower_is_named_and_only_it(bed):
    built = build_stack(bed, [FAST, FAST, FAST, SLOW], MEMBER_BYTES, btrfs="raid0", fill_fraction=0.3)
    slow = os.path.basename(built.members[3])
    doc, text = _diagnose(bed, _folder(built.target))
    stragglers = [f for f in doc["findings"] if f["code"] == "straggler"]
    assert stragglers, text
    for f in stragglers:
        assert f["message"].startswith(f"member {slow} "), f["message"]
    others = [os.path.basename(m) for m in built.members[:3]]
    assert not any(f["message"].startswith(f"member {o} ") for f in doc["findings"] for o in others)
    fs = _rows(doc, "fs")[0]
    assert 0.85 <= fs["efficiency"] <= 1.15, fs          # measured aggregate vs predicted
    assert f"member {slow}" in fs["limited_by"]


def test_four_members_behind_one_shared_limit_report_the_limit_and_its_ceiling(bed):
    bus = bed.add_shared("bus", Limits(read_bps=40 * MiB, write_bps=40 * MiB), 4 * MEMBER_BYTES + 128 * MiB)
    members = bed.add_devices(4, MEMBER_BYTES, [FAST] * 4, shared=bus.name)
    for m in members:       # written once, outside the throttle: an unwritten extent reads without I/O
        bed.fill(m, MEMBER_BYTES)
    # -K: no discard at mkfs, which would punch the members' backing files full of holes, and a hole
    # is read without touching the shared device
    subprocess.run(["mkfs.btrfs", "-q", "-f", "-K", "-d", "raid0", "-m", "raid0", *members], check=True)
    folder = bed.mount(members[0], "btrfs", "nodatacow")
    doc, text = _diagnose(bed, folder)
    shared = [f for f in doc["findings"] if f["code"] == "shared-limit" and "sequential" in f["message"]]
    assert shared, text
    together = _rows(doc, "members")[0]["measured"]
    assert 0.8 * 40 * MiB <= together <= 1.2 * 40 * MiB          # the ceiling measured is the shared 40 MiB/s
    assert f"{together / 1e6:,.1f} MB/s together" in shared[0]["message"]
    assert not [f for f in doc["findings"] if f["code"] == "straggler"]


def test_xfs_with_a_wrong_stripe_unit_over_raid0_names_the_file_system_and_the_doctor_finding(bed):
    # btrfs RAID 0 stripes 64 KiB elements over 4 members: the right xfs geometry is su=64k,sw=4
    built = build_stack(bed, [FAST] * 4, MEMBER_BYTES, btrfs="raid0", fs="xfs", su=32 << 10, sw=4,
                        fill_fraction=0.3)
    doc, text = _diagnose(bed, _folder(built.target))
    doctor = [f for f in doc["findings"] if f["code"] == "doctor" and f["layer"] == "fs"]
    assert doctor, text
    assert "stripe" in doctor[0]["message"]
    assert doc["stack"]["fs_type"] == "xfs" and doc["stack"]["level"] == "raid0"
    assert len(doc["stack"]["members"]) == 4


def test_a_healthy_stack_has_no_finding_and_every_layer_within_15_percent(bed):
    built = build_stack(bed, [FAST] * 4, MEMBER_BYTES, btrfs="raid0", fill_fraction=0.3)
    doc, text = _diagnose(bed, _folder(built.target))
    assert _warnings(doc) == [], text
    for r in doc["layers"]:
        if r["efficiency"] is not None and r["layer"] != "fs-buffered":
            assert 0.85 <= r["efficiency"] <= 1.15, r


def test_sigterm_keeps_what_was_measured_and_leaves_nothing(bed):
    built = build_stack(bed, [FAST] * 2, MEMBER_BYTES, btrfs="raid0", fill_fraction=0.3)
    folder = _folder(built.target)
    before = set(os.listdir(folder))
    child, out = _start(bed, folder)
    deadline = time.monotonic() + 60
    line = ""
    while "probe 3/" not in line and time.monotonic() < deadline:
        line = child.stderr.readline()
        assert line or child.poll() is None, "diagnose ended before its third probe"
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 128 + signal.SIGTERM, err
    assert "interrupted" in err
    with open(out) as f:
        doc = json.load(f)
    assert doc["complete"] is False and doc["stop_reason"] == "interrupted" and doc["signal"] == "SIGTERM"
    assert len(doc["probes"]) >= 2 and doc["probes"][0]["value"] > 0
    assert set(os.listdir(folder)) == before                       # the probe file is removed


def _digest(device: str) -> str:
    h = hashlib.sha256()
    with open(device, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def test_a_device_holding_data_is_only_read(bed):
    (dev,) = bed.add_devices(1, 64 * MiB, [FAST])
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
    before = _digest(dev)
    doc, _ = _diagnose(bed, dev)
    assert doc["stack"]["target_kind"] == "block" and _rows(doc, "member")
    assert _digest(dev) == before
    blkid = subprocess.run(["blkid", "-p", "-o", "value", "-s", "TYPE", dev], capture_output=True, text=True)
    assert blkid.stdout.strip() == "ext4"


def test_a_raid10_with_one_slow_member_names_it_as_what_holds_the_volume_back_in_two_runs(bed):
    # btrfs reads one copy of each mirror, chosen by the reading thread's pid: which members a probe
    # reads differs between runs; diagnose records them from the members' counters and predicts
    # from them, and costs the straggler for the copies that include it, so both runs say the same
    built = build_stack(bed, [FAST, FAST, FAST, SLOW], MEMBER_BYTES, btrfs="raid10", fill_fraction=0.3)
    slow = os.path.basename(built.members[3])
    for _ in range(2):
        doc, text = _diagnose(bed, _folder(built.target))
        stragglers = [f for f in doc["findings"] if f["code"] == "straggler"]
        assert stragglers and all(f["message"].startswith(f"member {slow} ") for f in stragglers), text
        assert all("holds the volume back" in f["message"] for f in stragglers), text
        assert not [f for f in doc["findings"] if f["code"] == "fs-below-device"], text
        for workload in ("seq-read", "rand-read"):
            fs = _rows(doc, "fs", workload)[0]
            assert 0.85 <= fs["efficiency"] <= 1.15, (fs, text)
        probe = next(p for p in doc["probes"] if p["layer"] == "fs")
        assert probe["member_io"], "the members' counters were not recorded"
