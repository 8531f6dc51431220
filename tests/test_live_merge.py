"""Per-node and per-link totals of a merged MPI phase (measure/aggregate.py: `mpi.nodes`,
`mpi.links`) and the summary line that names the slowest link (output/mpi_summary.py)."""
from __future__ import annotations

import pytest
from storlab.measure.aggregate import merge_phase
from storlab.output.mpi_summary import render_summary

MiB = 1 << 20


def rank_result(targets: list[str], mib_each: int, end_s: float) -> dict:
    workers = [{"id": i, "target": t, "start_s": 0.0, "end_s": end_s, "read_bytes": 0,
                "write_bytes": mib_each * MiB, "read_ops": 0, "write_ops": mib_each} for i, t in enumerate(targets)]
    return {"name": "write", "complete": True, "stop_reason": "done", "error": None, "seconds": end_s,
            "ramp_s": 0.0, "start_unix_s": 1_795_858_900.0, "offset_s": 0.0, "workers": workers}


def test_each_node_and_each_link_of_a_node_to_a_target_is_totalled():
    # ranks 0, 1 on n1 write to server A; ranks 2, 3 on n2 write to A and to B, B half as fast
    results = [rank_result(["/mnt/a/f0"], 100, 1.0), rank_result(["/mnt/a/f0"], 100, 1.0),
               rank_result(["/mnt/a/f0", "/mnt/b/f1"], 100, 2.0), rank_result(["/mnt/a/f0"], 100, 1.0)]
    phase = merge_phase(results, None, ["n1", "n1", "n2", "n2"])
    nodes = {n["node"]: n for n in phase["mpi"]["nodes"]}
    assert nodes["n1"]["ranks"] == [0, 1] and nodes["n1"]["bytes"] == 200 * MiB
    assert nodes["n2"]["ranks"] == [2, 3] and nodes["n2"]["bytes"] == 300 * MiB
    assert nodes["n2"]["bw_bytes"] == pytest.approx(300 * MiB / 2.0)
    links = {(x["node"], x["target"]): x for x in phase["mpi"]["links"]}
    assert set(links) == {("n1", "/mnt/a/f0"), ("n2", "/mnt/a/f0"), ("n2", "/mnt/b/f1")}
    assert links[("n2", "/mnt/a/f0")]["ranks"] == [2, 3] and links[("n2", "/mnt/a/f0")]["bytes"] == 200 * MiB
    assert links[("n2", "/mnt/b/f1")]["bw_bytes"] == pytest.approx(100 * MiB / 2.0)
    assert sum(x["bytes"] for x in links.values()) == phase["aggregate"]["bytes"]
    assert phase["mpi"]["first_done"]["rank"] == 0 and phase["mpi"]["last_done"]["rank"] == 2
    doc = {"kind": "run", "mpi": {"size": 4, "nodes": [{"node": "n1"}, {"node": "n2"}], "clock": []},
           "phases": [phase]}
    text = render_summary(doc)
    assert "3 links (node to target); slowest n2 to /mnt/b/f1: 100.0 MiB, 50.00 MiB/s" in text
