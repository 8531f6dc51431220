"""Rank sub-groups (measure/ranks.py): the ranks divided by shares as io500's concurrent phase
divides them, one process split into its own group, and teams of threads whose groups run side by
side, exchange within themselves, share one barrier of the whole and end on a member's failure."""
from __future__ import annotations

import threading
import time

import pytest
from storlab.errors import UserError
from storlab.measure.ranks import LocalRanks, RankFailure, run_on_threads, share_blocks

IO500_SHARES = {"ior-easy-write": 0.2, "ior-rnd1MB-read": 0.4, "mdworkbench": 0.4}


def test_shares_divide_the_ranks_in_contiguous_blocks_as_io500_does():
    # io500's phase_concurrent.c: workloads = {size x 0.2, size x 0.6, size}, truncated
    assert share_blocks(IO500_SHARES, 10) == {"ior-easy-write": [0, 1], "ior-rnd1MB-read": [2, 3, 4, 5],
                                              "mdworkbench": [6, 7, 8, 9]}
    assert {k: len(v) for k, v in share_blocks(IO500_SHARES, 4).items()} == {
        "ior-easy-write": 0, "ior-rnd1MB-read": 2, "mdworkbench": 2}          # 0.8 -> 0, 2.4 -> 2
    for size in range(1, 40):
        blocks = share_blocks(IO500_SHARES, size)
        flat = [r for rs in blocks.values() for r in rs]
        assert flat == list(range(size))                                      # every rank once, in order
        assert len(blocks["ior-easy-write"]) == int(size * 0.2 + 1e-9)
    # 0.7 x 10 is 7.000000000000001 and 0.1 + 0.2 is 0.30000000000000004: still 7 and 3
    assert len(share_blocks({"a": 0.7, "b": 0.3}, 10)["a"]) == 7
    assert len(share_blocks({"a": 0.1, "b": 0.2, "c": 0.7}, 10)["c"]) == 7


@pytest.mark.parametrize("shares, words", [({"a": 1.5, "b": 0.1}, "share of a = 1.5"),
                                           ({"a": 0.7, "b": 0.6, "c": 0.0}, "add up to 1.3"),
                                           ({"a": float("nan"), "b": 0.1}, "share of a = nan"),
                                           ({}, "no parts")])
def test_a_wrong_share_is_refused_in_one_line(shares, words):
    with pytest.raises(UserError) as e:
        share_blocks(shares, 4)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_one_process_is_a_group_of_its_own():
    whole = LocalRanks()
    groups = whole.split(IO500_SHARES)
    assert groups.name == "mdworkbench" and groups.sizes == {"ior-easy-write": 0, "ior-rnd1MB-read": 0, "mdworkbench": 1}
    part = groups.ranks
    assert (part.rank, part.size) == (0, 1) and part.allgather("x") == ["x"]
    assert whole.split_by("any").size == 1
    whole.barrier()


def test_thread_groups_exchange_within_themselves_and_meet_in_the_whole():
    starts: dict[int, float] = {}

    def work(ranks):
        groups = ranks.split({"w": 0.25, "r": 0.25, "m": 0.5})
        part = groups.ranks
        ranks.barrier()                             # one barrier of the whole: one clock
        starts[ranks.rank] = time.monotonic()
        mine = part.allgather(ranks.rank)           # the group's own exchange
        total = part.allreduce(ranks.rank, lambda a, b: a + b)
        first = part.bcast(f"{groups.name} from {ranks.rank}")
        nested = part.split_by("even" if part.rank % 2 == 0 else "odd")
        ranks.barrier()
        return groups.name, part.rank, part.size, mine, total, first, nested.size, ranks.allgather(groups.name)

    got = run_on_threads(8, work, timeout_s=10)
    assert [g[0] for g in got] == ["w", "w", "r", "r", "m", "m", "m", "m"]
    assert [g[1] for g in got] == [0, 1, 0, 1, 0, 1, 2, 3] and [g[2] for g in got] == [2, 2, 2, 2, 4, 4, 4, 4]
    assert got[0][3] == [0, 1] and got[2][3] == [2, 3] and got[5][3] == [4, 5, 6, 7]
    assert [g[4] for g in got] == [1, 1, 5, 5, 22, 22, 22, 22]
    assert [g[5] for g in got] == ["w from 0"] * 2 + ["r from 2"] * 2 + ["m from 4"] * 4
    assert [g[6] for g in got] == [1, 1, 1, 1, 2, 2, 2, 2]
    assert all(g[7] == [x[0] for x in got] for g in got)
    assert max(starts.values()) - min(starts.values()) < 0.5


def test_a_failed_part_ends_the_other_parts_and_the_whole_named():
    seen: dict[int, str] = {}

    def work(ranks):
        try:
            part = ranks.split({"a": 0.5, "b": 0.5}).ranks
            if ranks.rank == 3:
                raise OSError("disk gone")
            part.barrier()          # rank 2 waits for rank 3 in its group
            ranks.barrier()         # ranks 0 and 1 wait for rank 3 in the whole
        except RankFailure as e:
            seen[ranks.rank] = f"{e.rank}: {e}"
            raise

    started = time.monotonic()
    with pytest.raises(OSError, match="disk gone"):
        run_on_threads(4, work, timeout_s=30)
    assert time.monotonic() - started < 5                # no one waited for the timeout
    assert sorted(seen) == [0, 1, 2] and all(v.startswith("3: thread rank 3 failed: disk gone") for v in seen.values())


def test_a_member_that_never_comes_breaks_the_team_after_its_timeout():
    release = threading.Event()

    def work(ranks):
        if ranks.rank == 1:
            release.wait(5)
            return "late"
        ranks.barrier()

    with pytest.raises(RankFailure, match="did not come within 0.3 s"):
        run_on_threads(2, work, timeout_s=0.3)
    release.set()


def test_a_signal_in_the_main_thread_stops_every_member_before_it_propagates():
    import signal

    ended: list[int] = []

    def work(ranks):
        deadline = time.monotonic() + 20
        while ranks.failure is None and time.monotonic() < deadline:    # as an engine wait polls
            time.sleep(0.01)
        ended.append(ranks.rank)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    started = time.monotonic()
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            run_on_threads(3, work, timeout_s=30)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert sorted(ended) == [0, 1, 2] and time.monotonic() - started < 5
