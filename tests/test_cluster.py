"""The cluster in a box (tests/testbed/cluster.py, docs/testbed.md): nodes with host names of their
own, shaped links measured at their rate, a slower link, ranks placed on nodes by mpiexec, storlab
run across two nodes, and nothing left behind, also after SIGINT or SIGTERM."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from testbed.cluster import Cluster, ClusterError, Fabric, cluster_unavailable, leftovers, mpi_unavailable

REPO = Path(__file__).resolve().parents[1]
WHY = cluster_unavailable()
pytestmark = [pytest.mark.root, pytest.mark.netns,
              pytest.mark.skipif(WHY is not None, reason=f"cluster in a box: {WHY}")]

# A receiver that counts the bytes of one TCP connection from its first byte to the last, and a
# sender that writes for a given time: the goodput of one stream over a link
RECEIVER = """
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); n = 0; t0 = None
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    t0 = t0 or time.monotonic(); n += len(b)
print(n * 8 / (time.monotonic() - t0))
"""
SENDER = """
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2]))); chunk = b"x" * 65536; t = time.monotonic()
while time.monotonic() - t < float(sys.argv[3]):
    c.sendall(chunk)
c.close()
"""
# TCP over Ethernet at MTU 1500 with timestamps: 1448 payload bytes in 1514 on the wire (htb counts
# the Ethernet frame): the goodput a link shaped to R carries is about 0.956 R
TCP_PAYLOAD_EFFICIENCY = 1448 / 1514


def goodput_bps(c: Cluster, src: str, dst: str, port: int = 5201, seconds: float = 2.0) -> float:
    rx = c.popen(dst, [sys.executable, "-c", RECEIVER, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert rx.stdout.readline().strip() == "ready"
        c.run(src, [sys.executable, "-c", SENDER, c.address(dst), str(port), str(seconds)], timeout=seconds + 20)
        out, _ = rx.communicate(timeout=20)
        return float(out.strip())
    finally:
        rx.kill()


def test_nodes_have_their_own_host_names_and_reach_each_other_only_inside_the_cluster():
    with Cluster(["n1", "n2", "srv"]) as c:
        assert [c.run(n, ["hostname"]).strip() for n in c.nodes] == ["n1", "n2", "srv"]
        assert os.uname().nodename not in ("n1", "n2", "srv")
        # the host's own network holds no address of the cluster
        host_addrs = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
        assert "10.213." not in host_addrs
        c.run("n1", [sys.executable, "-c", f"import socket; socket.create_connection(('{c.address('n2')}', 9), 2)"],
              check=False)
    assert leftovers() == []


def test_shaped_links_carry_their_rate_and_a_slower_link_its_own():
    rate, slow = 80_000_000, 20_000_000
    with Cluster(["n1", "n2", "srv"], [Fabric("storage", rate_bps=rate, rates={"srv": slow})]) as c:
        fast_bps = goodput_bps(c, "n1", "n2")
        to_slow_bps = goodput_bps(c, "n1", "srv")
        from_slow_bps = goodput_bps(c, "srv", "n2")
    for measured, shaped in ((fast_bps, rate), (to_slow_bps, slow), (from_slow_bps, slow)):
        expected = shaped * TCP_PAYLOAD_EFFICIENCY
        assert abs(measured / expected - 1) < 0.05, f"{measured / 1e6:.1f} Mbit/s on a {shaped / 1e6:.0f} Mbit/s link"
    assert leftovers() == []


def test_two_fabrics_keep_their_own_addresses_and_rates():
    with Cluster(["a", "b"], [Fabric("storage", rate_bps=40_000_000), Fabric("mpi", rate_bps=10_000_000)]) as c:
        assert c.address("b", "storage") == "10.213.1.2" and c.address("b", "mpi") == "10.213.2.2"
        assert c.interface("mpi") in c.run("a", ["ip", "-o", "link"])
        storage = goodput_bps(c, "a", "b")
        # the same pair over the other fabric: send to b's address on it
        rx = c.popen("b", [sys.executable, "-c", RECEIVER, "5202"], stdout=subprocess.PIPE, text=True)
        try:
            rx.stdout.readline()
            c.run("a", [sys.executable, "-c", SENDER, c.address("b", "mpi"), "5202", "2"], timeout=30)
            mpi = float(rx.communicate(timeout=20)[0])
        finally:
            rx.kill()
    assert abs(storage / (40e6 * TCP_PAYLOAD_EFFICIENCY) - 1) < 0.05
    assert abs(mpi / (10e6 * TCP_PAYLOAD_EFFICIENCY) - 1) < 0.05


def test_bad_cluster_definitions_are_refused_in_one_line():
    for nodes, fabrics, says in ((["n1", "n1"], None, "distinct"), (["bad name"], None, "host name"),
                                 (["n1"], [Fabric("s", rates={"zz": 1})], "not in the cluster")):
        with pytest.raises(ClusterError, match=says):
            Cluster(nodes, fabrics)


@pytest.mark.mpi
@pytest.mark.skipif(mpi_unavailable() is not None, reason=f"ranks on nodes: {mpi_unavailable()}")
def test_mpiexec_places_ranks_on_nodes_and_storlab_names_them(tmp_path):
    out = tmp_path / "r.json"
    with Cluster(["n1", "n2"]) as c:
        placed = subprocess.run(c.mpiexec(["n1", "n2"], 4) + [
            sys.executable, "-c", "import socket; from mpi4py import MPI; "
            "hosts = MPI.COMM_WORLD.gather(socket.gethostname()); print(hosts if hosts else '', end='')"],
            capture_output=True, text=True, timeout=120)
        assert placed.returncode == 0, placed.stderr
        assert placed.stdout == "['n1', 'n2', 'n1', 'n2']"
        run = subprocess.run(c.mpiexec(["n1", "n2"], 4) + [
            sys.executable, "-m", "storlab", "run", "--engine", "null", "--target", str(tmp_path / "f"),
            "--size", "1m", "--bs", "4k", "--time", "0.5s", "--json", str(out), "--no-store", "-q"],
            capture_output=True, text=True, timeout=180, cwd=REPO)
        assert run.returncode == 0, run.stderr
    doc = json.loads(out.read_text())
    assert doc["mpi"]["size"] == 4
    assert {n["node"]: n["ranks"] for n in doc["mpi"]["nodes"]} == {"n1": [0, 2], "n2": [1, 3]}
    assert leftovers() == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_the_cluster_is_removed_when_its_holder_is_interrupted(sig):
    before = set(leftovers())
    p = subprocess.Popen([sys.executable, "-m", "tests.testbed.cluster", "--nodes", "n1,n2", "--rate", "50mbit",
                          "--hold"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("cluster:"), line + p.stderr.read()
        assert set(leftovers()) - before, "the cluster was not there while held"
        time.sleep(0.2)
        p.send_signal(sig)
        rc = p.wait(timeout=30)
    finally:
        p.kill()
    assert rc == 128 + sig
    assert set(leftovers()) - before == set()


def test_a_program_ended_by_sigterm_inside_a_cluster_leaves_no_namespace():
    # a benchmark or test stopped by `timeout` while its cluster lives: SIGTERM tears the cluster
    # down as it does during the build, not only in the holder's command line
    before = set(leftovers())
    program = ("import sys, time\n"
               "sys.path[:0] = ['tests']\n"
               "from testbed.cluster import Cluster, Fabric\n"
               "with Cluster(['n1', 'n2'], [Fabric('storage', None, {})]) as c:\n"
               "    print(c.tag, flush=True)\n"
               "    time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", program], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        tag = p.stdout.readline().strip()
        assert tag, p.stderr.read()
        assert set(leftovers()) - before, "the cluster was not there while it lived"
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    finally:
        p.kill()
    assert set(leftovers()) - before == set()
