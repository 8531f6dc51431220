"""Passes: summary statistics against hand-computed values, exact histogram merging, spread warning."""
import pytest
from storlab.jobs.job import resolve_job
from storlab.measure import stats
from storlab.measure.passes import describe, format_interval, summarise, t95
from storlab.measure.runner import run_job


def test_describe_matches_hand_computation():
    d = describe([10.0, 12.0, 14.0])
    # mean 12, sample sd 2, t(2 dof) = 4.303, half-width = 4.303 * 2 / sqrt(3) = 4.9687
    assert d["mean"] == 12.0 and d["stddev"] == pytest.approx(2.0)
    assert d["ci95"] == pytest.approx([12 - 4.96867, 12 + 4.96867], abs=1e-4)
    assert (d["min"], d["max"]) == (10.0, 14.0)
    assert d["spread_pct"] == pytest.approx(100 * 4 / 12)
    assert t95(1) == 12.706 and t95(30) == 2.042 and t95(200) == 1.96
    one = describe([5.0])
    assert one["stddev"] == 0.0 and one["ci95"] == [5.0, 5.0]
    assert d["ci95_note"] is None and d["ci95_shown"] == d["ci95"]
    assert one["ci95_note"] == "1 pass: no interval"


MiB = 1 << 20


def test_two_passes_interval_prints_as_brackets_clipped_at_zero_with_a_note():
    # the README's case: 206.9 and 1,135.5 MiB/s; computed interval -5,228.0 .. 6,570.5 MiB/s,
    # printed before as "95 % CI -5,228.0-6,570.5" (a dash that reads as a minus sign)
    d = describe([206.9 * MiB, 1135.5 * MiB], floor=0.0)
    assert d["ci95"][0] / MiB == pytest.approx(-5228.0, abs=0.5)
    assert d["ci95"][1] / MiB == pytest.approx(6570.5, abs=0.5)
    assert d["ci95_shown"] == [0.0, d["ci95"][1]]
    assert "only 2 passes" in d["ci95_note"] and "12.706" in d["ci95_note"]
    text = format_interval(d, MiB, "MiB/s", "bandwidth")
    assert text.startswith("95 % CI [0.0, 6,570.6] MiB/s (lower bound -5,228.2 clipped at 0.0: "
                           "bandwidth cannot be negative; only 2 passes")
    assert "-5,228.2-6,570.6" not in text


def test_interval_above_the_floor_is_shown_as_computed():
    d = describe([100.0, 110.0, 120.0], floor=0.0)
    assert d["ci95_shown"] == d["ci95"]
    assert format_interval(d) == f"95 % CI [{d['ci95'][0]:,.1f}, {d['ci95'][1]:,.1f}]"


def phase(name, bw, samples):
    buckets = stats.histogram(samples)
    return {"name": name, "read": {"bw_bytes": bw, "iops": bw / 4096, "bytes": 4096 * len(samples),
                                   "ops": len(samples), "lat_hist": {"scheme": "loglinear6", "buckets": buckets},
                                   "lat_ns": {"min": min(samples), "max": max(samples),
                                              "mean": sum(samples) / len(samples)}}}


def test_summary_merges_histograms_exactly_and_warns_on_spread():
    a, b = [1000, 2000, 3000], [5000, 7000]
    summaries, warnings = summarise([phase("r", 100.0, a), phase("r", 130.0, b)], spread_warn_pct=10)
    s = summaries[0]["read"]
    assert s["lat_hist"]["buckets"] == stats.histogram(a + b)
    assert (s["lat_ns"]["min"], s["lat_ns"]["max"]) == (1000, 7000)
    assert s["lat_ns"]["mean"] == pytest.approx(sum(a + b) / 5)
    assert s["ops"] == 5
    assert [w["code"] for w in warnings] == ["pass_spread"]
    _, quiet = summarise([phase("r", 100.0, a), phase("r", 105.0, b)], spread_warn_pct=10)
    assert quiet == []


def test_three_passes_end_to_end(shm_dir):
    job = resolve_job({"target": [f"{shm_dir}/p.dat"], "size": "1m", "engine": "null", "null_delay": "1ms",
                       "time": "200ms", "passes": "3", "pass_delay": "50ms"})
    doc = run_job(job)
    assert [p["pass"] for p in doc["phases"]] == [1, 2, 3]
    summary = doc["passes"]["phases"][0]["read"]
    assert summary["bw_bytes"]["n"] == 3
    assert summary["ops"] == sum(p["read"]["ops"] for p in doc["phases"])
    assert stats.count(summary["lat_hist"]["buckets"]) == summary["ops"]
    lo, hi = summary["bw_bytes"]["ci95"]
    assert lo <= summary["bw_bytes"]["mean"] <= hi


def test_two_passes_render_the_interval_in_brackets_with_a_note(shm_dir):
    from storlab.output import render_table

    job = resolve_job({"target": [f"{shm_dir}/p.dat"], "size": "1m", "engine": "null", "null_delay": "1ms",
                       "time": "100ms", "passes": "2"})
    doc = run_job(job)
    line = next(text for text in render_table(doc).splitlines() if " over 2 passes: " in text)
    assert "95 % CI [" in line and "] MiB/s" in line and "only 2 passes" in line
    lo, hi = doc["passes"]["phases"][0]["read"]["bw_bytes"]["ci95_shown"]
    assert lo >= 0.0 and f"[{lo / MiB:,.1f}, {hi / MiB:,.1f}]" in line


def test_verified_passes_carry_their_pass_number(shm_dir):
    job = resolve_job({"target": [f"{shm_dir}/v.dat"], "size": "256k", "rw": "write", "verify": "crc32c",
                       "passes": "2"})
    run_job(job)
    # the data on disk is from pass 2: a read expecting pass 1 calls it stale
    stale = run_job(resolve_job({"target": [f"{shm_dir}/v.dat"], "rw": "read", "verify": "crc32c",
                                 "verify_pass": "1"}))
    v = stale["phases"][0]["verify"]
    assert v["mismatches"] == 64 and v["first"][0]["field"] == "pass" and v["first"][0]["found"].startswith("2")
