"""The fabric probe of `storlab net`: TCP throughput and round-trip time between client nodes and
server nodes, one pair at a time and then every client at once, the way the GUPFS evaluation
measured its fabrics before the storage on them.

It runs on every rank of an MPI launch (the rank interface, measure/ranks.py); the lowest rank of
each node speaks for its node, the others wait. Server nodes are named by host name; every other
node is a client. Each pair is measured alone: the round trip as the median of small ping-pongs
over one TCP connection (after a few to warm it up), then `streams` TCP streams sending for
`seconds`. Throughput is counted where iperf3 counts its receiver's figure: the bytes the server
received between the first byte and the end of the stream, so what sits in socket buffers when the
sender stops is not counted. Then every client streams at once (client i to server i mod S), which
shows a link that the pairs share (a server's link, an uplink): `aggregate_bw_bytes` against the
sum of the pairs.
"""
from __future__ import annotations

import fcntl
import ipaddress
import socket
import statistics
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import TargetError, UserError
from ..jobs.tables.net import MAX_STREAMS
from .ranks import Ranks

__all__ = ["NetSettings", "new_body", "probe_fabric", "local_networks"]

CHUNK_BYTES = 1 << 20                   # one send: large enough that the system call costs nothing
PING_WARMUP, PING_COUNT = 5, 50
CONNECT_TIMEOUT_S = 5.0
# a stream's header: b"S" + 8-byte stream id, or b"P" for ping-pong; the server's answer to a
# stream is the bytes it received and the seconds between the first byte and the end (two doubles)
_RESULT = struct.Struct("!dd")

_SIOCGIFADDR, _SIOCGIFNETMASK = 0x8915, 0x891B


@dataclass(frozen=True)
class NetSettings:
    servers: tuple[str, ...]            # host names of the serving nodes
    seconds: float = 3.0                # each stream's sending time
    streams: int = 1                    # parallel TCP streams per pair
    aggregate: bool = True              # also every client at once


def local_networks() -> list[ipaddress.IPv4Interface]:
    """This node's IPv4 addresses with their networks, loopback left out (SIOCGIFADDR per interface)."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            req = struct.pack("256s", name.encode()[:15])
            try:
                addr = socket.inet_ntoa(fcntl.ioctl(s.fileno(), _SIOCGIFADDR, req)[20:24])
                mask = socket.inet_ntoa(fcntl.ioctl(s.fileno(), _SIOCGIFNETMASK, req)[20:24])
            except OSError:
                continue            # an interface without an IPv4 address
            iface = ipaddress.IPv4Interface(f"{addr}/{mask}")
            if not iface.ip.is_loopback:
                found.append(iface)
    return found


def _pick_address(server: list[str], client: list[str]) -> str:
    """The server address a client reaches directly: one on a network the client is on, else the
    server's first."""
    mine = [ipaddress.IPv4Interface(c).network for c in client]
    for a in server:
        if any(ipaddress.IPv4Interface(a).ip in net for net in mine):
            return str(ipaddress.IPv4Interface(a).ip)
    if not server:
        raise TargetError("the server node has no IPv4 address off loopback")
    return str(ipaddress.IPv4Interface(server[0]).ip)


class _Server:
    """The listening side on a server node: one thread per connection, counting or echoing."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(MAX_STREAMS * 4)
        self.port = self.sock.getsockname()[1]
        self._stop = False
        self._thread = threading.Thread(target=self._accept, name="storlab-net-server", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _serve(conn: socket.socket) -> None:
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            kind = conn.recv(1)
            if kind == b"P":
                while True:
                    b = conn.recv(1)
                    if not b:
                        return
                    conn.sendall(b)
            elif kind == b"S":
                buf = bytearray(CHUNK_BYTES)
                view = memoryview(buf)
                received, first = 0, None
                while True:
                    n = conn.recv_into(view)
                    if not n:
                        break
                    if first is None:
                        first = time.monotonic()
                    received += n
                end = time.monotonic()
                conn.sendall(_RESULT.pack(float(received), end - first if first is not None else 0.0))

    def close(self) -> None:
        self._stop = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def _connect(address: str, port: int) -> socket.socket:
    try:
        s = socket.create_connection((address, port), timeout=CONNECT_TIMEOUT_S)
    except OSError as e:
        raise TargetError(f"net: cannot reach {address}:{port}: {e.strerror or e}") from None
    s.settimeout(None)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _round_trip_s(address: str, port: int) -> float:
    """The median time of a one-byte exchange over one connection, after a warm-up."""
    with _connect(address, port) as s:
        s.sendall(b"P")
        times = []
        for i in range(PING_WARMUP + PING_COUNT):
            t0 = time.perf_counter()
            s.sendall(b"x")
            if s.recv(1) != b"x":
                raise TargetError(f"net: {address}:{port} closed the round-trip connection")
            if i >= PING_WARMUP:
                times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _send_streams(address: str, port: int, streams: int, seconds: float) -> list[tuple[float, float]]:
    """`streams` connections sending at once for `seconds`; each one's (bytes, seconds) as received."""
    socks = [_connect(address, port) for _ in range(streams)]
    results: list[tuple[float, float] | None] = [None] * streams
    errors: list[str] = []
    chunk = memoryview(bytes(CHUNK_BYTES))
    start = time.monotonic() + 0.05          # every stream starts together

    def send(i: int) -> None:
        s = socks[i]
        try:
            s.sendall(b"S")
            while time.monotonic() < start:
                time.sleep(0.001)
            end = start + seconds
            while time.monotonic() < end:
                s.sendall(chunk)
            s.shutdown(socket.SHUT_WR)
            answer = b""
            while len(answer) < _RESULT.size:
                b = s.recv(_RESULT.size - len(answer))
                if not b:
                    raise OSError("the server closed before its count")
                answer += b
            results[i] = _RESULT.unpack(answer)
        except OSError as e:
            errors.append(f"stream {i}: {e}")
        finally:
            s.close()

    # daemon threads: a stopped probe does not wait out their sending time to exit
    threads = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise TargetError(f"net: {address}:{port}: {errors[0]}")
    return [r for r in results if r is not None]


def _rate(counts: list[tuple[float, float]]) -> float:
    """Bytes per second of streams that ran together: their bytes over the longest of their times."""
    longest = max((sec for _, sec in counts), default=0.0)
    return sum(b for b, _ in counts) / longest if longest > 0 else 0.0


def _node_ranks(everyone: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """[{node, ranks}] in the order the nodes first appear, as the other MPI documents list them."""
    out: dict[str, list[int]] = {}
    for entry in sorted(everyone, key=lambda e: e["rank"]):
        out.setdefault(entry["host"], []).append(entry["rank"])
    return [{"node": n, "ranks": r} for n, r in out.items()]


def _nodes(everyone: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """host -> its lowest rank's entry (the node's speaker)."""
    out: dict[str, dict[str, Any]] = {}
    for entry in sorted(everyone, key=lambda e: e["rank"]):
        out.setdefault(entry["host"], entry)
    return out


def new_body(settings: NetSettings) -> dict[str, Any]:
    """The body of a `net` document before anything is measured; `probe_fabric` fills it as it
    goes, so a stopped probe leaves the pairs it measured."""
    return {"servers": list(settings.servers), "clients": [], "streams": settings.streams,
            "seconds": settings.seconds, "pairs": [], "aggregate": [], "aggregate_bw_bytes": None,
            "findings": [], "nodes": []}


def probe_fabric(ranks: Ranks, settings: NetSettings, body: dict[str, Any],
                 notify: Callable[[str], None] | None = None) -> None:
    """Run the probe on this rank, filling `body` (new_body) as each measurement ends. The values
    are the table's (jobs/tables/net.py), checked there."""
    host = socket.gethostname()
    server = _Server() if host in settings.servers else None
    try:
        me = {"rank": ranks.rank, "host": host, "addresses": [str(a) for a in local_networks()],
              "port": server.port if server else None}
        everyone = ranks.allgather(me)
        body["nodes"] = _node_ranks(everyone)
        nodes = _nodes(everyone)
        missing = [s for s in settings.servers if s not in nodes]
        clients = [h for h in nodes if h not in settings.servers]
        if missing or not clients:
            why = (f"no rank runs on server node(s) {', '.join(missing)} (nodes here: {', '.join(nodes)})"
                   if missing else "every node is a server: name only the serving nodes in --servers")
            ranks.fail(why)
            raise UserError(f"servers: {why}")
        body["clients"] = clients
        speaker = nodes[host]["rank"] == ranks.rank
        for c in clients:
            for s in settings.servers:
                body["pairs"].append(_pair(ranks, nodes, c, s, settings, speaker and host == c, notify))
        if settings.aggregate:
            body["aggregate"] = _aggregate(ranks, nodes, clients, settings, speaker and host in clients)
            body["aggregate_bw_bytes"] = sum(a["bw_bytes"] for a in body["aggregate"])
        body["findings"] = _findings(body["pairs"], body["aggregate"])
        ranks.barrier()
    finally:
        if server:
            server.close()


def _pair(ranks: Ranks, nodes: dict[str, dict[str, Any]], client: str, server: str, settings: NetSettings,
          mine: bool, notify) -> dict[str, Any]:
    """One client-server pair measured alone; every rank returns the same record."""
    ranks.barrier()
    result = None
    if mine:
        s = nodes[server]
        address = _pick_address(s["addresses"], nodes[client]["addresses"])
        rtt = _round_trip_s(address, s["port"])
        counts = _send_streams(address, s["port"], settings.streams, settings.seconds)
        result = {"client": client, "server": server, "address": address, "rtt_s": rtt,
                  "bw_bytes": _rate(counts), "stream_bw_bytes": [b / sec if sec else 0.0 for b, sec in counts]}
    pair = next(r for r in ranks.allgather(result) if r is not None)
    if notify:      # the rank that reports (rank 0), whichever node measured
        notify(f"net: {client} -> {server}: {pair['bw_bytes'] * 8 / 1e6:.1f} Mbit/s, "
               f"round trip {pair['rtt_s'] * 1e3:.3f} ms")
    return pair


def _aggregate(ranks: Ranks, nodes: dict[str, dict[str, Any]], clients: list[str], settings: NetSettings,
               mine: bool) -> list[dict[str, Any]]:
    """Every client at once, client i to server i mod S; each stream set's received rate."""
    ranks.barrier()
    result = None
    if mine:
        host = socket.gethostname()
        server = settings.servers[clients.index(host) % len(settings.servers)]
        s = nodes[server]
        address = _pick_address(s["addresses"], nodes[host]["addresses"])
        counts = _send_streams(address, s["port"], settings.streams, settings.seconds)
        result = {"client": host, "server": server, "bw_bytes": _rate(counts)}
    return [r for r in ranks.allgather(result) if r is not None]


# a shared link shows when all clients at once get clearly less than their pairs alone
SHARED_LINK_LOSS = 0.10


def _findings(pairs: list[dict[str, Any]], aggregate: list[dict[str, Any]]) -> list[str]:
    """Which link the clients share, in words: per server, the pairs alone against all at once."""
    out = []
    for server in dict.fromkeys(a["server"] for a in aggregate):
        together = sum(a["bw_bytes"] for a in aggregate if a["server"] == server)
        alone = sum(p["bw_bytes"] for p in pairs if p["server"] == server
                    and any(a["client"] == p["client"] and a["server"] == server for a in aggregate))
        if alone > 0 and together < alone * (1 - SHARED_LINK_LOSS):
            out.append(f"{server}: its clients together reach {together * 8 / 1e6:.1f} Mbit/s, "
                       f"{together / alone:.0%} of the {alone * 8 / 1e6:.1f} Mbit/s they reach one at a time: "
                       f"a link they share (the server's own link, or an uplink) limits them")
    return out
