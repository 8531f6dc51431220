"""The rank interface (measure/ranks.py) and its MPI side (measure/mpi/ranks.py): one process
without a launcher, mpi4py's absence said in one line under one, and the collectives, the vote,
a failure and the last exchange on three ranks under mpiexec."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import storlab.measure.mpi as mpi_package
from storlab.errors import UserError
from storlab.measure import launch
from storlab.measure.mpi import ranks as mpi_ranks
from storlab.measure.ranks import LocalRanks, RankFailure, any_rank
from test_mpi_runs import MPIEXEC, _have_mpi4py


def test_local_ranks_are_one_process_whose_collectives_return_its_own_value():
    r = LocalRanks()
    assert (r.rank, r.size) == (0, 1)
    assert r.bcast("x") == "x" and r.gather(3) == [3] and r.allgather(3) == [3]
    assert r.allreduce(5, lambda a, b: a + b) == 5
    assert r.gather_surviving({"a": 1}) == {0: {"a": 1}}
    assert any_rank(r, True) is True and any_rank(r, False) is False
    r.barrier()
    r.fail("ignored: nobody to tell")
    r.settle(1)
    assert r.failure is None
    r.check()                       # nothing to raise


def test_check_raises_the_failure_a_rank_knows_of():
    class Known(LocalRanks):
        failure = RankFailure(3, "rank 3 (node n1) died")

    with pytest.raises(RankFailure, match="rank 3 .node n1. died") as e:
        Known().check()
    assert e.value.rank == 3


def test_without_a_launcher_a_command_runs_as_one_process(monkeypatch):
    monkeypatch.setattr(mpi_ranks, "detect", lambda: None)
    assert isinstance(mpi_ranks.open_ranks(30.0, "workload"), LocalRanks)


def test_under_a_launcher_without_mpi4py_the_command_says_so_in_one_line(monkeypatch):
    monkeypatch.setattr(mpi_ranks, "detect", lambda: launch.Launch("pmi", 2, 0))
    monkeypatch.setitem(sys.modules, "storlab.measure.mpi.comm", None)     # import fails as without mpi4py
    monkeypatch.delattr(mpi_package, "comm", raising=False)
    with pytest.raises(UserError) as e:
        mpi_ranks.open_ranks(30.0, "workload")
    message = str(e.value)
    assert "\n" not in message and "storlab workload" in message and "mpi4py" in message


COMM_RANKS_SCRIPT = """
import json
from storlab.measure.mpi.ranks import open_ranks
from storlab.measure.ranks import RankFailure, any_rank

ranks = open_ranks(5.0, "test")
r = ranks.rank
out = {"kind": type(ranks).__name__, "size": ranks.size,
       "sum": ranks.allreduce(r + 1, lambda a, b: a + b),
       "none": any_rank(ranks, False), "one": any_rank(ranks, r == 2),
       "bcast": ranks.bcast("from 0" if r == 0 else None), "gather": ranks.gather(10 * r)}
if r == 2:
    ranks.fail("boom")
try:
    ranks.barrier()
    out["barrier"] = None
except RankFailure as e:
    out["barrier"] = [e.rank, str(e)]
try:
    ranks.check()
    out["check"] = None
except RankFailure as e:
    out["check"] = e.rank
got = ranks.gather_surviving(out)
if r == 0:
    print(json.dumps([got[k] for k in sorted(got)]), flush=True)
else:
    assert got is None
"""


@pytest.mark.mpi
@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich, or a site MPI on PATH)")
@pytest.mark.skipif(not _have_mpi4py(), reason="mpi4py not installed (pip install 'storlab[mpi]')")
def test_comm_ranks_collectives_vote_failure_and_last_exchange_on_three_ranks():
    p = subprocess.run([MPIEXEC, "-n", "3", sys.executable, "-c", COMM_RANKS_SCRIPT],
                       capture_output=True, text=True, timeout=120)
    line = next((x for x in p.stdout.splitlines() if x.startswith("[")), None)
    assert line is not None, p.stdout + p.stderr
    docs = json.loads(line)
    assert len(docs) == 3 and all(d["kind"] == "CommRanks" and d["size"] == 3 for d in docs)
    assert [d["sum"] for d in docs] == [6, 6, 6]                # 1 + 2 + 3 on every rank
    assert [d["none"] for d in docs] == [False] * 3 and [d["one"] for d in docs] == [True] * 3
    assert [d["bcast"] for d in docs] == ["from 0"] * 3
    assert [d["gather"] for d in docs] == [[0, 10, 20], None, None]
    for d in docs:      # rank 2's failure ends every rank's next barrier, named
        assert d["barrier"][0] == 2 and "rank 2 (node" in d["barrier"][1] and "boom" in d["barrier"][1], d
        assert d["check"] == 2


SPLIT_SCRIPT = """
import json, time
from storlab.measure.mpi.ranks import open_ranks
from storlab.measure.ranks import RankFailure

ranks = open_ranks(5.0, "test")
r = ranks.rank
groups = ranks.split({"w": 0.25, "r": 0.25, "m": 0.5})
part = groups.ranks
ranks.barrier()                                  # one barrier of the whole, then every part starts
start = time.time() + ranks.clock_offset_s
out = {"name": groups.name, "members": groups.members, "kind": type(part).__name__,
       "part": [part.rank, part.size], "mine": part.allgather(r), "sum": part.allreduce(r, lambda a, b: a + b),
       "bcast": part.bcast(f"{groups.name} from {r}"), "gather": part.gather(r)}
nested = part.split_by("even" if part.rank % 2 == 0 else "odd")
out["nested"] = [nested.rank, nested.size, nested.allgather(r)]
out["whole"] = ranks.allgather(groups.name)
out["start"] = start
# a failure in one part ends the other parts' and the whole's next collective, named
if r == 3:
    ranks.fail("boom in m")
try:
    part.barrier()
    ranks.barrier()
    out["after"] = None
except RankFailure as e:
    out["after"] = [e.rank, str(e)]
got = ranks.gather_surviving(out)
if r == 0:
    print(json.dumps([got[k] for k in sorted(got)]), flush=True)
"""


@pytest.mark.mpi
@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich, or a site MPI on PATH)")
@pytest.mark.skipif(not _have_mpi4py(), reason="mpi4py not installed (pip install 'storlab[mpi]')")
def test_rank_groups_on_four_ranks_run_apart_start_together_and_end_on_a_failure():
    p = subprocess.run([MPIEXEC, "-n", "4", sys.executable, "-c", SPLIT_SCRIPT],
                       capture_output=True, text=True, timeout=120)
    line = next((x for x in p.stdout.splitlines() if x.startswith("[")), None)
    assert line is not None, p.stdout + p.stderr
    docs = json.loads(line)
    assert [d["name"] for d in docs] == ["w", "r", "m", "m"]
    assert docs[0]["members"] == {"w": [0], "r": [1], "m": [2, 3]}
    assert all(d["kind"] == "CommRanks" for d in docs)
    assert [d["part"] for d in docs] == [[0, 1], [0, 1], [0, 2], [1, 2]]
    assert [d["mine"] for d in docs] == [[0], [1], [2, 3], [2, 3]]              # disjoint groups
    assert [d["sum"] for d in docs] == [0, 1, 5, 5]
    assert [d["bcast"] for d in docs] == ["w from 0", "r from 1", "m from 2", "m from 2"]
    assert [d["gather"] for d in docs] == [[0], [1], [2, 3], None]
    assert [d["nested"] for d in docs] == [[0, 1, [0]], [0, 1, [1]], [0, 1, [2]], [0, 1, [3]]]
    assert all(d["whole"] == ["w", "r", "m", "m"] for d in docs)
    starts = [d["start"] for d in docs]
    assert max(starts) - min(starts) < 0.25                  # one clock: the parts start together
    for d in docs:
        assert d["after"][0] == 3 and "boom in m" in d["after"][1], d
