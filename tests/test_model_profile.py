"""Device profiles (storlab.model.profile): the fit recovers a device's figures from points the model
itself predicts for it, a rate limiter is told from a queue by its latency at QD1, profiles round-trip
through their file, and bad files are one line naming the file."""
from __future__ import annotations

import os

import pytest
from storlab.model.predict import Device, Workload, predict
from storlab.model.profile import ProfileError, ProfilePoint, fit_profile, load_profile, save_profile

DISK = Device(150e6, 150e6, 80.0, 80.0, 1 / 80, "disk", sequential_latency_s=70e-6)


def _points(device: Device, p50_share: float = 1.0) -> list[ProfilePoint]:
    out = []
    for rw in ("randread", "read"):
        for size in (4096, 65536, 1 << 20):
            for qd in (1, 4, 16):
                p = predict(None, Workload(rw, size, qd=qd), [device])
                out.append(ProfilePoint(rw, size, qd, p.iops, p.latency_mean_s, p.latency_mean_s * p50_share))
    return out


def test_the_fit_recovers_a_disk_s_figures_and_predicts_its_points_back():
    profile = fit_profile(_points(DISK), name="disk")
    assert profile.read_iops == pytest.approx(1 / (1 / 80 + 4096 / 150e6), rel=0.01)
    assert profile.read_bw_bytes == pytest.approx(150e6, rel=0.01)
    assert profile.latency_s == pytest.approx(1 / 80, rel=0.05)
    assert profile.sequential_latency_s == pytest.approx(70e-6, rel=0.2)
    assert profile.queues and profile.parallelism == 1
    assert profile.mean_abs_error < 0.05


def test_the_fit_recovers_a_flash_device_of_several_units_and_predicts_its_points_back():
    # six units of 80 us each and 500 MB/s in all: its 4 KiB ceiling holds that transfer (the
    # profile's IOPS were measured with 4 KiB requests), and a 1 MiB request at QD1 is served at the
    # whole bandwidth, not a sixth of it
    flash = Device(500e6, 500e6, 75_000.0, 75_000.0, 72e-6, "flash", parallelism=6, iops_request_bytes=4096,
                   counts_every_request=True)
    profile = fit_profile(_points(flash), name="flash")
    assert profile.parallelism == 6
    assert profile.device().iops_request_bytes == 4096
    random = [e for p, e in zip(profile.points, profile.errors) if p.rw == "randread"]
    assert max(abs(e) for e in random) < 0.01
    big = predict(None, Workload("randread", 1 << 20), [profile.device()])
    assert big.bw_bytes == pytest.approx(1 / (1 / 500e6 + 72e-6 / (1 << 20)), rel=0.1)


def test_the_fit_keeps_one_request_s_own_rate_where_several_in_flight_move_more(tmp_path):
    # a memory-backed device: each request copied on one CPU at 4.5 GB/s, 17 GB/s with several in
    # flight. The QD1 line's slope is the one request's rate; the ceiling stays the total
    memory = Device(17e9, 17e9, 200_000.0, 200_000.0, 50e-6, "memory", parallelism=8, iops_request_bytes=4096,
                    request_bw_bytes=4.5e9)
    profile = fit_profile(_points(memory), name="memory")
    assert profile.request_bw_bytes == pytest.approx(4.5e9, rel=0.05)
    assert profile.read_bw_bytes == pytest.approx(17e9, rel=0.05)
    random = [e for p, e in zip(profile.points, profile.errors) if p.rw == "randread"]
    assert max(abs(e) for e in random) < 0.05
    one = predict(None, Workload("randread", 1 << 20), [profile.device()])
    assert one.bw_bytes == pytest.approx(1 / (1 / 4.5e9 + 50e-6 / (1 << 20)), rel=0.05)
    path = str(tmp_path / "memory.json")
    save_profile(profile, path)
    assert load_profile(path).request_bw_bytes == pytest.approx(profile.request_bw_bytes)
    # a disk's single request already streams at its bandwidth: nothing recorded
    assert fit_profile(_points(DISK)).request_bw_bytes is None
    # plan profile prints it
    from storlab.output.plan_text import profile_lines
    assert any("one request alone 4,5" in line for line in profile_lines("mem", 18, 2, profile, None))
    assert not any("one request alone" in line for line in profile_lines("d", 18, 2, fit_profile(_points(DISK)), None))


def test_a_median_far_below_the_mean_at_qd1_is_a_rate_limiter():
    profile = fit_profile(_points(DISK, p50_share=0.03))
    assert not profile.queues and not profile.device().queues
    assert any("rate limiter" in n for n in profile.notes)
    # a throttle's IOPS budget is one request's share whatever its size: its 4 KiB ceiling holds
    # no transfer to take off (only a mechanism's positioning does)
    device = profile.device()
    assert predict(None, Workload("randread", 4096, qd=16), [device]).iops == pytest.approx(profile.read_iops)


def test_a_profile_round_trips_through_its_file_and_feeds_the_model(tmp_path):
    profile = fit_profile(_points(DISK), name="disk")
    path = tmp_path / "disk.json"
    save_profile(profile, str(path))
    again = load_profile(str(path))
    assert again.read_iops == profile.read_iops and again.points == profile.points
    assert predict(None, Workload("randread", 4096, qd=1), [again.device()]).iops == pytest.approx(
        predict(None, Workload("randread", 4096, qd=1), [profile.device()]).iops)


def test_bad_profile_files_are_one_line_naming_the_file(tmp_path):
    with pytest.raises(ProfileError, match="no such profile file"):
        load_profile(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"     # written as text: the suite checks every document json.dumps makes
    bad.write_text('{"schema": "storlab.plan.profile/1", "kind": "plan", "name": "x"}')
    with pytest.raises(ProfileError, match="bad.json: profile field missing"):
        load_profile(str(bad))
    with pytest.raises(ProfileError, match="no measured point"):
        fit_profile([])
    # a profile's one-request rate that is no rate: refused by the device's own checks, one line
    good = tmp_path / "good.json"
    save_profile(fit_profile(_points(DISK)), str(good))
    odd = tmp_path / "odd.json"
    odd.write_text(good.read_text().replace('"request_bw_bytes": null', '"request_bw_bytes": -1.0'))
    with pytest.raises(ProfileError, match="odd.json: .*request_bw_bytes must be a positive finite rate") as info:
        load_profile(str(odd))
    assert "\n" not in str(info.value)


@pytest.mark.loop
def test_plan_profile_measures_a_loop_device_smaller_than_its_default_span(loop_device, tmp_path, capsys):
    # issue 36: plan profile on a block device asked for 1 GiB whatever the device's size, so a
    # 64 MiB loop device was refused ("runs past the end")
    from storlab.cli.main import main
    from storlab.model.profile import load_profile
    dev = loop_device(64 << 20, backing_dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    out_file = tmp_path / "loop.json"
    code = main(["plan", "profile", dev, "--time", "0.2", "--rw", "randread", "--request", "4K", "--qd", "1,4",
                 "-o", str(out_file)])
    _, err = capsys.readouterr()
    assert code == 0, err
    profile = load_profile(str(out_file))
    assert len(profile.points) == 2 and profile.read_iops > 0
