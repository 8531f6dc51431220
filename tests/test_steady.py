"""Steady state (fio's ss, ss_dur, ss_ramp, ss_interval): the criteria on synthetic progress, each
phase's own check, and runs that stop once steady."""
from __future__ import annotations

import pytest
from storlab.errors import UserError
from storlab.jobs.job import resolve_job
from storlab.jobs.options import OptionError, parse_value
from storlab.measure.steady import SteadyState
from test_cli_run import run_cli  # tests/ is on sys.path (pytest prepend mode)


def feed_rates(ss: SteadyState, rates: list[float], tick: float = 0.25) -> bool:
    """Progress readings of a phase whose IOPS are rates[k] in second k, read every `tick`."""
    t, ops = 0.0, 0.0
    ss.feed(0.0, 0.0, 0.0)
    for rate in rates:
        for _ in range(round(1 / tick)):
            t += tick
            ops += rate * tick
            if ss.feed(t, ops, ops * 4096):
                return True
    return False


def test_level_is_reached_when_every_sample_of_the_window_is_near_the_mean():
    ss = SteadyState("iops:5%", 4.0)
    assert not feed_rates(ss, [100, 300, 200, 1000, 1000])
    ss = SteadyState("iops:5%", 4.0)
    assert feed_rates(ss, [100, 300, 200, 1000, 1200, 1010, 990, 1000, 1005])
    assert ss.attained and ss.attained_at_s == 9.0
    assert ss.samples[-4:] == pytest.approx([1010, 990, 1000, 1005])
    assert ss.criterion == pytest.approx(100 * 11.25 / 1001.25)


def test_slope_is_the_least_squares_slope_per_second_in_percent_of_the_mean():
    rising = SteadyState("iops_slope:1%", 5.0)
    assert not feed_rates(rising, [1000, 1100, 1200, 1300, 1400, 1500])
    assert rising.criterion == pytest.approx(100 * 100 / 1300)   # slope 100 IOPS/s over a mean of 1300
    flat = SteadyState("iops_slope:1%", 5.0)
    assert feed_rates(flat, [1000, 1010, 990, 1000, 1005])
    # bandwidth in bytes/s, an absolute limit
    bw = SteadyState("bw:100000", 3.0)
    assert feed_rates(bw, [100, 101, 100, 100])   # 4096 bytes per op: deviation 2731 bytes/s < 1e5


def test_samples_start_after_the_ramp():
    ss = SteadyState("iops:1%", 2.0, ramp_s=3.0)
    assert not feed_rates(ss, [5, 900, 1000])
    ss = SteadyState("iops:1%", 2.0, ramp_s=3.0)
    assert feed_rates(ss, [5, 900, 1000, 1000, 1000])
    assert ss.attained_at_s == 5.0 and ss.samples == pytest.approx([1000, 1000])


def test_a_sample_is_the_mean_over_its_interval():
    """ss_interval 2 s (fio's ss_interval): each sample is the operations of its interval / 2 s,
    whatever the rate did inside it; the window holds ss_dur / ss_interval samples."""
    ss = SteadyState("iops:1%", 6.0, interval_s=2.0)
    assert ss.window == 3
    # second by second: 0, 2000 | 500, 1500 | 1000, 1000 | 1900, 100: each pair's mean is 1000
    assert feed_rates(ss, [0, 2000, 500, 1500, 1000, 1000, 1900, 100])
    assert ss.samples == pytest.approx([1000, 1000, 1000]) and ss.attained_at_s == 6.0
    # sampled every second instead, the same phase is nowhere near flat
    assert not feed_rates(SteadyState("iops:1%", 6.0), [0, 2000, 500, 1500, 1000, 1000, 1900, 100])
    # the slope is per sample, as fio computes it: 100 IOPS more every 2 s is 100 per sample
    rising = SteadyState("iops_slope:0.1%", 6.0, interval_s=2.0)
    assert not feed_rates(rising, [1000, 1000, 1100, 1100, 1200, 1200])
    assert rising.slope == pytest.approx(100.0) and rising.criterion == pytest.approx(100 * 100 / 1100)


def feed_latency(ss: SteadyState, clat_us: list[float], iops: float = 1000.0, tick: float = 0.25) -> bool:
    """Progress of a phase at `iops` whose completions in second k take clat_us[k] each: the
    cumulative completion latency grows by ops x clat."""
    t, ops, lat_ns = 0.0, 0.0, 0.0
    ss.feed(0.0, 0.0, 0.0, 0.0)
    for clat in clat_us:
        for _ in range(round(1 / tick)):
            t += tick
            ops += iops * tick
            lat_ns += iops * tick * clat * 1000
            if ss.feed(t, ops, ops * 4096, lat_ns):
                return True
    return False


def test_lat_judges_the_mean_completion_latency_of_each_interval():
    ss = SteadyState("lat:5%", 3.0)
    assert not feed_latency(ss, [50, 80, 100, 120])    # still rising: 20 us of 100 is 20 %
    assert ss.samples == pytest.approx([80_000, 100_000, 120_000])   # ns, the mean of each second
    ss = SteadyState("lat:5%", 3.0)
    assert feed_latency(ss, [50, 80, 100, 102, 99, 101])
    assert ss.attained_at_s == 5.0 and ss.criterion == pytest.approx(100 * (102 - 301 / 3) / (301 / 3))
    # an absolute limit is a latency (lat:2us = 2000 ns); the slope in ns per sample
    assert feed_latency(SteadyState("lat:2us", 3.0), [100, 101, 100, 101])
    slope = SteadyState("lat_slope:1000ns", 3.0)
    assert not feed_latency(slope, [100, 102, 104]) and slope.slope == pytest.approx(2000)
    # the other series are kept beside the judged one, as fio keeps them
    assert slope.iops == pytest.approx([1000] * 3) and slope.bw_bytes == pytest.approx([4096000] * 3)
    # an interval without completions has a mean latency of 0, as in fio
    idle = SteadyState("lat:5%", 2.0)
    assert not feed_latency(idle, [100, 100, 100], iops=0.0) and idle.samples == [0.0, 0.0]


def test_bad_values_name_the_option():
    with pytest.raises(OptionError, match=r"ss: 'iops' is not allowed; use iops:L"):
        parse_value("ss", "iops")
    assert parse_value("ss", "IOPS_SLOPE:0.30%") == "iops_slope:0.3%"
    assert parse_value("ss", "lat:0.5ms") == "lat:500us"
    with pytest.raises(UserError, match="ss_dur"):
        SteadyState.of({"ss": "iops:1%"})
    with pytest.raises(UserError, match=r"^ss_dur: 3 s holds fewer than 2 samples of ss_interval 2 s; "
                                        r"allowed: at least 2 x ss_interval$"):
        SteadyState.of({"ss": "iops:1%", "ss_dur": 3.0, "ss_interval": 2.0})
    with pytest.raises(OptionError, match=r"ss_interval: .* out of range"):
        parse_value("ss_interval", "0.001")


def test_a_phase_sets_its_own_check_and_the_others_take_the_runs(tmp_path):
    job = resolve_job({}, {"ss": "iops:5%", "ss_dur": "4s", "phase": [
        {"name": "a", "rw": "write"},
        {"name": "b", "rw": "read", "ss": "bw_slope:1%", "ss_dur": "10s", "ss_interval": "2s"}]})
    a, b = (job.settings_of(p) for p in job.phases)
    assert (a["ss"], a["ss_dur"], a["ss_interval"]) == ("iops:5%", 4.0, 1.0)
    assert (b["ss"], b["ss_dur"], b["ss_interval"]) == ("bw_slope:1%", 10.0, 2.0)
    # a command-line flag applies to every phase
    job = resolve_job({"ss_dur": "6"}, {"ss": "iops:5%", "phase": [{"rw": "write", "ss_dur": "10s"}]})
    assert job.settings_of(job.phases[0])["ss_dur"] == 6.0
    # one line naming where, when a phase's values do not go together, or a group sets them
    with pytest.raises(OptionError, match=r"^job file phase 2: ss_dur: steady state \(ss\) is judged over a window"):
        resolve_job({}, {"phase": [{"rw": "write"}, {"rw": "read", "ss": "iops:1%"}]})
    with pytest.raises(OptionError, match=r"^job file phase 1 group 1: option 'ss' applies to a whole phase; "
                                        r"put it in the \[\[phase\]\] table"):
        resolve_job({}, {"phase": [{"group": [{"rw": "read", "ss": "iops:1%"}]}]})


def test_a_run_stops_once_steady_and_says_so():
    r = run_cli("--engine", "null", "--rw", "randread", "--time", "30", "--ss", "iops:50%", "--ss-dur", "2")
    assert r["rc"] == 0
    doc = r["doc"]
    phase = doc["phases"][0]
    assert doc["complete"] and phase["complete"] and phase["stop_reason"] == "steady_state"
    assert phase["steadystate"]["attained"] and phase["seconds"] < 20
    # never flat enough: runs to its time and says it was not reached
    r = run_cli("--engine", "null", "--rw", "randread", "--time", "1.5", "--ss", "iops_slope:0.000001", "--ss-dur", "5")
    phase = r["doc"]["phases"][0]
    assert r["rc"] == 0 and phase["stop_reason"] == "done" and not phase["steadystate"]["attained"]


def test_each_phase_stops_at_its_own_steady_state(tmp_path):
    """Two phases (fio's examples/steadystate.fio, scaled down): the first takes the run's check,
    the second has its own criterion, window, ramp and interval; each stops once steady and its
    record says its own check."""
    job = tmp_path / "ss.toml"
    job.write_text('time = "30s"\nengine = "null"\nss = "iops:50%"\nss_dur = "1s"\nss_interval = "0.5s"\n'
                   '[[phase]]\nname = "w"\nrw = "write"\n'
                   '[[phase]]\nname = "r"\nrw = "randread"\nss = "bw_slope:60%"\nss_dur = "1s"\n'
                   'ss_ramp = "0.25s"\nss_interval = "0.25s"\n')
    r = run_cli(str(job))
    assert r["rc"] == 0
    w, rd = r["doc"]["phases"]
    for phase in (w, rd):
        assert phase["complete"] and phase["stop_reason"] == "steady_state" and phase["seconds"] < 20
        assert phase["steadystate"]["attained"]
    assert (w["steadystate"]["ss"], w["steadystate"]["interval_s"], w["steadystate"]["ramp_s"]) == ("iops:50%", 0.5, 0.0)
    assert len(w["steadystate"]["samples"]) == 2 and w["steadystate"]["attained_at_s"] >= 1.0
    assert (rd["steadystate"]["ss"], rd["steadystate"]["ramp_s"], rd["steadystate"]["interval_s"]) == ("bw_slope:60%", 0.25, 0.25)
    assert len(rd["steadystate"]["samples"]) == 4 and rd["steadystate"]["attained_at_s"] >= 1.25
    # the job record says which phase set its own check
    recorded = r["doc"]["job"]["phases"]
    assert "ss" not in recorded[0] and (recorded[1]["ss"], recorded[1]["ss_interval"]) == ("bw_slope:60%", 0.25)
    assert r["doc"]["job"]["ss"] == "iops:50%"


def test_lat_stops_a_real_run_once_its_completion_latency_is_flat():
    """The engine publishes the sum of completion latencies: a null engine taking 200 us per request
    has a mean clat of about 200 us in every interval, flat within 50 %."""
    r = run_cli("--engine", "null", "--null-delay", "200us", "--rw", "randread", "--qd", "4", "--time", "30",
                "--ss", "lat:50%", "--ss-dur", "1", "--ss-interval", "0.25")
    assert r["rc"] == 0
    phase = r["doc"]["phases"][0]
    ss = phase["steadystate"]
    assert phase["stop_reason"] == "steady_state" and ss["attained"] and phase["seconds"] < 20
    assert ss["metric"] == "lat" and len(ss["samples"]) == 4
    assert all(190_000 <= v <= 2_000_000 for v in ss["samples"]), ss["samples"]
    assert ss["samples"] == ss["clat_mean_ns"]
