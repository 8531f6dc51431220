"""OpenMetrics export of stored runs (output/openmetrics.py), read back with the Prometheus
project's own parser (prometheus-client, the `test` extra): every family parses, carries the
labels host, target, job, phase and direction, and gives back the document's figures."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "results"))

import rundoc  # noqa: E402
from storlab.output import export  # noqa: E402
from storlab.output.openmetrics import Family, job_name, render, to_openmetrics  # noqa: E402

parser = pytest.importorskip("prometheus_client.openmetrics.parser",
                             reason="prometheus-client not installed (pip install prometheus-client)")


def parse(text: str) -> dict[str, object]:
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def samples(fams, family: str, name: str | None = None) -> list:
    return [s for s in fams[family].samples if name is None or s.name == name]


def test_a_run_exports_every_phase_and_direction_with_its_labels():
    doc = rundoc.make_run(rw="randrw", phases=["write", "randrw"], host="node17", targets=["/dev/shm/a.dat"])
    fams = parse(export([doc], "openmetrics"))
    bw = samples(fams, "storlab_bandwidth_bytes_per_second")
    assert [(s.labels["phase"], s.labels["direction"]) for s in bw] == [
        ("write", "write"), ("randrw", "read"), ("randrw", "write")]
    for s in bw:
        assert s.labels["host"] == "node17" and s.labels["target"] == "/dev/shm/a.dat"
        assert s.labels["job"] == "run" and s.labels["run_id"] == doc["run_id"]
    assert bw[1].value == pytest.approx(doc["phases"][1]["read"]["bw_bytes"])
    iops = samples(fams, "storlab_iops")
    assert iops[2].value == pytest.approx(doc["phases"][1]["write"]["iops"])
    (written,) = [s for s in samples(fams, "storlab_io_bytes", "storlab_io_bytes_total")
                  if s.labels["phase"] == "write"]
    assert written.value == doc["phases"][0]["write"]["bytes"]
    assert fams["storlab_bandwidth_bytes_per_second"].unit == "bytes_per_second"


def test_latency_quantiles_are_a_summary_in_seconds():
    doc = rundoc.make_run(rw="randread")
    lat = doc["phases"][0]["read"]["lat_ns"]
    fams = parse(to_openmetrics([doc]))
    family = fams["storlab_latency_seconds"]
    assert family.type == "summary" and family.unit == "seconds"
    quantiles = {s.labels["quantile"]: s.value for s in family.samples if s.name == "storlab_latency_seconds"}
    assert quantiles == pytest.approx({"0.5": lat["p50"] / 1e9, "0.9": lat["p90"] / 1e9, "0.99": lat["p99"] / 1e9,
                                       "0.999": lat["p999"] / 1e9, "1": lat["max"] / 1e9})
    (count,) = samples(fams, "storlab_latency_seconds", "storlab_latency_seconds_count")
    assert count.value == doc["phases"][0]["read"]["ops"]
    (total,) = samples(fams, "storlab_latency_seconds", "storlab_latency_seconds_sum")
    assert total.value == pytest.approx(lat["mean"] * count.value / 1e9)


def test_samples_are_stamped_with_the_phase_end():
    doc = rundoc.make_run(rw="read")
    phase = doc["phases"][0]
    phase["start_unix_s"] = 1795858904.5
    fams = parse(to_openmetrics([doc]))
    (bw,) = samples(fams, "storlab_bandwidth_bytes_per_second")
    end = 1795858904.5 + max(w["end_s"] for w in phase["workers"])
    assert float(bw.timestamp) == pytest.approx(end, abs=1e-3)


def test_several_runs_and_passes_stay_distinct_series():
    a, b = rundoc.make_run(seed=1), rundoc.make_run(seed=2)
    b["phases"].append({**b["phases"][0], "pass": 2})
    b["phases"][0]["pass"] = 1
    fams = parse(to_openmetrics([a, b]))
    keys = [tuple(sorted(s.labels.items())) for s in samples(fams, "storlab_iops")]
    assert len(keys) == len(set(keys)) == 3
    assert sorted(s.labels.get("pass", "-") for s in samples(fams, "storlab_iops")) == ["-", "1", "2"]


def test_an_mpi_run_adds_each_nodes_bytes_and_rate():
    doc = rundoc.make_run(rw="write")
    doc["phases"][0]["mpi"] = {"nodes": [
        {"node": "n1", "ranks": [0, 1], "bytes": 1000, "start_s": 0.0, "end_s": 2.0, "bw_bytes": 500.0},
        {"node": "n2", "ranks": [2, 3], "bytes": 600, "start_s": 0.0, "end_s": 2.0, "bw_bytes": 300.0}]}
    fams = parse(to_openmetrics([doc]))
    node_bw = {s.labels["host"]: s.value for s in samples(fams, "storlab_node_bandwidth_bytes_per_second")}
    assert node_bw == {"n1": 500.0, "n2": 300.0}
    node_bytes = {s.labels["host"]: s.value for s in samples(fams, "storlab_node_io_bytes")}
    assert node_bytes == {"n1": 1000, "n2": 600}


def test_labels_with_quotes_backslashes_and_newlines_round_trip():
    odd = 'a "b"\\c\nd'
    doc = rundoc.make_run(targets=["/dev/shm/x.dat"])
    doc["environment"]["host"] = odd
    fams = parse(to_openmetrics([doc]))
    assert {s.labels["host"] for s in samples(fams, "storlab_iops")} == {odd}


def test_the_job_label_is_the_job_files_name_else_the_command():
    assert job_name({"argv": ["storlab", "run", "jobs/ckpt.toml", "--threads", "4"]}) == "ckpt"
    assert job_name({"argv": ["storlab", "run", "--fio", "x/seq.fio"]}) == "seq"
    assert job_name({"argv": ["storlab", "scale", "--rw", "write"]}) == "scale"
    assert job_name({"kind": "run"}) == "run"


def test_no_runs_or_no_io_gives_an_empty_but_valid_exposition():
    assert render([Family("storlab_iops", "gauge", "", "x")]) == "# EOF\n"
    meta_like = {**rundoc.make_run(), "phases": [{"name": "create", "ops": 10}]}
    assert list(parser.text_string_to_metric_families(to_openmetrics([meta_like]))) == []
