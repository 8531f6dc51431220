"""fio's latency_target: the search for the highest queue depth that holds a latency percentile."""
from __future__ import annotations

from types import SimpleNamespace

from storlab.measure import stats
from storlab.measure.benchmark import PhaseHooks
from storlab.measure.runner import IoBenchmark
from test_cli_run import run_cli  # tests/ is on sys.path (pytest prepend mode)


class FakeRunner:
    """Runs a phase as a device whose latency grows with the queue depth: qd x 100 us."""

    def __init__(self, target_s: float) -> None:
        self.job = SimpleNamespace(run={"latency_target": target_s, "latency_window": 0.5, "latency_percentile": 99.0})
        self.runs: list[tuple[int, float | None]] = []

    def _run_phase(self, phase, hooks):
        qd = phase.groups[0].values["qd"]
        self.runs.append((qd, phase.groups[0].values["time"]))
        lat = qd * 100_000
        return {"complete": True, "stop_reason": "done",
                "read": {"iops": qd / (lat / 1e9), "lat_hist": {"buckets": stats.histogram([lat] * 100)}}}


def search(target_s: float, qd: int) -> tuple[dict, list]:
    runner = FakeRunner(target_s)
    phase = SimpleNamespace(groups=[SimpleNamespace(values={"qd": qd, "time": 60.0, "io_size": None,
                                                            "io_total": None, "ramp": 0.0})])
    result = IoBenchmark._run_at_latency_target(runner, phase, PhaseHooks())
    return result, runner.runs


def test_doubling_then_bisection_finds_the_highest_depth_that_holds():
    result, runs = search(1.25e-3, 64)        # qd 12 gives 1.2 ms, qd 13 1.3 ms
    lt = result["latency_target"]
    assert lt["found"] and lt["qd"] == 12 and lt["iops"] > 0
    assert [s["qd"] for s in lt["steps"]] == [1, 2, 4, 8, 16, 12, 14, 13]
    assert all(t == 0.5 for _, t in runs), "trials last the window; the result is the one at qd 12"
    runner_then_runs = FakeRunner(1.25e-3)
    runner_then_runs.job.run["latency_run"] = True
    phase = SimpleNamespace(groups=[SimpleNamespace(values={"qd": 64, "time": 60.0, "io_size": None,
                                                            "io_total": None, "ramp": 0.0})])
    IoBenchmark._run_at_latency_target(runner_then_runs, phase, PhaseHooks())
    assert runner_then_runs.runs[-1] == (12, 60.0), "latency_run: then the phase as written at that depth"


def test_every_depth_holding_takes_the_phases_own_and_none_holding_says_so():
    result, runs = search(1.0, 48)
    assert result["latency_target"]["qd"] == 48 and [q for q, _ in runs] == [1, 2, 4, 8, 16, 32, 48]
    result, runs = search(50e-6, 8)
    lt = result["latency_target"]
    assert not lt["found"] and lt["qd"] == 0 and runs[-1][0] == 1


def test_a_run_reports_the_depth_found():
    r = run_cli("--engine", "null", "--null-delay", "0.0001", "--rw", "randread", "--qd", "8", "--time", "0.3",
                "--latency-target", "1s", "--latency-window", "0.2", "--latency-percentile", "99")
    assert r["rc"] == 0
    lt = r["doc"]["phases"][0]["latency_target"]
    assert lt["found"] and lt["qd"] == 8 and [s["qd"] for s in lt["steps"]] == [1, 2, 4, 8]
