"""The binomial tree every collective, heartbeat and final gather of storlab's MPI runs follows,
and how it heals around ranks that are gone. Pure functions of ranks (no mpi4py).

Rank r's parent is r with its lowest set bit cleared; its children are r + 1, r + 2, r + 4 ...
below that bit (every power of two below the size for rank 0); its subtree is the ranks
r .. r + lowbit(r) - 1. No rank has more than ceil(log2 size) children, and the tree is
ceil(log2 size) levels deep, so a message climbing or descending it takes that many hops and no
rank handles more than log2 size messages of one exchange.

A rank that is gone (stopped responding) is skipped: its children attach to the nearest living
ancestor, and the rank above it takes the gone rank's children in its place (recursively), so the
living ranks stay one tree and every rank still has at most about log2 size neighbours.
"""
from __future__ import annotations

from typing import AbstractSet, Iterator

__all__ = ["parent", "children", "subtree", "height", "living_parent", "living_children", "neighbours"]


def _low(rank: int, size: int) -> int:
    return rank & -rank if rank else max(1, 1 << (size - 1).bit_length())


def parent(rank: int) -> int | None:
    """The rank with `rank`'s lowest set bit cleared; None for the root."""
    return None if rank == 0 else rank & (rank - 1)


def children(rank: int, size: int) -> list[int]:
    """rank + 2^k for every 2^k below rank's lowest set bit (every 2^k for the root), within size."""
    low = _low(rank, size)
    out, step = [], 1
    while step < low and rank + step < size:
        out.append(rank + step)
        step <<= 1
    return out


def subtree(rank: int, size: int) -> range:
    """The ranks below `rank`, itself included."""
    return range(rank, min(size, rank + _low(rank, size)))


def height(rank: int, size: int) -> int:
    """Levels below `rank`: 0 for a leaf, ceil(log2 size) for the root of size ranks."""
    return (len(subtree(rank, size)) - 1).bit_length()


def living_parent(rank: int, gone: AbstractSet[int]) -> int | None:
    """The nearest ancestor not gone; None for the root or when every ancestor is gone."""
    p = parent(rank)
    while p is not None and p in gone:
        p = parent(p)
    return p


def living_children(rank: int, size: int, gone: AbstractSet[int], done: AbstractSet[int] = frozenset()) -> Iterator[int]:
    """The children `rank` hears from: its own, with each gone child replaced by that child's
    living children (recursively). A child in `done` (its subtree already heard from) is left
    out, and so is what is below it."""
    for c in children(rank, size):
        if c in done:
            continue
        if c in gone:
            yield from living_children(c, size, gone, done)
        else:
            yield c


def neighbours(rank: int, size: int, gone: AbstractSet[int]) -> set[int]:
    """The ranks `rank` exchanges heartbeats with: its living parent and living children."""
    p = living_parent(rank, gone)
    out = set(living_children(rank, size, gone))
    if p is not None:
        out.add(p)
    return out
