"""Steady state (fio's ss, ss_dur, ss_ramp): the criteria on synthetic progress, and a run that
stops once steady."""
from __future__ import annotations

import pytest
from storlab.errors import UserError
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


def test_bad_values_name_the_option():
    with pytest.raises(OptionError, match=r"ss: 'iops' is not allowed; use iops:L"):
        parse_value("ss", "iops")
    assert parse_value("ss", "IOPS_SLOPE:0.30%") == "iops_slope:0.3%"
    with pytest.raises(UserError, match="ss_dur"):
        SteadyState.of({"ss": "iops:1%"})


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
