"""storlab under mpiexec: real launches of 2 and 4 ranks (the mpich wheel's hydra, or any mpiexec
on PATH), with the null backend and with real files in /dev/shm. Each test reads the merged JSON
document rank 0 writes."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from storlab.measure import stats


def _mpiexec() -> str | None:
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else shutil.which("mpiexec")


def _have_mpi4py() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


MPIEXEC = _mpiexec()
pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich, or a site MPI on PATH)"),
    pytest.mark.skipif(not _have_mpi4py(), reason="mpi4py not installed (pip install 'storlab[mpi]')"),
]

STORLAB = [sys.executable, "-m", "storlab"]


def mpirun(n: int | list[tuple[int, list[str]]], args: list[str], out: Path, timeout_s: float = 90,
           command: str = "run", store: Path | None = None) -> tuple[subprocess.CompletedProcess, dict | None, float]:
    """Launch `storlab <command> args` on n ranks (or MPMD: [(ranks, extra args), ...]); returns
    the process, rank 0's JSON document (None if it wrote none) and the wall time in seconds."""
    base = [*STORLAB, command, *args, "--json", str(out), *(["--store", str(store)] if store else ["--no-store"])]
    if isinstance(n, int):
        cmd = [MPIEXEC, "-n", str(n), *base]
    else:
        cmd = [MPIEXEC]
        for i, (count, extra) in enumerate(n):
            cmd += ([":"] if i else []) + ["-n", str(count), *base, *extra]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    wall = time.monotonic() - t0
    doc = json.loads(out.read_text()) if out.exists() else None
    return p, doc, wall


def ranks(phase: dict) -> list[dict]:
    return phase["mpi"]["ranks"]


def check_schema(doc: dict) -> None:
    """The merged document keeps its kind's layout (storlab/schemas: run-1, meta-1, scale-1) that
    the store, exporters and reports read."""
    pytest.importorskip("jsonschema")
    from storlab.schemas import validate

    validate(doc)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("engine", ["null", "psync"])
def test_aggregate_bytes_equal_the_sum_of_the_ranks(shm_dir, n, engine):
    d = Path(shm_dir)
    extra = ["--null-delay", "200us", "--rw", "randread", "--time", "0.3s"] if engine == "null" else ["--rw", "write"]
    p, doc, _ = mpirun(n, ["--target", f"{d}/f{{rank}}", "--size", "2m", "--bs", "64k", "--threads", "2",
                           "--engine", engine, *extra], d / "out.json")
    assert p.returncode == 0, p.stderr
    assert doc["complete"] and doc["mpi"]["size"] == n
    check_schema(doc)
    ph = doc["phases"][0]
    direction = "read" if engine == "null" else "write"
    per_rank = [r["bytes"] for r in ranks(ph)]
    assert len(per_rank) == n and all(b > 0 for b in per_rank)
    assert ph["aggregate"]["bytes"] == sum(per_rank) == ph[direction]["bytes"]
    assert ph[direction]["bytes"] == sum(w[f"{direction}_bytes"] for w in ph["workers"])
    assert ph[direction]["ops"] == sum(r[direction]["ops"] for r in ranks(ph))
    assert [r["targets"] for r in ranks(ph)] == [[f"{d}/f{r}"] for r in range(n)]
    if engine == "psync":   # every rank wrote its whole 2 MiB file: the total is exact
        assert ph["aggregate"]["bytes"] == n * (2 << 20)
        assert all(os.path.getsize(d / f"f{r}") == 2 << 20 for r in range(n))
    # the human output names the MPI aggregate
    assert "all bytes / first start to last finish" in p.stdout


def test_a_rank_started_late_shows_in_deskew_and_straggler_output(shm_dir):
    d = Path(shm_dir)
    common = ["--target", f"{d}/f{{rank}}", "--size", "1m", "--engine", "null", "--null-delay", "1ms",
              "--rw", "randread", "--time", "1s"]
    # MPMD launch: rank 1 gets its own --start-delay
    p, doc, _ = mpirun([(1, common), (1, [*common, "--start-delay", "0.4s"])], [], d / "out.json")
    assert p.returncode == 0, p.stderr
    ph = doc["phases"][0]
    a, m = ph["aggregate"], ph["mpi"]
    early, late = ranks(ph)
    # Checked against each rank's own clock and the merged figures, not against 0.4 s after the
    # first start: a loaded host lets the ranks leave the start barrier a little apart.
    assert late["start_s"] - late["shift_s"] >= 0.4             # rank 1 waited out its start delay
    assert early["start_s"] - early["shift_s"] < late["start_s"] - late["shift_s"]
    for r in (early, late):                                     # time-based: 1 s from its own start
        assert r["end_s"] - r["start_s"] >= 1.0 - 1e-6, r
    assert late["start_s"] > early["start_s"] and late["end_s"] > early["end_s"]
    assert a["deskew_window_s"] == [late["start_s"], early["end_s"]]   # rank 1 starts, rank 0 is done
    assert m["last_done"]["rank"] == 1 and m["first_done"]["rank"] == 0
    assert m["stragglers"][0]["rank"] == 1
    assert m["stragglers"][0]["behind_s"] == late["end_s"] - early["end_s"] == a["straggler_s"]
    # the de-skewed rate counts only the window in which both ran; the plain rate spreads all the
    # bytes over first start to last finish, which includes each rank running alone
    window_s = a["deskew_window_s"][1] - a["deskew_window_s"][0]
    assert a["deskew_bw_bytes"] == pytest.approx(a["deskew_bytes"] / window_s)
    assert a["deskew_bytes"] < a["bytes"]
    assert a["bw_bytes"] == pytest.approx(a["bytes"] / (late["end_s"] - early["start_s"]))
    assert "stragglers (finished last): rank 1" in p.stdout


def test_merged_histograms_equal_the_histogram_of_all_samples(shm_dir):
    d = Path(shm_dir)
    p, doc, _ = mpirun(4, ["--target", f"{d}/f{{rank}}", "--size", "1m", "--engine", "null",
                           "--null-delay", "50us", "--rw", "randread", "--time", "0.3s", "--qd", "4"],
                       d / "out.json")
    assert p.returncode == 0, p.stderr
    ph = doc["phases"][0]
    per_rank = [r["read"]["lat_hist"]["buckets"] for r in ranks(ph)]
    # every sample of every rank, at its bucket's value (which falls back into the same bucket)
    samples = [stats.bucket_value(i) for b in per_rank for i, c in b for _ in range(c)]
    merged = ph["read"]["lat_hist"]["buckets"]
    assert merged == stats.histogram(samples)
    assert stats.count(merged) == ph["read"]["ops"] == sum(r["read"]["ops"] for r in ranks(ph))
    assert ph["read"]["lat_ns"]["p99"] == stats.percentile(stats.histogram(samples), 99)
    assert ph["read"]["lat_ns"]["max"] == max(r["read"]["lat_ns"]["max"] for r in ranks(ph))


def test_reorder_makes_each_rank_read_the_next_ranks_file(shm_dir, tmp_path):
    d = Path(shm_dir)
    for r in range(4):   # rank-specific sizes: whose file a rank read shows in its byte count
        (d / f"f{r}").write_bytes(os.urandom((r + 1) * (256 << 10)))
    p, doc, _ = mpirun(4, ["--target", f"{d}/f{{rank}}", "--rw", "read", "--bs", "64k", "--reorder", "1"],
                       d / "out.json", store=tmp_path / "results.db")
    assert p.returncode == 0, p.stderr
    from storlab import store

    # only rank 0 stores and prints
    assert [x["run_id"] for x in store.list_runs(path=tmp_path / "results.db")] == [doc["run_id"]]
    assert p.stdout.count("bw MiB/s") == 1
    for r, rec in enumerate(ranks(doc["phases"][0])):
        other = (r + 1) % 4
        assert rec["data_rank"] == other
        assert rec["targets"] == [f"{d}/f{other}"]
        assert rec["bytes"] == (other + 1) * (256 << 10)
    assert doc["mpi"]["reorder"] == 1


def test_reorder_checked_with_verification_finds_the_flip_in_the_other_ranks_data(shm_dir):
    d = Path(shm_dir)
    target = ["--target", f"{d}/f{{rank}}", "--bs", "4k", "--verify", "crc32c"]
    p, doc, _ = mpirun(4, [*target, "--rw", "write", "--size", "256k"], d / "w.json")
    assert p.returncode == 0, p.stderr
    with open(d / "f1", "r+b") as f:   # flip one byte of the data rank 1 wrote
        f.seek(100_000)
        b = f.read(1)
        f.seek(100_000)
        f.write(bytes([b[0] ^ 0x5A]))
    p, doc, _ = mpirun(4, [*target, "--rw", "read", "--reorder", "1"], d / "r.json")
    ph = doc["phases"][0]
    v = ph["verify"]
    assert v["mismatches"] == 1 and v["checked_blocks"] == 4 * 64
    assert v["first"][0]["rank"] == 0 and v["first"][0]["target"] == f"{d}/f1"   # rank 0 read rank 1's
    assert [r["verify"]["mismatches"] for r in ranks(ph)] == [1, 0, 0, 0]
    assert p.returncode == 1 and "verification failed" in p.stderr


def test_a_rank_that_raises_ends_every_rank_within_the_timeout(shm_dir):
    d = Path(shm_dir)
    for r in (0, 1, 3):
        (d / f"d{r}").mkdir()
    # rank 2's folder does not exist: its plan fails while the others wait at the barrier
    p, doc, wall = mpirun(4, ["--target", f"{d}/d{{rank}}/f", "--size", "1m", "--engine", "null",
                              "--null-delay", "1ms", "--time", "30s", "--rank-timeout", "5s"], d / "out.json")
    assert wall < 15, f"took {wall:.1f} s"
    assert p.returncode == 1
    assert doc["complete"] is False and doc["stop_reason"] == "error"
    check_schema(doc)
    assert doc["error"].startswith("rank 2 (node ")
    assert "d2/f" in doc["error"]
    assert doc["mpi"]["failed_rank"] == 2
    assert "storlab run: error: rank 2" in p.stderr


def test_a_rank_failing_mid_phase_interrupts_the_others(shm_dir):
    d = Path(shm_dir)
    common = ["--target", f"{d}/f{{rank}}", "--size", "1m", "--engine", "null", "--time", "30s",
              "--rank-timeout", "5s"]
    fast = [*common, "--null-delay", "1ms"]
    # rank 2's requests take 5 s and it aborts on a stall after 0.3 s: an error mid-phase
    stalls = [*common, "--null-delay", "5s", "--stall-after", "0.3s", "--stall-abort"]
    p, doc, wall = mpirun([(2, fast), (1, stalls), (1, fast)], [], d / "out.json")
    assert wall < 20, f"took {wall:.1f} s"
    assert p.returncode == 1
    ph = doc["phases"][0]
    assert doc["error"].startswith("rank 2 (node ") and "stall" in doc["error"]
    others = [r for r in ranks(ph) if r["rank"] != 2]
    assert all(r["stop_reason"] == "error" and r["bytes"] > 0 for r in others)   # partial results kept
    assert all(r["end_s"] < 10 for r in others)                                 # stopped well before 30 s


def test_stonewalled_write_then_read_back_exactly_what_each_rank_wrote(shm_dir, tmp_path):
    d = Path(shm_dir)
    jobfile = tmp_path / "job.toml"
    jobfile.write_text(f"""
target = ["{d}/f{{rank}}"]
size = "256m"
bs = "64k"
engine = "psync"
reorder = 1

[[phase]]
name = "write"
rw = "write"
time = "0.3s"

[[phase]]
name = "read"
rw = "read"
""")
    p, doc, _ = mpirun(2, [str(jobfile)], d / "out.json")
    assert p.returncode == 0, p.stderr
    write, read = doc["phases"]
    written = [r["bytes"] for r in ranks(write)]
    assert all(b > 0 for b in written)
    # time-based: each rank's writer ran from its own start to its deadline, 0.3 s later (the
    # 256 MiB file is rewritten until then; without the deadline one pass would end it far sooner)
    assert all(0.3 - 1e-6 <= r["end_s"] - r["start_s"] < 2.0 for r in ranks(write)), ranks(write)
    for r, rec in enumerate(ranks(read)):
        assert rec["data_rank"] == (r + 1) % 2
        assert rec["bytes"] == written[rec["data_rank"]]     # one thread per rank: exact
    sw = doc["mpi"]["stonewall"][0]
    assert sw["phase"] == "read" and sw["from_phase"] == "write"
    assert sw["io_size_bytes"] == [[written[1]], [written[0]]]


def test_ranks_on_one_shared_file_split_its_region(shm_dir):
    d = Path(shm_dir)
    p, doc, _ = mpirun(2, ["--target", f"{d}/shared.dat", "--size", "4m", "--bs", "64k", "--threads", "2",
                           "--rw", "write"], d / "out.json")
    assert p.returncode == 0, p.stderr
    # 2 ranks x 2 threads each own a quarter: one pass writes the file once, not once per rank
    assert doc["phases"][0]["aggregate"]["bytes"] == 4 << 20
    assert os.path.getsize(d / "shared.dat") == 4 << 20


def test_scale_runs_one_two_and_four_ranks_and_reports_efficiency(shm_dir, tmp_path):
    d = Path(shm_dir)
    db = tmp_path / "results.db"
    out = d / "scale.json"
    p = subprocess.run([MPIEXEC, "-n", "4", *STORLAB, "scale", "--target", f"{d}/f{{rank}}", "--size", "1m",
                        "--engine", "null", "--null-delay", "1ms", "--rw", "randread", "--time", "0.3s",
                        "--json", str(out), "--store", str(db)], capture_output=True, text=True, timeout=90)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["kind"] == "scale" and doc["complete"]
    check_schema(doc)
    assert doc["scale"]["ranks_run"] == [1, 2, 4]
    assert [r["mpi"]["size"] for r in doc["runs"]] == [1, 2, 4]
    pts = doc["scale"]["curve"][0]["points"]
    for pt, run in zip(pts, doc["runs"]):   # each point is its run's aggregate, against 1 rank
        assert pt["bw_bytes"] == run["phases"][0]["aggregate"]["bw_bytes"]
        assert pt["efficiency"] == pytest.approx(pt["bw_bytes"] / (pt["ranks"] * pts[0]["bw_bytes"]))
    # More ranks move more bytes in the same time. (How close to linear depends on the CPUs free:
    # 4 ranks may share 2 CPUs with whatever else runs, so no tighter bound is asserted here.)
    assert pts[0]["bytes"] < pts[1]["bytes"] < pts[2]["bytes"]
    assert "efficiency %" in p.stdout
    from storlab import store

    (saved,) = store.list_runs(path=db)     # rank 0 alone stored it, once
    assert saved["kind"] == "scale" and saved["run_id"] == doc["run_id"]


CLOCK_SCRIPT = """
import json
from mpi4py import MPI
from storlab.measure.mpi import clock
from storlab.measure.mpi.comm import Comm, Liveness

live = Liveness(MPI.COMM_WORLD, 10.0)
comm = Comm(MPI.COMM_WORLD, live)
# pretend every rank is on a node of its own, so each one runs the ping-pong with rank 0
offsets = clock.exchange(comm, ["n0", "n1", "n2"])
if comm.rank == 0:
    print(json.dumps([o.as_dict() for o in offsets]))
comm.free()
assert live.close()
"""


def test_clock_ping_pong_between_ranks_on_one_host_finds_no_offset():
    p = subprocess.run([MPIEXEC, "-n", "3", sys.executable, "-c", CLOCK_SCRIPT], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    offsets = json.loads(p.stdout)
    assert offsets[0] == {"offset_s": 0.0, "rtt_s": 0.0, "error_bound_s": 0.0}
    for o in offsets[1:]:
        # one host, one clock: the estimate is 0 within its own error bound (half the round trip;
        # how long the round trip takes depends on how busy the host is, so it is not bounded here)
        assert o["rtt_s"] > 0 and o["error_bound_s"] == pytest.approx(o["rtt_s"] / 2)
        assert abs(o["offset_s"]) <= o["error_bound_s"] + 1e-6


COLLECTIVES_SCRIPT = """
import json
from mpi4py import MPI
from storlab.measure.mpi.comm import Comm, Liveness

live = Liveness(MPI.COMM_WORLD, 10.0)
comm = Comm(MPI.COMM_WORLD, live)
r, n = comm.rank, comm.size
seen = []
for k in range(20):   # many rounds in a row: a fast rank's next message must not be taken for this one
    got = comm.gather({"rank": r, "k": k})
    value = comm.bcast(("from 0", k) if r == 0 else None)
    every = comm.allgather(r * r + k)
    total = comm.reduce([r + k], lambda a, b: sorted(a + b))
    comm.barrier()
    seen.append([got, value, every, total])
report = comm.gather(seen)
if r == 0:
    print(json.dumps({"size": n, "seen": report}))
comm.free()
assert live.close()
"""


@pytest.mark.parametrize("n, doorbell", [(3, "1"), (5, "1"), (6, "1"), (5, "0")])
def test_tree_collectives_are_correct_at_odd_and_even_rank_counts(n, doorbell):
    """gather, reduce, bcast, allgather and barrier along the binomial tree: every rank's value in
    rank order on rank 0 (merged once each by the reduce), rank 0's value everywhere, round after
    round; with more ranks than cores,
    waiting on the doorbell and (turned off) by sleeping polls."""
    p = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, "-c", COLLECTIVES_SCRIPT], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "STORLAB_MPI_DOORBELL": doorbell})
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["size"] == n
    for rank, rounds in enumerate(doc["seen"]):
        for k, (got, value, every, total) in enumerate(rounds):
            if rank == 0:
                assert got == [{"rank": x, "k": k} for x in range(n)]
                assert total == [x + k for x in range(n)]      # every rank's value merged once
            else:
                assert got is None and total is None
            assert value == ["from 0", k]
            assert every == [x * x + k for x in range(n)]


FINAL_GATHER_SCRIPT = """
import json, os, sys, time
from mpi4py import MPI
from storlab.measure.mpi.comm import Comm, Liveness

silent = int(sys.argv[1])
live = Liveness(MPI.COMM_WORLD, 1.0)
comm = Comm(MPI.COMM_WORLD, live)
r, n = comm.rank, comm.size
value = {"rank": r, "hist": {str(b): r + b for b in range(4)}}
flat = comm.gather(value)                   # every rank alive: the plain tree gather ...
final = comm.gather_surviving(value, 30.0)  # ... and the failure-proof one agree
if r == silent:                             # this rank goes silent: no heartbeat, no message
    live._stop.set()
    live._thread.join()
    time.sleep(6)
    os._exit(0)
t0 = time.monotonic()
after = comm.gather_surviving(value, 30.0, tag=14)
if r == 0:
    print(json.dumps({"flat": flat, "final": {str(k): v for k, v in sorted(final.items())},
                      "after": sorted(after), "seconds": time.monotonic() - t0,
                      "failure": live.failure.args[0] if live.failure else None,
                      "sent": live.messages_sent}), flush=True)
live.close()
os._exit(0)
"""


@pytest.mark.parametrize("n, silent", [(4, 2), (7, 4)])
def test_the_final_gather_matches_the_flat_one_and_goes_round_a_silent_rank(n, silent):
    """The last exchange of a run climbs the tree (no rank receives from more than its children)
    and gives rank 0 the same as the plain gather; a rank that goes silent (no heartbeat, no
    message) is named within the rank timeout and the ranks below it still reach rank 0."""
    p = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, "-c", FINAL_GATHER_SCRIPT, str(silent)],
                       capture_output=True, text=True, timeout=120)
    # (the launcher may end the job with an error once a rank leaves without finalising MPI: what
    # counts is what rank 0 got)
    line = next((x for x in p.stdout.splitlines() if x.startswith("{")), None)
    assert line is not None, p.stdout + p.stderr
    doc = json.loads(line)
    assert doc["final"] == {str(i): v for i, v in enumerate(doc["flat"])}
    assert [x["rank"] for x in doc["flat"]] == list(range(n))
    assert doc["after"] == [r for r in range(n) if r != silent]    # the silent rank's subtree included
    assert f"rank {silent}" in doc["failure"] and "stopped responding" in doc["failure"]
    assert doc["seconds"] < 15


FAILURE_NOTICE_SCRIPT = """
import json, os, time
from mpi4py import MPI
from storlab.measure.mpi.comm import Comm, Liveness, RankFailure

live = Liveness(MPI.COMM_WORLD, 60.0)      # heartbeats a second apart: a notice must not wait for them
comm = Comm(MPI.COMM_WORLD, live)
r, n = comm.rank, comm.size
comm.barrier()
out = {"rank": r, "bell": live.bell is not None}
if r == n - 1:
    time.sleep(1.5)                        # the others are asleep in the barrier below by now
    out["reported"] = time.time()
    live.report("boom")
else:
    try:
        comm.barrier()
        out["raised"] = None
    except RankFailure as e:
        out["raised"], out["at"] = str(e), time.time()
got = comm.gather_surviving(out, 10.0)
if r == 0:
    print(json.dumps([got[k] for k in sorted(got)]), flush=True)
live.close()
os._exit(0)
"""


def test_a_failure_notice_wakes_every_waiting_rank_at_once():
    """A rank's failure reaches ranks asleep in a collective within a fraction of a heartbeat:
    with more ranks than cores each liveness thread sleeps on its doorbell until its next
    heartbeat (a second here), so the notice must ring its way down the tree (5 hops from rank 7
    to rank 3), and each main thread must be woken by its liveness thread, not wait for a poll."""
    n = 8
    p = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, "-c", FAILURE_NOTICE_SCRIPT],
                       capture_output=True, text=True, timeout=120)
    line = next((x for x in p.stdout.splitlines() if x.startswith("[")), None)
    assert line is not None, p.stdout + p.stderr
    ranks = json.loads(line)
    assert [x["rank"] for x in ranks] == list(range(n))
    reported = ranks[-1]["reported"]
    for x in ranks[:-1]:
        assert x["raised"] and f"rank {n - 1} " in x["raised"] and "boom" in x["raised"], x
    slowest = max(x["at"] for x in ranks[:-1]) - reported
    assert 0 <= slowest < 0.5, f"the last rank heard of the failure {slowest:.2f} s after it"


def test_the_gap_between_phases_is_measured_and_recorded(tmp_path, shm_dir):
    """benchmarks/mpi_overhead.py's rank side: one gap per phase boundary, from the merged document."""
    out = tmp_path / "gaps.json"
    bench = Path(__file__).parent.parent / "benchmarks" / "mpi_overhead.py"
    p = subprocess.run([MPIEXEC, "-n", "3", sys.executable, str(bench), "--worker", "--phases", "4",
                        "--dir", shm_dir, "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    r = json.loads(out.read_text())
    assert r["complete"] and len(r["gaps_s"]) == 3 and all(g >= 0 for g in r["gaps_s"])
    assert r["messages_s"] > 0 and r["first_io_s"] > 0 and r["message_s"] > 0
    # one barrier (a reduce and a broadcast) before each of the 4 phases, one exchange after the
    # last, and the start-up check of the job's shape (an allgather): 12 tree sweeps in all
    assert r["sweeps_per_phase"] * 4 == 2 * (4 + 1) + 2
    assert r["heartbeat_peers"] <= 2          # rank 0 of 3: its two children; the others: 1 or 2


def _rank_pids(marker: str) -> dict[int, int]:
    """PIDs of the storlab ranks started with STORLAB_TEST_MARK=marker, by rank (PMI_RANK)."""
    found: dict[int, int] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = dict(e.split("=", 1) for e in Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0") if "=" in e)
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if env.get("STORLAB_TEST_MARK") == marker and b"storlab" in cmd and "PMI_RANK" in env:
            found[int(env["PMI_RANK"])] = int(pid)
    return found


@pytest.mark.parametrize("signo, rank", [(signal.SIGTERM, 1), (signal.SIGINT, 0)])
def test_ctrl_c_to_one_rank_lets_the_other_ranks_run_to_the_end(shm_dir, tmp_path, signo, rank):
    out = tmp_path / "m.json"
    marker = uuid.uuid4().hex
    cmd = [MPIEXEC, "-n", "2", *STORLAB, "run", "--target", f"{shm_dir}/s.{{rank}}", "--size", "1m",
           "--engine", "null", "--null-delay", "100us", "--time", "60s", "--json", str(out), "--no-store", "-q"]
    proc = subprocess.Popen(cmd, env={**os.environ, "STORLAB_TEST_MARK": marker},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    pids: dict[int, int] = {}
    while len(pids) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.2)
        pids = _rank_pids(marker)
    targets = [Path(shm_dir) / f"s.{r}" for r in (0, 1)]
    while not all(t.exists() and t.stat().st_size == 1 << 20 for t in targets):   # laid out: the
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()   # phase is next
        time.sleep(0.1)
    time.sleep(1.0)            # the phase is running on both ranks
    t0 = time.monotonic()
    os.kill(pids[rank], signo)
    _, err = proc.communicate(timeout=40)
    assert time.monotonic() - t0 < 30, "every rank must stop at its next tick, not at the 60 s end"
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "interrupted", err
    assert doc["signal"] == signal.Signals(signo).name
    assert f"rank {rank}" in doc["error"]
    assert sorted(doc["mpi"]["ranks_reporting"]) == [0, 1]
    phase = doc["phases"][0]
    assert phase["read"]["ops"] > 100
    check_schema(doc)


def test_io_uring_does_not_spin_where_the_hosts_ranks_outnumber_its_cpus(shm_dir, tmp_path):
    """A thread spins for its completions only where the phase's threads on the host fit its CPUs:
    2 ranks of `threads` threads each, `threads` fitting the CPUs alone but not twice over, record
    WAIT_SPIN_OFF naming the ranks; one rank of the same threads spins."""
    cpus = len(os.sched_getaffinity(0))
    threads = cpus // 2 + 1
    args = ["--target", f"{shm_dir}/spin.{{rank}}", "--size", "1m", "--engine", "io_uring", "--qd", "4",
            "--threads", str(threads), "-q"]
    p, doc, _ = mpirun(2, args, tmp_path / "two.json")
    assert p.returncode == 0, p.stderr
    spin = [f for f in doc["environment"]["io_uring"]["setup_flags"] if f.startswith("WAIT_SPIN")]
    assert spin == [f"WAIT_SPIN_OFF({2 * threads} threads (2 ranks here) on {cpus} CPUs)"], spin
    p, doc, _ = mpirun(1, args, tmp_path / "one.json")
    assert p.returncode == 0, p.stderr
    assert "WAIT_SPIN(100us)" in doc["environment"]["io_uring"]["setup_flags"]
