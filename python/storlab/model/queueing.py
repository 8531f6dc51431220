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

A station that reorders its queue (a spinning drive's rotational position ordering) serves a
request faster the more it can choose from: `positioning_s` of its demand (seek and rotation) is
shortened to costs.reordered_positioning_fraction(q) of itself, q the requests it chooses among
(at most `reorder_depth`), each bringing `reorder_per_request` to choose among (a team of drives
that a request's operations cross: its operations on each). A single-server one is a
load-dependent station followed by its queue-length distribution (_ReorderingQueue): with j there
it chooses among the j - 1 that waited when it freed up, D_k(j) = D_k - P_k (1 - f(max(1, j - 1) r_k));
exact at n = 1, and as n grows the capacity tends to c / (D_k - P_k (1 - f(depth))). A
multi-server one chooses among its mean queue, max(1, Q_k(n - 1)) (the arrival theorem).

The tail estimate: the wait at the busiest station is spread as in the finite-source queue of
that station alone (the machine-repairman model, M/M/1//N: Kleinrock, "Queueing Systems", vol. 1,
1975, section 3.10), its service S = D / c and the rest of the cycle a think time: an arrival finds
K of the other N - 1 requests there, P(K = k) proportional to (N - 1)! / (N - 1 - k)! (S / Z)^k,
and waits for their K exponential services (memoryless). The p-th percentile of that wait, as a
multiple of its mean, scales a request's mean wait in the network W (its waits at every station:
a request at one of twelve equal drives waits at the one it visits); the response time's
percentile is the mean response plus W times (that multiple - 1). The distribution of K depends
on S / Z only, so a station that a share of the requests visit gives the same multiple. With many
requests and a light load K is geometric and the wait exponential (the M/M/1 figure, ln(1 / (1 - p)) / rho times its mean);
with the station saturated every arrival finds the N - 1 others and waits for N - 1 services, an
Erlang wait, narrow around its mean (16 requests at one disk: p99 1.6 x the mean wait, not 4.6).
The multiple comes from the wait's mean and variance with a gamma distribution (Wilson and
Hilferty's approximation of its quantile) beyond the arrivals that find nobody there. A service
that varies less than an exponential one (`service_scv`, its squared coefficient of variation: a
spinning drive's positioning about 0.1, a fixed transfer 0) narrows the wait: k services then
vary by scv x k S^2 instead of k S^2.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from statistics import NormalDist

from .costs import reordered_time

__all__ = ["Station", "NetworkSolution", "solve_closed", "wait_quantile_multiple", "TAIL_PERCENTILE", "MAX_CUSTOMERS"]

TAIL_PERCENTILE = 0.99
MAX_CUSTOMERS = 1_000_000      # MVA walks n = 1..N; beyond this the asymptote is exact to 1 ppm


@dataclass(frozen=True)
class Station:
    """One queueing centre: its demand per request (seconds of service one host request needs
    there, visits included) and how many requests it serves at once. positioning_s: the part of the
    demand that a station reordering its queue shortens (a spinning drive's seek and rotation);
    reorder_depth: how many queued requests it chooses among (1: in arrival order);
    reorder_per_request: how many of those each request queued at the station brings (a team of
    drives that a request's operations cross: its operations on each drive)."""
    name: str
    demand_s: float
    servers: int = 1
    positioning_s: float = 0.0
    reorder_depth: int = 1
    reorder_per_request: float = 1.0    # requests it chooses among per request queued at the station
    service_scv: float = 1.0            # squared coefficient of variation of one service (1: exponential,
                                        # MVA's; 0: a fixed transfer): the tail's, and a reordering
                                        # station's residual service (solve_closed)
    visit_share: float = 1.0            # the share of the requests that visit it (one of K equal members
                                        # a request lands on one of: 1 / K)
    fork: int = 1                       # a reordering station standing for this many drives that one
                                        # request's pieces occupy at once, each serving its own queue in
                                        # its own order: the request waits for the last (_ReorderingQueue)

    def __post_init__(self) -> None:
        if not (self.demand_s >= 0 and math.isfinite(self.demand_s)):
            raise ValueError(f"station {self.name!r}: demand must be a finite non-negative time")
        if self.servers < 1:
            raise ValueError(f"station {self.name!r}: servers must be at least 1")
        if not 0 <= self.positioning_s <= self.demand_s:
            raise ValueError(f"station {self.name!r}: positioning must be a part of the demand")
        if not (self.service_scv >= 0 and math.isfinite(self.service_scv)):
            raise ValueError(f"station {self.name!r}: service_scv must be a finite number >= 0")
        if self.reorder_depth < 1 or not self.reorder_per_request > 0:
            raise ValueError(f"station {self.name!r}: reorder depth must be at least 1, and a request bring some")
        if not 0 < self.visit_share <= 1:
            raise ValueError(f"station {self.name!r}: visit share must be in (0, 1]")
        if self.fork < 1:
            raise ValueError(f"station {self.name!r}: fork must be at least 1")

    @property
    def reorders(self) -> bool:
        return self.reorder_depth > 1 and self.positioning_s > 0

    def demand_choosing_among(self, queued: float) -> float:
        """Its demand when it chooses among `queued` requests (the demand itself if it does not reorder)."""
        if not self.reorders:
            return self.demand_s
        return reordered_time(self.demand_s, self.positioning_s, queued * self.reorder_per_request,
                              self.reorder_depth)

    def capacity_with(self, customers: int) -> float:
        """Requests per second it serves when never idle with at most `customers` in the network."""
        demand = self.demand_choosing_among(customers)
        return math.inf if demand == 0 else self.servers / demand

    @property
    def capacity(self) -> float:
        """Requests per second it serves when never idle (queued as deep as it reorders)."""
        return self.capacity_with(self.reorder_depth)


@dataclass(frozen=True)
class NetworkSolution:
    customers: int
    throughput: float                   # requests/s
    response_s: float                   # mean time of one request (Little: N / X)
    tail_s: float                       # TAIL_PERCENTILE estimate
    utilisation: dict[str, float]       # each station's busy share (0..1)
    queue_length: dict[str, float]      # each station's mean number present
    bottleneck: str                     # the station with the highest utilisation ("" if none)


def wait_quantile_multiple(customers: int, service_s: float, elsewhere_s: float,
                           percentile: float = TAIL_PERCENTILE, service_scv: float = 1.0,
                           random_order: bool = False) -> float:
    """The `percentile` of the wait at one FCFS station of mean service `service_s`, as a multiple
    of the mean wait, when `customers` requests cycle between it and `elsewhere_s` of other time
    (the finite-source queue M/M/1//N, see the module's text); each service's squared coefficient of
    variation `service_scv` (1: exponential). 1 when nobody waits.
    `random_order`: the station serves its queue in no order of arrival (a drive reordering for the
    soonest to reach, which of the waiting requests that is being a matter of where each lies). The
    mean wait is the same, its second moment 2 / (2 - rho) times the first-come one (Kingman, "On
    queues in which customers are served in random order", 1962, for M/M/1): a request that is never
    the nearest waits on. In M/M/1 rho is also the chance that an arrival that finds the station busy
    finds another waiting, the only case where the order matters; here that chance is taken from the
    finite-source distribution (two requests at one drive: never, the order is first-come)."""
    others = customers - 1
    if others < 1 or service_s <= 0:
        return 1.0
    # P(K = k) over the other requests found there: ratio (others - k + 1) S / Z from k - 1 to k
    # (all of them when Z = 0); summed over a window of k wide enough to hold the mass
    if elsewhere_s <= 0:
        weights = {others: 0.0}
    else:
        load = service_s / elsewhere_s
        mode = min(others, max(0, int(others + 1 - 1 / load)))
        width = int(60 + 12 * math.sqrt(min(others, 1 / load) + 1))
        low, high = max(0, mode - width), min(others, mode + width)
        weights = {mode: 0.0}
        for k in range(mode + 1, high + 1):
            weights[k] = weights[k - 1] + math.log((others - k + 1) * load)
        for k in range(mode - 1, low - 1, -1):
            weights[k] = weights[k + 1] - math.log((others - k) * load)
    top = max(weights.values())
    probability = {k: math.exp(w - top) for k, w in weights.items()}
    total = sum(probability.values())
    nobody = probability.get(0, 0.0) / total
    busy = {k: p / total for k, p in probability.items() if k > 0}
    if not busy or nobody >= percentile:
        return 1.0
    found = sum(busy.values())
    mean_k = sum(k * p for k, p in busy.items()) / found
    var_k = sum(k * k * p for k, p in busy.items()) / found - mean_k ** 2
    # the wait of an arrival that finds k: k services; over k: mean k S, variance
    # (scv E k + Var k) S^2, taken as a gamma distribution (its shape from the two); nothing varies:
    # the wait is its mean
    mean = mean_k * service_s
    spread = service_scv * mean_k + max(0.0, var_k)
    if random_order:
        others_waiting = sum(p for k, p in busy.items() if k >= 2) / found
        spread = (spread + mean_k ** 2) * 2.0 / (2.0 - others_waiting) - mean_k ** 2
    if spread <= 1e-12 * mean_k ** 2:
        return 1.0 / found
    shape = mean_k ** 2 / spread
    level = (percentile - nobody) / (1 - nobody)
    z = NormalDist().inv_cdf(level)
    quantile = mean * max(0.0, 1 - 1 / (9 * shape) + z * math.sqrt(1 / (9 * shape))) ** 3
    mean_wait = mean * found
    return quantile / mean_wait


# A reordering station's queue-length distribution is followed exactly up to this many requests in
# the network; beyond it the drive chooses among as many as it reorders nearly always, and its mean
# queue carries on as at any other station (a bound on the work: it grows with the square of n)
LOAD_DEPENDENT_MAX = 512


def _last_of(fork: int, found: int, load: float) -> float:
    """The services before a request's piece at the drive that serves it last, of `fork` drives that
    each found `found` requests (one in service) and pick among the waiting in their own order. At
    each choice a drive picks it with chance 1 / m, m the requests it chooses among: `found` at the
    first, then one fewer a choice less the arrivals meanwhile, `load` of them a service (the
    station's utilisation: arrivals per service, lambda s). A queue kept full (load 1) makes the
    count geometric; one that nothing refills (load 0), a uniform place among those found. The mean
    of the largest of `fork` such counts, each drive's taken as independent; one drive: found - 1,
    the first-come count, whatever the load."""
    if found <= 1:
        return 0.0
    if fork == 1:
        return found - 1.0
    return _largest_count(fork, found, round(min(1.0, max(0.0, load)) * 100))


@functools.lru_cache(maxsize=None)
def _largest_count(fork: int, found: int, load_percent: int) -> float:
    fall = 1.0 - load_percent / 100.0            # the count's fall a choice
    total, unpicked, choice = 0.0, 1.0, 0
    while unpicked > 0.0:
        unpicked *= 1.0 - 1.0 / max(1.0, found - fall * choice)
        choice += 1
        term = 1.0 - (1.0 - unpicked) ** fork        # P(the last of them waits past this choice)
        total += term
        if term < 1e-9:
            break
    return total


class _ReorderingQueue:
    """The marginal queue-length distribution of a station that reorders (exact MVA for a
    load-dependent station: Reiser and Lavenberg, "Mean-Value Analysis of Closed Multichain Queuing
    Networks", 1980): with j requests there it serves the one it reaches soonest of the j - 1 that
    waited when it freed up (at least the one), so a busy drive serves faster exactly when its queue
    is long, which the mean queue alone understates (twelve drives, 16 requests: 595 reads/s with
    the mean, 721 followed so, 727 in a draw of the same drives, benchmarks/model_drive_draw.py). An
    arrival that finds it busy waits for the rest of the service in progress, (1 + scv) / 2 of one
    for a service of squared coefficient of variation scv (the residual life of renewal theory:
    Kleinrock, "Queueing Systems", vol. 1, 1975, section 5.2), not a whole one as an exponential
    service would have it, unless it comes straight back from that station (its visit share, when
    the delay between is short against the service): it then finds the service that began as it
    left.

    A request split over `fork` such drives (a random read over several members) finds the same
    requests queued at each, but each drive serves the soonest of its own queue, so the order differs
    from drive to drive and the request waits for the drive that serves it last (_last_of: each
    drive picks it by chance among those it chooses from, the largest of `fork` such counts; Little's
    law then leaves each drive fewer requests to choose among, those it has served waiting for the
    others). Serving the drives as one team instead came out 7 to 24 % fast at depth against a draw
    with head positions (benchmarks/model_drive_draw.py)."""

    def __init__(self, station: Station, delay_s: float) -> None:
        self.station = station
        self.probabilities = [1.0]                  # P(j there | n - 1 in the network), j = 0 .. n - 1
        self.demands: list[float] = [0.0]           # demand with j there, j >= 1
        alone = station.demand_choosing_among(1) / station.visit_share
        returning = station.visit_share * max(0.0, 1.0 - delay_s / alone) if alone > 0 else 0.0
        self.residual_saving = (1.0 - returning) * (1.0 - min(1.0, station.service_scv)) / 2.0

    def demand(self, j: int) -> float:
        while len(self.demands) <= j:
            waiting = len(self.demands) - 1
            self.demands.append(self.station.demand_choosing_among(max(1, waiting)))
        return self.demands[j]

    def residence(self) -> tuple[float, float, float]:
        """(residence time, own service, one piece's residence) of an arrival at population n, from
        P(. | n - 1); the last two differ for a fork only (one piece: at the drive it lands on)."""
        residence = own = piece = 0.0
        busy = 1.0 - self.probabilities[0]
        residual = 1.0 - self.residual_saving        # of the service in progress, when one is
        for found, p in enumerate(self.probabilities):
            if p <= 0.0:
                continue
            d = self.demand(found + 1)
            own += p * d
            if found:       # the rest of the one in service, then those served before it
                residence += p * d * (1.0 + residual + _last_of(self.station.fork, found, busy))
                piece += p * d * (residual + found)
            else:
                residence += p * d
                piece += p * d
        return residence, own, piece

    def advance(self, throughput: float) -> float:
        """P(. | n) from P(. | n - 1) at the throughput of population n; returns the mean queue."""
        p = [0.0] + [throughput * self.demand(j + 1) * q for j, q in enumerate(self.probabilities)]
        busy = sum(p)
        if busy > 1.0:          # rounding near saturation: the station is never idle
            p = [v / busy for v in p]
            busy = 1.0
        p[0] = 1.0 - busy
        self.probabilities = p
        return sum(j * v for j, v in enumerate(p))


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

    capacity = min((s.capacity_with(customers) for s in stations), default=math.inf)
    busiest = max(range(len(queueing)), key=lambda i: queueing[i][1], default=None)
    # a reordering station serves faster the more it chooses among (see the module's text), up to
    # the queue at which it chooses among as many as it reorders; past it, its demand is fixed. A
    # single one is followed by its queue-length distribution (_ReorderingQueue), equal ones share it
    deepest = [s.reorder_depth / s.reorder_per_request if s.reorders else 0.0 for s in stations]
    reordering = [i for i, s in enumerate(stations) if s.reorders and s.servers > 1]
    followed: dict[tuple, _ReorderingQueue] = {}
    pieces: dict[int, float] = {}       # a followed station's one-piece residence
    # past LOAD_DEPENDENT_MAX a followed station's residence keeps its last ratio to D (1 + Q), and
    # one piece's its last share of it (a fork's wait for its last piece, the residual service)
    stretch: dict[int, tuple[float, float]] = {}
    follow = {}
    for i, s in enumerate(stations):
        if s.reorders and s.servers == 1:
            key = (s.demand_s, s.positioning_s, s.reorder_depth, s.reorder_per_request, s.service_scv, s.visit_share,
                   s.fork)
            follow[i] = followed.setdefault(key, _ReorderingQueue(s, delay_s))
    for n in range(1, n_max + 1):
        if reordering:
            for i in reordering:
                queueing[i] = (stations[i], stations[i].demand_choosing_among(q[i]) / stations[i].servers)
            reordering = [i for i in reordering if q[i] < deepest[i]]
        if follow and n > LOAD_DEPENDENT_MAX:
            # past the distribution's reach: the mean queue carries on at the depth it reached
            reordering += [i for i in follow if q[i] < deepest[i]]
            follow = {}
        r = [d * (1.0 + q[i]) for i, (_, d) in enumerate(queueing)]
        if follow:
            arrivals = {id(f): f.residence() for f in followed.values()}
            for i, f in follow.items():
                r[i], own, pieces[i] = arrivals[id(f)]
                queueing[i] = (stations[i], own)
                plain = own * (1.0 + q[i])
                stretch[i] = (r[i] / plain if plain > 0 else 1.0, pieces[i] / r[i] if r[i] > 0 else 1.0)
        else:
            for i, (ratio, piece_share) in stretch.items():
                r[i] *= ratio
                pieces[i] = r[i] * piece_share
        cycle = cycle_of(r)
        x = n / cycle if cycle > 0 else math.inf
        q = [x * ri for ri in r]
        if follow and math.isfinite(x):
            means = {id(f): f.advance(x) for f in followed.values()}
            for i, f in follow.items():
                q[i] = means[id(f)]
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
    utilisation = {s.name: min(1.0, x * d) for s, d in queueing}
    queue_length = {s.name: x * r[i] + x * s.demand_s * (s.servers - 1) / s.servers
                    for i, s in enumerate(stations)}
    response = customers / x
    waits = [r[i] - d for i, (_, d) in enumerate(queueing)]
    worst_wait = max(waits, default=0.0)
    tail = response
    if worst_wait > 0:
        # spread as at the busiest station (its queue's distribution depends on its demand against
        # the rest of the cycle only, whatever share of the requests visit it); the wait spread is
        # a request's whole wait: at one of several equal members it waits at the one it visits
        worst = waits.index(worst_wait)
        elsewhere = max(0.0, response - r[worst])
        # a fork's wait is the largest of its pieces': its percentile p is one piece's at p^(1 / fork)
        fork = stations[worst].fork if worst in pieces else 1
        multiple = wait_quantile_multiple(customers, queueing[worst][1], elsewhere,
                                          percentile=TAIL_PERCENTILE ** (1.0 / fork),
                                          service_scv=stations[worst].service_scv,
                                          random_order=stations[worst].reorders)
        one_piece = [pieces[i] - d if i in pieces else w for i, ((_, d), w) in enumerate(zip(queueing, waits))]
        tail = response + sum(max(0.0, p) * multiple - max(0.0, w) for p, w in zip(one_piece, waits))
    bottleneck = max(stations, key=lambda s: s.demand_s / s.servers).name if stations else ""
    return NetworkSolution(customers, x, response, max(tail, response), utilisation, queue_length, bottleneck)
