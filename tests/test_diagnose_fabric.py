"""storlab diagnose across the fabric (diagnose/fabric.py): the model's prediction of clients on
unequal links against closed forms, the rows and findings built from measurements given by hand,
the command's refusals, and on the cluster in a box (tests/testbed/cluster.py) the four losses the
GUPFS order tells apart, each named as the layer that loses: a slow client link, an oversubscribed
server link, the server's CPU and a slow disk behind an NBD export; and none on a healthy one."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from storlab.diagnose.fabric import (
    FabricSettings,
    at_once,
    build_fabric_rows,
    fabric_findings,
    link_from_goodput,
    predict_clients,
)
from storlab.diagnose.probes import SEQ_READ
from storlab.model.network import ClusterLoad, Link, Server, payload_efficiency
from storlab.schemas import validate
from testbed import Limits, Testbed, testbed_unavailable
from testbed.cluster import Cluster, Fabric, cluster_unavailable, mpi_unavailable
from testbed.servers import NbdServer, nbd_unavailable
from testbed.throttle import dev_numbers

REPO = Path(__file__).resolve().parents[1]
MiB = 1 << 20
TCP_1500 = (1500 - 52) / (1500 + 38)             # payload per wire byte at MTU 1,500 (docs/model.md)
NBD_1MIB = TCP_1500 * MiB / (MiB + 56)           # NBD: 28-byte request, 20 + 8 bytes of reply per request


# --- the model: closed forms -------------------------------------------------------------------

def test_nbd_payload_is_tcp_less_its_56_bytes_per_request():
    assert payload_efficiency("nbd", 1500, MiB) == pytest.approx(NBD_1MIB, rel=1e-12)


def test_a_link_made_from_measured_goodput_carries_that_goodput_over_tcp():
    link = link_from_goodput("c1 link", 23.9e6, "tcp", 1e-4)
    assert link.payload_bytes_per_s(MiB) == pytest.approx(23.9e6, rel=1e-12)
    assert link_from_goodput("c1 link", 23.9e6, "nbd", 1e-4).payload_bytes_per_s(MiB) == \
        pytest.approx(23.9e6 * MiB / (MiB + 56), rel=1e-12)


def _server(rate_bits: float, **kw) -> Server:
    return Server("srv", Link("srv link", rate_bits, "nbd", rtt_s=0.0), **kw)


def test_clients_on_unequal_links_each_get_their_link_when_the_server_has_room():
    # 200 and 100 Mbit/s clients, a 10 Gbit/s server, deep queues and no round trip: X -> capacity
    links = {"c1": Link("c1 link", 200e6, "nbd", rtt_s=0.0), "c2": Link("c2 link", 100e6, "nbd", rtt_s=0.0)}
    p = predict_clients(links, _server(10e9), ClusterLoad("read", MiB, qd=256))
    assert p.per_client["c1"] == pytest.approx(200e6 / 8 * NBD_1MIB, rel=0.01)
    assert p.per_client["c2"] == pytest.approx(100e6 / 8 * NBD_1MIB, rel=0.01)
    assert p.total == pytest.approx(300e6 / 8 * NBD_1MIB, rel=0.01)
    assert "c2 link (client link)" in p.limited_by


def test_clients_together_above_the_server_link_get_its_payload_shared_in_proportion():
    links = {"c1": Link("c1 link", 200e6, "nbd", rtt_s=0.0), "c2": Link("c2 link", 100e6, "nbd", rtt_s=0.0)}
    p = predict_clients(links, _server(150e6), ClusterLoad("read", MiB, qd=256))
    assert p.total == pytest.approx(150e6 / 8 * NBD_1MIB, rel=1e-9)          # the cap, exactly
    # alone, c1 gets the server link's 150 Mbit/s and c2 its own 100: the cap is shared 150 : 100
    assert p.per_client["c1"] / p.per_client["c2"] == pytest.approx(1.5, rel=0.01)
    assert p.limited_by == "srv link (server link)"


def test_a_server_cpu_or_storage_below_the_links_caps_the_clients_at_its_rate():
    links = {"c1": Link("c1 link", 200e6, "nbd", rtt_s=0.0), "c2": Link("c2 link", 200e6, "nbd", rtt_s=0.0)}
    load = ClusterLoad("read", MiB, qd=256)
    cpu = predict_clients(links, _server(10e9, cpu_per_request_s=MiB / 10e6), load)     # one core, 10 MB/s
    assert cpu.total == pytest.approx(10e6, rel=1e-9) and cpu.limited_by == "srv CPU"
    disk = predict_clients(links, _server(10e9, storage_bytes_per_s=8e6), load)
    assert disk.total == pytest.approx(8e6, rel=1e-9) and disk.limited_by == "srv storage"


# --- rows and findings from measurements given by hand -------------------------------------------

def _probe(host: str, value: float) -> dict:
    return {"host": host, "probe": {"subject": f"{host}: x", "value": value, "run_id": "0" * 32}}


def _fabric(pairs: dict[str, float], aggregate: float, rtt_s: float = 1e-4) -> dict:
    return {"pairs": [{"client": c, "server": "srv", "bw_bytes": v, "rtt_s": rtt_s} for c, v in pairs.items()],
            "aggregate_bw_bytes": aggregate}


def _codes(pairs, aggregate, storage, protocol, clients) -> tuple[set[str], list]:
    settings = FabricSettings("nbd://srv/", ("srv",), 30.0, backing="/dev/loop9", memory_target="nbd://srv:1/")
    measured = {"server-storage": [_probe("srv", storage)],
                "protocol": [_probe(c, v) for c, v in protocol.items()],
                "clients": [_probe(c, v) for c, v in clients.items()]}
    rows, ctx = build_fabric_rows(settings, list(pairs), "nbd", measured, _fabric(pairs, aggregate), SEQ_READ)
    findings = fabric_findings(rows, ctx, SEQ_READ)
    return {f.code for f in findings if f.severity == "warning"}, rows


LINK = 23.9e6       # one TCP stream's payload over a 200 Mbit/s shaped link


def _timed(host: str, value: float, start: float, seconds: float, connect: float | None = None,
           offset: float = 0.0, series: tuple[float, list[float]] | None = None) -> dict:
    """A node's result with its measured phase's wall clock, as a probe's run document has it:
    its worker measures from `connect` s after the phase starts (None: no worker recorded), on a
    clock `offset` s behind rank 0's; `series`: its reads' time series (interval, bytes/s each)."""
    phase = {"start_unix_s": start, "seconds": seconds}
    if connect is not None:
        phase["workers"] = [{"start_s": connect, "end_s": connect + seconds}]
    if series is not None:
        phase["read"] = {"timeseries": {"interval_s": series[0], "bw_bytes": series[1]}}
    return {**_probe(host, value), "clock_offset_s": offset, "document": {"phases": [phase]}}


def test_clients_at_once_count_what_they_moved_while_all_of_them_read():
    # two clients share 8 MB/s; c2 connects 0.5 s after c1, and when c1's 3.5 s end, its requests
    # still in flight hold the share it had for 0.5 s more (served, not counted), to c2's end: c1
    # reads 8 MB/s alone, then 4; c2 4 throughout. Series in 0.5 s steps from each phase's start.
    c1 = _timed("c1", 16e6 / 3.5, 100.0, 3.5, 0.0, series=(0.5, [8e6] + [4e6] * 6))
    c2 = _timed("c2", 14e6 / 3.5, 100.0, 3.5, 0.5, series=(0.5, [0.0] + [4e6] * 7))
    # while both read (100.5 to 103.5) they moved 8 MB/s together, the rate they share
    assert at_once([c1, c2]) == pytest.approx(8e6)
    # without series, IOR's union: 30 MB over 4 s, the drain counted against them
    plain = [_timed("c1", 16e6 / 3.5, 100.0, 3.5, 0.0), _timed("c2", 14e6 / 3.5, 100.0, 3.5, 0.5)]
    assert at_once(plain) == pytest.approx(30e6 / 4.0)
    # overlapping too little (under half the shortest span): the union again
    late = _timed("c2", 14e6 / 3.5, 103.0, 3.5, 0.0, series=(0.5, [4e6] * 7))
    assert at_once([c1, late]) == pytest.approx((16e6 + 14e6) / 6.5)


def test_clients_at_once_are_their_bytes_over_the_span_from_first_start_to_last_end():
    # side by side: the span is each one's, so the figure is the sum of the rates
    assert at_once([_timed("c1", 4e6, 100.0, 2.0), _timed("c2", 4e6, 100.0, 2.0)]) == pytest.approx(8e6)
    # the second client starts 1 s late: 8 + 8 MB over 3 s, not 4 + 4 MB/s (IOR's aggregate); the
    # sum of the rates would count the second alone's second twice
    assert at_once([_timed("c1", 4e6, 100.0, 2.0), _timed("c2", 4e6, 101.0, 2.0)]) == pytest.approx(16e6 / 3)
    # both phases start together, but the second client connects 1 s later and measures from
    # then: its worker's span counts, not its phase's start (the regression: clients at once read
    # above the throttle that limits them both)
    assert at_once([_timed("c1", 4e6, 100.0, 2.0, 0.1), _timed("c2", 4e6, 100.0, 2.0, 1.1)]) == pytest.approx(16e6 / 3)
    # a node's clock runs 1 s behind rank 0's: its times are moved onto rank 0's clock
    assert at_once([_timed("c1", 4e6, 100.0, 2.0, 0.0), _timed("c2", 4e6, 99.0, 2.0, 0.0, offset=1.0)]) \
        == pytest.approx(8e6)
    # without the wall clock (results given by hand): the sum of the rates
    assert at_once([_probe("c1", 4e6), _probe("c2", 5e6)]) == pytest.approx(9e6)
    assert at_once([]) == 0.0


def test_a_healthy_fabric_has_no_finding_and_every_row_near_its_prediction():
    codes, rows = _codes({"c1": LINK, "c2": LINK}, 2 * LINK, 200e6, {"c1": 23.0e6, "c2": 23.0e6},
                         {"c1": 22.5e6, "c2": 22.5e6})
    assert codes == set()
    for r in rows:
        if r.efficiency is not None:
            assert 0.85 < r.efficiency < 1.15, r


@pytest.mark.parametrize("case, pairs, aggregate, storage, protocol, clients, expected", [
    ("slow client link", {"c1": LINK, "c2": LINK / 2}, 1.5 * LINK, 200e6, {"c1": 23e6, "c2": 11.5e6},
     {"c1": 23e6, "c2": 11.5e6}, {"slow-client-link"}),
    ("oversubscribed server link", {"c1": LINK, "c2": LINK}, LINK, 200e6, {"c1": 11.5e6, "c2": 11.5e6},
     {"c1": 11.5e6, "c2": 11.5e6}, {"server-link-oversubscribed"}),
    ("server CPU", {"c1": LINK, "c2": LINK}, 2 * LINK, 200e6, {"c1": 6e6, "c2": 6e6}, {"c1": 6e6, "c2": 6e6},
     {"server-cpu"}),
    ("slow disk", {"c1": LINK, "c2": LINK}, 2 * LINK, 8.4e6, {"c1": 23e6, "c2": 23e6}, {"c1": 4.2e6, "c2": 4.2e6},
     {"server-storage"}),
])
def test_each_loss_is_named_as_its_layer(case, pairs, aggregate, storage, protocol, clients, expected):
    codes, _ = _codes(pairs, aggregate, storage, protocol, clients)
    assert codes == expected, case


def test_an_export_below_a_cpu_bound_memory_export_is_the_server_cpu_again():
    # a file export reads its store on the CPU the memory export already found short
    codes, _ = _codes({"c1": LINK, "c2": LINK}, 2 * LINK, 200e6, {"c1": 2.5e6, "c2": 2.5e6},
                      {"c1": 1.3e6, "c2": 1.3e6})
    assert codes == {"server-cpu"}


def test_an_export_slower_than_its_storage_and_protocol_is_a_loss_of_the_clients_layer():
    codes, rows = _codes({"c1": LINK, "c2": LINK}, 2 * LINK, 200e6, {"c1": 23e6, "c2": 23e6},
                         {"c1": 10e6, "c2": 10e6})
    assert codes == {"layer-loss"}
    (view,) = [r for r in rows if r.layer == "clients"]
    assert view.efficiency == pytest.approx(20e6 / view.predicted)


# --- the command's refusals -----------------------------------------------------------------------

def _storlab(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "MPI_", "HYDRA_"))}
    return subprocess.run([sys.executable, "-m", "storlab", "diagnose", *args], capture_output=True, text=True,
                          env=env, timeout=60)


@pytest.mark.parametrize("args, flag", [
    (["nbd://srv:10809/"], "servers"),
    (["nbd://srv:10809/", "--servers", "srv"], "mpiexec"),
    (["nbd://srv:10809/", "--servers", "srv", "--stack", "x.toml"], "stack"),
    (["/tmp", "--servers", "srv"], "servers"),
    (["/tmp", "--memory-target", "nbd://srv:1/"], "memory-target"),
])
def test_a_network_diagnosis_called_wrongly_is_one_line(args, flag):
    r = _storlab(*args, "--no-store")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert flag in r.stderr


# --- on the cluster in a box ----------------------------------------------------------------------

WHY = cluster_unavailable() or mpi_unavailable() or nbd_unavailable() or testbed_unavailable()
CLIENT_BPS, FAST_BPS = 200_000_000, 1_000_000_000
EXPORT_BYTES = 128 * MiB
BUDGET = "24s"                   # six measurements of 3.5 s: the storage, two pairs, all at once,
                                 # the memory export and the real one
CPU_ROOT = Path("/sys/fs/cgroup/cpu")


class NodeNbd(NbdServer):
    """nbdkit on a cluster node at a port of its own (NbdServer serves 10809 on a node), its extra
    plugin parameters after the plugin's own."""

    def __init__(self, workdir: Path, port: int, params: list[str], **kw) -> None:
        super().__init__(workdir, **kw)
        self.port = port
        self.args[self.args.index("--port") + 1] = str(port)
        self.args += params


def _joining(procs: Path | None):
    """argv -> argv that first moves the process into a cgroup (its cgroup.procs file)."""
    if procs is None:
        return lambda argv: argv
    return lambda argv: ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs), *argv]


class CpuQuota:
    """A cgroup v1 cpu controller group with a CFS quota: its processes get `share` of one core."""

    def __init__(self, share: float) -> None:
        self.path = CPU_ROOT / f"storlab-diag-fabric-{os.getpid()}"
        self.share = share

    def __enter__(self) -> CpuQuota:
        self.path.mkdir()
        (self.path / "cpu.cfs_period_us").write_text("100000")
        (self.path / "cpu.cfs_quota_us").write_text(str(int(100000 * self.share)))
        return self

    def __exit__(self, *exc) -> None:
        for _ in range(50):
            pids = (self.path / "cgroup.procs").read_text().split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def _diagnose(*, rates: dict[str, int] | None = None, server_bps: int = FAST_BPS, disk: Limits | None = None,
              cpu_share: float | None = None, tmp: Path) -> tuple[dict, str]:
    """Two clients and a server; nbdkit exporting a loop device (cache=none and fadvise=random: each
    read reaches the device, and only its own bytes do: a read-ahead beyond a request would be
    dropped from the cache with it and read again, spending the throttle's budget on bytes no
    client receives) and 128 MiB of memory; `storlab diagnose` under mpiexec with a rank on each node, all
    inside the testbed's blkio cgroup (so the loop device's limit holds for the server's process and
    the storage probe alike); the document, and the bytes the device read for the cgroup (what
    the throttle let through: beside the clients' figures when a finding is unexpected)."""
    with Testbed() as bed:
        (dev,) = bed.add_devices(1, EXPORT_BYTES, disk)
        bed.fill(dev, EXPORT_BYTES)
        fabric = Fabric("storage", rate_bps=CLIENT_BPS, rates={"srv": server_bps, **(rates or {})})
        quota = CpuQuota(cpu_share) if cpu_share else None
        with Cluster(["c1", "c2", "srv"], [fabric]) as c:
            if quota:
                quota.__enter__()
            try:
                blkio = _joining(bed.throttle.path / "cgroup.procs")
                cpu = _joining(quota.path / "cgroup.procs" if quota else None)
                place = lambda argv: c.command("srv", blkio(cpu(argv)))                  # noqa: E731
                srv = c.address("srv")
                with NodeNbd(tmp, 10809, ["cache=none", "fadvise=random"], plugin="file", backing=Path(dev), log=False, place=place,
                             address=srv, read_only=True), \
                        NodeNbd(tmp, 10810, [], plugin="memory", size="128M", log=False, place=place, address=srv):
                    out = tmp / "diagnose.json"
                    cmd = c.mpiexec(["c1", "c2", "srv"], 3) + [
                        sys.executable, "-m", "storlab", "diagnose", f"nbd://{srv}:10809/", "--servers", "srv",
                        "--backing", dev, "--memory-target", f"nbd://{srv}:10810/", "--budget", BUDGET,
                        "--no-store", "--json", str(out)]
                    child = bed.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
                    text, err = child.communicate(timeout=240)
                    assert child.returncode == 0, err[-3000:]
                    print(text)
                    served = bed.throttle.read_bytes(dev_numbers(dev))
                    return json.loads(out.read_text()), f"the device read {served} bytes for the cgroup"
            finally:
                if quota:
                    quota.__exit__(None, None, None)


def _named(doc: dict) -> set[str]:
    return {f["code"] for f in doc["findings"] if f["severity"] == "warning"}


@pytest.mark.root
@pytest.mark.netns
@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.skipif(WHY is not None, reason=f"cluster, NBD and testbed: {WHY}")
@pytest.mark.parametrize("case, kwargs, expected, layer", [
    ("slow client link", {"rates": {"c2": 100_000_000}}, "slow-client-link", "client-link"),
    ("oversubscribed server link", {"server_bps": CLIENT_BPS}, "server-link-oversubscribed", "fabric"),
    ("server CPU", {"cpu_share": 0.01}, "server-cpu", "protocol"),
    ("slow disk", {"disk": Limits(read_bps=8 * MiB)}, "server-storage", "server-storage"),
    ("healthy", {}, None, None),
], ids=["slow-client-link", "oversubscribed-server-link", "server-cpu", "slow-disk", "healthy"])
def test_the_losing_layer_is_named_on_the_cluster(case, kwargs, expected, layer, tmp_path):
    doc, served = _diagnose(tmp=tmp_path, **kwargs)
    validate(doc)
    assert doc["complete"], doc.get("error")
    assert _named(doc) == ({expected} if expected else set()), (case, doc["findings"], doc["layers"], served)
    if expected:
        (finding,) = [f for f in doc["findings"] if f["code"] == expected]
        assert finding["layer"] == layer


def test_a_fabric_document_is_valid_and_renders_as_a_table_and_a_page():
    from storlab.document import header
    from storlab.output.diagnose import build_html, render_table

    pairs = {"c1": LINK, "c2": LINK / 2}
    settings = FabricSettings("nbd://srv/", ("srv",), 30.0, backing="/dev/loop9", memory_target="nbd://srv:1/")
    measured = {"server-storage": [_probe("srv", 200e6)], "protocol": [_probe("c1", 23e6), _probe("c2", 11.5e6)],
                "clients": [_probe("c1", 23e6), _probe("c2", 11.5e6)]}
    rows, ctx = build_fabric_rows(settings, list(pairs), "nbd", measured, _fabric(pairs, 1.5 * LINK), SEQ_READ)
    doc = header("diagnose", schema="storlab.diagnose/1", argv=["storlab", "diagnose"])
    doc.update({"target": "nbd://srv/", "budget_s": 30.0, "stack_check": None, "doctor": [], "probes": [],
                "stack": {"target": "nbd://srv/", "target_kind": "network", "mount_point": None, "fs_type": None,
                          "fs_device": None, "volume": None, "level": "network", "members": [], "striping": None,
                          "notes": []},
                "fabric": {"servers": ["srv"], "clients": ["c1", "c2"], "protocol": "nbd", "backing": "/dev/loop9",
                           "memory_target": "nbd://srv:1/", "seconds": 3.5, "net": _fabric(pairs, 1.5 * LINK)},
                "layers": [r.to_dict() for r in rows],
                "findings": [f.to_dict() for f in fabric_findings(rows, ctx, SEQ_READ)],
                "workloads": [{"name": "seq-read", "label": SEQ_READ.label(), "rw": "read", "bs": MiB, "qd": 4,
                               "figure": "bw_bytes"}], "finished_at": None})
    validate(doc)
    text = render_table(doc)
    assert "nbd across the fabric, client node(s) c1, c2, server node(s) srv" in text
    assert "client c2's link carries 11.9 MB/s against 23.9 MB/s" in text and "server storage" in text
    assert "<img" in build_html(doc)
