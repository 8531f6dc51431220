"""Clock offsets between nodes, estimated once at start by ping-pong against rank 0 (as NTP and
Cristian's algorithm do) and applied to every rank's wall-clock phase start.

One exchange: the rank reads its clock (t0), asks rank 0 for its clock (t_root), reads its clock
again (t1). If the request and the reply took equally long, rank 0's clock read t_root at the
rank's moment (t0 + t1) / 2, so offset = t_root - (t0 + t1) / 2, with an error of at most half
the round trip (t1 - t0). Of several exchanges the one with the shortest round trip is kept:
it has the tightest bound. Ranks on rank 0's node share its clock: their offset is exactly 0, not
an estimate. Ranks on another node share one clock too, so the node's best exchange serves all
of them. Times are seconds of the wall clock (time.time()), as the engine's `start_unix_s`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

__all__ = ["ClockSample", "Offset", "best_offset", "node_offsets", "exchange", "ROUNDS"]

ROUNDS = 8   # exchanges per rank; the first is often slow (connection set-up, a queued request)


@dataclass(frozen=True)
class ClockSample:
    t0_s: float        # this rank's clock when it sent the request
    root_s: float      # rank 0's clock when it answered
    t1_s: float        # this rank's clock when the answer arrived

    @property
    def rtt_s(self) -> float:
        return self.t1_s - self.t0_s

    @property
    def offset_s(self) -> float:
        return self.root_s - (self.t0_s + self.t1_s) / 2


@dataclass(frozen=True)
class Offset:
    offset_s: float    # add to this rank's wall-clock times to get rank 0's
    rtt_s: float       # round trip of the exchange it came from (0 on rank 0's node)
    error_s: float     # bound on the estimate's error: rtt / 2 (0 on rank 0's node)

    def as_dict(self) -> dict[str, float]:
        return {"offset_s": self.offset_s, "rtt_s": self.rtt_s, "error_bound_s": self.error_s}


def best_offset(samples: Sequence[ClockSample]) -> Offset:
    """The offset from the exchange with the shortest round trip."""
    if not samples:
        raise ValueError("clock offset: no exchanges to estimate from")
    s = min(samples, key=lambda x: x.rtt_s)
    if s.rtt_s < 0:
        raise ValueError(f"clock offset: negative round trip {s.rtt_s} s (clock stepped during the exchange?)")
    return Offset(s.offset_s, s.rtt_s, s.rtt_s / 2)


def node_offsets(samples: Sequence[Sequence[ClockSample]], nodes: Sequence[str]) -> list[Offset]:
    """Per rank: 0 on rank 0's node; elsewhere the best estimate among all ranks of that node."""
    if len(samples) != len(nodes):
        raise ValueError("clock offset: one list of exchanges per rank is needed")
    best: dict[str, Offset] = {}
    for rank_samples, node in zip(samples, nodes):
        if node == nodes[0] or not rank_samples:
            continue
        o = best_offset(rank_samples)
        if node not in best or o.rtt_s < best[node].rtt_s:
            best[node] = o
    zero = Offset(0.0, 0.0, 0.0)
    return [zero if node == nodes[0] else best.get(node, zero) for node in nodes]


def exchange(comm, nodes: Sequence[str], rounds: int = ROUNDS) -> list[Offset]:
    """Run the ping-pong on `comm` (storlab.measure.mpi.comm.Comm); every rank returns all ranks' offsets.

    Only ranks off rank 0's node take part; rank 0 answers them one after the other.
    """
    remote = [r for r in range(1, comm.size) if nodes[r] != nodes[0]]
    mine: list[ClockSample] = []
    if comm.rank == 0:
        for r in remote:
            for _ in range(rounds):
                comm.recv(r)
                comm.send(time.time(), r)
    elif comm.rank in remote:
        for _ in range(rounds):
            t0 = time.time()
            comm.send(None, 0)
            root = comm.recv(0)
            mine.append(ClockSample(t0, root, time.time()))
    everyone = comm.allgather([(s.t0_s, s.root_s, s.t1_s) for s in mine])
    return node_offsets([[ClockSample(*x) for x in r] for r in everyone], nodes)
