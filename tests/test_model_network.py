"""The network in the model (storlab.model.network, model/cluster.py): payload efficiencies from the
protocols' framing, checked by hand; a cluster of clients over links to servers against closed
forms (one request at a time; the bottleneck's capacity); cluster files named as the testbed names
its nodes and fabric; plan perf on a cluster file, its document validated against the schema."""
from __future__ import annotations

import json

import pytest
from storlab.cli.main import main
from storlab.model.cluster import cluster_from_dict, load_cluster
from storlab.model.costs import HOST_REQUEST_OVERHEAD_S
from storlab.model.network import (
    Cluster,
    ClusterLoad,
    Link,
    Server,
    parse_rate_bits,
    payload_efficiency,
    predict_cluster,
)
from storlab.model.stack import StackError
from storlab.schemas import validate

MiB = 1 << 20


def test_tcp_payload_over_ethernet_is_its_framing():
    # IEEE 802.3 frame: MTU + 38 bytes on the wire; IPv4 20 + TCP 20 + timestamps 12 inside
    assert payload_efficiency("tcp", 1500) == pytest.approx(1448 / 1538)
    assert payload_efficiency("tcp", 9000) == pytest.approx(8948 / 9038)
    # 1 GbE: 125 MB/s of line carry 117.7 MB/s of TCP payload
    assert Link("gige", 1e9).payload_bytes_per_s(MiB) == pytest.approx(125e6 * 1448 / 1538)


def test_iscsi_nfs_http_and_tls_add_their_headers():
    tcp = 1448 / 1538
    # iSCSI (RFC 7143): a 48-byte header per 8 KiB data PDU, plus the command and response PDUs
    assert payload_efficiency("iscsi", 1500, MiB) == pytest.approx(tcp * MiB / (MiB + 48 * (2 + 128)))
    assert payload_efficiency("nfs", 1500, 4096) == pytest.approx(tcp * 4096 / 4296)
    assert payload_efficiency("http", 1500, 4096) == pytest.approx(tcp * 4096 / 4896)
    # one 4 KiB object with its 800 header bytes fits one TLS record: 21 bytes more
    assert payload_efficiency("https", 1500, 4096) == pytest.approx(tcp * 4096 / (4896 + 21))
    assert payload_efficiency("iscsi", 1500, 4096) < payload_efficiency("tcp", 1500, 4096)


def test_fibre_channel_is_8b10b_and_its_frames():
    # 2GFC: 2.125 Gbaud / 10 = 212.5 MB/s (the Engenio slides' "212.5MB/s raw"), frames 2048 / 2108
    link = Link("fc", 2.125e9, protocol="fc")
    assert link.payload_bytes_per_s(MiB) == pytest.approx(212.5e6 * 2048 / 2108)
    assert 195e6 < link.payload_bytes_per_s(MiB) < 212.5e6    # the studies: about 200 MB/s per port


def test_rates_in_the_testbeds_form():
    assert parse_rate_bits("1gbit") == 1e9 and parse_rate_bits("200mbit") == 2e8
    assert parse_rate_bits("10Gbit/s") == 1e10 and parse_rate_bits(5e8) == 5e8
    with pytest.raises(StackError, match="not a link rate"):
        parse_rate_bits("fast")


def _cluster(clients=4, server_gbit=10.0, switch=None, uplink=None, cpu=0.0, cores=1, rtt=100e-6, servers=1):
    client = Link("c", 1e9, rtt_s=rtt)
    server = Server("srv", Link("s", server_gbit * 1e9, rtt_s=rtt), count=servers, cores=cores, cpu_per_request_s=cpu)
    return Cluster("t", clients, client, server, switch, uplink)


def test_one_stream_waits_a_round_trip_per_request():
    # one thread, one request at a time: client overhead + round trip + the slowest stage's transfer
    c = _cluster()
    for size in (4096, MiB):
        p = predict_cluster(c, ClusterLoad("read", size))
        client_payload = 125e6 * 1448 / 1538
        expected = size / (HOST_REQUEST_OVERHEAD_S + 100e-6 + size / client_payload)
        assert p.single_stream_bw_bytes == pytest.approx(expected)
    assert predict_cluster(c, ClusterLoad("read", 4096)).single_stream_limiting == "round trip per request"
    assert predict_cluster(c, ClusterLoad("read", MiB)).single_stream_limiting == "c (client link)"


def test_clients_saturate_their_links_then_the_server_link():
    payload = 1448 / 1538 / 8
    # 4 clients on 1 Gbit/s, server on 10 Gbit/s: deep queues reach 4 client links' worth
    four = predict_cluster(_cluster(4), ClusterLoad("read", MiB, threads=8))
    assert four.bw_bytes == pytest.approx(4 * 1e9 * payload, rel=0.02) and four.limiting == "c (client link)"
    # 16 clients on a 10 Gbit/s server link: the server's link binds, not the sum of the clients'
    many = predict_cluster(_cluster(16), ClusterLoad("read", MiB, threads=8))
    assert many.bw_bytes == pytest.approx(10e9 * payload, rel=0.01) and many.limiting == "s (server link)"
    assert many.bw_bytes < 16 * 1e9 * payload


def _windowed(protocol: str, window: int = 64 * 1024, rtt: float = 1e-3) -> Cluster:
    client = Link("c", 1e9, protocol=protocol, rtt_s=rtt, window_bytes=window)
    return Cluster("t", 1, client, Server("srv", Link("s", 10e9, protocol=protocol, rtt_s=rtt)),
                   client_request_overhead_s=0.0)


def test_a_tcp_connection_carries_one_window_per_round_trip():
    # 64 KiB per 1 ms: 65.5 MB/s a connection, below the 117.7 MB/s a 1 Gbit/s link carries
    per_connection = 64 * 1024 / 1e-3
    one = predict_cluster(_windowed("tcp"), ClusterLoad("read", MiB, threads=1, qd=4))
    assert one.bw_bytes == pytest.approx(per_connection, rel=0.01) and one.limiting == "TCP window"
    # a TCP stream per thread: two windows fill the link
    two = predict_cluster(_windowed("tcp"), ClusterLoad("read", MiB, threads=2, qd=4))
    assert two.bw_bytes == pytest.approx(125e6 * 1448 / 1538, rel=0.02) and two.limiting == "c (client link)"
    # an iSCSI session (and an NFS mount) puts every thread on one connection: one window for all
    for protocol in ("iscsi", "nfs"):
        many = predict_cluster(_windowed(protocol), ClusterLoad("read", MiB, threads=8, qd=4))
        assert many.bw_bytes == pytest.approx(per_connection, rel=0.01), protocol
    # S3 over HTTP/1.1: a connection per request in flight
    http = predict_cluster(_windowed("http"), ClusterLoad("read", MiB, threads=2, qd=4))
    assert http.bw_bytes > 1.5 * per_connection and http.limiting == "c (client link)"
    # a lone request takes its window-bound transfer: 16 round trips for 1 MiB, beside one for the request
    lone = predict_cluster(_windowed("tcp"), ClusterLoad("read", MiB))
    assert lone.single_stream_bw_bytes == pytest.approx(MiB / (1e-3 + MiB / per_connection))
    assert lone.single_stream_limiting == "TCP window"
    # Fibre Channel has no window; a window large against the round trip binds nothing
    assert predict_cluster(_windowed("fc"), ClusterLoad("read", MiB, threads=1, qd=4)).limiting != "TCP window"
    wide = predict_cluster(_windowed("tcp", window=4 * MiB), ClusterLoad("read", MiB, threads=1, qd=4))
    assert wide.limiting == "c (client link)"


def test_a_shared_switch_and_uplink_are_named_when_they_bind():
    switch = predict_cluster(_cluster(8, switch=4e9), ClusterLoad("read", MiB, threads=8))
    assert switch.limiting == "switch" and switch.bw_bytes == pytest.approx(4e9 * 1448 / 1538 / 8, rel=0.01)
    up = predict_cluster(_cluster(8, uplink=Link("up", 2e9, count=1)), ClusterLoad("read", MiB, threads=8))
    assert up.limiting == "up (uplink)"


def test_server_cpu_per_request_caps_small_requests():
    # 2 servers x 2 cores at 50 us per request: 80,000 requests/s, whatever the links carry
    c = _cluster(16, cpu=50e-6, cores=2, servers=2)
    p = predict_cluster(c, ClusterLoad("read", 512, threads=16, qd=8))
    assert p.iops == pytest.approx(2 * 2 / 50e-6, rel=0.01) and p.limiting == "srv CPU"


CLUSTER = """
name = "nfs-gige"
[[node]]
name = "n1"
role = "client"
[[node]]
name = "n2"
role = "client"
[[node]]
name = "srv"
role = "server"
cores = 4
cpu_per_request = "20us"
storage_bw = "500MB/s"
[[fabric]]
name = "storage"
rate = "1gbit"
rates = { srv = "10gbit" }
protocol = "nfs"
rtt = "100us"
"""


def test_a_cluster_file_uses_the_testbeds_names():
    import tomllib
    c = cluster_from_dict(tomllib.loads(CLUSTER))
    assert c.clients == 2 and c.client_names == ("n1", "n2")
    assert c.client_link.rate_bits == 1e9 and c.servers.link.rate_bits == 1e10
    assert c.client_link.protocol == "nfs" and c.client_link.rtt_s == pytest.approx(100e-6)
    assert c.servers.storage_bytes_per_s == 500e6 and c.servers.cores == 4


@pytest.mark.parametrize("change, words", [
    (("protocol = \"nfs\"", "protocol = \"smb\""), "protocol: 'smb' is not one the model knows"),
    (("role = \"server\"", "role = \"nas\""), "role: 'nas'; allowed: client, server"),
    (("rate = \"1gbit\"", "rate = \"fast\""), "not a link rate"),
    (("cores = 4", "cores = 4\ndisks = 3"), "unknown key 'disks'"),
    # the key once, though its parser names it too
    (("rtt = \"100us\"", "rtt = \"100us\"\nwindow = \"85.3KiB\""), "1: window: '85.3KiB' is not a whole number"),
])
def test_a_bad_cluster_file_is_one_line_naming_the_key(tmp_path, capsys, change, words):
    path = tmp_path / "bad.toml"
    path.write_text(CLUSTER.replace(*change))
    code = main(["plan", "perf", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and words in err and str(path) in err


def test_plan_perf_on_a_cluster_file_names_the_limit_and_the_single_stream(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text(CLUSTER)
    code = main(["plan", "perf", str(path), "--rw", "read", "--request", "4K,1M", "--threads", "1,16", "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert validate(doc) == "plan-1.schema.json"
    points = {(p["request_bytes"], p["threads_per_client"]): p for p in doc["cluster"]}
    assert set(points) == {(4096, 1), (4096, 16), (MiB, 1), (MiB, 16)}
    # 2 clients x 16 threads of 1 MiB: the two client links carry 2 x 117.7 MB/s less the NFS
    # headers, less than the server's storage (500 MB/s) or its 10 Gbit/s link
    big = points[(MiB, 16)]
    assert big["limiting"] == "storage/n1 (client link)"
    assert big["bw_bytes"] == pytest.approx(2 * 1e9 / 8 * payload_efficiency("nfs", 1500, MiB), rel=0.02)
    assert points[(4096, 1)]["single_stream_limiting"] == "round trip per request"
    code = main(["plan", "perf", str(path), "--rw", "read"])
    text = capsys.readouterr().out
    assert code == 0 and "single stream, read 1 MiB" in text


def test_load_cluster_reads_a_server_stack_beside_it(tmp_path):
    (tmp_path / "r0.toml").write_text('[drive]\ncapacity = "1TB"\nseq = "100MB/s"\n[raid]\nlayout = "R0/4"\n'
                                      'chunk = "64KiB"\n')
    path = tmp_path / "c.toml"
    path.write_text(CLUSTER.replace('storage_bw = "500MB/s"', 'stack = "r0.toml"'))
    c = load_cluster(str(path), "read", MiB)
    # four drives at 100 MB/s streamed at depth: 400 MB/s
    assert c.servers.storage_bytes_per_s == pytest.approx(400e6, rel=0.01)


def test_a_clients_protocol_cpu_is_its_own_queue():
    # software iSCSI: each client's stack spends 10 us per request and 1 s per 500 MB on one core;
    # 1 MiB requests: 10 us + 2.097 ms = 2.107 ms each, so a client carries at most 475 requests/s
    # (498 MB/s), above its 1 GbE link: the link binds; with 10 GbE links the CPU does
    import tomllib
    text = CLUSTER.replace('role = "client"\n[[node]]\nname = "n2"', 'role = "client"\ncpu_per_request = "10us"\n'
                           'cpu_rate = "500MB/s"\n[[node]]\nname = "n2"').replace(
        'name = "n2"\nrole = "client"', 'name = "n2"\nrole = "client"\ncpu_per_request = "10us"\ncpu_rate = "500MB/s"')
    c = cluster_from_dict(tomllib.loads(text))
    assert c.client_cpu_time_s(MiB) == pytest.approx(10e-6 + MiB / 500e6)
    p = predict_cluster(c, ClusterLoad("read", MiB, threads=8))
    cpu = next(s for s in p.components if s.name == "client CPU")
    assert cpu.capacity_iops == pytest.approx(2 / (10e-6 + MiB / 500e6))     # two clients, one core each
    assert p.limiting == "storage/n1 (client link)"
    slow = Cluster("t", 2, Link("c", 10e9), Server("srv", Link("s", 40e9)), client_cpu_per_request_s=10e-6,
                   client_cpu_rate_bytes=500e6)
    p = predict_cluster(slow, ClusterLoad("read", MiB, threads=8))
    assert p.limiting == "client CPU" and p.bw_bytes == pytest.approx(2 * MiB / (10e-6 + MiB / 500e6), rel=0.01)


def test_clients_unlike_each_other_are_refused():
    import tomllib
    text = CLUSTER.replace('name = "n2"\nrole = "client"', 'name = "n2"\nrole = "client"\ncores = 2')
    with pytest.raises(StackError, match="a client unlike 'n1'"):
        cluster_from_dict(tomllib.loads(text))


def test_other_plan_commands_refuse_a_cluster_file(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text(CLUSTER)
    code = main(["plan", "geometry", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "a cluster file" in err and err.count("\n") == 1


def test_a_token_bucket_link_caps_the_rate_without_adding_transfer_time():
    # tc htb / tbf meter a link: a lone request passes at memory speed while tokens last, so its time
    # is the fixed delay (client overhead + round trip); the link only caps the rate it is held to
    def cluster(rate, shaper):
        link = Link("l", rate, rtt_s=100e-6, shaper=shaper)
        return Cluster("t", 1, link, Server("srv", Link("s", rate, rtt_s=100e-6, shaper=shaper)))

    fixed = HOST_REQUEST_OVERHEAD_S + 100e-6
    fast = predict_cluster(cluster(10e9, "token-bucket"), ClusterLoad("read", 4096))
    assert fast.iops == pytest.approx(1 / fixed)
    wire = predict_cluster(cluster(10e9, "wire"), ClusterLoad("read", 4096))
    assert wire.iops == pytest.approx(1 / (fixed + 4096 / (10e9 / 8 * 1448 / 1538)))
    # at 100 Mbit/s the unmetered rate (1 / fixed) is above the cap: the cap holds, where a wire
    # would add its 348 us transfer to every request
    cap = 100e6 / 8 * 1448 / 1538 / 4096
    slow = predict_cluster(cluster(100e6, "token-bucket"), ClusterLoad("read", 4096))
    assert slow.iops == pytest.approx(cap) and slow.single_stream_bw_bytes == pytest.approx(cap * 4096)
    assert "link" in slow.limiting
    assert predict_cluster(cluster(100e6, "wire"), ClusterLoad("read", 4096)).iops == pytest.approx(
        1 / (fixed + 1 / cap))


def test_a_cluster_file_names_its_shaper_or_is_refused_in_one_line(tmp_path):
    base = CLUSTER.replace('protocol = "nfs"', 'protocol = "nfs"\nshaper = "token-bucket"')
    assert 'shaper = "token-bucket"' in base
    path = tmp_path / "c.toml"
    path.write_text(base)
    assert load_cluster(str(path)).client_link.shaper == "token-bucket"
    path.write_text(base.replace("token-bucket", "netem"))
    with pytest.raises(StackError, match="shaper: 'netem'; allowed: wire"):
        load_cluster(str(path))


def test_a_cluster_file_states_its_connections_or_is_refused_in_one_line(tmp_path):
    # an NFS mount shares one connection; libnfs (storlab's nfs engine) opens one per thread, and
    # the fabric says so: with a window stated, eight threads then carry eight windows, not one
    base = CLUSTER.replace('rtt = "100us"', 'rtt = "1ms"\nwindow = "64KiB"')
    path = tmp_path / "c.toml"
    path.write_text(base)
    mount = load_cluster(str(path))
    path.write_text(base.replace('window = "64KiB"', 'window = "64KiB"\nconnections = "thread"'))
    libnfs = load_cluster(str(path))
    assert mount.client_link.connections is None and libnfs.client_link.connections == "thread"
    load = ClusterLoad("read", MiB, threads=8, qd=2)
    assert predict_cluster(mount, load).limiting == "TCP window"
    assert predict_cluster(libnfs, load).bw_bytes > 1.5 * predict_cluster(mount, load).bw_bytes
    path.write_text(base.replace('window = "64KiB"', 'window = "64KiB"\nconnections = "session"'))
    with pytest.raises(StackError, match="connections: 'session'; allowed: thread"):
        load_cluster(str(path))


def test_a_link_built_in_python_refuses_unknown_connections():
    with pytest.raises(StackError, match="link 'c': connections: 'session'; allowed: thread"):
        Link("c", 1e9, connections="session")


def test_a_user_space_client_pays_no_block_layer():
    # a lone 4 KiB request over a metered link: a kernel client's time is the block layer's overhead
    # + the round trip + the server's CPU; a user-space client (libnfs, libnbd, an S3 library) has
    # client_request_overhead_s = 0: the round trip and the CPU only
    link = Link("l", 10e9, rtt_s=20e-6, shaper="token-bucket")
    srv = Server("srv", link, cpu_per_request_s=60e-6)
    kernel = predict_cluster(Cluster("t", 1, link, srv), ClusterLoad("read", 4096))
    user = predict_cluster(Cluster("t", 1, link, srv, client_request_overhead_s=0.0), ClusterLoad("read", 4096))
    assert kernel.iops == pytest.approx(1 / (HOST_REQUEST_OVERHEAD_S + 20e-6 + 60e-6))
    assert user.iops == pytest.approx(1 / (20e-6 + 60e-6))
    with pytest.raises(StackError, match="client_request_overhead"):
        Cluster("t", 1, link, srv, client_request_overhead_s=-1e-6)


def test_two_cores_serve_two_lone_clients_side_by_side_then_queue():
    # one station of 2 cores at D = 1.8 ms per request and a fixed Z = 0.2 ms, 2 clients one request
    # each: Seidmann's multi-server with Schweitzer's estimate gives R = D/2 (1 + Q/2) + D/2 with
    # Q = 2 R / (Z + R), i.e. 2 R^2 + (2 Z - 3 D) R - 2 D Z = 0; alone, R = D
    d, z = 1.8e-3, 0.2e-3
    link = Link("l", 10e9, rtt_s=z, shaper="token-bucket")
    srv = Server("srv", link, cores=2, cpu_per_request_s=d)

    def cluster(n):
        return Cluster("t", n, link, srv, client_request_overhead_s=0.0)

    assert predict_cluster(cluster(1), ClusterLoad("read", 4096)).iops == pytest.approx(1 / (z + d))
    r = (-(2 * z - 3 * d) + ((2 * z - 3 * d) ** 2 + 16 * d * z) ** 0.5) / 4
    two = predict_cluster(cluster(2), ClusterLoad("read", 4096))
    assert two.iops == pytest.approx(2 / (z + r), rel=1e-6)
    assert 1.2 / (z + d) < two.iops < 2 / (z + d)     # more than one core's worth, less than two lone ones
    many = predict_cluster(cluster(64), ClusterLoad("read", 4096))
    assert many.iops == pytest.approx(2 / d, rel=0.02) and many.limiting == "srv CPU"


def test_a_measured_request_rate_caps_the_server_beside_its_cpu():
    # the CPU alone carries 2 / 50 us = 40,000 requests/s; measured, the server carries 16,000 at
    # most: a deep load gets 16,000, named as the measured rate. A lone request takes the round trip
    # and its slowest stage (a request's stages overlap, the model's rule): the measured rate's
    # 62.5 us per request, not the CPU's 50 us
    link = Link("l", 10e9, rtt_s=20e-6, shaper="token-bucket")
    srv = Server("srv", link, cores=2, cpu_per_request_s=50e-6, max_iops=16_000)
    deep = predict_cluster(Cluster("t", 4, link, srv, client_request_overhead_s=0.0), ClusterLoad("read", 4096, qd=16))
    assert deep.iops == pytest.approx(16_000, rel=0.01) and deep.limiting == "srv (measured requests/s)"
    lone = predict_cluster(Cluster("t", 1, link, srv, client_request_overhead_s=0.0), ClusterLoad("read", 4096))
    assert lone.iops == pytest.approx(1 / (20e-6 + 62.5e-6))
    with pytest.raises(StackError, match="max_iops"):
        Server("srv", link, max_iops=0)


def test_a_cluster_file_states_a_user_space_client_and_a_measured_server():
    import tomllib
    text = (CLUSTER.replace('name = "n1"\nrole = "client"', 'name = "n1"\nrole = "client"\nrequest_overhead = "0us"')
            .replace('name = "n2"\nrole = "client"', 'name = "n2"\nrole = "client"\nrequest_overhead = "0us"')
            .replace('cores = 4', 'cores = 4\nmax_iops = 16000'))
    c = cluster_from_dict(tomllib.loads(text))
    assert c.client_request_overhead_s == 0.0 and c.servers.max_iops == 16000
    assert cluster_from_dict(tomllib.loads(CLUSTER)).client_request_overhead_s == HOST_REQUEST_OVERHEAD_S
    with pytest.raises(StackError, match="request_overhead is a client's key"):
        cluster_from_dict(tomllib.loads(CLUSTER.replace('cores = 4', 'cores = 4\nrequest_overhead = "0us"')))


@pytest.mark.parametrize("edit, message", [
    (('cores = 4', 'cores = 4\nmax_iops = "x"'), "max_iops: expected requests/s, a number > 0, got 'x'"),
    (('cores = 4', 'cores = 4\nmax_iops = 0'), "max_iops: expected requests/s, a number > 0, got 0"),
    (('name = "n1"\nrole = "client"', 'name = "n1"\nrole = "client"\nrequest_overhead = "abc"'),
     "request_overhead"),
    (('name = "n1"\nrole = "client"', 'name = "n1"\nrole = "client"\nrequest_overhead = "0us"'),
     "unequal request_overhead"),
    (('name = "n1"\nrole = "client"', 'name = "n1"\nrole = "client"\nmax_iops = 10'), "storage keys"),
])
def test_bad_request_overhead_and_max_iops_are_refused_in_one_line(edit, message):
    import tomllib
    with pytest.raises(StackError, match=message) as e:
        cluster_from_dict(tomllib.loads(CLUSTER.replace(*edit)))
    assert "\n" not in str(e.value)
