"""The network in the model: links that carry a protocol's payload at a share of their line rate
and add a round trip to every request, switches and uplinks shared by many clients, servers whose
CPU costs time per request and per byte on a number of cores, and a cluster of N clients over
those links to K servers solved as one closed queueing network (docs/model.md, "Networks").

Payload efficiency per protocol, from the framing each standard defines (no measured figure):
- Ethernet (IEEE 802.3): every frame carries 38 bytes beside its MTU on the wire (preamble and
  start delimiter 8, header 14, FCS 4, inter-frame gap 12);
- TCP/IP (RFC 791, 793, 7323): 20 bytes of IPv4 header, 20 of TCP and 12 of the timestamp option
  (Linux sends it by default) inside each frame: 1,448 payload bytes per 1,538 on the wire at MTU
  1,500 (94.1 %), 8,948 per 9,038 at MTU 9,000 (99.0 %);
- iSCSI (RFC 7143): a 48-byte basic header segment per PDU, data PDUs of at most 8,192 bytes (the
  default MaxRecvDataSegmentLength), and a command and a response PDU per request;
- NFS over TCP (RFC 5531, 1813): a record mark, an RPC call and reply header with AUTH_SYS
  credentials and the READ/WRITE arguments and results: about 200 bytes per request;
- NBD (the NBD protocol's specification): a 28-byte request header, and for a read a structured
  reply's 20-byte chunk header with its 8-byte offset (what libnbd and nbdkit negotiate): 56 bytes
  per request;
- HTTP/1.1 and S3 (RFC 9112): a request line and headers (an S3 request carries its signature
  headers) and the response headers, about 800 bytes per request; HTTPS adds TLS records (RFC
  8446): 5 bytes of header and a 16-byte AEAD tag per record of at most 16 KiB;
- Fibre Channel (FC-FS): 8b/10b coding up to 8GFC (10 line bits per byte), 64b/66b beyond; a frame
  of at most 2,048 data bytes carries 36 bytes of delimiters, header and CRC and is followed by at
  least 6 idle words (24 bytes): 2,048 of 2,108 (97.2 %); 2GFC (2.125 Gbaud) carries 206 MB/s.
A request costs its link one round trip (the command out, the status or data back) besides its
transfer; a TCP connection carries at most one window per round trip (the bandwidth-delay
product: throughput <= window / RTT, RFC 7323 section 1; Mathis et al., "The Macroscopic Behavior
of the TCP Congestion Avoidance Algorithm", 1997). How many connections a client's requests share
is the protocol's (CONNECTIONS): a window is a limit per connection, so a protocol that puts every
thread's requests on one connection holds them all to one window.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

from ..units import format_duration
from .costs import HOST_REQUEST_OVERHEAD_S
from .stack import StackError

__all__ = ["PROTOCOLS", "SHAPERS", "Link", "Server", "Cluster", "ClusterLoad", "ClusterPrediction", "NetworkCapacity",
           "payload_efficiency", "predict_cluster", "CONNECTIONS", "CONNECTION_KINDS", "connection_kind",
           "connections_per_client", "parse_rate_bits", "DEFAULT_RTT_S", "DEFAULT_MTU"]

PROTOCOLS = {"tcp": "TCP/IP over Ethernet", "iscsi": "iSCSI over TCP/IP", "nfs": "NFS over TCP/IP",
             "nbd": "NBD over TCP/IP",
             "http": "HTTP/1.1 (S3) over TCP/IP", "https": "HTTPS (S3 over TLS) over TCP/IP",
             "fc": "Fibre Channel (SCSI, FCP)"}
DEFAULT_MTU = 1500
# The TCP connections a client's requests travel on, per protocol (a stated window holds each):
# - thread: one per thread (iperf -P streams; a block client's or libnbd's handle per thread);
# - client: one per client and server, every thread's requests on it (an iSCSI session has one
#   connection unless multiple connections per session are negotiated, RFC 7143 section 4.2; an
#   NFS mount one unless `nconnect` is set, nfs(5));
# - request: one per request in flight (HTTP/1.1 carries one request at a time on a connection,
#   RFC 9112 section 9.3, so an S3 client keeps a pooled connection per request it has open);
# - None: no TCP window (Fibre Channel paces frames with buffer credits, not a window).
# A link may state its own (`connections`): a user-space NFS client such as libnfs, storlab's nfs
# engine, opens one per thread.
CONNECTIONS = {"tcp": "thread", "iscsi": "client", "nfs": "client", "nbd": "thread", "http": "request",
               "https": "request", "fc": None}
CONNECTION_KINDS = {"thread": "one TCP connection per thread", "client": "one per client, every thread on it",
                    "request": "one per request in flight"}


def connection_kind(value: object) -> str | None:
    """A link's stated `connections`, checked (None: the protocol's); ValueError names the values."""
    if value is not None and value not in CONNECTION_KINDS:
        raise ValueError(f"{value!r}; allowed: " + ", ".join(f"{k} ({v})" for k, v in CONNECTION_KINDS.items()))
    return None if value is None else str(value)


# How a link holds a request to its rate. A wire serialises: a request's bytes take size / rate on
# it, in series with the round trip. A token bucket (Linux tc's htb and tbf, tc-htb(8) and
# tc-tbf(8); the cluster testbed's links) only meters: bytes pass at memory speed while tokens
# last and wait for tokens when they run out, so the link caps the rate without adding its
# transfer time to a request that finds tokens; the time between requests refills the bucket.
SHAPERS = {"wire": "serialises every request's bytes at the line rate",
           "token-bucket": "meters the rate only (tc htb or tbf): no transfer time while tokens last"}
# One round trip through one switch on a LAN when nothing else is queued: the order of a 10 GbE
# ping between two hosts (tens of microseconds); a stack file states its own `rtt`.
DEFAULT_RTT_S = 50e-6
ETHERNET_WIRE_EXTRA_BYTES = 38        # preamble + SFD 8, header 14, FCS 4, inter-frame gap 12
TCP_IP_HEADER_BYTES = 52              # IPv4 20, TCP 20, timestamps option 12
ISCSI_BHS_BYTES = 48
ISCSI_DATA_SEGMENT_BYTES = 8192
NFS_REQUEST_OVERHEAD_BYTES = 200
NBD_REQUEST_OVERHEAD_BYTES = 28 + 20 + 8     # request header; structured reply chunk header and offset
HTTP_REQUEST_OVERHEAD_BYTES = 800
TLS_RECORD_BYTES = 16384
TLS_RECORD_OVERHEAD_BYTES = 21        # record header 5 + AEAD tag 16 (TLS 1.3)
FC_FRAME_DATA_BYTES = 2048
FC_FRAME_OVERHEAD_BYTES = 36 + 24     # SOF 4, header 24, CRC 4, EOF 4; 6 idle words between frames
FC_8B10B_MAX_BAUD = 8.5e9             # 1, 2, 4 and 8GFC code 8b/10b; 16GFC and beyond 64b/66b
MAX_CLUSTER_NODES = 10_000


def parse_rate_bits(text: str | int | float, what: str = "rate") -> float:
    """A link rate in bits per second, as tc and link speeds are written: '1gbit', '200mbit',
    '10Gbit/s', or a bare number of bits per second (the cluster testbed's form)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(?:bit|b)?(?:/s|ps)?\s*", str(text), re.IGNORECASE)
        if not m:
            raise StackError(f"{what}: {text!r} is not a link rate; write e.g. 1gbit, 200mbit or 10Gbit/s")
        value = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2).lower()]
    if not (1e3 <= value <= 1e13 and math.isfinite(value)):
        raise StackError(f"{what}: {text!r} is out of range; allowed: 1kbit to 10000gbit")
    return value


def _tcp_efficiency(mtu: int) -> float:
    return (mtu - TCP_IP_HEADER_BYTES) / (mtu + ETHERNET_WIRE_EXTRA_BYTES)


def payload_efficiency(protocol: str, mtu: int = DEFAULT_MTU, request_bytes: int | None = None,
                       rate_bits: float | None = None) -> float:
    """Payload bytes per byte the line carries (for FC: per byte of line rate / 8, coding included),
    for requests of `request_bytes` (per-request headers weigh on small ones)."""
    if protocol not in PROTOCOLS:
        raise StackError(f"protocol: {protocol!r} is not one the model knows; allowed: {', '.join(PROTOCOLS)}")
    if protocol == "fc":
        coding = 8 / 10 if rate_bits is None or rate_bits <= FC_8B10B_MAX_BAUD else 64 / 66
        return coding * FC_FRAME_DATA_BYTES / (FC_FRAME_DATA_BYTES + FC_FRAME_OVERHEAD_BYTES)
    if not 576 <= mtu <= 65536:
        raise StackError(f"mtu: {mtu} is out of range; allowed: 576 to 65536")
    efficiency = _tcp_efficiency(mtu)
    size = request_bytes or (1 << 20)
    extra = 0.0
    if protocol == "iscsi":
        extra = ISCSI_BHS_BYTES * (2 + math.ceil(size / ISCSI_DATA_SEGMENT_BYTES))
    elif protocol == "nfs":
        extra = NFS_REQUEST_OVERHEAD_BYTES
    elif protocol == "nbd":
        extra = NBD_REQUEST_OVERHEAD_BYTES
    elif protocol in ("http", "https"):
        extra = HTTP_REQUEST_OVERHEAD_BYTES
        if protocol == "https":
            extra += TLS_RECORD_OVERHEAD_BYTES * math.ceil((size + extra) / TLS_RECORD_BYTES)
    return efficiency * size / (size + extra)


@dataclass(frozen=True)
class Link:
    """A link (or a set of `count` equal ones): line rate in bits/s, the protocol it carries, its MTU,
    the round trip a request waits on it, and for TCP the window a stream may have in flight."""
    name: str
    rate_bits: float
    protocol: str = "tcp"
    mtu: int = DEFAULT_MTU
    rtt_s: float = DEFAULT_RTT_S
    window_bytes: int | None = None
    count: int = 1
    shaper: str = "wire"        # wire | token-bucket (SHAPERS)
    connections: str | None = None   # thread | client | request (CONNECTION_KINDS); None: the protocol's

    def __post_init__(self) -> None:
        payload_efficiency(self.protocol, self.mtu, rate_bits=self.rate_bits)      # validates both
        if self.shaper not in SHAPERS:
            raise StackError(f"link {self.name!r}: shaper: {self.shaper!r}; allowed: {', '.join(SHAPERS)}")
        if not (self.rtt_s >= 0 and math.isfinite(self.rtt_s)):
            raise StackError(f"link {self.name!r}: rtt must be a finite time >= 0")
        if self.count < 1:
            raise StackError(f"link {self.name!r}: count must be at least 1")
        try:
            connection_kind(self.connections)
        except ValueError as e:
            raise StackError(f"link {self.name!r}: connections: {e}") from None

    def payload_bytes_per_s(self, request_bytes: int) -> float:
        return self.rate_bits / 8 * payload_efficiency(self.protocol, self.mtu, request_bytes, self.rate_bits)


@dataclass(frozen=True)
class Server:
    """K equal servers (file, object or iSCSI targets): their link, their CPU (seconds per request,
    bytes per second one core handles, cores) and what their storage delivers (bytes/s and
    requests/s per server; None: not a limit) with the storage's time per request."""
    name: str
    link: Link
    count: int = 1
    cores: int = 1
    cpu_per_request_s: float = 0.0
    cpu_rate_bytes: float | None = None
    storage_bytes_per_s: float | None = None
    storage_iops: float | None = None
    storage_latency_s: float = 0.0
    # the requests/s the server carries at most, measured as a whole (its CPU, protocol stack and
    # storage together, e.g. a load deep enough that nothing else binds): one queue of 1 / max_iops
    # per request per server; None: not measured (its CPU and storage figures stand for it)
    max_iops: float | None = None

    def __post_init__(self) -> None:
        if self.max_iops is not None and not (self.max_iops > 0 and math.isfinite(self.max_iops)):
            raise StackError(f"server {self.name!r}: max_iops must be a finite rate > 0")

    def cpu_time_s(self, request_bytes: int) -> float:
        return self.cpu_per_request_s + (request_bytes / self.cpu_rate_bytes if self.cpu_rate_bytes else 0.0)


@dataclass(frozen=True)
class Cluster:
    """N client nodes, each on its own link, through a switch (and optional uplinks shared by the
    clients) to K servers. `switch_bits`: the switch's own limit (None: non-blocking)."""
    name: str
    clients: int
    client_link: Link
    servers: Server
    switch_bits: float | None = None
    uplink: Link | None = None
    client_names: tuple[str, ...] = field(default=())
    # each client's own protocol work (a software iSCSI initiator, an NFS client: the TCP/IP stack
    # copies and checksums every byte): seconds per request, bytes per second per core, cores
    client_cpu_per_request_s: float = 0.0
    client_cpu_rate_bytes: float | None = None
    client_cores: int = 1
    # each client's fixed time per request outside its CPU queue. A kernel client (an NFS mount, an
    # iSCSI initiator, a block device) passes the block layer: costs.HOST_REQUEST_OVERHEAD_S, 50 us
    # measured for a direct 4 KiB read through it. A user-space client (libnfs, libnbd, an S3
    # library) does not: its time per request is its own CPU, stated as client_cpu_per_request_s or
    # measured with the server's (the cluster testbed), and this is 0.
    client_request_overhead_s: float = HOST_REQUEST_OVERHEAD_S

    def client_cpu_time_s(self, request_bytes: int) -> float:
        return self.client_cpu_per_request_s + (request_bytes / self.client_cpu_rate_bytes
                                                if self.client_cpu_rate_bytes else 0.0)

    def __post_init__(self) -> None:
        if not 1 <= self.clients <= MAX_CLUSTER_NODES:
            raise StackError(f"cluster: clients must be 1 to {MAX_CLUSTER_NODES}, got {self.clients}")
        if not (self.client_request_overhead_s >= 0 and math.isfinite(self.client_request_overhead_s)):
            raise StackError("cluster: client_request_overhead must be a finite time >= 0")


@dataclass(frozen=True)
class ClusterLoad:
    rw: str                 # read | write (what the clients ask the servers for)
    request_bytes: int
    threads: int = 1        # per client
    qd: int = 1             # per thread


@dataclass(frozen=True)
class NetworkCapacity:
    name: str
    capacity_iops: float    # requests/s it carries at most
    headroom_fraction: float
    why: str


@dataclass(frozen=True)
class ClusterPrediction:
    load: ClusterLoad
    clients: int
    iops: float
    bw_bytes: float
    limiting: str
    components: tuple[NetworkCapacity, ...]
    single_stream_bw_bytes: float   # one thread, one request at a time, over one client link
    single_stream_limiting: str
    latency_mean_s: float


@dataclass(frozen=True)
class _Station:
    name: str
    demand_s: float          # service per request at one instance
    servers: int             # instances (or cores) serving the requests that reach it
    bound: bool = False      # one instance per client: only that client's requests wait there
    why: str = ""
    rate_only: bool = False  # a token-bucket link: caps the rate, adds no time to a lone request


def _stations(cluster: Cluster, load: ClusterLoad) -> list[_Station]:
    size = load.request_bytes
    client = cluster.client_link
    out = [_Station(f"{client.name} (client link)", size / client.payload_bytes_per_s(size), 1, bound=True,
                    why=f"{client.rate_bits / 1e9:g} Gbit/s {PROTOCOLS[client.protocol]}, payload "
                        f"{payload_efficiency(client.protocol, client.mtu, size, client.rate_bits):.1%}",
                    rate_only=client.shaper == "token-bucket")]
    window = _window_station(cluster, load)
    if window is not None:
        out.append(window)
    client_cpu = cluster.client_cpu_time_s(size)
    if client_cpu > 0:
        out.append(_Station("client CPU", client_cpu, cluster.client_cores, bound=True,
                            why=f"{cluster.client_cores} core(s) per client, {client_cpu * 1e6:.3g} us per request"))
    if cluster.uplink is not None:
        up = cluster.uplink
        out.append(_Station(f"{up.name} (uplink)", size / up.payload_bytes_per_s(size), up.count,
                            why=f"{up.count} x {up.rate_bits / 1e9:g} Gbit/s shared by {cluster.clients} clients",
                            rate_only=up.shaper == "token-bucket"))
    if cluster.switch_bits is not None:
        switch_payload = cluster.switch_bits / 8 * payload_efficiency(client.protocol, client.mtu, size,
                                                                      client.rate_bits)
        out.append(_Station("switch", size / switch_payload, 1, why=f"{cluster.switch_bits / 1e9:g} Gbit/s backplane"))
    srv = cluster.servers
    out.append(_Station(f"{srv.link.name} (server link)", size / srv.link.payload_bytes_per_s(size), srv.count,
                        why=f"{srv.count} x {srv.link.rate_bits / 1e9:g} Gbit/s {PROTOCOLS[srv.link.protocol]}",
                        rate_only=srv.link.shaper == "token-bucket"))
    cpu = srv.cpu_time_s(size)
    if cpu > 0:
        out.append(_Station(f"{srv.name} CPU", cpu, srv.count * srv.cores,
                            why=f"{srv.count} x {srv.cores} core(s), {cpu * 1e6:.3g} us per request"))
    storage = []
    if srv.storage_bytes_per_s:
        storage.append(size / srv.storage_bytes_per_s)
    if srv.storage_iops:
        storage.append(1 / srv.storage_iops)
    if storage:
        out.append(_Station(f"{srv.name} storage", max(storage), srv.count,
                            why=f"{srv.count} server(s)' storage"))
    if srv.max_iops:
        out.append(_Station(f"{srv.name} (measured requests/s)", 1 / srv.max_iops, srv.count,
                            why=f"{srv.count} x {srv.max_iops:,.0f} requests/s at most, measured"))
    return out


def connections_per_client(link: Link, load: ClusterLoad) -> int | None:
    """The TCP connections one client's requests share over `link` (its own `connections`, else
    its protocol's, CONNECTIONS); None: no window applies (Fibre Channel)."""
    if CONNECTIONS[link.protocol] is None:
        return None
    kind = link.connections or CONNECTIONS[link.protocol]
    return {"thread": load.threads, "client": 1, "request": load.threads * load.qd}[kind]


def _window_station(cluster: Cluster, load: ClusterLoad) -> _Station | None:
    """A stated window: each of a client's connections carries one window per round trip, so a
    request's bytes take size x RTT / window on its connection (a wire-like stage: a lone request
    takes that long too), and the client's connections serve its requests side by side."""
    link = cluster.client_link
    window = link.window_bytes
    connections = connections_per_client(link, load)
    rtt = _round_trip_s(cluster)
    if not window or connections is None or rtt <= 0:
        return None
    return _Station("TCP window", load.request_bytes * rtt / window, connections, bound=True,
                    why=f"{connections} connection(s) per client, {window:,} B per {format_duration(rtt)} round trip")


def _delay_s(cluster: Cluster, load: ClusterLoad) -> float:
    """A request's fixed time: the client's own fixed time per request (the block layer's for a
    kernel client, 0 for a user-space one: Cluster.client_request_overhead_s), the round trips of
    the links it crosses (the client's and the server's are one path: the larger round trip) and the
    server storage's time per request."""
    return cluster.client_request_overhead_s + _round_trip_s(cluster) + cluster.servers.storage_latency_s


def _round_trip_s(cluster: Cluster) -> float:
    """A request's round trip: the client's and the server's links are one path, the larger one's."""
    return max(cluster.client_link.rtt_s, cluster.servers.link.rtt_s)


def _solve(stations: list[_Station], delay_s: float, clients: int, per_client: int) -> tuple[float, dict[str, float]]:
    """Approximate mean-value analysis (Schweitzer 1979; Bard 1979) of N = clients x per_client
    requests: R_k = D_k / c_k (1 + Q_k seen) + D_k (c_k - 1) / c_k (Seidmann's multi-server), where a
    request sees (N - 1) / N of a shared station's queue and (n - 1) / n of its own client's link
    (n its client's requests: no other client waits there). Returns X and each station's residence."""
    n = clients * per_client
    queues = {s.name: n / (len(stations) + 1) for s in stations}
    x = 0.0
    residence: dict[str, float] = {}
    for _ in range(2000):
        residence = {}
        for s in stations:
            q = queues[s.name]
            seen = q * (per_client - 1) / per_client if s.bound else q * (n - 1) / n
            residence[s.name] = s.demand_s / s.servers * (1 + seen) + s.demand_s * (s.servers - 1) / s.servers
        cycle = delay_s + sum(residence.values())
        new_x = n / cycle
        new_q = {s.name: (new_x / clients if s.bound else new_x) * residence[s.name] for s in stations}
        done = abs(new_x - x) <= 1e-12 * new_x
        x, queues = new_x, new_q
        if done:
            break
    return x, residence


def predict_cluster(cluster: Cluster, load: ClusterLoad) -> ClusterPrediction:
    """Requests/s and bytes/s of `clients x threads x qd` requests cycling from the clients through
    their links, the shared uplinks and switch, the servers' links, CPU and storage. A request's
    bytes stream through the links and the server at once, so its time alone is the fixed delay
    (client overhead, round trip, storage latency) plus its slowest stage; under load it queues at
    the bottleneck (the component with the least capacity), as `predict` does. The component with
    the least headroom is named (the requests in flight when twice as many would still gain 5 % or
    more), and the single stream: one thread over one link, one request at a time."""
    if load.rw not in ("read", "write"):
        raise StackError(f"cluster: rw must be read or write, got {load.rw!r}")
    stations = _stations(cluster, load)
    capacities = {s.name: (s.servers / s.demand_s) * (cluster.clients if s.bound else 1) for s in stations}
    # token-bucket links only cap the rate (x below); the queue and a lone request's time are the
    # other stages' (a cluster of token-bucket links alone: the lone request is the fixed delay)
    timed = [s for s in stations if not s.rate_only] or [replace(min(stations, key=lambda s: s.demand_s), demand_s=0.0)]
    bottleneck = min(timed, key=lambda s: capacities[s.name] if s.demand_s else math.inf)
    slowest = max(timed, key=lambda s: s.demand_s)
    unloaded = _delay_s(cluster, load) + slowest.demand_s
    delay = max(0.0, unloaded - bottleneck.demand_s)
    per_client = load.threads * load.qd
    x, _ = _solve([bottleneck], delay, cluster.clients, per_client)
    x = min(x, *capacities.values())
    components = [NetworkCapacity(s.name, capacities[s.name], 1 - x / capacities[s.name], s.why) for s in stations]
    busiest = min(components, key=lambda c: c.headroom_fraction)
    doubled, _ = _solve([bottleneck], delay, cluster.clients, 2 * per_client)
    doubled = min(doubled, *capacities.values())
    limiting = busiest.name if doubled <= x * 1.05 else f"requests in flight ({cluster.clients * per_client})"
    # one stream: one request at a time over one client link, nothing else queued
    single = load.request_bytes / unloaded
    single_why = "round trip per request" if unloaded - slowest.demand_s >= slowest.demand_s else slowest.name
    for s in stations:      # a metered link still holds one stream to its rate
        if s.rate_only and load.request_bytes * s.servers / s.demand_s < single:
            single, single_why = load.request_bytes * s.servers / s.demand_s, s.name
    return ClusterPrediction(load, cluster.clients, x, x * load.request_bytes, limiting, tuple(components),
                             single, single_why, cluster.clients * per_client / x)
