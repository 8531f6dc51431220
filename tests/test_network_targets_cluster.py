"""Network targets on the cluster in a box (tests/testbed/cluster.py): one server node behind a
link shaped to 200 Mbit/s, two client nodes on faster links. Two clients reading one NFS file
(nfs-ganesha) or one NBD export (nbdkit) together get within 15 % of what `storlab net` measures
on the same link; the rest is the protocol's cost, which the test reports."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from testbed.cluster import Cluster, Fabric, cluster_unavailable, mpi_unavailable
from testbed.servers import GaneshaServer, NbdServer, nbd_unavailable, nfs_unavailable

REPO = Path(__file__).resolve().parents[1]
WHY = cluster_unavailable()
WHY_MPI = mpi_unavailable()
SERVER_LINK_BPS, CLIENT_LINK_BPS = 200_000_000, 1_000_000_000
MiB = 1 << 20

pytestmark = [pytest.mark.root, pytest.mark.netns, pytest.mark.mpi, pytest.mark.slow,
              pytest.mark.skipif(WHY is not None, reason=f"cluster in a box: {WHY}"),
              pytest.mark.skipif(WHY_MPI is not None, reason=f"ranks on nodes: {WHY_MPI}")]


def mpi_json(c: Cluster, hosts: list[str], out: Path, *args: str) -> dict:
    r = subprocess.run(c.mpiexec(hosts, len(hosts)) + [sys.executable, "-m", "storlab", *args, "--no-store",
                                                        "--json", str(out)],
                       capture_output=True, text=True, timeout=240, cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(out.read_text())


def two_clients_against_the_link(c: Cluster, url: str, tmp_path: Path) -> tuple[float, float]:
    """(both clients reading `url` for 4 s together, `storlab net`'s aggregate over the same link)."""
    run = mpi_json(c, ["c1", "c2"], tmp_path / "run.json", "run", "--target", url, "--rw", "read", "--bs", "1m",
                   "--time", "4s")
    net = mpi_json(c, ["c1", "c2", "srv"], tmp_path / "net.json", "net", "--servers", "srv", "--time", "3s")
    (phase,) = run["phases"]
    assert phase["aggregate"]["ranks"] == 2 and {r["node"] for r in phase["mpi"]["ranks"]} == {"c1", "c2"}
    return phase["read"]["bw_bytes"], net["aggregate_bw_bytes"]


def check_within_the_link(kind: str, read_bw: float, net_bw: float) -> None:
    ratio = read_bw / net_bw
    print(f"{kind}: two clients {read_bw / 1e6:.2f} MB/s, storlab net {net_bw / 1e6:.2f} MB/s over a "
          f"{SERVER_LINK_BPS / 1e6:.0f} Mbit/s server link: protocol cost {1 - ratio:.1%}")
    assert 0.85 <= ratio <= 1.05, (kind, read_bw, net_bw)   # net reads a point or two low in aggregate


def cluster() -> Cluster:
    return Cluster(["c1", "c2", "srv"], [Fabric("storage", rate_bps=CLIENT_LINK_BPS, rates={"srv": SERVER_LINK_BPS})])


@pytest.mark.skipif(nfs_unavailable() is not None, reason=f"NFS: {nfs_unavailable()}")
def test_two_nfs_clients_get_the_server_link_less_the_protocol(tmp_path):
    export = Path("/dev/shm") / f"storlab-nfs-{tmp_path.name}"
    export.mkdir()
    try:
        (export / "data").write_bytes(b"\x5a" * (128 * MiB))     # served from the server's memory
        with cluster() as c, GaneshaServer(tmp_path, export, run=lambda argv: c.command("srv", argv),
                                           address=c.address("srv")) as srv:
            read_bw, net_bw = two_clients_against_the_link(c, srv.url("data"), tmp_path)
    finally:
        for f in export.iterdir():
            f.unlink()
        export.rmdir()
    check_within_the_link("NFSv3", read_bw, net_bw)


@pytest.mark.skipif(nbd_unavailable() is not None, reason=f"NBD: {nbd_unavailable()}")
def test_two_nbd_clients_get_the_server_link_less_the_protocol(tmp_path):
    with cluster() as c, NbdServer(tmp_path, "256M", log=False, place=lambda argv: c.command("srv", argv),
                                   address=c.address("srv")) as srv:
        read_bw, net_bw = two_clients_against_the_link(c, srv.url, tmp_path)
    check_within_the_link("NBD", read_bw, net_bw)
