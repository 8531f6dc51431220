"""Cluster stack files: client nodes, the fabric between them and the server nodes with their
devices, named as the cluster-in-a-box testbed names them (tests/testbed/cluster.py: nodes by
host name, a fabric with one rate for every link and `rates` per node, in bits per second), read
into the model's `network.Cluster`. The file's form, with every key: docs/model.md, "Networks".
"""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Mapping

from ..jobs.tomlfile import TomlFileError, read_toml
from ..units import UnitError, parse_duration, parse_rate
from .network import PROTOCOLS, SHAPERS, Cluster, Link, Server, connection_kind, parse_rate_bits
from .predict import Workload, predict
from .stack import StackError, load_stack

__all__ = ["is_cluster_file", "load_cluster", "cluster_from_dict"]

_TOP_KEYS = {"name", "description", "node", "fabric"}
_NODE_KEYS = {"name", "role", "count", "cores", "cpu_per_request", "cpu_rate", "stack", "storage_bw", "storage_iops",
              "storage_latency", "max_iops", "request_overhead"}
_FABRIC_KEYS = {"name", "rate", "rates", "protocol", "mtu", "rtt", "window", "connections", "switch", "uplink",
                "uplinks", "shaper"}
ROLES = ("client", "server")
# the depth at which a server's stack is asked for its streaming rate (its ceiling for the cluster)
STORAGE_PROBE_QD = 64


def is_cluster_file(path: str) -> bool:
    """A TOML file with [[node]] tables (a cluster), as opposed to a one-host stack file."""
    if not os.path.isfile(path):
        return False
    try:
        return "node" in read_toml(path, "stack file")
    except TomlFileError:
        return False


def _check(table: Any, allowed: set[str], where: str) -> Mapping[str, Any]:
    if not isinstance(table, Mapping):
        raise StackError(f"{where}: expected a table")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise StackError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")
    return table


def _value(where: str, key: str, raw: Any, parse) -> Any:
    try:
        return parse(raw)
    except (UnitError, ValueError, TypeError) as e:
        message = str(e)        # a parser that names the key already says "key: ..."
        raise StackError(f"{where}: {key}: {message.removeprefix(f'{key}: ')}") from None


def _requests_per_s(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 < raw < float("inf"):
        raise ValueError(f"expected requests/s, a number > 0, got {raw!r}")
    return float(raw)


def _whole(raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= 65536:
        raise ValueError(f"expected a whole number from 1 to 65536, got {raw!r}")
    return raw


def _link(fabric: Mapping[str, Any], node: str, where: str, count: int = 1) -> Link:
    rates = fabric.get("rates", {})
    if not isinstance(rates, Mapping):
        raise StackError(f"{where}: rates: expected a table of node = rate")
    raw = rates.get(node, fabric.get("rate"))
    if raw is None:
        raise StackError(f"{where}: no rate for node {node!r}; give rate (every link) or rates.{node}")
    protocol = str(fabric.get("protocol", "tcp"))
    if protocol not in PROTOCOLS:
        raise StackError(f"{where}: protocol: {protocol!r} is not one the model knows; allowed: "
                         f"{', '.join(PROTOCOLS)}")
    return Link(f"{fabric.get('name', 'fabric')}/{node}", parse_rate_bits(raw, f"{where}: rate of {node}"), protocol,
                _value(where, "mtu", fabric.get("mtu", 1500), _whole),
                _value(where, "rtt", fabric.get("rtt", "50us"), lambda v: parse_duration(v, "rtt")),
                None if "window" not in fabric else _value(where, "window", fabric["window"],
                                                            lambda v: int(parse_rate(v, "window"))),
                count, _shaper(fabric, where), _value(where, "connections", fabric.get("connections"), connection_kind))


def _shaper(fabric: Mapping[str, Any], where: str) -> str:
    shaper = fabric.get("shaper", "wire")
    if shaper not in SHAPERS:
        raise StackError(f"{where}: shaper: {shaper!r}; allowed: "
                         + ", ".join(f"{k} ({v})" for k, v in SHAPERS.items()))
    return str(shaper)


def _cpu(node: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A node's CPU figures (cores, cpu_per_request, cpu_rate), as Server's keyword names."""
    kwargs: dict[str, Any] = {}
    if "cores" in node:
        kwargs["cores"] = _value(where, "cores", node["cores"], _whole)
    if "cpu_per_request" in node:
        kwargs["cpu_per_request_s"] = _value(where, "cpu_per_request", node["cpu_per_request"],
                                             lambda v: parse_duration(v, "cpu_per_request"))
    if "cpu_rate" in node:
        kwargs["cpu_rate_bytes"] = _value(where, "cpu_rate", node["cpu_rate"], lambda v: parse_rate(v, "cpu_rate"))
    return kwargs


def _server(node: Mapping[str, Any], link: Link, count: int, base_dir: str, rw: str, request_bytes: int,
            where: str) -> Server:
    kwargs = _cpu(node, where)
    if "stack" in node and ("storage_bw" in node or "storage_iops" in node):
        raise StackError(f"{where}: give stack or storage_bw / storage_iops, not both")
    if "stack" in node:
        stack = load_stack(os.path.join(base_dir, str(node["stack"])))
        deep = predict(stack, Workload(rw, request_bytes, qd=STORAGE_PROBE_QD))
        one = predict(stack, Workload(rw, request_bytes, qd=1))
        # its streaming rate, and its time per request beyond the transfer at that rate
        kwargs.update(storage_bytes_per_s=deep.bw_bytes,
                      storage_latency_s=max(0.0, one.latency_mean_s - request_bytes / deep.bw_bytes))
    if "storage_bw" in node:
        kwargs["storage_bytes_per_s"] = _value(where, "storage_bw", node["storage_bw"],
                                               lambda v: parse_rate(v, "storage_bw"))
    if "storage_iops" in node:
        kwargs["storage_iops"] = _value(where, "storage_iops", node["storage_iops"], float)
    if "storage_latency" in node:
        kwargs["storage_latency_s"] = _value(where, "storage_latency", node["storage_latency"],
                                             lambda v: parse_duration(v, "storage_latency"))
    if "max_iops" in node:
        kwargs["max_iops"] = _value(where, "max_iops", node["max_iops"], _requests_per_s)
    if "request_overhead" in node:
        raise StackError(f"{where}: request_overhead is a client's key (its fixed time per request)")
    return Server(str(node["name"]), link, count=count, **kwargs)


def cluster_from_dict(data: Mapping[str, Any], source: str = "cluster", base_dir: str = ".", rw: str = "read",
                      request_bytes: int = 1 << 20) -> Cluster:
    """The cluster of a parsed file, for one workload (a server's stack is predicted at it). The
    model takes equal clients and equal servers: each role's nodes must have the same link and, for
    servers, the same figures (the first one's are used; a node that differs is refused)."""
    _check(data, _TOP_KEYS, source)
    nodes = data.get("node")
    fabrics = data.get("fabric")
    if not isinstance(nodes, list) or not nodes:
        raise StackError(f"{source}: [[node]] tables are required (clients and servers)")
    if not isinstance(fabrics, list) or len(fabrics) != 1:
        raise StackError(f"{source}: exactly one [[fabric]] table is required (the storage network)")
    fabric = _check(fabrics[0], _FABRIC_KEYS, "[[fabric]] 1")
    by_role: dict[str, list[Mapping[str, Any]]] = {role: [] for role in ROLES}
    for i, node in enumerate(nodes, 1):
        where = f"[[node]] {i}"
        _check(node, _NODE_KEYS, where)
        if "name" not in node:
            raise StackError(f"{where}: name is required (the node's host name, as the testbed names it)")
        role = node.get("role")
        if role not in ROLES:
            raise StackError(f"{where} ({node['name']}): role: {role!r}; allowed: {', '.join(ROLES)}")
        count = _value(where, "count", node.get("count", 1), _whole)
        # several equal nodes of one table: n1-1, n1-2, ... (the links look the table's name up)
        by_role[role] += [node] if count == 1 else [dict(node, name=f"{node['name']}-{k}", _base=node["name"])
                                                    for k in range(1, count + 1)]
    for role in ROLES:
        if not by_role[role]:
            raise StackError(f"{source}: no {role} node; give at least one [[node]] with role = \"{role}\"")
    where = "[[fabric]] 1"
    client_links = {str(n["name"]): _link(fabric, str(n.get("_base", n["name"])), where) for n in by_role["client"]}
    first_client = next(iter(client_links.values()))
    for name, link in client_links.items():
        if (link.rate_bits, link.rtt_s) != (first_client.rate_bits, first_client.rtt_s):
            raise StackError(f"{where}: client {name!r} has a link unlike the first client's; the model takes "
                             "clients with equal links")
    servers = by_role["server"]
    first = servers[0]
    def figures(node: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in node.items() if k not in ("name", "_base", "count")}
    for other in servers[1:]:
        if figures(other) != figures(first):
            raise StackError(f"[[node]] {other['name']}: a server unlike {first['name']!r}; the model takes equal "
                             "servers")
    server_link = _link(fabric, str(first.get("_base", first["name"])), where, count=len(servers))
    server = _server(first, server_link, len(servers), base_dir, rw, request_bytes, f"[[node]] {first['name']}")
    uplink = None
    if "uplink" in fabric:
        uplink = Link(f"{fabric.get('name', 'fabric')}/uplink", parse_rate_bits(fabric["uplink"], f"{where}: uplink"),
                      first_client.protocol, first_client.mtu, 0.0,
                      count=_value(where, "uplinks", fabric.get("uplinks", 1), _whole), shaper=_shaper(fabric, where))
    switch = None if "switch" not in fabric else parse_rate_bits(fabric["switch"], f"{where}: switch")
    clients = by_role["client"]
    for other in clients[1:]:
        if _cpu(other, f"[[node]] {other['name']}") != _cpu(clients[0], ""):
            raise StackError(f"[[node]] {other['name']}: a client unlike {clients[0]['name']!r}; the model takes "
                             "equal clients")
    if any(k in n for n in clients for k in ("stack", "storage_bw", "storage_iops", "storage_latency", "max_iops")):
        raise StackError(f"{source}: a client node has storage keys; only servers hold the storage")
    client_cpu = {f"client_{k}": v for k, v in _cpu(clients[0], f"[[node]] {clients[0]['name']}").items()}
    if any(n.get("request_overhead") != clients[0].get("request_overhead") for n in clients[1:]):
        raise StackError(f"[[node]] {clients[0]['name']}: clients with unequal request_overhead; the model takes "
                         "equal clients")
    if "request_overhead" in clients[0]:
        # a user-space client (libnfs, libnbd, an S3 library) passes no block layer: "0us"
        client_cpu["client_request_overhead_s"] = _value(
            f"[[node]] {clients[0]['name']}", "request_overhead", clients[0]["request_overhead"],
            lambda v: parse_duration(v, "request_overhead"))
    return Cluster(str(data.get("name", source)), len(client_links), first_client, server, switch, uplink,
                   tuple(client_links), **client_cpu)


def load_cluster(path: str, rw: str = "read", request_bytes: int = 1 << 20) -> Cluster:
    """Read a cluster file; errors name the file."""
    try:
        data = read_toml(path, "stack file")
    except TomlFileError as e:
        raise StackError(str(e)) from None
    try:
        cluster = cluster_from_dict(data, os.path.basename(path), os.path.dirname(os.path.abspath(path)), rw,
                                    request_bytes)
    except StackError as e:
        raise StackError(f"{path}: {e}") from None
    if "name" not in data:
        cluster = replace(cluster, name=os.path.splitext(os.path.basename(path))[0])
    return cluster
