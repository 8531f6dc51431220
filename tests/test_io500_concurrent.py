"""io500's proposed concurrent phase in `storlab io500 --mode extended` (suites/io500/concurrent.py):
its score rule against hand-worked numbers, the .ini keys of the proposal accepted or refused in
one line, and a whole extended run with one rank on /dev/shm, whose parts run on threads: each
part reports its own figures, the shares add up, the weighted score is recomputed from the
document, the parts start together, and io500's own phases, score and result.txt are untouched."""
from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from storlab.jobs.io500.phases import PHASES_EXTENDED
from storlab.jobs.io500.translator import translate, translate_text
from storlab.jobs.translation import Refusal
from storlab.measure.ranks import LocalRanks
from storlab.output.io500_files import proposal_lines, render_result
from storlab.output.views import VIEWS
from storlab.suites.io500.concurrent import PARTS, thread_team_size, weighted_score
from storlab.suites.io500.run import run as run_io500
from storlab.suites.io500.score import calc_score

GIB = float(1 << 30)


def test_the_score_is_the_geometric_mean_of_the_parts_per_process_times_all_processes():
    parts = {"ior-easy-write": {"score": 2.0, "procs": 2}, "ior-rnd1MB-read": {"score": 8.0, "procs": 4},
             "mdworkbench": {"score": 16.0, "procs": 4}}
    score, branch = weighted_score(parts, 10)
    # per process: 1, 2, 4 -> geometric mean 2, times 10 processes
    assert score == pytest.approx(20.0)
    # the branch's code leaves the first part out of the product but not out of the root
    assert branch == pytest.approx((2 * 4) ** (1 / 3) * 10)
    # a part given no process is left out of the mean
    parts["ior-easy-write"] = {"score": 0.0, "procs": 0}
    assert weighted_score(parts, 8)[0] == pytest.approx(math.sqrt(2 * 4) * 8)


def test_one_rank_runs_the_parts_on_the_smallest_team_of_threads_that_gives_each_a_thread():
    assert thread_team_size({"ior-easy-write": 0.2, "ior-rnd1MB-read": 0.4, "mdworkbench": 0.4}) == 5
    assert thread_team_size({"ior-easy-write": 0.25, "ior-rnd1MB-read": 0.25, "mdworkbench": 0.5}) == 4
    assert thread_team_size({"ior-easy-write": 0.5, "ior-rnd1MB-read": 0.5, "mdworkbench": 0.0}) == 2
    assert thread_team_size({"ior-easy-write": 0.001, "ior-rnd1MB-read": 0.5, "mdworkbench": 0.499}) is None


def test_the_proposals_keys_are_accepted_and_a_wrong_one_refused_in_one_line():
    t = translate_text("[concurrent]\nratio-write = 0.25\nratio-read = 0.25\n[ior-rnd1MB]\nblockSize = 4194304\n"
                       "[ior-rnd1MB-write]\nrun = TRUE\n")
    accepted = {m.key: m for m in t.mapped if m.how == "accepted"}
    assert {"concurrent.ratio-write", "concurrent.ratio-read", "ior-rnd1MB.blockSize", "ior-rnd1MB-write.run"} <= set(accepted)
    assert "proposed concurrent phase" in accepted["concurrent.ratio-write"].note
    # the proposal's sections stay out of io500 02091cf's config hash
    assert t.details["config_hash"] == translate_text("").details["config_hash"]
    for text, key in (("[concurrent]\nratio-write = 1.5\n", "concurrent.ratio-write"),
                      ("[concurrent]\nratio-write = 0.7\nratio-read = 0.5\n", "concurrent.ratio-read"),
                      ("[concurrent]\nratio = 0.5\n", "concurrent.ratio"),
                      ("[ior-rnd1MB]\nrandomPrefill = 4096\n", "ior-rnd1MB.randomPrefill"),
                      ("[ior-rnd1MB]\nblockSize = 1000\n", "ior-rnd1MB.blockSize")):
        with pytest.raises(Refusal) as e:
            translate_text(text)
        assert key in str(e.value) and "\n" not in str(e.value), text


@pytest.fixture
def shm_dir_path(shm_dir) -> Path:
    return Path(shm_dir)


def _config(tmp: str, extra: str = "") -> str:
    os.makedirs(os.path.join(tmp, "data"), exist_ok=True)
    path = os.path.join(tmp, "c.ini")
    with open(path, "w") as f:
        f.write(f"[global]\ndatadir = {tmp}/data\nresultdir = {tmp}/res\n[debug]\nstonewall-time = 1\n"
                "[ior-easy]\ntransferSize = 1m\nblockSize = 16m\n[mdtest-easy]\nn = 300\n"
                "[ior-hard]\nsegmentCount = 200\n[mdtest-hard]\nn = 200\n"
                "[mdworkbench]\nprecreatePerSet = 20\nfilesPerProc = 10\n"
                f"[ior-rnd1MB]\nblockSize = 4194304\nsegmentCount = 2\n{extra}")
    return path


def test_the_concurrent_phase_on_one_rank_runs_its_parts_on_threads_apart_from_the_score(shm_dir_path):
    d = shm_dir_path
    doc = run_io500(translate(_config(str(d))), LocalRanks(), argv=["storlab", "io500"], timestamp="X",
                    mode="extended")
    # io500's own phases and scores are 02091cf's: the proposals are apart
    assert [p["name"] for p in doc["phases"]] == [n for n, _ in PHASES_EXTENDED]
    scored = [p for p in doc["phases"] if p["group"]]
    assert doc["score"]["extended"]["SCORE"] == pytest.approx(calc_score(scored, extended=True)[2])
    assert "concurrent" not in render_result(doc) and "rnd1MB" not in render_result(doc)
    section = doc["proposals"]
    assert section["in_score"] is False and "phase-concurrent" in section["source"]
    by = {p["name"]: p for p in section["phases"]}
    assert list(by) == ["ior-rnd1MB-write", "concurrent"] and all(p["proposal"] for p in by.values())
    # ior-rnd1MB-write: random 1 MiB writes into each rank's region of one file, stopped by the stonewall
    rnd = by["ior-rnd1MB-write"]
    assert rnd["valid"] and rnd["details"]["region_bytes"] == 8 << 20 and rnd["details"]["bytes"] > 0
    assert rnd["score"] == pytest.approx(rnd["details"]["bytes"] / rnd["seconds"] / GIB)
    c = by["concurrent"]
    assert c["ran"] and c["valid"] and c["unit"] == "score", c
    det = c["details"]
    # one rank: 5 threads, divided 1 / 2 / 2 as io500 divides 5 processes by 0.2 / 0.4 / 0.4
    assert det["ranks_are"] == "threads of one process" and det["processes"] == 5
    assert det["procs"] == {"ior-easy-write": 1, "ior-rnd1MB-read": 2, "mdworkbench": 2}
    assert sum(det["procs"].values()) == det["processes"]
    members = [r for name in PARTS for r in det["members"][name]]
    assert sorted(members) == list(range(5)) and len(set(members)) == 5            # disjoint, every rank
    parts = det["parts"]
    for name in ("ior-easy-write", "ior-rnd1MB-read"):     # each part's score from its own figures
        p = parts[name]
        assert p["bytes"] > 0 and p["ops"] == p["bytes"] // (1 << 20) and p["errors"] == 0
        assert p["score"] == pytest.approx(p["bytes"] / p["seconds"] / GIB)
        assert sum(p["bytes_per_rank"]) == p["bytes"] and len(p["bytes_per_rank"]) == p["procs"]
        assert p["seconds"] >= 1.0                     # both run to the one deadline (the stonewall)
    md = parts["mdworkbench"]
    assert md["ops"]["obj_read"] == 2 * 10 * 10        # 2 ranks x 10 files x 10 sets, within the stonewall
    assert md["score"] == pytest.approx(md["ops"]["obj_read"] * 4 / md["seconds"] / 1000)
    # the weighted score, recomputed from the parts' figures in the document
    per = [parts[n]["score"] / parts[n]["procs"] for n in PARTS]
    assert [parts[n]["per_process"] for n in PARTS] == pytest.approx(per)
    assert c["score"] == pytest.approx(math.prod(per) ** (1 / 3) * 5)
    assert det["score_as_branch_code"] == pytest.approx((per[1] * per[2]) ** (1 / 3) * 5)
    # one clock: every part started after the same barrier
    assert det["start_spread_s"] == pytest.approx(max(det["start_unix"]) - min(det["start_unix"]))
    assert det["start_spread_s"] < 0.5
    assert c["seconds"] >= max(parts[n]["seconds"] for n in PARTS)
    lines = proposal_lines(doc)
    assert lines[1].startswith("[PROPOSAL]       concurrent") and "(not in SCORE)" in lines[1]
    # the printed table shows them after io500's own score lines; result files never do
    table = VIEWS["io500"].table(doc)
    assert table.index("[PROPOSAL]") > table.index("[SCOREX]") and all(line in table for line in lines)
    assert os.listdir(d / "data") == []                                   # nothing left behind


def test_without_the_random_file_the_read_part_is_invalid_and_says_why(shm_dir_path):
    extra = "[ior-rnd1MB-write]\nrun = FALSE\n[concurrent]\nratio-write = 0.5\nratio-read = 0.5\n"
    doc = run_io500(translate(_config(str(shm_dir_path), extra)), LocalRanks(), argv=["storlab", "io500"],
                    timestamp="X", mode="extended")
    by = {p["name"]: p for p in doc["proposals"]["phases"]}
    assert not by["ior-rnd1MB-write"]["ran"] and "run = FALSE" in by["ior-rnd1MB-write"]["reason"]
    c = by["concurrent"]
    assert c["details"]["procs"] == {"ior-easy-write": 1, "ior-rnd1MB-read": 1, "mdworkbench": 0}
    assert not c["valid"] and c["error"] == "ior-rnd1MB-write did not run: there is nothing to read"
    assert c["details"]["parts"]["ior-easy-write"]["bytes"] > 0 and c["score"] == 0.0
    assert os.listdir(shm_dir_path / "data") == []


def test_switched_off_or_standard_mode_runs_no_proposal(shm_dir_path):
    doc = run_io500(translate(_config(str(shm_dir_path), "[concurrent]\nrun = FALSE\n")), LocalRanks(),
                    argv=["storlab", "io500"], timestamp="X", mode="extended")
    c = {p["name"]: p for p in doc["proposals"]["phases"]}["concurrent"]
    assert not c["ran"] and c["reason"] == "switched off in the .ini (run = FALSE)"
    doc = run_io500(translate(_config(str(shm_dir_path))), LocalRanks(), argv=["storlab", "io500"], timestamp="Y")
    assert "proposals" not in doc


def test_a_part_that_fails_stops_the_other_parts_and_the_run_leaving_nothing(shm_dir_path, monkeypatch):
    import time

    from storlab.errors import TargetError
    from storlab.suites.io500 import concurrent

    real = concurrent._run_part

    def failing(part, deadline):
        if part.name == "mdworkbench" and part.run.rank == 1:
            raise TargetError("mdworkbench-concurrent: No space left on device")
        return real(part, deadline)

    monkeypatch.setattr(concurrent, "_run_part", failing)
    started = time.monotonic()
    # a 30 s stonewall (the last [debug] wins), without the time-based ior-rnd1MB-write before it
    extra = "[debug]\nstonewall-time = 30\n[ior-rnd1MB-write]\nrun = FALSE\n"
    doc = run_io500(translate(_config(str(shm_dir_path), extra)), LocalRanks(),
                    argv=["storlab", "io500"], timestamp="X", mode="extended")
    # the ior-easy part's time-based engine run stops at its next look, not at the 30 s stonewall
    assert time.monotonic() - started < 25
    c = {p["name"]: p for p in doc["proposals"]["phases"]}["concurrent"]
    assert not c["complete"] and "No space left on device" in c["error"]
    assert doc["complete"] is False and "No space left on device" in doc["error"]
    assert "ior-easy-read" not in {p["name"] for p in doc["phases"]}      # the run ended there
    assert not doc["io500"]["valid"]
    assert os.listdir(shm_dir_path / "data") == []
