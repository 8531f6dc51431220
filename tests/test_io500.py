"""`storlab io500` (suites/io500/, output/io500_files.py, cli/io500.py): io500's score and
score hash checked against a real io500 run's result.txt, and whole runs with one rank on
/dev/shm: every phase in io500's order, result files io500's tooling reads, nothing left behind,
refusals before anything is written, and a SIGTERM that keeps the phases done."""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from storlab.errors import TargetError
from storlab.jobs.io500.phases import PHASES
from storlab.jobs.io500.translator import translate
from storlab.measure.ranks import LocalRanks
from storlab.output.io500_files import render_result, render_summary, score_hash
from storlab.suites.io500.find import find_files
from storlab.suites.io500.folders import check_datadir
from storlab.suites.io500.ior import ior_rank_offset
from storlab.suites.io500.mdtest import mdtest_stride
from storlab.suites.io500.run import run as run_io500
from storlab.suites.io500.score import calc_score, score_groups

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "io500")
GROUP = dict(PHASES)


def _io500_result(path: str) -> tuple[list[dict], dict[str, str]]:
    """The phases ({name, group, score}) and the [SCORE] section of an io500 result.txt."""
    phases, score, section = [], {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
                continue
            if "=" not in line or line.startswith(";"):
                continue
            key, value = (x.strip() for x in line.split("=", 1))
            if section == "SCORE":
                score[key] = value
            elif key == "score" and section in GROUP:
                phases.append({"name": section, "group": GROUP[section], "score": float(value)})
    return phases, score


def test_score_is_io500s_on_a_real_run():
    # tests/fixtures/io500/io500-result.txt: `mpiexec -n 2 io500 small.ini` (io500 02091cf, tmpfs)
    phases, printed = _io500_result(os.path.join(FIXTURES, "io500-result.txt"))
    assert len(phases) == 13
    bw, md, total = calc_score(phases)
    # result.txt holds each phase's score to 6 decimals; io500 averaged the unrounded values
    assert printed["BW"] == "2.251563" and bw == pytest.approx(2.251563, abs=2e-6)
    assert printed["MD"] == "261.111828" and md == pytest.approx(261.111828, abs=2e-6)
    assert printed["SCORE"] == "24.246847 [INVALID]" and total == pytest.approx(24.246847, abs=2e-6)
    # the score hash, from the values as printed, is the one io500 wrote
    doc = {"io500": {"version": "io500-02091cf"}, "phases": phases,
           "score": {"BW": 2.251563, "MD": 261.111828, "SCORE": 24.246847, "valid": False}}
    assert score_hash(doc) == printed["hash"] == "9FD280A"
    doc["score"]["valid"] = True
    assert score_hash(doc) != printed["hash"]


def test_a_score_at_or_below_zero_is_skipped_in_the_mean():
    phases = [{"name": "a", "group": "BW", "score": 4.0}, {"name": "b", "group": "BW", "score": 0.0},
              {"name": "c", "group": "BW", "score": -1.0}, {"name": "d", "group": "BW", "score": 1.0},
              {"name": "e", "group": "MD", "score": 9.0}, {"name": "x", "group": "", "score": 100.0}]
    bw, md, total = calc_score(phases)
    assert bw == pytest.approx(2.0) and md == pytest.approx(9.0) and total == pytest.approx(18 ** 0.5)
    assert score_groups(phases)["BW"]["skipped"] == ["b", "c"]
    assert calc_score([{"name": "a", "group": "BW", "score": 0.0}]) == (0.0, 0.0, 0.0)


def test_find_looks_at_names_sizes_and_times(tmp_path):
    old = tmp_path / "a01"
    old.write_bytes(b"x" * 3901)
    os.utime(old, (1000, 1000))
    (tmp_path / "b01").write_bytes(b"x" * 3901)        # found
    (tmp_path / "c01").write_bytes(b"x" * 10)          # wrong size
    (tmp_path / "d02").write_bytes(b"x" * 3901)        # wrong name
    (tmp_path / "sub").mkdir()
    subdirs, total, found, errors = find_files([str(tmp_path)], newer_than=2000.0, size=3901)
    assert (subdirs, total, found, errors) == ([str(tmp_path / "sub")], 4, 1, 0)


def _config(tmp: str, stonewall: int = 1, extra: str = "") -> str:
    os.makedirs(os.path.join(tmp, "data"), exist_ok=True)
    path = os.path.join(tmp, "c.ini")
    with open(path, "w") as f:
        f.write(f"[global]\ndatadir = {tmp}/data\nresultdir = {tmp}/res\n[debug]\nstonewall-time = {stonewall}\n"
                "[ior-easy]\ntransferSize = 1m\nblockSize = 16m\n[mdtest-easy]\nn = 300\n"
                f"[ior-hard]\nsegmentCount = 200\n[mdtest-hard]\nn = 200\n{extra}")
    return path


def test_a_whole_run_on_one_rank(shm_dir_path):
    shm_dir = shm_dir_path
    cfg = _config(str(shm_dir))
    doc = run_io500(translate(cfg), LocalRanks(), argv=["storlab", "io500"], timestamp="T1")
    assert [p["name"] for p in doc["phases"]] == [n for n, _ in PHASES]
    by = {p["name"]: p for p in doc["phases"]}
    assert by["ior-easy-write"]["details"]["bytes"] == 16 << 20           # blockSize reached
    assert by["ior-hard-write"]["details"]["bytes"] == 200 * 47008        # segmentCount reached
    for name in ("ior-easy-write", "ior-hard-write"):   # the one fsync per rank (IOR -e), timed inside the phase
        [fsync_s] = by[name]["details"]["fsync_s"]
        assert 0 <= fsync_s < by[name]["seconds"]
    assert by["mdtest-easy-write"]["details"]["items"] == 300
    assert by["mdtest-hard-read"]["details"]["items"] == by["mdtest-hard-delete"]["details"]["items"] == 200
    # read back verified as IOR -R does: every transfer compared with what was written
    assert by["ior-easy-read"]["details"]["verified_transfers"] == 16 and by["ior-hard-read"]["details"][
        "verified_transfers"] == 200
    assert by["ior-easy-read"]["details"]["mismatched_transfers"] == by["ior-hard-read"]["details"][
        "mismatched_transfers"] == 0
    # find looked at every file: 1 ior-easy + 1 ior-hard + 300 + 200 mdtest files; found the
    # mdtest-hard files (3901 bytes, newer than the timestamp) whose names hold "01"
    assert by["find"]["details"]["total_files"] == 502 and by["find"]["details"]["found"] > 0
    assert all(p["score"] > 0 for p in doc["phases"] if p["group"])
    # a 1 s stonewall: invalid, with io500's reason, and the write phases judged as io500 does
    assert doc["io500"]["run_invalid"] == ["stonewall-time 1s != 300s"] and not doc["score"]["valid"]
    assert "Runtime is smaller than expected minimum runtime" in by["ior-hard-write"]["judged"]
    assert os.listdir(shm_dir / "data") == []                             # everything removed
    res = shm_dir / "res" / "T1"
    assert os.path.exists(res / "timestampfile")
    text = render_result(doc)
    assert "[SCORE]\nMD              = " in text and f"hash            = {score_hash(doc)}" in text
    assert render_summary(doc).splitlines()[-1].startswith("[SCORE ] Bandwidth ")


_EVERY_PHASE_OFF = "".join(f"[{s}]\nrun = FALSE\n" for s in ("ior-easy", "mdtest-easy", "ior-hard", "mdtest-hard",
                                                             "find", "find-easy", "find-hard", "mdworkbench"))


@pytest.mark.parametrize("timestamped", [True, False])
def test_a_missing_datadir_is_made_as_io500_makes_it_and_removed_afterwards(shm_dir_path, timestamped):
    d = shm_dir_path
    cfg = _config(str(d), extra=_EVERY_PHASE_OFF + f"[global]\ntimestamp-datadir = {timestamped}\n")
    os.rmdir(d / "data")
    doc = run_io500(translate(cfg), LocalRanks(), argv=[], timestamp="T")
    assert doc["io500"]["datadir_made"] and doc["complete"]
    assert not os.path.exists(d / "data")                  # storlab made it, so storlab removed it
    assert os.path.exists(d / "res" / "T" / "timestampfile")


def test_a_datadir_there_is_kept(shm_dir_path):
    d = shm_dir_path
    doc = run_io500(translate(_config(str(d), extra=_EVERY_PHASE_OFF)), LocalRanks(), argv=[], timestamp="T")
    assert not doc["io500"]["datadir_made"] and os.listdir(d / "data") == []


def test_refused_before_anything_is_written(shm_dir_path):
    shm_dir = shm_dir_path
    no_parent = _config(str(shm_dir), extra=f"[global]\ndatadir = {shm_dir}/no/data\n")
    with pytest.raises(TargetError, match="does not exist and neither does its parent"):
        run_io500(translate(no_parent), LocalRanks(), argv=[], timestamp="T")
    assert not os.path.exists(shm_dir / "res") and not os.path.exists(shm_dir / "no")
    under_dev = _config(str(shm_dir), extra="[global]\ndatadir = /dev/storlab-io500-test\n")
    with pytest.raises(TargetError, match="datadir /dev/storlab-io500-test"):
        run_io500(translate(under_dev), LocalRanks(), argv=[], timestamp="T")
    assert not os.path.exists("/dev/storlab-io500-test") and not os.path.exists(shm_dir / "res")
    cfg = _config(str(shm_dir), extra="")
    with open(cfg, "a") as f:
        f.write("[global]\ntimestamp-datadir = FALSE\n")
    (shm_dir / "data" / "precious.dat").write_text("mine")
    with pytest.raises(TargetError, match="holds files storlab did not make"):
        run_io500(translate(cfg), LocalRanks(), argv=[], timestamp="T")
    assert os.listdir(shm_dir / "data") == ["precious.dat"]
    assert check_datadir("/proc/1", False) is not None


def test_cli_writes_io500s_files_and_a_document(shm_dir_path, tmp_path):
    shm_dir = shm_dir_path
    cfg = _config(str(shm_dir))
    out = tmp_path / "doc.json"
    p = subprocess.run([sys.executable, "-m", "storlab", "io500", cfg, "--timestamp", "T2", "--json", str(out),
                        "--quiet"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    res = shm_dir / "res" / "T2"
    assert sorted(os.listdir(res)) == ["config-orig.ini", "config.ini", "result.txt", "result_summary.txt",
                                       "storlab-io500.json", "timestampfile"]
    doc = json.loads(out.read_text())
    assert doc["kind"] == "io500" and doc["translation"]["format"] == "io500"
    assert "config-hash     = " + doc["io500"]["config_hash"] in (res / "result.txt").read_text()
    emitted = subprocess.run([sys.executable, "-m", "storlab", "io500", cfg, "--emit", "-"],
                             capture_output=True, text=True, timeout=60)
    assert emitted.returncode == 0 and "[[phase]]" in emitted.stdout


def test_sigterm_keeps_the_phases_done_and_removes_the_files(shm_dir_path, tmp_path):
    shm_dir = shm_dir_path
    cfg = _config(str(shm_dir), stonewall=3, extra="[ior-easy]\nblockSize = 100000m\n")
    out = tmp_path / "doc.json"
    p = subprocess.Popen([sys.executable, "-m", "storlab", "io500", cfg, "--timestamp", "T3", "--json", str(out),
                          "--quiet", "--no-store"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the result folder is made just before the first phase, ior-easy-write (3 s): signal inside it
    deadline = time.monotonic() + 60
    while not (shm_dir / "res" / "T3").exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "interrupted"
    assert doc["phases"][-1]["complete"] is False and "SIGTERM" in doc["error"]
    assert not doc["score"]["valid"] and any("interrupted" in r for r in doc["io500"]["run_invalid"])
    assert os.listdir(shm_dir / "data") == []
    assert (shm_dir / "res" / "T3" / "result.txt").exists()


@pytest.fixture
def shm_dir_path(shm_dir) -> Path:
    return Path(shm_dir)


def test_stored_runs_show_and_compare_phase_by_phase(shm_dir_path, capsys):
    from storlab.cli.main import main

    cfg = _config(str(shm_dir_path))
    for stamp in ("A", "B"):
        assert main(["io500", cfg, "--timestamp", stamp, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["results", "list", "--kind", "io500", "--json"]) == 0
    ids = [r["run_id"] for r in json.loads(capsys.readouterr().out)]
    assert len(ids) == 2
    assert main(["results", "show", ids[0]]) == 0
    assert "[SCORE ] Bandwidth " in capsys.readouterr().out
    assert main(["results", "compare", *ids, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    scores = {r["phase"]: r for r in rows if r["metric"] == "score"}
    assert list(scores)[:2] == ["ior-easy-write", "mdtest-easy-write"] and "SCORE" in scores
    assert all(r["ratios"][0] is not None and r["ratios"][0] > 0 for name, r in scores.items()
               if name not in ("timestamp",))


def test_neighbour_shifts_are_iors_and_mdtests():
    # IOR -C -Q q: by-slot mapping shifts by the ranks of a node; on one node that is no shift at all
    assert [ior_rank_offset(["a"] * n, 1) for n in (1, 2, 4)] == [0, 0, 0]
    assert ior_rank_offset(["a", "a", "b", "b"], 1) == 2 and ior_rank_offset(["a", "a", "b", "b"], 2) == 0
    assert ior_rank_offset(["a", "a", "a", "b", "b", "b"], 2) == 0 and ior_rank_offset(["a", "b", "c"], 2) == 2
    assert ior_rank_offset(["a", "b", "a", "b"], 1) == 1          # round-robin: the next rank is on the next node
    # mdtest -N 1: one rank further on one node; a node further with several nodes by slot
    assert [mdtest_stride(["a"] * n) for n in (1, 2, 4)] == [1, 1, 1]
    assert mdtest_stride(["a", "a", "b", "b"]) == 2 and mdtest_stride(["a", "b", "a", "b"]) == 1


def test_extended_mode_runs_md_workbench_find_easy_and_find_hard(shm_dir_path):
    from storlab.jobs.io500.phases import PHASES_EXTENDED
    from storlab.output.io500_files import extended_hash, render_result

    d = shm_dir_path
    cfg = _config(str(d), extra="[mdworkbench]\nprecreatePerSet = 20\nfilesPerProc = 10\n")
    doc = run_io500(translate(cfg), LocalRanks(), argv=["storlab", "io500"], timestamp="X", mode="extended")
    assert [p["name"] for p in doc["phases"]] == [n for n, _ in PHASES_EXTENDED]
    by = {p["name"]: p for p in doc["phases"]}
    # find-easy: every mdtest-easy file looked at, names with 01 found; find-hard: mdtest-hard only
    assert by["find-easy"]["details"]["total_files"] == 300 and by["find-easy"]["details"]["found"] > 0
    assert by["find-hard"]["details"]["total_files"] == 200
    assert by["find-hard"]["details"]["found"] == by["find"]["details"]["found"]
    # md-workbench: 10 sets of 20 files made, two iterations of 10 files per set, the sets emptied
    bench = by["mdworkbench-bench"]
    assert bench["ran"] and bench["optional"] and bench["valid"] and bench["score"] > 0
    assert [r["ops"]["obj_read"] for r in bench["details"]["results"]] == [100, 100]
    assert by["mdworkbench-create"]["details"]["results"][0]["ops"]["obj_create"] == 200
    assert by["mdworkbench-delete"]["details"]["results"][0]["ops"]["obj_delete"] == 200
    # the standard score leaves the optional phases out; [SCOREX] takes them in
    standard = [p for p in doc["phases"] if p["group"] and not p["optional"]]
    assert doc["score"]["SCORE"] == pytest.approx(calc_score(standard)[2])
    x = doc["score"]["extended"]
    md = [p["score"] for p in doc["phases"] if p["group"] == "MD" and p["score"] > 0]
    assert x["MD"] == pytest.approx(math.prod(md) ** (1 / len(md))) and len(md) == 11
    text = render_result(doc)
    assert f"[SCOREX]\nMD              = {x['MD']:f}\n" in text and f"hash            = {extended_hash(doc)}" in text
    assert os.listdir(d / "data") == []


def test_extended_mode_with_md_workbench_switched_off_scores_it_0_as_io500(shm_dir_path):
    cfg = _config(str(shm_dir_path), extra="[mdworkbench]\nrun = FALSE\n")
    doc = run_io500(translate(cfg), LocalRanks(), argv=["storlab", "io500"], timestamp="X", mode="extended")
    by = {p["name"]: p for p in doc["phases"]}
    assert not by["mdworkbench-bench"]["ran"] and by["mdworkbench-bench"]["score"] == 0
    # io500 still prints the sizes it derives from mdtest-easy-write's rate and the command
    rate = by["mdtest-easy-write"]["score"]
    per_set = int(rate * 1 * 1000 / 1) // 10
    assert by["mdworkbench-bench"]["head"] == {"filesPerProc": str(per_set), "precreatePerSet": str(per_set)}
    assert by["mdworkbench-bench"]["exe"].endswith(f"-P={per_set} -I={per_set} -2 -R=2 -X")
    assert not doc["score"]["extended"]["valid"]


def test_phases_switched_off_between_create_and_delete_leave_delete_working(shm_dir_path):
    # mdtest-hard-stat and -read off: delete still removes every file mdtest-hard-write made
    cfg = _config(str(shm_dir_path), extra="[mdtest-hard-stat]\nrun = FALSE\n[mdtest-hard-read]\nrun = FALSE\n"
                  "[mdtest-easy-stat]\nrun = FALSE\n")
    doc = run_io500(translate(cfg), LocalRanks(), argv=["storlab", "io500"], timestamp="T")
    by = {p["name"]: p for p in doc["phases"]}
    assert not by["mdtest-hard-read"]["ran"] and by["mdtest-hard-delete"]["complete"]
    assert by["mdtest-hard-delete"]["details"]["items"] == 200 and by["mdtest-easy-delete"]["details"]["items"] == 300
    assert os.listdir(shm_dir_path / "data") == []


def test_every_phase_storlab_runs_has_its_code_and_no_other_phase_has():
    # io500's table (jobs/io500/phases.py) and the code the suite attaches to each record
    from storlab.jobs.io500.phases import TABLE
    from storlab.suites.io500.phases import CODE, suite_phases

    assert set(CODE) == {p.name for p in TABLE}
    steps = suite_phases("extended")
    assert [s.phase for s in steps] == list(TABLE)
    assert [s.phase.name for s in suite_phases("standard")] == [n for n, _ in PHASES]


class _EngineRun:
    """An engine run that goes on until it is interrupted, or ends by itself after 50 waits."""

    def __init__(self) -> None:
        self.interrupted = False
        self.waits = 0

    def wait(self, timeout_s: float) -> bool:
        self.waits += 1
        return self.interrupted or self.waits > 50

    def interrupt(self) -> None:
        self.interrupted = True


def test_another_ranks_failure_interrupts_an_engine_wait():
    from storlab.measure.ranks import RankFailure
    from storlab.suites.io500.engine import RankWatch, wait

    class OneFailed(LocalRanks):
        failure = RankFailure(1, "rank 1 (node n1) died")

    run = _EngineRun()
    wait(run, "ior-easy-write", RankWatch(OneFailed()))      # returns: the phase ended, no signal
    assert run.interrupted


def test_a_signal_recorded_during_an_engine_wait_stops_the_phase_and_the_run(monkeypatch):
    from storlab.signals import STOP
    from storlab.suites.io500.engine import RankWatch, wait

    monkeypatch.setattr(STOP, "received", [signal.SIGTERM])
    run = _EngineRun()
    with pytest.raises(KeyboardInterrupt):
        wait(run, "mdtest-easy-write", RankWatch(LocalRanks()))
    assert run.interrupted


def test_engine_errors_map_as_every_benchmarks_do():
    from storlab import _core
    from storlab.errors import SpecError, TargetError
    from storlab.suites.io500.engine import core_failure

    e = core_failure(_core.CoreError("spec", "bs: 0 is below 1"), "ior-easy-write")
    assert type(e) is SpecError and str(e) == "ior-easy-write: bs: 0 is below 1"
    assert type(core_failure(_core.CoreError("target", "gone"), "mdtest-hard")) is TargetError
