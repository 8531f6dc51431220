"""`storlab net`, the fabric probe, on the cluster in a box (tests/testbed/cluster.py): each
client-server pair's TCP throughput and round trip, every client at once, the shared server link
it finds, iperf3 beside it on the same link, and refusals of bad input."""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from storlab import schemas
from storlab.cli.main import ExitCode, main
from testbed.cluster import Cluster, Fabric, cluster_unavailable, mpi_unavailable

REPO = Path(__file__).resolve().parents[1]
WHY = cluster_unavailable()
WHY_MPI = mpi_unavailable()


# one TCP stream's payload over a link htb shapes to R: 1448 of every 1514 bytes on the wire
TCP_PAYLOAD_EFFICIENCY = 1448 / 1514


def net(c: Cluster, hosts: list[str], tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "net.json"
    r = subprocess.run(c.mpiexec(hosts, len(hosts)) + [
        sys.executable, "-m", "storlab", "net", "--json", str(out), "--no-store", *flags],
        capture_output=True, text=True, timeout=240, cwd=REPO)
    return r, (json.loads(out.read_text()) if out.exists() else {})


@pytest.mark.root
@pytest.mark.netns
@pytest.mark.mpi
@pytest.mark.skipif(WHY is not None, reason=f"cluster in a box: {WHY}")
@pytest.mark.skipif(WHY_MPI is not None, reason=f"ranks on nodes: {WHY_MPI}")
def test_net_measures_each_pair_and_finds_the_server_link_the_clients_share(tmp_path):
    rate, server_rate = 80_000_000, 40_000_000
    with Cluster(["c1", "c2", "srv"], [Fabric("storage", rate_bps=rate, rates={"srv": server_rate})]) as c:
        r, doc = net(c, ["c1", "c2", "srv"], tmp_path, "--servers", "srv", "--time", "2s")
    assert r.returncode == 0, r.stderr
    schemas.validate(doc)
    assert doc["kind"] == "net" and doc["complete"] is True
    assert doc["servers"] == ["srv"] and doc["clients"] == ["c1", "c2"]
    expected = server_rate / 8 * TCP_PAYLOAD_EFFICIENCY        # each pair alone: the server's link binds
    for pair in doc["pairs"]:
        assert abs(pair["bw_bytes"] / expected - 1) < 0.05, pair
        assert 0 < pair["rtt_s"] < 0.01
    # both clients at once share the server's link: together about one link's worth, not two
    assert abs(doc["aggregate_bw_bytes"] / expected - 1) < 0.08
    assert any(f.startswith("srv:") and "share" in f for f in doc["findings"])
    assert "c1" in r.stdout and "srv" in r.stdout and "Mbit/s" in r.stdout


@pytest.mark.root
@pytest.mark.netns
@pytest.mark.mpi
@pytest.mark.skipif(WHY is not None, reason=f"cluster in a box: {WHY}")
@pytest.mark.skipif(WHY_MPI is not None, reason=f"ranks on nodes: {WHY_MPI}")
@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed (apt-get install iperf3)")
def test_net_agrees_with_iperf3_on_the_same_link(tmp_path):
    with Cluster(["c1", "srv"], [Fabric("storage", rate_bps=100_000_000)]) as c:
        r, doc = net(c, ["c1", "srv"], tmp_path, "--servers", "srv", "--time", "3s")
        server = c.popen("srv", ["iperf3", "-s", "-1", "-J"], stdout=subprocess.PIPE, text=True)
        try:
            c.run("c1", [sys.executable, "-c", "import time; time.sleep(0.3)"])
            client = json.loads(c.run("c1", ["iperf3", "-c", c.address("srv"), "-t", "3", "-J"], timeout=60))
        finally:
            server.wait(timeout=30)
    assert r.returncode == 0, r.stderr
    iperf3 = client["end"]["sum_received"]["bits_per_second"] / 8
    assert abs(doc["pairs"][0]["bw_bytes"] / iperf3 - 1) < 0.05, (doc["pairs"][0]["bw_bytes"], iperf3)


@pytest.mark.parametrize("argv, says", [
    (["net", "--servers", ""], "servers"),
    (["net", "--servers", "srv", "--time", "0s"], "time"),
    (["net", "--servers", "srv", "--streams", "0"], "streams"),
    (["net", "--servers", "srv", "--streams", "nan"], "streams"),
])
def test_bad_net_flags_are_one_line(capsys, argv, says):
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == ExitCode.USAGE and "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("storlab net: error: ")]
    assert len(lines) == 1 and says in lines[0], err


def test_net_without_a_launcher_says_it_needs_ranks_on_the_nodes(capsys):
    rc = main(["net", "--servers", "srv", "--time", "1s", "--no-store"])
    err = capsys.readouterr().err
    assert rc == ExitCode.USAGE and "Traceback" not in err
    assert "mpiexec" in err and "srv" in err


@pytest.mark.root
@pytest.mark.netns
@pytest.mark.mpi
@pytest.mark.skipif(WHY is not None, reason=f"cluster in a box: {WHY}")
@pytest.mark.skipif(WHY_MPI is not None, reason=f"ranks on nodes: {WHY_MPI}")
def test_an_interrupted_probe_keeps_the_pairs_it_measured(tmp_path):
    """SIGINT to mpiexec after the first pair: the document is written, complete false, with that
    pair, exit 130, and the cluster's nodes hold no storlab process afterwards."""
    out = tmp_path / "net.json"
    with Cluster(["c1", "c2", "srv"], [Fabric("storage", rate_bps=50_000_000)]) as c:
        p = subprocess.Popen(c.mpiexec(["c1", "c2", "srv"], 3) + [
            sys.executable, "-m", "storlab", "net", "--servers", "srv", "--time", "3s", "--json", str(out),
            "--no-store"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        try:
            first = p.stderr.readline()
            assert "c1 -> srv" in first, first + p.stderr.read()
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=60)
        finally:
            p.kill()
        leftover = [c.run(n, ["pgrep", "-f", "storlab net"], check=False).strip() for n in c.nodes]
    assert p.returncode == 130, err
    doc = json.loads(out.read_text())
    schemas.validate(doc)
    assert doc["complete"] is False and doc["stop_reason"] == "interrupted"
    assert [(q["client"], q["server"]) for q in doc["pairs"]][:1] == [("c1", "srv")]
    assert "interrupted" in err
    assert leftover == ["", "", ""]
