"""What a layer should deliver, predicted from the layer measured below it.

The volume's prediction is the stack model's (storlab.model.predict, docs/model.md) with the
members' measured rates as its devices. Its rules, as they apply here:
- members at once: the sum of the members alone (nothing shared between them);
- a striped volume (RAID 0, 10, 5, 6): stripes are equal, so every data member moves at the pace of
  the slowest one: data members x the slowest member's rate when all run at once. The same holds
  for random requests at depth: the slow member's queue fills and the others wait for it;
- a mirror (RAID 1): reads come from one copy per reader (btrfs picks the copy by process, md by
  nearest head), so one member's rate per worker; writes go to every copy: the slowest member;
- parity writes smaller than a full stripe cost read-modify-write: 4 device I/Os per request on
  single parity, 6 on double (the classic small-write penalty);
- a file system with direct I/O: the volume below it (the file system adds no work to a large
  aligned read or write; what it loses is the finding).
The prediction names the component that limits it; `potential` is what the same rule gives with
every member at the members' median pace, the figure a straggler costs.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from ..model.predict import Device, predict
from ..model.predict import Workload as ModelWorkload
from ..model.stack import stack_from_notation

__all__ = ["Expectation", "expect_members_together", "expect_volume", "data_members"]



@dataclass(frozen=True)
class Expectation:
    value: float                 # predicted figure (bytes/s or IOPS)
    limited_by: str              # the component that sets it
    potential: float             # the same rule at the members' median pace
    rule: str                    # the rule in words, for the evidence line


def data_members(level: str, n: int) -> int:
    """Members that carry distinct data in one full stripe."""
    return {"raid0": n, "raid10": max(1, n // 2), "raid5": max(1, n - 1), "raid6": max(1, n - 2)}.get(level, 1)


def expect_members_together(alone: dict[str, float]) -> Expectation:
    """Members run at once, with nothing shared: the sum of each alone."""
    total = sum(alone.values())
    return Expectation(total, "the members themselves", total, "sum of each member alone")


# the model's notation of each level diagnose meets (single and linear need no stack)
_NOTATION = {"raid0": "R0", "raid1": "R1", "raid10": "R10", "raid5": "R5", "raid6": "R6"}
_UNBOUNDED_BW = 1e15          # a figure the probe did not measure: no limit from it
_UNBOUNDED_IOPS = 1e12
_UNLOADED_LATENCY_S = 1e-6    # the members' figures were measured at the probe's depth: the
                              # queue depth is in them, so the model's Little's-law bound must not bind


def _devices(rates: dict[str, float], figure: str) -> list[Device]:
    """Members as the model's devices: the measured figure is the limit, the other is not."""
    out = []
    for name, v in rates.items():
        if figure == "iops":
            out.append(Device(_UNBOUNDED_BW, _UNBOUNDED_BW, v, v, _UNLOADED_LATENCY_S, name=name, shared_time=False,
                              counts_every_request=True))
        else:
            out.append(Device(v, v, _UNBOUNDED_IOPS, _UNBOUNDED_IOPS, _UNLOADED_LATENCY_S, name=name,
                              shared_time=False))
    return out


def _model_value(level: str, rates: dict[str, float], *, rw: str, request_bytes: int, qd: int, workers: int,
                 chunk_bytes: int, figure: str, mirror_read: str) -> tuple[float, str]:
    stack = stack_from_notation(f"{_NOTATION[level]}/{len(rates)}", chunk_bytes)
    p = predict(stack, ModelWorkload(rw, request_bytes, qd, workers), _devices(rates, figure), mirror_read=mirror_read)
    return (p.iops if figure == "iops" else p.bw_bytes), p.limiting


def expect_volume(level: str, together: dict[str, float], *, rw: str, request_bytes: int, qd: int,
                  figure: str, workers: int = 1, chunk_bytes: int = 64 << 10,
                  mirror_read: str = "per-thread") -> Expectation:
    """The volume built from `together` (each member's rate when all run at once), predicted by the
    stack model (storlab.model.predict) with the members as its devices."""
    if not together:
        raise ValueError("expect_volume: no member rates")
    names = list(together)
    slowest = min(names, key=together.get)
    median = statistics.median(together.values())
    if level not in _NOTATION or len(names) == 1:
        first = names[0]        # one member serves the range (linear: the first holds its start)
        return Expectation(together[first], f"member {first}", together[first], "one member serves the range")
    kw = dict(rw=rw, request_bytes=request_bytes, qd=qd, workers=workers, chunk_bytes=chunk_bytes, figure=figure,
              mirror_read=mirror_read)
    value, limiting = _model_value(level, together, **kw)
    potential, _ = _model_value(level, {n: median for n in names}, **kw)
    m = re.fullmatch(r"member\[(\d+)\] (.*)", limiting)
    if m:
        name = m.group(2)
        share = together[name] / median if median else 1.0
        limited_by = f"member {name} (slowest, {share:.0%} of the median)" if name == slowest and share < 0.9 \
            else "the members (equal pace)"
    else:
        limited_by = limiting
    d = data_members(level, len(names))
    return Expectation(value, limited_by, potential,
                       f"stack model: {level} over {len(names)} members ({d} data), each at its rate with all at once")
