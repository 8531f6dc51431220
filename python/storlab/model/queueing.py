"""Closed queueing network of one workload: throughput and latency at a given concurrency.

A run keeps `N = queue depth x threads` requests outstanding; each request spends a fixed time
that does not queue (the delay `Z`: the unloaded latency of host, HBA, protocol and the parts of
the path it crosses below their limit) and a service time at the stations it queues for (the
bottleneck: a drive, a member set, a link, a server's CPU). This module solves that network
exactly by mean-value analysis (Reiser & Lavenberg 1980):

    R_k(n) = D_k * (1 + Q_k(n - 1))          residence time at station k with n in the system
    X(n)   = n / (Z + sum_k R_k(n))           Little's law over the whole cycle
    Q_k(n) = X(n) * R_k(n)                    Little's law at station k

A request's wait at a station can also run beside work of its own that the station does not
see (`overlap_s`, a part of Z: its transfer through its own, unshared stages beyond its service
at the shared one). That much of its waits is hidden:

    X(n)   = n / (Z + sum_k R_k(n) - min(overlap, sum_k (R_k(n) - D_k)))

Two streams, each through its own 195 MB/s adapter into one 370 MB/s controller, each get the
controller's half while their adapters carry them: the controller's queue costs them little.

A station with `servers` > 1 (a drive with several actuators, an SSD's channels, a server's CPU
cores) uses Seidmann's approximation: a queue of demand D / c plus a pure delay D (c - 1) / c,
exact at n = 1 and for n -> infinity. Hand-checkable cases: at n = 1, X = 1 / (Z + sum D);
as n grows, X -> c / D_max, the bottleneck's capacity (never above it).

The tail estimate: with the queueing time of the busiest station exponential (M/M/1-like), the
p-th percentile response time is Z + sum D + W_max * ln(1 / (1 - p)), W_max the mean wait at the
busiest station: a mean and the 99th percentile from one formula; for deterministic service (a
throttle, a drive streaming) it is an upper estimate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Station", "NetworkSolution", "solve_closed", "TAIL_PERCENTILE", "MAX_CUSTOMERS"]

TAIL_PERCENTILE = 0.99
MAX_CUSTOMERS = 1_000_000      # MVA walks n = 1..N; beyond this the asymptote is exact to 1 ppm


@dataclass(frozen=True)
class Station:
    """One queueing centre: its demand per request (seconds of service one host request needs
    there, visits included) and how many requests it serves at once."""
    name: str
    demand_s: float
    servers: int = 1

    def __post_init__(self) -> None:
        if not (self.demand_s >= 0 and math.isfinite(self.demand_s)):
            raise ValueError(f"station {self.name!r}: demand must be a finite non-negative time")
        if self.servers < 1:
            raise ValueError(f"station {self.name!r}: servers must be at least 1")

    @property
    def capacity(self) -> float:
        """Requests per second it serves when never idle."""
        return math.inf if self.demand_s == 0 else self.servers / self.demand_s


@dataclass(frozen=True)
class NetworkSolution:
    customers: int
    throughput: float                   # requests/s
    response_s: float                   # mean time of one request (Little: N / X)
    tail_s: float                       # TAIL_PERCENTILE estimate
    utilisation: dict[str, float]       # each station's busy share (0..1)
    queue_length: dict[str, float]      # each station's mean number present
    bottleneck: str                     # the station with the highest utilisation ("" if none)


def solve_closed(stations: list[Station], delay_s: float, customers: int, overlap_s: float = 0.0) -> NetworkSolution:
    """Exact MVA (Seidmann for multi-server stations) of `customers` requests cycling through
    `delay_s` and the stations; up to `overlap_s` of a request's waits run beside its own work in
    the delay."""
    if customers < 1:
        raise ValueError("customers must be at least 1")
    if not (delay_s >= 0 and math.isfinite(delay_s)):
        raise ValueError("delay must be a finite non-negative time")
    if not 0 <= overlap_s <= delay_s:
        raise ValueError("overlap must be a non-negative part of the delay")
    queueing = [(s, s.demand_s / s.servers) for s in stations]
    extra_delay = delay_s + sum(s.demand_s * (s.servers - 1) / s.servers for s in stations)
    n_max = min(customers, MAX_CUSTOMERS)
    q = [0.0] * len(queueing)
    x = 0.0
    r = [0.0] * len(queueing)

    def cycle_of(r: list[float]) -> float:
        waits = sum(ri - d for ri, (_, d) in zip(r, queueing))
        return extra_delay + sum(r) - min(overlap_s, waits)

    capacity = min((s.capacity for s in stations), default=math.inf)
    busiest = max(range(len(queueing)), key=lambda i: queueing[i][1], default=None)
    for n in range(1, n_max + 1):
        r = [d * (1.0 + q[i]) for i, (_, d) in enumerate(queueing)]
        cycle = cycle_of(r)
        x = n / cycle if cycle > 0 else math.inf
        q = [x * ri for ri in r]
        if x > capacity and busiest is not None:
            # a wait hidden beside the request's own transfer can run the cycle ahead of the busiest
            # station near saturation: hold it at its capacity and queue the requests it cannot
            # serve there (the n still add up)
            x = capacity
            q = [x * ri for ri in r]
            q[busiest] += n - x * cycle
    if customers > n_max and math.isfinite(x):
        x = min(customers / cycle_of(r), capacity)
    if not math.isfinite(x):
        return NetworkSolution(customers, math.inf, 0.0, 0.0, {s.name: 0.0 for s in stations},
                               {s.name: 0.0 for s in stations}, "")
    utilisation = {s.name: min(1.0, x * s.demand_s / s.servers) for s in stations}
    queue_length = {s.name: x * r[i] + x * s.demand_s * (s.servers - 1) / s.servers
                    for i, s in enumerate(stations)}
    response = customers / x
    unloaded = delay_s + sum(s.demand_s for s in stations)
    waits = [r[i] - d for i, (_, d) in enumerate(queueing)]
    worst_wait = max(waits, default=0.0)
    tail = unloaded + max(0.0, response - unloaded - worst_wait) + worst_wait * math.log(1 / (1 - TAIL_PERCENTILE))
    bottleneck = max(stations, key=lambda s: s.demand_s / s.servers).name if stations else ""
    return NetworkSolution(customers, x, response, max(tail, response), utilisation, queue_length, bottleneck)
