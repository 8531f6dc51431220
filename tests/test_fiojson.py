"""Tests of storlab's fio JSON output (output/fiojson.py, `storlab run --fio-json`): every key a real
fio 3.x writes is there with fio's type, and the counts, bytes and rates are the storlab document's."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "results"))

import rundoc  # noqa: E402
from storlab.cli.main import main
from storlab.measure import stats
from storlab.output.fiojson import FIO_PERCENTILES, FIO_VERSION, fio_error_number, fio_json

needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


def real_fio_json(directory: str, rw: str = "randrw", engine: str = "psync") -> dict:
    """fio's own JSON for a small job on tmpfs."""
    out = subprocess.run(["fio", "--name=ref", f"--filename={directory}/fio.dat", "--size=2M", "--bs=4k",
                          f"--rw={rw}", f"--ioengine={engine}", "--output-format=json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def key_type_differences(fio: dict, ours: dict, path: str = "") -> list[str]:
    """Keys of `fio` missing from `ours` or of another JSON type, recursively (job options and
    percentile maps compared by their keys only where fio's are fixed)."""
    found = []
    for key, value in fio.items():
        where = f"{path}/{key}"
        if key not in ours:
            found.append(f"missing {where}")
            continue
        mine = ours[key]
        if isinstance(value, bool) or isinstance(mine, bool) or type(value) is not type(mine):
            found.append(f"type of {where}: fio {type(value).__name__}, storlab {type(mine).__name__}")
        elif isinstance(value, dict) and key not in ("job options", "global options"):
            found += key_type_differences(value, mine, where)
    return found


@needs_fio
def test_every_key_fio_writes_is_there_with_fios_type(shm_dir):
    fio = real_fio_json(shm_dir)
    ours = fio_json(rundoc.make_run(rw="randrw", engine="io_uring", qd=8))
    top = {k: v for k, v in fio.items() if k != "jobs"}
    assert key_type_differences(top, ours) == []
    assert key_type_differences(fio["jobs"][0], ours["jobs"][0], "/jobs/0") == []


@needs_fio
def test_psync_run_has_the_shape_of_fio_psync(shm_dir):
    """psync has no submission latency in fio (slat N = 0); a storlab psync run says the same."""
    fio = real_fio_json(shm_dir, rw="read")
    ours = fio_json(rundoc.make_run(rw="read", engine="psync"))
    assert key_type_differences(fio["jobs"][0], ours["jobs"][0], "/jobs/0") == []
    assert fio["jobs"][0]["read"]["slat_ns"]["N"] == ours["jobs"][0]["read"]["slat_ns"]["N"] == 0
    assert ours["jobs"][0]["write"]["total_ios"] == 0
    assert "percentile" not in ours["jobs"][0]["write"]["clat_ns"]      # fio: none without samples


def test_values_are_the_documents():
    doc = rundoc.make_run(rw="randrw", engine="io_uring", qd=4, threads=2, phases=["randrw", "read"])
    out = fio_json(doc)
    assert out["fio version"] == FIO_VERSION and [j["jobname"] for j in out["jobs"]] == ["randrw", "read"]
    assert [j["groupid"] for j in out["jobs"]] == [0, 1]
    for phase, job in zip(doc["phases"], out["jobs"]):
        for d in ("read", "write"):
            if d not in phase:
                assert job[d]["total_ios"] == 0 and job[d]["io_bytes"] == 0
                continue
            src, got = phase[d], job[d]
            assert got["total_ios"] == src["ops"]
            assert got["io_bytes"] == src["bytes"] and got["io_kbytes"] == src["bytes"] // 1024
            assert got["iops"] == src["iops"]
            assert got["bw_bytes"] == round(src["bw_bytes"]) and got["bw"] == int(src["bw_bytes"] // 1024)
            assert got["runtime"] == round(src["seconds"] * 1000)
            assert got["lat_ns"]["min"] == src["lat_ns"]["min"] and got["lat_ns"]["max"] == src["lat_ns"]["max"]
            buckets = src["lat_hist"]["buckets"]           # clat falls back to lat when not kept apart
            assert got["clat_ns"]["N"] == stats.count(buckets)
            assert list(got["clat_ns"]["percentile"]) == [f"{q:f}" for q in FIO_PERCENTILES]
            assert got["clat_ns"]["percentile"]["50.000000"] == src["lat_ns"]["p50"]
            assert got["clat_ns"]["percentile"]["99.900000"] == src["lat_ns"]["p999"]
            assert got["bw_samples"] == len(src["timeseries"]["bw_bytes"])
            assert got["bw_min"] == int(min(src["timeseries"]["bw_bytes"]) / 1024)
        lat_total = sum(v for key in ("latency_ns", "latency_us", "latency_ms") for v in job[key].values())
        assert lat_total == pytest.approx(100.0)
    opts = out["jobs"][0]["job options"]
    assert (opts["rw"], opts["bs"], opts["iodepth"], opts["numjobs"], opts["ioengine"]) == \
        ("randrw", "4096", "4", "2", "io_uring")
    assert out["jobs"][0]["iodepth_level"]["4"] == 100.0


def test_steady_state_and_latency_target_are_fios_objects():
    doc = rundoc.make_run(rw="randread", engine="io_uring", qd=16, phases=["randread"])
    doc["phases"][0]["steadystate"] = {"ss": "iops_slope:0.5%", "metric": "iops_slope", "limit": 0.5,
                                       "limit_is_pct": True, "duration_s": 3.0, "attained": True,
                                       "criterion": 0.25, "max_deviation": 12.0, "slope": 2.5,
                                       "samples": [1000.0, 1002.0, 1005.0]}
    doc["phases"][0]["latency_target"] = {"qd": 8, "target_s": 0.0005, "percentile": 99.0, "window_s": 2.0}
    job = fio_json(doc)["jobs"][0]
    assert job["steadystate"] == {"ss": "iops_slope:0.500000%", "duration": 3, "attained": 1,
                                  "criterion": "0.250000%", "max_deviation": 12.0, "slope": 2.5,
                                  "data": {"bw_mean": 0, "iops_mean": 1002, "iops": [1000, 1002, 1005], "bw": []}}
    assert (job["latency_depth"], job["latency_target"], job["latency_percentile"], job["latency_window"]) == \
        (8, 500, 99.0, 2_000_000)


def test_each_phase_has_its_own_steadystate_with_every_series():
    """Each phase judged its own check (fio's examples/steadystate.fio: iops over one, bw_slope
    over the other); a lat check also gives fio's lat_ns series and lat_mean."""
    doc = rundoc.make_run(rw="randread", phases=["write", "read"])
    series = {"iops": [100.0, 101.0], "bw_bytes": [409600.0, 413696.0], "clat_mean_ns": [9000.0, 9100.0]}
    doc["phases"][0]["steadystate"] = {"ss": "iops:10%", "metric": "iops", "limit": 10.0, "limit_is_pct": True,
                                       "duration_s": 2.0, "attained": True, "criterion": 0.5,
                                       "samples": series["iops"], **series}
    doc["phases"][1]["steadystate"] = {"ss": "lat:5%", "metric": "lat", "limit": 5.0, "limit_is_pct": True,
                                       "duration_s": 20.0, "interval_s": 10.0, "attained": False,
                                       "criterion": 0.55, "samples": series["clat_mean_ns"], **series}
    w, r = (j["steadystate"] for j in fio_json(doc)["jobs"])
    assert (w["ss"], w["duration"], w["attained"]) == ("iops:10.000000%", 2, 1)
    assert w["data"] == {"bw_mean": 411648, "iops_mean": 100, "iops": [100, 101], "bw": [409600, 413696]}
    assert (r["ss"], r["duration"], r["attained"], r["criterion"]) == ("lat:5.000000%", 20, 0, "0.550000%")
    assert r["data"]["lat_ns"] == [9000, 9100] and r["data"]["lat_mean"] == 9050 and r["data"]["iops"] == [100, 101]


def test_latency_buckets_follow_fios_ranges():
    """fio counts 750-999 ns under '1000' of latency_ns and 1-1.999 ms under '2' of latency_ms."""
    doc = rundoc.make_run(rw="read")
    samples = [800, 800, 1_500_000, 3_000_000_000]
    doc["phases"][0]["read"]["lat_hist"] = {"scheme": "loglinear6", "buckets": stats.histogram(samples)}
    job = fio_json(doc)["jobs"][0]
    assert job["latency_ns"]["1000"] == 50.0
    assert job["latency_ms"]["2"] == 25.0 and job["latency_ms"][">=2000"] == 25.0


def test_a_sweep_document_is_refused_in_one_line():
    with pytest.raises(ValueError, match="needs a storlab.run/1 document of kind run"):
        fio_json(rundoc.make_sweep(sizes=(4096,)))


def test_run_writes_fio_json_beside_the_document(shm_dir, tmp_path):
    target = f"{shm_dir}/a.dat"
    assert main(["run", "--target", target, "--size", "1m", "--rw", "randread", "--bs", "4k",
                 "--engine", "null", "--time", "0.2s", "--quiet", "--json", str(tmp_path / "doc.json"),
                 "--fio-json", str(tmp_path / "fio.json")]) == 0
    doc = json.loads((tmp_path / "doc.json").read_text())
    out = json.loads((tmp_path / "fio.json").read_text())
    assert out["storlab"]["run_id"] == doc["run_id"]
    assert out["jobs"][0]["read"]["total_ios"] == doc["phases"][0]["read"]["ops"] > 0
    assert out["jobs"][0]["job options"]["filename"] == target


def test_fio_json_to_standard_output_is_refused_before_the_run(capsys):
    assert main(["run", "--engine", "null", "--size", "1m", "--time", "0.1s", "--fio-json", "-"]) == 2
    assert "fio-json: standard output ('-') is not possible here" in capsys.readouterr().err


def test_a_jobs_error_is_the_errno_its_failure_carries_as_fios():
    assert fio_error_number(None) == 0 and fio_error_number("") == 0
    assert fio_error_number("write of 4096 bytes at offset 0 on /dev/full failed: "
                            "No space left on device (os error 28)") == 28
    assert fio_error_number("stopped: stall") == 1
