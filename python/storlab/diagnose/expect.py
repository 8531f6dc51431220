"""What a layer should deliver, predicted from the layer measured below it.

The rules are the stack model's (docs/model.md) applied to measured members instead of datasheet
figures:
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

import statistics
from dataclasses import dataclass

__all__ = ["Expectation", "expect_members_together", "expect_volume", "data_members", "SMALL_WRITE_PENALTY"]

# device I/Os per small (sub-stripe) random write: read data + read parity + write both (RAID 5),
# plus the second parity read and write (RAID 6)
SMALL_WRITE_PENALTY = {"raid5": 4, "raid6": 6}


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


def expect_volume(level: str, together: dict[str, float], *, direction: str, random: bool,
                  workers: int = 1) -> Expectation:
    """The volume built from `together` (each member's rate when all run at once)."""
    if not together:
        raise ValueError("expect_volume: no member rates")
    n = len(together)
    slowest = min(together, key=together.get)
    low = together[slowest]
    median = statistics.median(together.values())
    spread = low < 0.9 * median
    limit = f"member {slowest} (slowest, {low / median:.0%} of the median)" if spread else "the members (equal pace)"
    if level in ("single", "linear") or n == 1:
        # one member serves the probe's range (linear: the first member holds its start)
        first = next(iter(together))
        return Expectation(together[first], f"member {first}", together[first], "one member serves the range")
    if level == "raid1":
        if direction == "read":
            k = min(workers, n)
            return Expectation(k * median, "one copy per reader", k * median,
                               f"{k} reader(s) x one member each")
        return Expectation(low, limit, median, "every copy is written: the slowest member")
    d = data_members(level, n)
    if level in SMALL_WRITE_PENALTY and direction == "write" and random:
        p = SMALL_WRITE_PENALTY[level]
        return Expectation(n * low / p, limit, n * median / p,
                           f"{n} members x slowest / {p} (read-modify-write per small write)")
    if random and direction == "read":
        # random reads land on every member, parity and mirror copies included, at the slowest pace
        k = d if level == "raid10" else n
        return Expectation(k * low, limit, k * median, f"{k} members x the slowest member's rate")
    return Expectation(d * low, limit, d * median, f"{d} data members x the slowest member's rate")
