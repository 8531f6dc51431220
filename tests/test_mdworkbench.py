"""md-workbench in `storlab io500 --mode extended` (suites/io500/mdworkbench.py) beside IOR's real
md-workbench: the same options on tmpfs, and every operation count of every phase (sets and files
made, read, stat'ed, removed) equal to the real one's (`--print-detailed-stats`), at 1 rank in
process and at 2 ranks under mpiexec; the rates, latency figures and io500's lines reported."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from storlab.jobs.io500.translator import config_from_ini, translate
from storlab.measure.ranks import LocalRanks
from storlab.suites.io500.mdworkbench import quantiles
from storlab.suites.io500.run import run as run_io500

# every phase but md-workbench's off: only md-workbench and the timestamp run
OTHERS_OFF = "".join(f"[{s}]\nrun = FALSE\n" for s in ("ior-easy", "mdtest-easy", "ior-hard", "mdtest-hard", "find",
                                                       "find-easy", "find-hard"))
COUNTS = ("dset_create", "dset_delete", "obj_create", "obj_read", "obj_stat", "obj_delete")


def _md_workbench() -> str:
    """The real md-workbench of the peer builds (shared/peers/build-ior.sh or build-io500.sh)."""
    cands = [os.path.join(os.environ["STORLAB_IO500"], "bin") if os.environ.get("STORLAB_IO500") else None,
             os.path.dirname(os.environ["STORLAB_IOR"]) if os.environ.get("STORLAB_IOR") else None, "/tmp/io500b/bin"]
    for folder in cands:
        if folder and os.access(os.path.join(folder, "md-workbench"), os.X_OK):
            return os.path.join(folder, "md-workbench")
    pytest.skip("md-workbench not built: run shared/peers/build-ior.sh (needs mpicc) and set STORLAB_IOR, "
                "or STORLAB_IO500 to io500's folder")


def _mpiexec() -> str | None:
    return shutil.which("mpiexec") or shutil.which("mpiexec", path=os.path.dirname(sys.executable))


def _real_counts(binary: str, exe: str, prefix: str, ranks: int) -> list[dict[str, int]]:
    """Run md-workbench with io500's command `exe` (its folder moved to `prefix`, detailed stats
    on) and return each phase's global counts, in order (precreate; benchmark x 2; cleanup)."""
    args = [a for a in exe.split()[1:] if a != "--process-reports"]
    args = [f"-o={prefix}" if a.startswith("-o=") else a for a in args]
    args = [f"--run-info-file={prefix}.status" if a.startswith("--run-info-file=") else a for a in args]
    mpiexec = _mpiexec()
    cmd = [binary, *args, "--print-detailed-stats"]
    if mpiexec:
        cmd = [mpiexec, "-n", str(ranks), *cmd]
    elif ranks > 1:
        pytest.skip("no mpiexec to run md-workbench with")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    out = []
    for line in p.stdout.splitlines():
        fields = line.split("\t")
        if fields[0].strip() in ("precreate", "benchmark", "cleanup") and len(fields) > 7:
            out.append(dict(zip(COUNTS, map(int, fields[1:7]))))
    return out


def _real_run(binary: str, doc: dict, prefix: str, ranks: int) -> list[dict[str, int]]:
    """The real md-workbench run with the commands of `doc`'s three md-workbench phases, in order."""
    exe = {p["name"]: p["exe"] for p in doc["phases"]}
    return [counts for name in ("mdworkbench-create", "mdworkbench-bench", "mdworkbench-delete")
            for counts in _real_counts(binary, exe[name], prefix, ranks)]


def _ini(d: Path, precreate: int, files: int, waiting: float = 0.0) -> Path:
    (d / "data").mkdir(exist_ok=True)
    cfg = d / "c.ini"
    cfg.write_text(f"[global]\ndatadir = {d}/data\nresultdir = {d}/res\n[debug]\nstonewall-time = 1\n{OTHERS_OFF}"
                   f"[mdworkbench]\nprecreatePerSet = {precreate}\nfilesPerProc = {files}\nwaitingTime = {waiting}\n")
    return cfg


def _storlab_counts(doc: dict) -> list[dict[str, int]]:
    by = {p["name"]: p for p in doc["phases"]}
    return [r["ops"] for name in ("mdworkbench-create", "mdworkbench-bench", "mdworkbench-delete")
            for r in by[name]["details"]["results"]]


def _check_reported(doc: dict) -> None:
    """io500's lines and md-workbench's figures: each phase's rate, longest operation and latencies."""
    by = {p["name"]: p for p in doc["phases"]}
    create, bench, delete = by["mdworkbench-create"], by["mdworkbench-bench"], by["mdworkbench-delete"]
    for p in (create, bench, delete):
        assert p["valid"] and p["score"] > 0 and float(p["pairs"]["maxOpTime"]) > 0, p["name"]
        assert list(p["head"]) == ["filesPerProc", "precreatePerSet"]
    first, second = bench["details"]["results"]
    assert bench["score"] == pytest.approx(second["rate_iops"] / 1000)
    assert float(bench["pairs"]["scoreIteration0"]) == pytest.approx(first["rate_iops"] / 1000, rel=1e-5)
    # md-workbench's benchmark rate: 4 operations per file read, over the slowest rank's time
    assert second["rate_iops"] == pytest.approx(second["ops"]["obj_read"] * 4 / second["seconds"])
    assert set(second["latency_s"]) == {"read", "stat", "create", "delete"}
    assert set(create["details"]["results"][0]["latency_s"]) == {"create"}
    assert bench["group"] == "MD" and create["group"] == "" and delete["group"] == ""


def test_quantiles_are_md_workbenchs():
    # compute_histogram: position round(q (n - 1) + 0.49); the median of an even count is the mean of two
    t = [float(i) for i in range(1, 11)]
    assert quantiles(t) == {"min": 1.0, "q1": 4.0, "median": 5.5, "q3": 8.0, "q90": 10.0, "q99": 10.0, "max": 10.0}
    assert quantiles([3.0, 1.0, 2.0])["median"] == 2.0 and quantiles([]) == {}


def test_only_one_of_md_workbenchs_sizes_is_refused_in_one_line():
    from storlab.jobs.translation import Refusal

    with pytest.raises(Refusal) as e:
        config_from_ini("[mdworkbench]\nprecreatePerSet = 5\n", "c.ini")
    assert str(e.value).count("\n") == 0
    assert "c.ini:2" in str(e.value) and "mdworkbench.precreatePerSet" in str(e.value)
    assert "filesPerProc and precreatePerSet" in str(e.value)


@pytest.mark.parametrize("waiting", [0.0, 0.5])
def test_one_rank_counts_agree_with_the_real_md_workbench(shm_dir, waiting):
    binary = _md_workbench()
    d = Path(shm_dir)
    doc = run_io500(translate(str(_ini(d, precreate=30, files=20, waiting=waiting))), LocalRanks(),
                    argv=["storlab", "io500"], timestamp="T", mode="extended")
    assert f" -t={waiting:f} " in {p["name"]: p for p in doc["phases"]}["mdworkbench-bench"]["exe"]
    mine = _storlab_counts(doc)
    # precreate: 10 sets and 30 x 10 files; each iteration 20 x 10 files stat'ed, read, removed and
    # made; cleanup: the 30 x 10 files left and the sets
    assert mine[0]["dset_create"] == 10 and mine[0]["obj_create"] == 300
    assert mine[1] == {"dset_create": 0, "dset_delete": 0, "obj_create": 200, "obj_read": 200, "obj_stat": 200,
                       "obj_delete": 200}
    assert mine[3]["obj_delete"] == 300 and mine[3]["dset_delete"] == 10
    assert _real_run(binary, doc, str(d / "real"), 1) == mine
    _check_reported(doc)
    assert os.listdir(d / "data") == [] and not os.path.exists(d / "real")


@pytest.mark.mpi
def test_two_ranks_counts_agree_with_the_real_md_workbench(shm_dir, tmp_path):
    from test_mpi_runs import MPIEXEC, _have_mpi4py

    if MPIEXEC is None or not _have_mpi4py():
        pytest.skip("no mpiexec or mpi4py (pip install 'storlab[mpi]')")
    binary = _md_workbench()
    d = Path(shm_dir)
    out = tmp_path / "doc.json"
    p = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "storlab", "io500", str(_ini(d, 25, 25)),
                        "--mode", "extended", "--timestamp", "T", "--json", str(out), "--quiet", "--no-store"],
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    mine = _storlab_counts(doc)
    # every rank reads set d of rank r - (d + 1): across the ranks, each file read once and verified
    assert [m["obj_read"] for m in mine[1:3]] == [2 * 250, 2 * 250]
    assert _real_run(binary, doc, str(d / "real"), 2) == mine
    _check_reported(doc)
    assert os.listdir(d / "data") == []


def test_a_run_stopped_inside_md_workbench_leaves_nothing(shm_dir, monkeypatch):
    # Ctrl-C in the benchmark, after precreate made 10 sets of 30 files: the run ends there, scored
    # as interrupted, and the clean-up removes md-workbench's folder (the run made it)
    from storlab.suites.io500.mdworkbench import Workbench

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(Workbench, "benchmark_iteration", interrupted)
    d = Path(shm_dir)
    doc = run_io500(translate(str(_ini(d, precreate=30, files=20))), LocalRanks(), argv=["storlab", "io500"],
                    timestamp="T", mode="extended")
    by = {p["name"]: p for p in doc["phases"]}
    assert by["mdworkbench-create"]["details"]["results"][0]["ops"]["obj_create"] == 300
    assert not by["mdworkbench-bench"]["complete"] and not doc["complete"] and not doc["score"]["extended"]["valid"]
    assert doc["cleanup"]["files_removed"] >= 300 and doc["cleanup"]["errors"] == []
    assert os.listdir(d / "data") == []
