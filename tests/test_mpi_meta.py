"""`storlab meta` under mpiexec (MetaRanks in python/storlab/measure/mpi/orchestrator.py): real
launches of 2 and 4 ranks on /dev/shm reading the merged document rank 0 writes, plus the merging
and window counting without MPI. Every launch checks that nothing is left behind."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from storlab.measure import stats
from storlab.measure.aggregate import count_in_window, merge_meta_phase
from test_mpi_runs import MPIEXEC, _have_mpi4py, check_schema, mpirun

needs_mpi = [
    pytest.mark.mpi,
    pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich, or a site MPI on PATH)"),
    pytest.mark.skipif(not _have_mpi4py(), reason="mpi4py not installed (pip install 'storlab[mpi]')"),
]


def mpi(fn):
    for mark in needs_mpi:
        fn = mark(fn)
    return fn


def meta_run(n, args, d: Path, timeout_s: float = 60):
    return mpirun(n, [*args, "--quiet"], d / "out.json", timeout_s=timeout_s, command="meta")


def leftovers(*dirs: Path) -> list[str]:
    """Everything under the folders but the JSON document (and the mount points' own lost+found)."""
    return sorted(str(p) for d in dirs for p in d.rglob("*") if p.name != "out.json")


def by_name(doc: dict) -> dict[str, dict]:
    return {p["name"]: p for p in doc["phases"]}


# -- launches -----------------------------------------------------------------------------------
@mpi
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("mode", ["unique", "shared"])
def test_every_ranks_files_are_made_counted_and_removed(shm_dir, n, mode):
    d = Path(shm_dir)
    threads, files = 2, 300
    p, doc, _ = meta_run(n, ["--target", str(d), "--dir", mode, "--threads", str(threads),
                             "--files-per-thread", str(files), "--depth", "1", "--fanout", "3"], d)
    assert p.returncode == 0, p.stderr
    assert doc["kind"] == "meta" and doc["complete"] and doc["mpi"]["size"] == n
    check_schema(doc)
    phases = by_name(doc)
    assert list(phases) == ["mkdir", "create", "stat", "read", "rename", "remove", "rmdir"]
    for name in ("create", "stat", "read", "rename", "remove"):
        ph = phases[name]
        assert ph["ops"] == n * threads * files == sum(r["ops"] for r in ph["mpi"]["ranks"])
        assert ph["items_per_worker"] == [files] * (n * threads)
        assert [r["rank"] for r in ph["mpi"]["ranks"]] == list(range(n))
    # directories: a tree of 1 + 3 per thread of every rank, or one tree made by rank 0 alone
    tree_dirs = n * threads * 4 if mode == "unique" else 4
    assert phases["mkdir"]["ops"] == phases["rmdir"]["ops"] == tree_dirs
    if mode == "shared":
        assert [r["ops"] for r in phases["mkdir"]["mpi"]["ranks"]] == [4] + [0] * (n - 1)
    assert doc["cleanup"]["error"] is None and len(doc["cleanup"]["ranks"]) == n
    assert leftovers(d) == []


@mpi
@pytest.mark.parametrize("mode", ["unique", "shared"])
def test_kept_files_carry_the_rank_in_their_names(shm_dir, mode):
    d = Path(shm_dir)
    n, threads, files = 4, 2, 20
    p, doc, _ = meta_run(n, ["--target", str(d), "--dir", mode, "--threads", str(threads),
                             "--files-per-thread", str(files), "--keep", "--phases", "create,stat"], d)
    assert p.returncode == 0, p.stderr
    workdir = Path(doc["job"]["workdir"])
    names = {f.name for f in workdir.rglob("*") if f.is_file()}
    assert names == {f"r{r}.f{t}.{i}" for r in range(n) for t in range(threads) for i in range(files)}
    roots = sorted(x.name for x in workdir.iterdir())
    assert roots == (["shared"] if mode == "shared" else sorted(f"r{r}.w{t}" for r in range(n) for t in range(threads)))
    assert by_name(doc)["stat"]["ops"] == len(names)


@mpi
def test_merged_histogram_is_the_histogram_of_every_ranks_samples(shm_dir):
    d = Path(shm_dir)
    p, doc, _ = meta_run(4, ["--target", str(d), "--threads", "2", "--files-per-thread", "500",
                             "--phases", "create,stat,remove,rmdir"], d)
    assert p.returncode == 0, p.stderr
    for ph in doc["phases"]:
        ranks = ph["mpi"]["ranks"]
        # every sample of every rank, at its bucket's value (which falls back into the same bucket)
        samples = [stats.bucket_value(i) for r in ranks for i, c in r["lat_hist"]["buckets"] for _ in range(c)]
        assert ph["lat_hist"]["buckets"] == stats.histogram(samples), ph["name"]
        assert stats.count(ph["lat_hist"]["buckets"]) == ph["ops"]
        lo, hi = min(r["lat_ns"]["min"] for r in ranks), max(r["lat_ns"]["max"] for r in ranks)
        assert ph["lat_ns"]["p99"] == stats.percentile(stats.histogram(samples), 99, lo, hi)
        assert lo <= ph["lat_ns"]["p50"] <= ph["lat_ns"]["p999"] <= hi
        assert ph["lat_ns"]["max"] == max(r["lat_ns"]["max"] for r in ranks)
        # ops/s over the span from the earliest start to the latest finish, on rank 0's clock
        assert ph["seconds"] == pytest.approx(max(r["end_s"] for r in ranks))
        assert ph["ops_per_s"] == pytest.approx(ph["ops"] / ph["seconds"])
    assert leftovers(d) == []


@mpi
def test_stonewall_counts_of_every_rank_carry_to_the_later_phases(shm_dir):
    d = Path(shm_dir)
    p, doc, wall = meta_run(2, ["--target", str(d), "--threads", "2", "--files-per-thread", "4000000",
                                "--stonewall", "0.3s", "--phases", "create,stat,remove,rmdir"], d)
    assert p.returncode == 0, p.stderr
    assert wall < 30, f"took {wall:.1f} s"
    phases = by_name(doc)
    create = phases["create"]
    assert create["stonewalled"] and 0 < create["ops"] < 2 * 2 * 4_000_000
    walled = {x["phase"]: x["ranks"] for x in doc["mpi"]["stonewall"]}
    assert [x["items_per_worker"] for x in walled["create"]] == [r["items_per_worker"] for r in create["mpi"]["ranks"]]
    # stat (faster than create) works on exactly the items each thread of each rank created ...
    stat = phases["stat"]
    assert not stat["stonewalled"]
    for r, made in zip(stat["mpi"]["ranks"], walled["create"]):
        assert r["items_per_worker"] == made["items_per_worker"]
    # ... and remove on at most those (it has its own 0.3 s); rmdir takes the rest with the tree
    for r, made in zip(phases["remove"]["mpi"]["ranks"], walled["create"]):
        assert all(x <= y for x, y in zip(r["items_per_worker"], made["items_per_worker"]))
    assert any(w["code"] == "stonewalled" for w in doc["warnings"])
    assert leftovers(d) == []


FAILING_HOOK = textwrap.dedent("""
    import os, sys
    from storlab.measure.mpi.orchestrator import MetaRankHooks
    from storlab.cli.main import main

    if os.environ["PMI_RANK"] == sys.argv[1]:
        poll = MetaRankHooks.poll

        def failing_poll(self, phase, run):
            poll(self, phase, run)
            if phase == "create" and run.progress()[2] > 500:
                raise RuntimeError("injected failure")
        MetaRankHooks.poll = failing_poll
    sys.exit(main(["meta", *sys.argv[2:]]))
""")


@mpi
@pytest.mark.parametrize("n,bad", [(2, 0), (4, 2)])
def test_a_rank_whose_hook_raises_ends_every_rank_and_leaves_nothing(shm_dir, n, bad):
    d = Path(shm_dir)
    args = ["--target", str(d), "--dir", "shared", "--threads", "2", "--files-per-thread", "4000000",
            "--json", str(d / "out.json"), "--no-store", "--quiet", "--rank-timeout", "5s"]
    t0 = time.monotonic()
    p = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, "-c", FAILING_HOOK, str(bad), *args],
                       capture_output=True, text=True, timeout=60)
    wall = time.monotonic() - t0
    doc = json.loads((d / "out.json").read_text())
    assert wall < 20, f"took {wall:.1f} s"
    assert p.returncode == 1
    check_schema(doc)
    assert doc["complete"] is False and doc["stop_reason"] == "error"
    assert doc["error"].startswith(f"rank {bad} (node ") and "RuntimeError: injected failure" in doc["error"]
    assert doc["mpi"]["failed_rank"] == bad
    create = by_name(doc)["create"]
    others = [r for r in create["mpi"]["ranks"] if r["rank"] != bad]
    assert len(others) == n - 1 and all(r["stop_reason"] == "error" and r["ops"] > 0 for r in others)
    assert all(r["end_s"] < 10 for r in others)      # stopped long before 4 M files each
    assert doc["cleanup"]["error"] is None and doc["cleanup"]["files_removed"] > 0
    assert leftovers(d) == []


@mpi
def test_a_rank_whose_target_is_not_a_directory_fails_before_any_phase(shm_dir):
    d = Path(shm_dir)
    for r in (0, 1, 3):
        (d / f"t{r}").mkdir()
    (d / "t2").write_text("in the way")
    p, doc, wall = meta_run(4, ["--target", f"{d}/t{{rank}}", "--files-per-thread", "100", "--rank-timeout", "5s"], d)
    assert wall < 20, f"took {wall:.1f} s"
    assert p.returncode == 1
    assert doc["error"].startswith("rank 2 (node ") and "not a directory" in doc["error"]
    assert doc["mpi"]["failed_rank"] == 2
    assert "storlab meta: error: rank 2" in p.stderr
    assert leftovers(d) == sorted(str(d / f"t{r}") for r in range(4))


@contextlib.contextmanager
def tmpfs(path: Path, options: str):
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount tmpfs: {r.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@mpi
@pytest.mark.root
def test_a_rank_out_of_inodes_stops_every_rank_naming_it_and_each_rank_removes_its_files(shm_dir):
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tiny tmpfs")
    d = Path(shm_dir)
    (d / "big").mkdir()
    with tmpfs(d / "small", "size=1m,nr_inodes=200") as small:
        common = ["--files-per-thread", "4000000", "--threads", "2", "--rank-timeout", "5s"]
        p, doc, wall = mpirun([(1, [*common, "--target", str(d / "big")]), (1, [*common, "--target", str(small)])],
                              ["--quiet"], d / "out.json", timeout_s=60, command="meta")
        assert wall < 30, f"took {wall:.1f} s"
        assert p.returncode == 1
        assert doc["error"].startswith("rank 1 (node ") and "No space left on device" in doc["error"]
        assert f"create of {small}/storlab-meta-" in doc["error"]
        ranks = by_name(doc)["create"]["mpi"]["ranks"]
        assert ranks[0]["ops"] > 0 and ranks[0]["stop_reason"] == "error"
        assert [c["files_removed"] for c in doc["cleanup"]["ranks"]] == [r["ops"] for r in ranks]
        assert leftovers(d / "big", small) == []


# -- without MPI: the merging and the window count ----------------------------------------------
def test_count_in_window_interpolates_between_samples():
    samples = [(0.0, 0), (1.0, 100), (2.0, 300)]
    assert count_in_window(samples, 0.5, 1.5) == pytest.approx(50 + 100)
    assert count_in_window(samples, -1.0, 5.0) == 300          # outside the samples: held constant
    assert count_in_window(samples, 1.5, 1.5) == 0


def _phase(ops, start_unix_s, offset_s, spans, buckets):
    workers = [{"id": i, "target": f"/t/w{i}", "start_s": a, "end_s": b, "ops": ops // len(spans),
                "stonewalled": False, "read_bytes": 0, "read_ops": 0, "write_bytes": 0, "write_ops": 0}
               for i, (a, b) in enumerate(spans)]
    n = stats.count(buckets)
    return {"name": "create", "complete": True, "stop_reason": "done", "error": None, "error_kind": None,
            "ops": ops, "seconds": max(b for _, b in spans), "ops_per_s": 0.0,
            "lat_ns": {"min": 1000, "mean": 1000.0 * (1 + (n % 3)), "stddev": 0.0, "p50": 0, "p90": 0,
                       "p99": 0, "p999": 0, "max": 5000},
            "lat_hist": {"scheme": stats.SCHEME, "buckets": buckets},
            "items_per_worker": [ops // len(spans)] * len(spans), "stonewalled": False, "stonewall_s": None,
            "bytes": 0, "bw_bytes": 0.0, "start_unix_s": start_unix_s, "offset_s": offset_s, "workers": workers}


def test_merge_applies_clock_offsets_and_sums_operations():
    h0 = stats.histogram([1000] * 40)
    h1 = stats.histogram([3000] * 60)
    # rank 1's clock is 0.5 s ahead of rank 0's: its start of 100.7 is 100.2 on rank 0's clock
    a = _phase(40, 100.0, 0.0, [(0.0, 1.0), (0.0, 1.0)], h0)
    b = _phase(60, 100.7, -0.5, [(0.0, 1.0), (0.0, 1.0)], h1)
    m = merge_meta_phase([a, b], window_ops=[32.0, 48.0], nodes=["n0", "n1"])
    assert m["ops"] == 100 and m["items_per_worker"] == [20, 20, 30, 30]
    assert m["seconds"] == pytest.approx(1.2)                     # 0 to rank 1's end at 0.2 + 1.0
    assert m["ops_per_s"] == pytest.approx(100 / 1.2)
    agg = m["aggregate"]
    assert agg["deskew_window_s"] == pytest.approx([0.2, 1.0])
    assert agg["deskew_ops_per_s"] == pytest.approx(80 / 0.8)
    assert m["lat_hist"]["buckets"] == stats.merge(h0, h1)
    assert m["mpi"]["last_done"]["rank"] == 1 and m["mpi"]["slowest_ranks"][0]["rank"] == 0


def test_merge_of_a_missing_rank_is_incomplete_and_names_it():
    a = _phase(40, 100.0, 0.0, [(0.0, 1.0)], stats.histogram([1000] * 40))
    m = merge_meta_phase([a, None], nodes=["n0", "n1"])
    assert m["complete"] is False and m["error"] == "no result from rank 1"
    assert m["mpi"]["missing_ranks"] == [1] and m["ops"] == 40
