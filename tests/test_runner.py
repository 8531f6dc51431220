"""Runner-level methodology: de-skew and straggler report, phases, hooks (null backend, real files)."""
from __future__ import annotations

import pytest
from storlab.jobs.job import resolve_job
from storlab.measure.benchmark import PhaseHooks
from storlab.measure.runner import run_job


def staggered_job(target: str, late_s: float = 0.4, time_s: str = "1s"):
    phases = [{"name": "staggered", "groups": [
        {"name": "early", "options": {}},
        {"name": "late", "options": {"start_delay": f"{late_s}s"}},
    ]}]
    return resolve_job({"target": [target], "size": "1m", "engine": "null", "null_delay": "1ms",
                        "time": time_s, "no_store": True}, phases=phases)


def test_deskew_with_a_worker_started_late(shm_dir):
    doc = run_job(staggered_job(f"{shm_dir}/d.dat"))
    p = doc["phases"][0]
    a = p["aggregate"]
    early, late = p["workers"]
    # The late worker starts no earlier than its 0.4 s delay (later on a loaded machine); every other
    # figure is checked against the workers' own measured times, not against the wall clock.
    assert 0.4 <= late["start_s"] < 0.7
    for w in (early, late):   # each worker runs 1 s from its own start (its deadline ends it)
        assert w["end_s"] - w["start_s"] == pytest.approx(1.0, abs=0.02)
    assert a["last_start_s"] == pytest.approx(late["start_s"])
    assert a["first_done_s"] == pytest.approx(early["end_s"])
    assert a["last_done_s"] == pytest.approx(late["end_s"])
    assert a["straggler_s"] == pytest.approx(a["last_done_s"] - a["first_done_s"])
    assert a["deskew_window_s"] == pytest.approx([a["last_start_s"], a["first_done_s"]])
    # both active in the window: the de-skewed rate is the sum of the two workers' own rates
    own_rate = sum(w["read_bytes"] / (w["end_s"] - w["start_s"]) for w in (early, late))
    assert a["deskew_bw_bytes"] == pytest.approx(own_rate, rel=0.1)
    # the plain aggregate spreads the same bytes over the whole span and so reads lower
    span = a["last_done_s"] - early["start_s"]
    assert p["seconds"] == pytest.approx(span, abs=0.005)
    assert a["bw_bytes"] == pytest.approx(a["bytes"] / span, rel=0.01)
    assert a["bw_bytes"] < 0.8 * a["deskew_bw_bytes"]
    assert a["bytes"] == early["read_bytes"] + late["read_bytes"]


def test_no_deskew_window_when_workers_never_overlap(shm_dir):
    doc = run_job(staggered_job(f"{shm_dir}/d.dat", late_s=0.5, time_s="300ms"))
    a = doc["phases"][0]["aggregate"]
    assert a["deskew_window_s"] is None and a["deskew_bw_bytes"] is None
    assert a["first_done_s"] < a["last_start_s"]


def test_hooks_see_every_phase_and_can_interrupt(shm_dir):
    calls = []

    class Hooks(PhaseHooks):
        def before_start(self, phase, run):
            calls.append(("before", phase.name))

        def poll(self, phase, run):
            calls.append(("poll", phase.name))
            run.interrupt()  # as an MPI orchestrator would when another rank failed

        def after_end(self, phase, run, result):
            calls.append(("after", phase.name))
            t = result["aggregate"]
            result["window_bytes"] = run.bytes_in_window(t["first_start_s"], t["last_done_s"])

    job = resolve_job({"target": [f"{shm_dir}/h.dat"], "size": "1m", "engine": "null",
                       "null_delay": "1ms", "time": "30s"})
    runner_doc = run_job(job, hooks=Hooks())
    assert [c[0] for c in calls][0] == "before" and calls[-1][0] == "after"
    p = runner_doc["phases"][0]
    assert p["complete"] is False and runner_doc["stop_reason"] == "interrupted"
    assert p["window_bytes"] == pytest.approx(p["read"]["bytes"], rel=0.01)


def test_stalled_requests_are_reported_with_target_offset_and_age(shm_dir):
    messages = []
    # requests of 700 ms against a 100 ms limit: the 20 ms monitor has 600 ms to see each one,
    # enough on a loaded machine too
    job = resolve_job({"target": [f"{shm_dir}/s.dat"], "size": "1m", "engine": "null", "null_delay": "700ms",
                       "stall_after": "100ms", "io_size": "12k", "qd": "2"})
    doc = run_job(job, notify=messages.append)
    p = doc["phases"][0]
    assert doc["complete"] and p["read"]["ops"] == 3
    stalls = p["stalls"]
    # every request outlives 100 ms; each is reported once, with its own offset
    assert sorted(s["offset"] for s in stalls) == [0, 4096, 8192]
    assert all(0.1 <= s["age_s"] < 0.7 and s["target"].endswith("s.dat") for s in stalls)
    assert len(messages) == 3 and "stalled I/O" in messages[0]


def test_fast_requests_are_not_stalls(shm_dir):
    job = resolve_job({"target": [f"{shm_dir}/s.dat"], "size": "1m", "engine": "null", "null_delay": "1ms",
                       "stall_after": "200ms", "time": "300ms"})
    assert run_job(job)["phases"][0]["stalls"] == []


def test_stall_abort_ends_the_phase_with_an_error(shm_dir):
    job = resolve_job({"target": [f"{shm_dir}/s.dat"], "size": "1m", "engine": "null", "null_delay": "300ms",
                       "stall_after": "50ms", "stall_abort": True, "time": "10s"})
    doc = run_job(job)
    assert doc["stop_reason"] == "error" and "stalled I/O" in doc["error"]
    assert doc["phases"][0]["seconds"] < 1.0


@pytest.mark.parametrize("mode", ["lockstep", "lag"])
@pytest.mark.parametrize("engine", ["psync", "io_uring"])
def test_read_behind_write_never_reads_ahead_of_the_writer(shm_dir, mode, engine):
    # The file starts as zeros; a read that overtook the writer would find no verification header.
    job = resolve_job({"target": [f"{shm_dir}/rbw.dat"], "size": "8m", "rw": "write", "bs": "16k",
                       "rbw": mode, "rbw_lag": "4", "verify": "crc32c", "engine": engine})
    doc = run_job(job)
    p = doc["phases"][0]
    rbw, v = p["rbw"], p["verify"]
    assert doc["complete"] and v["mismatches"] == 0
    assert rbw["records_written"] == 512 == p["write"]["ops"]
    assert rbw["records_read"] == 512
    assert p["read"]["ops"] + rbw["records_skipped"] == 512
    if mode == "lockstep":
        assert rbw["records_skipped"] == 0 and p["read"]["ops"] == 512
    duplex = (p["read"]["bytes"] + p["write"]["bytes"]) / p["seconds"]
    assert rbw["duplex_bw_bytes"] == pytest.approx(duplex)


def test_lag_mode_accounts_for_every_record(shm_dir):
    # a reader at most 1 record behind a writer that never waits: every record is either read
    # (and verified clean) or counted as skipped
    job = resolve_job({"target": [f"{shm_dir}/lag.dat"], "size": "32m", "rw": "write", "bs": "4k",
                       "rbw": "lag", "rbw_lag": "1", "verify": "xxh3"})
    p = run_job(job)["phases"][0]
    assert p["verify"]["mismatches"] == 0
    assert p["read"]["ops"] + p["rbw"]["records_skipped"] == 8192


def test_a_job_file_mixes_io_and_metadata_phases(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from storlab.jobs.job import load_jobfile

    f = tmp_path / "job.toml"
    f.write_text('size = "1m"\n[[phase]]\nname = "w"\nrw = "write"\nbs = "64k"\n'
                 '[[phase]]\nname = "md"\ntype = "meta"\nfiles = 120\nthreads = 2\n')
    doc = run_job(resolve_job({}, load_jobfile(str(f))))
    names = [p["name"] for p in doc["phases"]]
    assert names[0] == "w" and names[1:] == ["md:mkdir", "md:create", "md:stat", "md:read", "md:rename",
                                             "md:remove", "md:rmdir"]
    create = doc["phases"][2]
    assert create["kind"] == "meta" and create["ops"] == 240
    assert doc["job"]["phases"][1]["type"] == "meta"
    assert list(tmp_path.iterdir()) == [f]  # scratch file and metadata tree removed


def _phase_run(shm_dir):
    """An engine phase of 1 MiB of null reads with a 1 ms delay each (256 requests: ~0.26 s)."""
    import json

    from storlab import _core
    from storlab.measure.runner import checked_spec

    job = resolve_job({"target": [f"{shm_dir}/armed.dat"], "size": "1m", "engine": "null", "null_delay": "1ms",
                       "no_store": True})
    return _core.PhaseRun(json.dumps(checked_spec(job.phases[0], ())))


def _threads_of_this_process() -> int:
    import os

    return len(os.listdir("/proc/self/task"))


def test_an_armed_phase_waits_at_the_start_line_until_started(shm_dir):
    run = _phase_run(shm_dir)
    run.arm()
    run.arm()                                  # arming twice changes nothing
    assert run.wait(0.3) is False              # set up, not released: nothing moves
    assert run.progress()[:3] == (0, 0, 0.0)
    run.start()
    while not run.wait(0.5):
        pass
    import json

    result = json.loads(run.result_json())
    assert result["complete"] and result["read"]["bytes"] == 1 << 20
    # the clock started at the release, not at arming: 256 requests of 1 ms, not 0.3 s more
    assert result["seconds"] < 0.25 + 256e-3
    with pytest.raises(RuntimeError, match="already started"):
        run.start()


def test_an_armed_phase_dropped_unstarted_ends_its_threads(shm_dir):
    import gc
    import time

    before = _threads_of_this_process()
    run = _phase_run(shm_dir)
    run.arm()
    assert _threads_of_this_process() > before     # the coordinator and its worker wait
    del run
    gc.collect()
    deadline = time.monotonic() + 5
    while _threads_of_this_process() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _threads_of_this_process() == before
