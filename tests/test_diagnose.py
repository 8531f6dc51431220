"""storlab diagnose without devices of its own: the prediction rules with hand-worked figures, the
findings on synthetic probe results (a straggler, a shared limit, a file system below its device, a
healthy stack), the probe plan within a budget, and the whole command on a tmpfs folder (the
file-system layer only), its document, table, HTML report and clean-up."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from browser import in_page_check, needs_chromium, screenshot
from storlab.cli.main import main
from storlab.diagnose.expect import expect_members_together, expect_volume
from storlab.diagnose.findings import build_rows, find
from storlab.diagnose.probes import RAND_READ, SEQ_READ, Probe, ProbeResult, find_mpiexec, member_share
from storlab.diagnose.run import PROBE_MIN_S, plan_probes
from storlab.diagnose.stack import StackView
from storlab.errors import SpecError
from storlab.output.diagnose import build_html, render_table

MB = 1e6
DEVPATH = {f"/dev/loop{i}": f"loop{i}" for i in range(1, 5)}


def _view(members=("loop1", "loop2", "loop3", "loop4"), level="raid0"):
    return StackView("/mnt/x", "dir", "/mnt/x", "btrfs", members[0], None, level, list(members))


def _result(layer, w, value, per_target=None, bs=None):
    wl = member_share(w, 4) if bs else w
    p = Probe(layer, layer, wl, list(per_target or ["/f"]), 3.0, row_workload=w.name)
    doc = {"run_id": f"{layer}-{w.name}"}
    return ProbeResult(p, doc, value, {f"/dev/{k}": v for k, v in (per_target or {}).items()}, True)


def _results(alone, together, fs, w=SEQ_READ, volume=None):
    res = {}
    for m, v in alone.items():
        res[(f"member:{m}", w.name)] = _result(f"member:{m}", w, v, {m: v})
    res[("members", w.name)] = _result("members", w, sum(together.values()), together)
    if volume is not None:
        res[("volume", w.name)] = _result("volume", w, volume)
    res[("fs", w.name)] = _result("fs", w, fs)
    return res


# -- prediction rules --------------------------------------------------------------------------

SEQ = dict(rw="read", request_bytes=1 << 20, qd=4, figure="bw_bytes")


def test_a_striped_volume_moves_at_the_pace_of_its_slowest_member():
    e = expect_volume("raid0", {"a": 40 * MB, "b": 40 * MB, "c": 40 * MB, "d": 10 * MB}, **SEQ)
    assert e.value == pytest.approx(40 * MB)          # 4 x 10
    assert e.potential == pytest.approx(160 * MB)     # 4 x the median 40
    assert "member d" in e.limited_by and "stack model" in e.rule


def test_mirror_reads_use_one_copy_per_reader_and_writes_every_copy():
    rates = {"a": 50 * MB, "b": 30 * MB}
    assert expect_volume("raid1", rates, **SEQ).value == pytest.approx(50 * MB)     # btrfs: one copy per reader
    write = {**SEQ, "rw": "write"}
    assert expect_volume("raid1", rates, **write).value == pytest.approx(30 * MB)   # every copy: the slowest


def test_random_reads_at_depth_are_held_to_the_slowest_member_too():
    rates = {"a": 1000.0, "b": 1000.0, "c": 1000.0, "d": 250.0}
    e = expect_volume("raid0", rates, rw="randread", request_bytes=4096, qd=16, figure="iops")
    assert e.value == pytest.approx(1000.0) and e.potential == pytest.approx(4000.0)


def test_parity_small_writes_pay_the_read_modify_write_penalty():
    rates = {k: 1000.0 for k in "abcde"}
    small = dict(rw="randwrite", request_bytes=4096, qd=16, figure="iops")
    reads = expect_volume("raid5", rates, **{**small, "rw": "randread"}).value
    r5, r6 = expect_volume("raid5", rates, **small).value, expect_volume("raid6", rates, **small).value
    assert reads == pytest.approx(5000.0)
    # each small write reads and writes data and parity: two I/Os on each of two members (three
    # members, for RAID 6), so at most half the read rate, and less for double parity
    assert r5 <= reads / 2 + 1e-6 and r6 < r5


def test_members_at_once_are_predicted_as_the_sum_of_each_alone():
    assert expect_members_together({"a": 1.0, "b": 2.5}).value == pytest.approx(3.5)


def test_a_member_is_probed_with_its_share_of_a_striped_request():
    assert member_share(SEQ_READ, 4).bs == 256 << 10
    assert member_share(SEQ_READ, 1).bs == 1 << 20
    assert member_share(RAND_READ, 4).bs == 4096      # a small random request lands whole on one member


# -- findings -----------------------------------------------------------------------------------

def test_the_slow_member_and_only_it_is_named_as_the_straggler():
    view = _view()
    alone = {"loop1": 41 * MB, "loop2": 42 * MB, "loop3": 41 * MB, "loop4": 10.5 * MB}
    rows, rates = build_rows(view, _results(alone, dict(alone), fs=41 * MB), [SEQ_READ], DEVPATH)
    found = find(view, rows, rates, [SEQ_READ], [])
    stragglers = [f for f in found if f.code == "straggler"]
    assert len(stragglers) == 1 and "member loop4" in stragglers[0].message
    assert "loop1" not in stragglers[0].message.split("against")[0]
    fs_row = next(r for r in rows if r.layer == "fs")
    assert fs_row.predicted == pytest.approx(42 * MB)   # 4 x 10.5
    assert 0.85 < fs_row.efficiency < 1.15
    assert not [f for f in found if f.code in ("shared-limit", "fs-below-device")]


def test_a_member_slow_in_only_one_probe_is_not_a_straggler():
    view = _view()
    alone = {"loop1": 11 * MB, "loop2": 42 * MB, "loop3": 41 * MB, "loop4": 41 * MB}
    together = {"loop1": 40 * MB, "loop2": 41 * MB, "loop3": 40 * MB, "loop4": 41 * MB}
    rows, rates = build_rows(view, _results(alone, together, fs=160 * MB), [SEQ_READ], DEVPATH)
    assert not [f for f in find(view, rows, rates, [SEQ_READ], []) if f.code == "straggler"]


def test_members_together_below_their_sum_alone_is_a_shared_limit_with_its_ceiling():
    view = _view()
    alone = {m: 40 * MB for m in view.members}
    together = {m: 10 * MB for m in view.members}
    rows, rates = build_rows(view, _results(alone, together, fs=40 * MB), [SEQ_READ], DEVPATH)
    found = find(view, rows, rates, [SEQ_READ], [])
    shared = [f for f in found if f.code == "shared-limit"]
    assert len(shared) == 1 and "40.0 MB/s together" in shared[0].message and "160.0 MB/s" in shared[0].message
    assert not [f for f in found if f.code == "straggler"]


def test_a_file_system_below_its_device_is_named_with_the_doctors_finding():
    view = _view()
    alone = {m: 40 * MB for m in view.members}
    doctor = [{"code": "fs-stripe-mismatch", "severity": "warning", "device": "loop9",
               "message": "xfs stripe unit 32 KiB does not match the 64 KiB below", "evidence": "e", "fix": "mkfs.xfs"}]
    rows, rates = build_rows(view, _results(alone, dict(alone), fs=100 * MB), [SEQ_READ], DEVPATH)
    found = find(view, rows, rates, [SEQ_READ], doctor)
    codes = [f.code for f in found]
    assert "fs-below-device" in codes and "doctor" in codes
    fs = next(f for f in found if f.code == "fs-below-device")
    assert "xfs stripe unit 32 KiB" in fs.evidence and fs.fix == "mkfs.xfs"


def test_a_healthy_stack_has_no_finding_above_the_noise():
    view = _view()
    alone = {"loop1": 40 * MB, "loop2": 41 * MB, "loop3": 39.5 * MB, "loop4": 40.5 * MB}
    rows, rates = build_rows(view, _results(alone, dict(alone), fs=156 * MB), [SEQ_READ], DEVPATH)
    found = find(view, rows, rates, [SEQ_READ], [])
    assert [f for f in found if f.severity == "warning"] == []
    assert all(0.85 <= r.efficiency <= 1.15 for r in rows if r.efficiency is not None)


# -- probe plan ---------------------------------------------------------------------------------

def test_every_probe_gets_an_equal_share_of_the_budget():
    probes = plan_probes(_view(), 60.0, "/mnt/x/probe", [SEQ_READ, RAND_READ])
    # per workload: 4 members alone, 4 at once, the file system; then buffered and cached
    assert len(probes) == 2 * 6 + 2
    assert len({p.time_s for p in probes}) == 1
    assert sum(p.time_s for p in probes) <= 60.0


def test_a_budget_too_short_for_the_stack_names_the_budget_it_needs():
    with pytest.raises(SpecError, match=r"budget: 10 s is too short for 15 probes .* give --budget 38s"):
        plan_probes(_view(), 10.0, "/mnt/x/probe", [SEQ_READ, RAND_READ])
    assert PROBE_MIN_S >= 2.0


# -- the command on tmpfs --------------------------------------------------------------------------

def test_diagnose_on_tmpfs_measures_the_file_system_layer_and_leaves_nothing(shm_dir, tmp_path, capsys):
    out, html = tmp_path / "d.json", tmp_path / "d.html"
    before = set(os.listdir(shm_dir))
    code = main(["diagnose", shm_dir, "--budget", "15s", "--no-store", "--json", str(out), "-o", str(html)])
    assert code == 0
    assert set(os.listdir(shm_dir)) == before            # the probe file is gone
    doc = json.loads(out.read_text())
    assert doc["schema"] == "storlab.diagnose/1" and doc["complete"] is True
    assert doc["stack"]["members"] == [] and doc["stack"]["fs_type"] == "tmpfs"
    layers = {r["layer"] for r in doc["layers"]}
    assert layers == {"fs", "fs-buffered", "fs-cached"}
    assert all(r["measured"] and r["measured"] > 0 for r in doc["layers"])
    text = capsys.readouterr().out
    assert "file system" in text and "findings:" in text
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "data:image/png;base64," in page
    assert render_table(doc) in text
    assert build_html(doc).count("<h2>") >= 3


@pytest.mark.parametrize("argv, message", [
    (["diagnose", "/no/such/place"], "diagnose target: /no/such/place does not exist"),
    (["diagnose", "/dev/shm", "--budget", "1s"], "budget: '1s' is out of range"),
    (["diagnose", "/dev/null"], "diagnose target: /dev/null is neither a directory"),
])
def test_bad_input_is_one_line_naming_the_field(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_diagnose_stores_every_probe_as_a_run_tagged_with_the_diagnosis(shm_dir, tmp_path):
    from storlab import store

    db = tmp_path / "results.db"
    out = tmp_path / "d.json"
    assert main(["diagnose", shm_dir, "--budget", "15s", "--store", str(db), "--json", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    stored = store.list_runs(db, tag=f"diagnose:{doc['run_id'][:8]}")
    # every probe, the write that laid the probe file out included
    assert sorted(r["run_id"] for r in stored) == sorted(p["run_id"] for p in doc["probes"])
    assert any(p["layer"] == "fs-write" for p in doc["probes"])


@pytest.mark.mpi
@pytest.mark.skipif(find_mpiexec() is None, reason="no mpiexec (pip install mpich, or a site MPI on PATH)")
def test_ranks_measure_the_file_system_as_mpi_ranks(shm_dir, tmp_path):
    out = tmp_path / "d.json"
    assert main(["diagnose", shm_dir, "--budget", "20s", "--ranks", "2", "--no-store", "--json", str(out),
                 "--quiet"]) == 0
    doc = json.loads(out.read_text())
    ranks = [r for r in doc["layers"] if r["layer"] == "fs-ranks"]
    assert len(ranks) == 2 and all(r["measured"] > 0 for r in ranks)
    assert all("2 MPI ranks" in r["subject"] for r in ranks)


@pytest.mark.browser
@needs_chromium
def test_the_html_report_renders_in_headless_chromium(shm_dir, tmp_path):
    """The waterfall chart and the findings of a real diagnosis: a screenshot that is not blank,
    the chart decoded, no console output and no script error."""
    html = tmp_path / "d.html"
    assert main(["diagnose", shm_dir, "--budget", "15s", "--no-store", "--quiet", "-o", str(html)]) == 0
    ncolors, non_white, console, _ = screenshot(html, tmp_path)
    assert console == [] and ncolors > 50 and non_white > 0.03
    check, console = in_page_check(html, tmp_path)
    assert check["images"] == 1 and check["broken"] == 0 and check["errors"] == [] and console == []


def test_a_planned_stack_is_compared_first_and_a_target_without_devices_says_it_differs(shm_dir, tmp_path, capsys):
    """--stack on a memory file system used to report no difference from a planned RAID 6 of
    twelve drives: nothing was compared, and that is a difference."""
    stack = Path(__file__).resolve().parent.parent / "examples" / "stacks" / "r6-12-nlsas-md.toml"
    out = tmp_path / "d.json"
    assert main(["diagnose", shm_dir, "--budget", "15s", "--stack", str(stack), "--no-store", "--json", str(out)]) == 0
    check = json.loads(out.read_text())["stack_check"]
    assert check["stack_file"] == str(stack) and len(check["differences"]) == 1
    assert "without a block device below it" in check["differences"][0]["found"]
    assert "1 difference(s) from the live stack" in capsys.readouterr().out


@pytest.mark.root
@pytest.mark.loop
def test_allow_destroy_adds_write_probes_on_the_named_device_and_only_then(loop_device, shm_dir, tmp_path):
    """--allow-destroy was accepted and did nothing: a device named in it is also written (the
    engine's gate checks what it opens), a device not named is only read."""
    dev = loop_device(64 << 20, backing_dir=shm_dir)
    out = tmp_path / "d.json"
    assert main(["diagnose", dev, "--budget", "10s", "--allow-destroy", dev, "--no-store", "--quiet",
                 "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    writes = [r for r in doc["layers"] if r["workload"] == "seq-write"]
    assert [r["layer"] for r in writes] == ["member"] and writes[0]["measured"] > 0
    assert main(["diagnose", dev, "--budget", "10s", "--no-store", "--quiet", "--json", str(out)]) == 0
    assert not [r for r in json.loads(out.read_text())["layers"] if r["workload"] == "seq-write"]


def test_ranks_without_mpiexec_is_one_line_and_leaves_nothing(shm_dir, monkeypatch, capsys):
    from storlab.diagnose import probes

    monkeypatch.setattr(probes, "find_mpiexec", lambda: None)
    before = set(os.listdir(shm_dir))
    assert main(["diagnose", shm_dir, "--budget", "20s", "--ranks", "2", "--no-store", "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "storlab diagnose: error: ranks: no mpiexec found (pip install 'storlab[mpi]' or put a site MPI on PATH)"
    assert set(os.listdir(shm_dir)) == before


# -- the model's rules followed: mirror copies read, the straggler's cost, figures above prediction --

def _with_io(r: ProbeResult, read_bytes: dict[str, int]) -> ProbeResult:
    r.member_io = {m: {"read_bytes": b, "write_bytes": 0} for m, b in read_bytes.items()}
    return r


def test_a_raid10_read_is_predicted_from_the_copies_seen_read():
    # btrfs read one copy per pair by the reader's pid: loop2 and loop4 (the slow one) this time
    view = _view(level="raid10")
    alone = {"loop1": 40 * MB, "loop2": 40 * MB, "loop3": 40 * MB, "loop4": 10 * MB}
    res = _results(alone, dict(alone), fs=20 * MB)
    _with_io(res[("fs", SEQ_READ.name)], {"loop1": 0, "loop2": 60 << 20, "loop3": 4096, "loop4": 60 << 20})
    rows, rates = build_rows(view, res, [SEQ_READ], DEVPATH)
    fs = next(r for r in rows if r.layer == "fs")
    assert fs.predicted == pytest.approx(20 * MB)          # two copies read, the stripe at the slow one's pace
    assert "member loop4" in fs.limited_by and "reads seen on loop2, loop4" in fs.rule
    found = find(view, rows, rates, [SEQ_READ], [])
    assert not [f for f in found if f.code in ("fs-below-device", "layer-loss")]
    straggler = next(f for f in found if f.code == "straggler")
    assert straggler.message.startswith("member loop4 ") and "holds the volume back" in straggler.message
    assert "80.0 MB/s with every member at the others' pace (it costs 75%)" in straggler.message


def test_the_other_copies_read_predict_the_fast_pace_and_the_straggler_still_names_its_cost():
    view = _view(level="raid10")
    alone = {"loop1": 40 * MB, "loop2": 40 * MB, "loop3": 40 * MB, "loop4": 10 * MB}
    res = _results(alone, dict(alone), fs=80 * MB)
    _with_io(res[("fs", SEQ_READ.name)], {"loop1": 60 << 20, "loop2": 0, "loop3": 60 << 20, "loop4": 0})
    rows, rates = build_rows(view, res, [SEQ_READ], DEVPATH)
    assert next(r for r in rows if r.layer == "fs").predicted == pytest.approx(80 * MB)
    found = find(view, rows, rates, [SEQ_READ], [])
    straggler = next(f for f in found if f.code == "straggler")
    assert "predicted at 20.0 MB/s against 80.0 MB/s" in straggler.message   # the same words in both runs
    assert not [f for f in found if f.code == "fs-below-device"]


def test_a_straggler_of_two_is_costed_against_the_other_member_s_pace_not_the_median_of_both():
    e = expect_volume("raid0", {"a": 40 * MB, "b": 10 * MB}, **SEQ)
    assert e.value == pytest.approx(20 * MB) and e.potential == pytest.approx(80 * MB)


def test_a_figure_far_above_its_prediction_is_a_finding():
    view = _view()
    alone = {m: 40 * MB for m in view.members}
    rows, rates = build_rows(view, _results(alone, dict(alone), fs=640 * MB), [SEQ_READ], DEVPATH)
    found = find(view, rows, rates, [SEQ_READ], [])
    above = [f for f in found if f.code == "above-prediction"]
    assert len(above) == 1 and above[0].severity == "warning" and "400%" in above[0].message


def test_a_shared_limit_names_the_device_the_members_hang_on():
    view = _view()
    view.shared_below = {m: "backed by files on loop9" for m in view.members}
    alone = {m: 40 * MB for m in view.members}
    together = {m: 10 * MB for m in view.members}
    rows, rates = build_rows(view, _results(alone, together, fs=40 * MB), [SEQ_READ], DEVPATH)
    shared = next(f for f in find(view, rows, rates, [SEQ_READ], []) if f.code == "shared-limit")
    assert shared.message.endswith(", all backed by files on loop9")


def test_shared_below_reads_partitions_and_scsi_hosts_from_sysfs(tmp_path):
    from storlab.diagnose.stack import shared_below
    disk = tmp_path / "devices" / "pci0" / "host3" / "port-3:0" / "expander-3:0" / "target3:0:1" / "3:0:1:0"
    (disk).mkdir(parents=True)
    blocks = tmp_path / "devices" / "block"
    (blocks / "sdb" / "sdb1").mkdir(parents=True)
    (blocks / "sdb" / "sdb1" / "partition").write_text("1\n")
    (blocks / "sdc").mkdir(parents=True)
    (blocks / "sdc" / "device").symlink_to(disk)
    cls = tmp_path / "class" / "block"
    cls.mkdir(parents=True)
    (cls / "sdb1").symlink_to(blocks / "sdb" / "sdb1")
    (cls / "sdc").symlink_to(blocks / "sdc")
    found = shared_below(["sdb1", "sdc"], sys_root=str(tmp_path))
    assert found == {"sdb1": "partitions of sdb", "sdc": "behind expander-3:0"}


def test_an_io_failure_under_a_probe_ends_the_diagnosis_with_exit_1(shm_dir, monkeypatch, capsys):
    from storlab.diagnose import run as run_module
    from storlab.errors import RunIOError

    def failing(probe, argv, checkpoint=None):
        raise RunIOError("read at offset 0: Input/output error")

    monkeypatch.setattr(run_module, "run_probe", failing)
    before = set(os.listdir(shm_dir))
    assert main(["diagnose", shm_dir, "--budget", "20s", "--no-store", "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("storlab diagnose: error: ") and "Input/output error" in err
    assert set(os.listdir(shm_dir)) == before


def test_a_size_based_probe_records_the_time_it_took():
    p = Probe("fs-write", "/mnt/x", SEQ_READ, ["/f"], 0.0, size=32 << 20)
    r = ProbeResult(p, {"phases": [{"seconds": 1.6}]}, 20 * MB, {}, True)
    assert r.to_dict()["time_s"] == pytest.approx(1.6)


def test_the_chart_uses_a_log_axis_when_an_in_cache_bar_dwarfs_the_device_bars():
    from storlab.output.diagnose import waterfall_chart
    doc = {"workloads": [{"name": "seq-read", "label": "1 MiB sequential read QD4"}],
           "layers": [{"layer": "fs", "workload": "seq-read", "unit": "bytes/s", "measured": 21e6, "predicted": 21e6},
                      {"layer": "fs-cached", "workload": "seq-read", "unit": "bytes/s", "measured": 1.8e9,
                       "predicted": None}]}
    ax = waterfall_chart(doc).figure.axes[0]
    assert ax.get_yscale() == "log"
    doc["layers"].pop()
    assert waterfall_chart(doc).figure.axes[0].get_yscale() == "linear"


def test_a_device_profile_gives_the_members_their_latency_and_queueing():
    # issue 36: diagnose never read a profile. Two members measured at 100 IOPS each (at the probe's
    # depth); the profile says one request takes 10 ms and the device serves one at a time. At QD1
    # one worker keeps one request in flight: Little's law, 1 / (10 ms + 4 KiB at the profile's
    # 100 MB/s) = 99.6 IOPS, not the 200 of the two measured figures added
    from storlab.model.profile import DeviceProfile
    profile = DeviceProfile("hdd", 100 * MB, 100 * MB, 100.0, 100.0, latency_s=0.010, sequential_latency_s=0.0001,
                            parallelism=1, queues=True)
    rates = {"a": 100.0, "b": 100.0}
    one = dict(rw="randread", request_bytes=4096, qd=1, figure="iops")
    with_profile = expect_volume("raid0", rates, **one, profile=profile)
    assert with_profile.value == pytest.approx(1 / (0.010 + 4096 / (100 * MB)), rel=1e-6)
    assert "profiled device hdd" in with_profile.rule
    assert expect_volume("raid0", rates, **one).value == pytest.approx(200, rel=0.01)


def test_a_missing_profile_is_refused_before_any_probe(tmp_path, capsys):
    code = main(["diagnose", str(tmp_path), "--profile", str(tmp_path / "none.json"), "--no-store"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == f"storlab diagnose: error: {tmp_path / 'none.json'}: no such profile file\n"
