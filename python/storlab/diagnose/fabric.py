"""`storlab diagnose URL --servers HOSTS` across the fabric: a network target (nbd://, nfs://)
diagnosed in the GUPFS evaluation's order, under mpiexec with ranks on client and server nodes.

Four layers, bottom-up, each measured with short probes and predicted from the one below with the
network model (model/network.py):
1. the server's storage (`--backing`, the export's backing device or file), read locally on each
   server node, as the server's own process reads it (blocking reads from several threads);
2. the fabric (measure/net.py's probe, `storlab net`): each client-server pair alone, then every
   client at once; all at once is predicted as the sum of the pairs (nothing shared);
3. the protocol (`--memory-target`, an export of the same server served from memory): every client
   reading it at once, predicted by the model from the links measured in 2 with the protocol's
   framing and the measured round trip: what the protocol delivers when no disk is in the path;
4. the clients' view: every client reading TARGET at once, predicted from 1 to 3 (the links, the
   server's protocol work as 3 measured it when it lost, and the storage measured in 1).

The lowest rank of each node speaks for the node (as in `storlab net`); the clients read at the
same time after a barrier, each its own share of the target (participants). A layer's "at once"
figure is what the clients moved while all of them read (Xdd's de-skewed rate: each client's
time series inside [latest start, earliest end], on rank 0's clock), not the sum of their rates,
which overstates it when one client sets up later and the other reads alone for a while, nor
IOR's union of their spans, which counts against them the requests an early finisher still has
in flight while the others go on. Only reads: the target holds the data it exports.
"""
from __future__ import annotations

import socket
import statistics
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..document import header, now_iso
from ..errors import StorlabError, UserError
from ..measure.net import NetSettings, new_body, probe_fabric
from ..measure.ranks import RankFailure, Ranks
from ..model.network import DEFAULT_MTU, Cluster, ClusterLoad, Link, Server, payload_efficiency, predict_cluster
from .findings import NOISE, STRAGGLER, Finding, Row, fmt
from .probes import SEQ_READ, Probe, ProbeResult, Workload, run_probe
from .run import SCHEMA, probe_time

__all__ = ["FabricSettings", "ClientsPrediction", "diagnose_fabric", "predict_clients", "link_from_goodput",
           "fabric_findings", "model_protocol", "at_once"]

# the server's store is read as a server process reads it: blocking reads on several threads
# (nbdkit's and ganesha's workers), one request each. (io_uring with 1 MiB requests on a throttled
# loop device gets half the cap: docs/testbed.md, "The throttle".)
STORAGE_THREADS = 4
TCP = "tcp"


@dataclass
class FabricSettings:
    target: str                                   # the network target the clients read
    servers: tuple[str, ...]                      # host names of the serving nodes
    budget_s: float
    backing: str | None = None                    # the export's backing store, on each server node
    memory_target: str | None = None              # an export of the same server(s) served from memory
    argv: list[str] = field(default_factory=list)
    say: Callable[[str], None] | None = None


def model_protocol(url: str) -> str:
    """The network model's protocol of a target URL (nbds: NBD; its TLS is not modelled)."""
    scheme = url.split("://", 1)[0].lower()
    return "nfs" if scheme == "nfs" else "nbd"


def link_from_goodput(name: str, bw_bytes: float, protocol: str, rtt_s: float, count: int = 1) -> Link:
    """A link whose TCP payload is the measured `bw_bytes`: its line rate is that over TCP's payload
    share (the model's framing at MTU 1,500), so the model gives back the measured TCP figure less
    the protocol's own bytes per request."""
    rate_bits = bw_bytes * 8 / payload_efficiency(TCP, DEFAULT_MTU)
    return Link(name, max(rate_bits, 1e3), protocol, DEFAULT_MTU, rtt_s, count=count)


@dataclass(frozen=True)
class ClientsPrediction:
    total: float                     # bytes/s of every client at once
    per_client: dict[str, float]     # each client's share of it
    limited_by: str
    capped_by: str | None = None     # the shared station that caps the clients' sum (None: none does)
    own_limits: dict[str, str] = field(default_factory=dict)     # what limits each client alone


def _client_own(name: str) -> bool:
    return name.endswith("(client link)") or name == "client CPU"


def predict_clients(links: dict[str, Link], server: Server, load: ClusterLoad) -> ClientsPrediction:
    """Every client at once over links that may differ: the model's cluster of one client on each
    client's own link to the servers (network.predict_cluster), their sum capped by the least of the
    stations every client shares (the servers' links, CPU and storage). Clients on unequal links
    queue only at their own link until the server; the cap shares what the server carries in
    proportion to what each client would get."""
    per: dict[str, float] = {}
    own: dict[str, str] = {}
    cap, cap_name = float("inf"), ""
    for client, link in links.items():
        p = predict_cluster(Cluster(client, 1, link, server), load)
        per[client] = p.bw_bytes
        own[client] = p.limiting
        for c in p.components:
            if not _client_own(c.name) and c.capacity_iops * load.request_bytes < cap:
                cap, cap_name = c.capacity_iops * load.request_bytes, c.name
    total = sum(per.values())
    if total > cap:
        return ClientsPrediction(cap, {c: v * cap / total for c, v in per.items()}, cap_name, cap_name, own)
    return ClientsPrediction(total, per, ", ".join(dict.fromkeys(own.values())), None, own)


def _roles(ranks: Ranks, servers: tuple[str, ...]) -> tuple[str, bool, list[str]]:
    """(this host, whether this rank speaks for its node, the client nodes in rank order)."""
    host = socket.gethostname()
    everyone = ranks.allgather({"rank": ranks.rank, "host": host})
    first: dict[str, int] = {}
    for entry in sorted(everyone, key=lambda e: e["rank"]):
        first.setdefault(entry["host"], entry["rank"])
    missing = [s for s in servers if s not in first]
    clients = [h for h in first if h not in servers]
    if missing or not clients:
        why = (f"no rank runs on server node(s) {', '.join(missing)} (nodes here: {', '.join(first)})"
               if missing else "every node is a server: name only the serving nodes in --servers")
        raise UserError(f"servers: {why}")
    return host, first[host] == ranks.rank, clients


def _measure_on(ranks: Ranks, mine: bool, host: str, measure: Callable[[], ProbeResult]) -> list[dict[str, Any]]:
    """`measure` on the ranks where `mine` holds, all at once after a barrier; every rank gets every
    node's result ({host, probe, document} or {host, error})."""
    ranks.barrier()
    result = None
    if mine:
        try:
            r = measure()
            result = {"host": host, "probe": r.to_dict(), "document": r.document,
                      "clock_offset_s": ranks.clock_offset_s}
        except StorlabError as e:
            result = {"host": host, "error": f"{host}: {e}"}
    return [r for r in ranks.allgather(result) if r is not None]


def diagnose_fabric(ranks: Ranks, settings: FabricSettings) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run the diagnosis on this rank; rank 0 returns the document and every probe's run document
    (for the store), the other ranks the same document."""
    say = settings.say or (lambda _s: None)
    host, speaker, clients = _roles(ranks, settings.servers)
    count = (1 if settings.backing else 0) + len(clients) * len(settings.servers) + 1 \
        + (1 if settings.memory_target else 0) + 1
    seconds = probe_time(count, settings.budget_s, "measurements across the fabric")
    protocol = model_protocol(settings.target)
    doc = header("diagnose", schema=SCHEMA, argv=settings.argv)
    doc.update({"target": settings.target, "budget_s": settings.budget_s, "stack_check": None, "doctor": [],
                "layers": [], "findings": [], "probes": [],
                "stack": {"target": settings.target, "target_kind": "network", "mount_point": None, "fs_type": None,
                          "fs_device": None, "volume": None, "level": "network", "members": [], "striping": None,
                          "notes": [f"{protocol} target read by {len(clients)} client node(s) "
                                    f"({', '.join(clients)}) from server node(s) {', '.join(settings.servers)}"]},
                "fabric": {"servers": list(settings.servers), "clients": clients, "protocol": protocol,
                           "backing": settings.backing, "memory_target": settings.memory_target,
                           "seconds": seconds, "net": None}})
    w = SEQ_READ
    n = len(clients)
    measured: dict[str, list[dict[str, Any]]] = {}
    probe_docs: list[dict[str, Any]] = []

    def client_probe(layer: str, url: str) -> Callable[[], ProbeResult]:
        index = clients.index(host) if host in clients else 0
        return lambda: run_probe(Probe(layer, f"{host}: {url}", w, [url], seconds, network=True,
                                       extra={"participants": n, "participant_base": index,
                                              "interval": CLIENT_INTERVAL_S}), settings.argv)

    steps: list[tuple[str, bool, Callable[[], ProbeResult] | None, str]] = []
    if settings.backing:
        steps.append(("server-storage", speaker and host in settings.servers,
                      lambda: run_probe(Probe("server-storage", f"{host}: {settings.backing} (local, direct)", w,
                                              [settings.backing], seconds,
                                              extra={"engine": "psync", "qd": 1, "threads": STORAGE_THREADS}),
                                        settings.argv),
                      f"{', '.join(settings.servers)}: {settings.backing}, locally"))
    steps.append(("fabric", False, None, "the fabric (storlab net)"))
    if settings.memory_target:
        steps.append(("protocol", speaker and host in clients, client_probe("protocol", settings.memory_target),
                      f"{settings.memory_target} (memory), {n} client(s) at once"))
    steps.append(("clients", speaker and host in clients, client_probe("clients", settings.target),
                  f"{settings.target}, {n} client(s) at once"))
    try:
        for i, (layer, mine, measure, what) in enumerate(steps, 1):
            say(f"diagnose: {i}/{len(steps)}: {what}, {seconds:g} s each")
            if layer == "fabric":
                net_settings = NetSettings(settings.servers, seconds=seconds, streams=1)
                body = new_body(net_settings)
                doc["fabric"]["net"] = body
                probe_fabric(ranks, net_settings, body,
                             (lambda line: say(f"diagnose: {line}")) if ranks.rank == 0 else None)
                continue
            results = _measure_on(ranks, mine, host, measure)
            measured[layer] = results
            errors = [r["error"] for r in results if "error" in r]
            for r in results:
                if "probe" in r:
                    doc["probes"].append(r["probe"])
                    probe_docs.append(r["document"])
            stopped = [r["document"] for r in results if "document" in r
                       and r["document"].get("stop_reason") in ("interrupted", "error")]
            if errors or stopped:
                reason = "error" if errors or stopped[0].get("stop_reason") == "error" else "interrupted"
                doc.update(complete=False, stop_reason=reason,
                           error=errors[0] if errors else stopped[0].get("error"))
                break
    except KeyboardInterrupt:
        doc.update(complete=False, stop_reason="interrupted")
    except RankFailure as e:        # another rank failed or vanished: named, what was measured kept
        doc.update(complete=False, stop_reason="error", error=str(e))
    net = doc["fabric"]["net"]
    rows, context = build_fabric_rows(settings, clients, protocol, measured, net, w)
    doc["layers"] = [r.to_dict() for r in rows]
    doc["findings"] = [f.to_dict() for f in fabric_findings(rows, context, w)]
    doc["workloads"] = [{"name": w.name, "label": w.label(), "rw": w.rw, "bs": w.bs, "qd": w.qd, "figure": w.figure}]
    if net is not None:
        doc["mpi"] = {"size": ranks.size, "nodes": net.pop("nodes", [])}
    doc["finished_at"] = now_iso()
    return doc, probe_docs


def _by_host(results: list[dict[str, Any]] | None) -> dict[str, float]:
    return {r["host"]: float(r["probe"]["value"] or 0.0) for r in results or [] if "probe" in r}


# The time-series interval of the client probes: fine enough that the bytes each client moved while
# all of them read (at_once's de-skew window) are counted to a few percent of a probe of seconds
CLIENT_INTERVAL_S = 0.05
# the de-skew window stands for the clients at once when it holds at least this share of the
# shortest client's measured span; with less overlap the union (IOR's aggregate) is taken
DESKEW_MIN_OVERLAP = 0.5


@dataclass(frozen=True)
class _Span:
    """A node's measured phase on rank 0's clock: its workers' first start and last end, the bytes
    it moved, the moment its time series counts from (the phase's start plus its ramp) and the
    phase itself."""
    start: float
    end: float
    bytes: float
    series_origin: float
    phase: dict[str, Any]


def _span(r: dict[str, Any]) -> _Span | None:
    """A node's _Span: its workers' measured time, from the first worker's start to the last one's
    end (a phase starts its clock before the workers connect to the target). None without the
    phase's wall clock."""
    phases = (r.get("document") or {}).get("phases") or []
    phase = phases[-1] if phases else {}
    start, seconds = phase.get("start_unix_s"), phase.get("seconds")
    if start is None or not seconds:
        return None
    base = float(start) + float(r.get("clock_offset_s") or 0.0)
    workers = phase.get("workers") or []
    first = min((float(w["start_s"]) for w in workers), default=0.0)
    last = max((float(w["end_s"]) for w in workers), default=float(seconds))
    return _Span(base + first, base + max(last, first + float(seconds)),
                 float(r["probe"]["value"] or 0.0) * float(seconds), base + float(phase.get("ramp_s") or 0.0), phase)


def _bytes_between(span: _Span, a: float, b: float) -> float | None:
    """Bytes the node moved between a and b (rank 0's clock), from its time series: an interval
    partly inside counts in proportion. None without a time series."""
    total, found = 0.0, False
    for direction in ("read", "write"):
        series = (span.phase.get(direction) or {}).get("timeseries") or {}
        step, rates = series.get("interval_s"), series.get("bw_bytes")
        if not step or rates is None:
            continue
        found = True
        for k, rate in enumerate(rates):
            lo, hi = span.series_origin + k * step, span.series_origin + (k + 1) * step
            inside = min(hi, b) - max(lo, a)
            if inside > 0:
                total += float(rate) * inside
    return total if found else None


def at_once(results: list[dict[str, Any]] | None) -> float:
    """What every node moved while all of them worked: Xdd's de-skewed rate, the bytes of each
    node's time series inside [latest start, earliest end] over that window (docs/mpi.md). The
    nodes start within a barrier's skew but connect at their own pace, and a time-based probe's
    requests still in flight at its end are served, uncounted, while a later node goes on: over
    the union of their spans (IOR's aggregate, total bytes / (last end - first start)) those
    drained requests would count against the clients. The union is taken where the nodes overlap
    too little (DESKEW_MIN_OVERLAP) or a node has no time series; a result without its phase's
    wall clock falls back to the sum of the rates."""
    measured = [r for r in results or [] if "probe" in r]
    spans = [_span(r) for r in measured]
    if any(s is None for s in spans):
        return sum(_by_host(measured).values())
    if not spans:
        return 0.0
    a, b = max(s.start for s in spans), min(s.end for s in spans)
    if b - a >= DESKEW_MIN_OVERLAP * min(s.end - s.start for s in spans):
        inside = [_bytes_between(s, a, b) for s in spans]
        if all(x is not None for x in inside):
            return sum(inside) / (b - a)
    # every span is longer than 0 s (a phase without seconds fell back above), so the window is too
    return sum(s.bytes for s in spans) / (max(s.end for s in spans) - min(s.start for s in spans))


def _row(layer: str, subject: str, w: Workload, measured: float | None, predicted: float | None = None,
         limited_by: str | None = None, rule: str | None = None, run_id: str | None = None) -> Row:
    return Row(layer, subject, w.name, "bytes/s", measured, predicted, limited_by, rule, run_id)


@dataclass
class FabricContext:
    """What the findings need beyond the rows: each pair alone, the links, and the predictions."""
    pairs: dict[str, float] = field(default_factory=dict)          # client -> bytes/s alone
    aggregate: float | None = None                                  # every client at once (TCP)
    links: dict[str, Link] = field(default_factory=dict)
    server: Server | None = None                                    # as the clients' view is predicted
    server_link_seen: bool = False                                  # all at once fell short of the pairs
    protocol_lost: bool = False
    storage: float | None = None
    clients_without_storage: float | None = None                    # the clients' view, storage left out
    load: ClusterLoad | None = None


def build_fabric_rows(settings: FabricSettings, clients: list[str], protocol: str,
                      measured: dict[str, list[dict[str, Any]]], net: dict[str, Any] | None,
                      w: Workload) -> tuple[list[Row], FabricContext]:
    """The rows bottom-up, each predicted from the layers measured below it."""
    rows: list[Row] = []
    ctx = FabricContext(load=ClusterLoad(w.rw, w.bs, threads=1, qd=w.qd))
    storage = _by_host(measured.get("server-storage"))
    for r in measured.get("server-storage") or []:
        if "probe" in r:
            rows.append(_row("server-storage", r["probe"]["subject"], w, r["probe"]["value"],
                             run_id=r["probe"]["run_id"]))
    if storage:
        ctx.storage = min(storage.values())
    if not net or not net.get("pairs"):
        return rows, ctx
    rtt: dict[str, float] = {}
    for p in net["pairs"]:
        ctx.pairs[p["client"]] = ctx.pairs.get(p["client"], 0.0) + p["bw_bytes"]
        rtt[p["client"]] = max(rtt.get(p["client"], 0.0), p["rtt_s"])
        rows.append(_row("client-link", f"{p['client']} -> {p['server']} (TCP, alone; round trip "
                                        f"{p['rtt_s'] * 1e3:.2f} ms)", w, p["bw_bytes"]))
    ctx.aggregate = net.get("aggregate_bw_bytes")
    if ctx.aggregate is None:
        return rows, ctx
    alone = sum(ctx.pairs.values())
    rows.append(_row("fabric", f"{len(ctx.pairs)} client(s) at once (TCP)", w, ctx.aggregate, alone,
                     "the client links (each alone)", "nothing shared: the sum of each pair alone"))
    servers = settings.servers
    ctx.links = {c: link_from_goodput(f"{c} link", ctx.pairs[c], protocol, rtt[c]) for c in clients if c in ctx.pairs}
    # the server link carries what all clients at once carried when that fell short of the pairs'
    # sum (it was seen to limit); otherwise it was not seen to limit and carries the sum
    shared = ctx.aggregate < (1 - NOISE) * alone
    ctx.server_link_seen = shared
    server_link = link_from_goodput(f"{','.join(servers)} link", (ctx.aggregate if shared else max(alone, ctx.aggregate))
                                    / len(servers), protocol, 0.0, count=len(servers))
    server = Server(",".join(servers), server_link, count=len(servers))
    rule = (f"network model: {protocol} over each client's link as measured alone (TCP payload, its round trip), "
            + ("the server link as all clients at once carried it" if shared else
               "the server link not seen to limit (all clients at once reached the pairs' sum)"))
    prot = measured.get("protocol")
    prot_value = at_once(prot) if prot else None
    if prot:
        p = predict_clients(ctx.links, server, ctx.load)
        rows.append(_row("protocol", f"{settings.memory_target} (memory export), {len(prot)} client(s) at once", w,
                         prot_value, p.total, p.limited_by, rule,
                         prot[0].get("probe", {}).get("run_id")))
        if prot_value and prot_value < (1 - NOISE) * p.total:
            ctx.protocol_lost = True
            # the server's protocol work as the memory export measured it: a CPU station of that capacity
            server = replace(server, cpu_per_request_s=w.bs * len(servers) / prot_value)
            rule += "; the server's protocol work at the rate the memory export delivered"
    ctx.server = server
    view = measured.get("clients")
    if view:
        without = predict_clients(ctx.links, server, ctx.load)
        ctx.clients_without_storage = without.total
        predicted = without
        if ctx.storage:
            predicted = predict_clients(ctx.links, replace(server, storage_bytes_per_s=ctx.storage), ctx.load)
            rule += f"; the server's storage as measured on it ({fmt(ctx.storage, 'bytes/s')})"
        per = _by_host(view)
        rows.append(_row("clients", f"{settings.target}, {len(view)} client(s) at once", w, at_once(view),
                         predicted.total, predicted.limited_by, rule))
        # each client's own row is predicted only where nothing shared caps the clients: a shared
        # station's rate is not divided by any rule the clients keep
        own = predicted.capped_by is None
        for r in view:
            if "probe" in r:
                c = r["host"]
                rows.append(_row("client", f"{c} (its own view)", w, per[c], predicted.per_client.get(c) if own else None,
                                 predicted.own_limits.get(c) if own else None,
                                 "the model of this client alone on its link" if own else None,
                                 r["probe"]["run_id"]))
    return rows, ctx


def fabric_findings(rows: list[Row], ctx: FabricContext, w: Workload) -> list[Finding]:
    """The layer that loses, named: a slow client link, an oversubscribed server link, the server's
    CPU (the protocol below its links with no disk in the path), the server's storage."""
    out: list[Finding] = []
    unit = "bytes/s"
    by_layer = {r.layer: r for r in rows if r.layer not in ("client-link", "client", "server-storage")}
    # a slow client link: below STRAGGLER x the other clients' median, alone
    if len(ctx.pairs) > 1:
        c, v = min(ctx.pairs.items(), key=lambda kv: kv[1])
        med = statistics.median(x for k, x in ctx.pairs.items() if k != c)
        if med > 0 and v < STRAGGLER * med:
            cost = ""
            if ctx.server is not None and c in ctx.links and ctx.load is not None:
                with_it = predict_clients(ctx.links, ctx.server, ctx.load).total
                evened = dict(ctx.links, **{c: replace(ctx.links[c], rate_bits=ctx.links[c].rate_bits * med / v)})
                server = ctx.server
                if not ctx.server_link_seen:    # not seen to limit: it carries the evened clients' sum too
                    grown = (sum(ctx.pairs.values()) + med - v) / sum(ctx.pairs.values())
                    server = replace(server, link=replace(server.link, rate_bits=server.link.rate_bits * grown))
                potential = predict_clients(evened, server, ctx.load).total
                cost = (f"; the clients together are predicted at {fmt(with_it, unit)} against "
                        f"{fmt(potential, unit)} with {c} at the others' pace")
            out.append(Finding("slow-client-link", "warning", "client-link",
                               f"client {c}'s link carries {fmt(v, unit)} against {fmt(med, unit)} for the other "
                               f"clients ({v / med:.0%}) for {w.label()}{cost}",
                               "each client-server pair alone (TCP): " + ", ".join(
                                   f"{k} {fmt(x, unit)}" for k, x in ctx.pairs.items()),
                               f"check {c}'s network link: its speed and duplex, its errors and drops, a shaper "
                               "or a slower port on the switch"))
    fabric = by_layer.get("fabric")
    if fabric is not None and fabric.efficiency is not None and fabric.efficiency < 1 - NOISE:
        out.append(Finding("server-link-oversubscribed", "warning", "fabric",
                           f"the clients together reach {fmt(fabric.measured, unit)}, {fabric.efficiency:.0%} of the "
                           f"{fmt(fabric.predicted, unit)} they reach one at a time: a link they share, the "
                           "server's own link (or an uplink), carries less than the clients' links together",
                           "storlab net: each pair alone, then every client at once (TCP)",
                           "give the server a faster link or more of them (bonding, more servers), or fewer "
                           "clients per server"))
    prot = by_layer.get("protocol")
    view = by_layer.get("clients")
    if prot is not None and ctx.protocol_lost and prot.efficiency is not None:
        # the export reads its store on the same CPU: under a CPU limit it delivers less than the
        # memory export, and that is this loss again, not another layer's
        heavier = ""
        if view is not None and view.efficiency is not None and view.efficiency < 1 - NOISE and prot.measured:
            heavier = (f"; the export itself delivers {fmt(view.measured, unit)}, "
                       f"{view.measured / prot.measured:.0%} of the memory export: reading its store costs the "
                       "server's CPU too")
        out.append(Finding("server-cpu", "warning", "protocol",
                           f"the memory export delivers {fmt(prot.measured, unit)} against the "
                           f"{fmt(prot.predicted, unit)} its links carry ({prot.efficiency:.0%}) for {w.label()}: "
                           "with no disk in the path, the server's CPU or its protocol software (threads, request "
                           "handling) loses" + heavier,
                           f"predicted from the fabric measured below: {prot.rule} (limited by {prot.limited_by})",
                           "watch the server's CPU during a run (top, mpstat); give the server more cores or its "
                           "service more threads, or move other work off it"))
    if view is not None and ctx.storage and ctx.clients_without_storage and view.predicted \
            and view.predicted < (1 - NOISE) * ctx.clients_without_storage:
        out.append(Finding("server-storage", "warning", "server-storage",
                           f"the server's storage limits the clients: it reads {fmt(ctx.storage, unit)} locally, "
                           f"the clients get {fmt(view.measured, unit)} together (predicted "
                           f"{fmt(view.predicted, unit)}), where the fabric and the protocol carry "
                           f"{fmt(ctx.clients_without_storage, unit)}",
                           f"the backing store read on the server node; the clients' prediction without it: "
                           f"{fmt(ctx.clients_without_storage, unit)}",
                           "faster or more devices behind the export, or a cache on the server; the network is "
                           "not the limit"))
    for r in (prot, view):
        if r is None or r.efficiency is None:
            continue
        if r.efficiency > 1 + NOISE:
            out.append(Finding("above-prediction", "warning", r.layer,
                               f"{r.subject} delivers {fmt(r.measured, unit)}, {r.efficiency:.0%} of the predicted "
                               f"{fmt(r.predicted, unit)}: the prediction is wrong here, so no loss can be read from "
                               "this row", f"predicted from the layers below: {r.rule}",
                               "a cache on the server or a client, or links measured under other conditions; keep "
                               "the JSON document and report it"))
        elif r is view and r.efficiency < 1 - NOISE and not ctx.protocol_lost:
            out.append(Finding("layer-loss", "warning", "clients",
                               f"{r.subject} delivers {fmt(r.measured, unit)} of a predicted "
                               f"{fmt(r.predicted, unit)} ({r.efficiency:.0%}): the export loses more than its "
                               "storage, the protocol and the fabric explain",
                               f"predicted from the layers below: {r.rule} (limited by {r.limited_by})",
                               "the path between the server's storage and its export: the export's file system or "
                               "cache settings, the server's CPU under disk and network load together"))
    return out
