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
every member at the members' median pace, the figure a straggler costs. With a device profile
(`storlab diagnose --profile`), the members are the profiled device (its latency, queueing and
parallelism) limited by their measured figures, so the probe's queue depth counts as it does on
the device; without one, the measured figures alone (taken at the probe's depth).
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, replace

from ..model.predict import Device, predict
from ..model.predict import Workload as ModelWorkload
from ..model.profile import DeviceProfile
from ..model.stack import stack_from_notation

__all__ = ["Expectation", "expect_members_together", "expect_volume", "data_members"]



@dataclass(frozen=True)
class Expectation:
    value: float                 # predicted figure (bytes/s or IOPS)
    limited_by: str              # the component that sets it
    potential: float             # the same rule with every member at the others' pace
    rule: str                    # the rule in words, for the evidence line
    held_back: float | None = None   # the prediction with the slowest member among those read


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


def _devices(rates: dict[str, float], figure: str, profile: DeviceProfile | None = None) -> list[Device]:
    """Members as the model's devices: the measured figure is the limit, the other is not. With a
    device profile (`storlab plan profile`), each member is the profiled device (its latency, its
    queueing, its parallelism: the model's queue-depth bound then applies as it does to the device)
    with the measured figure as its limit in place of the profile's."""
    out = []
    for name, v in rates.items():
        if profile is not None:
            device = profile.device(name)
            if figure == "iops":
                out.append(replace(device, read_iops=v, write_iops=v))
            else:
                out.append(replace(device, read_bw_bytes=v, write_bw_bytes=v))
            continue
        if figure == "iops":
            out.append(Device(_UNBOUNDED_BW, _UNBOUNDED_BW, v, v, _UNLOADED_LATENCY_S, name=name, shared_time=False,
                              counts_every_request=True, queues=False))
        else:
            out.append(Device(v, v, _UNBOUNDED_IOPS, _UNBOUNDED_IOPS, _UNLOADED_LATENCY_S, name=name,
                              shared_time=False, queues=False))
    return out


def _model_value(level: str, rates: dict[str, float], *, rw: str, request_bytes: int, qd: int, workers: int,
                 chunk_bytes: int, figure: str, mirror_read: str,
                 read_members: tuple[int, ...] | dict[int, float] | None = None,
                 profile: DeviceProfile | None = None) -> tuple[float, str]:
    # software RAID (btrfs, md): parity is computed per request in flight, no controller cache gathers stripes
    stack = stack_from_notation(f"{_NOTATION[level]}/{len(rates)}", chunk_bytes, engine="md")
    p = predict(stack, ModelWorkload(rw, request_bytes, qd, workers), _devices(rates, figure, profile),
                mirror_read=mirror_read,
                read_members=read_members if level in _MIRRORED else None)
    return (p.iops if figure == "iops" else p.bw_bytes), p.limiting


_MIRRORED = ("raid1", "raid10")


def expect_volume(level: str, together: dict[str, float], *, rw: str, request_bytes: int, qd: int,
                  figure: str, workers: int = 1, chunk_bytes: int = 64 << 10,
                  mirror_read: str = "per-thread", read_by: dict[str, int] | list[str] | None = None,
                  profile: DeviceProfile | None = None) -> Expectation:
    """The volume built from `together` (each member's rate when all run at once), predicted by the
    stack model (storlab.model.predict) with the members as its devices. `read_by`: for a mirror,
    the members the volume's probe was seen to read (btrfs picks a copy by the reader's pid, so
    which ones differs between runs); the prediction follows them. `potential` is the same rule
    with every member at the pace of the others (the median of all but the slowest): what the
    volume would do without its straggler, against the prediction with the straggler in the copies
    read (`held_back`), whatever copies this run read."""
    if not together:
        raise ValueError("expect_volume: no member rates")
    names = list(together)
    slowest = min(names, key=together.get)
    others = [v for n, v in together.items() if n != slowest] or [together[slowest]]
    pace = statistics.median(others)
    if level not in _NOTATION or len(names) == 1:
        first = names[0]        # one member serves the range (linear: the first holds its start)
        return Expectation(together[first], f"member {first}", together[first], "one member serves the range")
    kw = dict(rw=rw, request_bytes=request_bytes, qd=qd, workers=workers, chunk_bytes=chunk_bytes, figure=figure,
              mirror_read=mirror_read, profile=profile)
    read_members: dict[int, float] | None = None
    rule_read = ""
    if level in _MIRRORED and read_by and not rw.endswith("write"):
        moved = read_by if isinstance(read_by, dict) else {n: 1 for n in read_by}
        read_members = {names.index(n): float(b) for n, b in moved.items() if n in names and b > 0} or None
        if read_members:
            total = sum(read_members.values())
            rule_read = "; reads seen on " + ", ".join(
                f"{names[i]}" + (f" ({b / total:.0%})" if len(set(read_members.values())) > 1 else "")
                for i, b in sorted(read_members.items()))
    value, limiting = _model_value(level, together, read_members=read_members, **kw)
    potential, _ = _model_value(level, {n: pace for n in names}, read_members=read_members, **kw)
    held_back = value
    if level in _MIRRORED and not rw.endswith("write"):
        # the copies a reader uses include the straggler's (the worst of btrfs's per-pid choices)
        with_slow = _with_member(level, names, slowest, read_members)
        held_back, _ = _model_value(level, together, read_members=with_slow, **kw)
        potential_read, _ = _model_value(level, {n: pace for n in names}, read_members=with_slow, **kw)
        potential = max(potential, potential_read)
    m = re.fullmatch(r"member\[(\d+)\] (.*)", limiting)
    if m:
        name = m.group(2)
        share = together[name] / pace if pace else 1.0
        limited_by = f"member {name} (slowest, {share:.0%} of the others' pace)" if name == slowest and share < 0.9 \
            else "the members (equal pace)"
    else:
        limited_by = limiting
    d = data_members(level, len(names))
    profiled = f", each the profiled device {profile.name}" if profile is not None else ""
    return Expectation(value, limited_by, potential,
                       f"stack model: {level} over {len(names)} members ({d} data), each at its rate with all at once"
                       + profiled + rule_read, held_back)


def _with_member(level: str, names: list[str], member: str, recorded: dict[int, float] | None
                 ) -> tuple[int, ...] | None:
    """The copies read when one of them is `member`: the recorded set with `member` in place of one
    of its copies (which one is its partner is not known; with the others at one pace it does not
    matter), or one copy per pair of the model's RAID 10 (pairs adjacent) including it."""
    i = names.index(member)
    if level == "raid1":
        return (i,)
    read_members = tuple(sorted(recorded)) if recorded else None
    if read_members:
        if i in read_members:
            return read_members
        return tuple(sorted((*read_members[:-1], i)))    # it stands in for the copy read in its place
    return tuple(sorted({j for j in range(len(names)) if j % 2 == 0} - {i ^ 1} | {i}))
