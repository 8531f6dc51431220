"""How io500's phases use the engine: an I/O run (`_core.PhaseRun`) or a metadata run
(`_core.MetaRun`) made from a spec, waited for and its errors mapped through the same path as
every benchmark: measure/benchmark.py's `wait_for_phase` and errors.py's `from_core`."""
from __future__ import annotations

import json
from typing import Any

from ... import _core
from ...errors import StorlabError, from_core
from ...jobs.job import core_spec, resolve_job
from ...measure.benchmark import PhaseHooks, wait_for_phase
from ...measure.ranks import Ranks

__all__ = ["RankWatch", "core_failure", "io_run", "meta_run", "run_io", "wait"]

WAIT_S = 0.2      # how often a wait looks up (signals, the hooks' poll)


class RankWatch(PhaseHooks):
    """The hooks of every io500 engine run: another rank's failure interrupts this rank's run
    at the next tick (its next collective then raises the RankFailure), so no rank works on
    to the end of a long phase for a rank that is gone."""

    def __init__(self, ranks: Ranks) -> None:
        self.ranks = ranks

    def poll(self, phase, run) -> None:
        if self.ranks.failure is not None:
            run.interrupt()


def core_failure(e: _core.CoreError, context: str) -> StorlabError:
    """The engine's error as storlab's exception (`from_core`), its message led by `context`
    (the phase, or the rank whose files it concerns)."""
    kind, message = e.args
    return from_core(kind, f"{context}: {message}")


def io_run(phase: dict[str, Any]) -> _core.PhaseRun:
    """The engine run (its plan built: targets opened and laid out) of one I/O phase given as a
    job's [[phase]] table; one thread on psync, as IOR's one process per rank."""
    job = resolve_job({}, {"phase": [{"threads": 1, "engine": "psync", **phase}]}, jobfile_name="io500")
    try:
        return _core.PhaseRun(json.dumps(core_spec(job.phases[0])))
    except _core.CoreError as e:
        raise core_failure(e, phase["name"]) from None


def meta_run(spec: dict[str, Any], context: str) -> _core.MetaRun:
    """A metadata run of the meta spec `spec` (its folder opened)."""
    try:
        return _core.MetaRun(json.dumps(spec))
    except _core.CoreError as e:
        raise core_failure(e, context) from None


def wait(run, name: str, hooks: PhaseHooks) -> None:
    """Wait for a started engine run. A signal interrupts it (the workers finish what is in
    flight) and then stops the io500 run, as a signal between phases does: KeyboardInterrupt."""
    if wait_for_phase(run, name, hooks, WAIT_S, _no_report, tell_hooks=False):
        raise KeyboardInterrupt(name)


def run_io(run, name: str, hooks: PhaseHooks) -> dict[str, Any]:
    """Start an I/O run, wait for it and return its result."""
    run.start()
    wait(run, name, hooks)
    return json.loads(run.result_json())


def _no_report() -> None:
    """io500 prints no progress inside a phase (the phase's name when it starts, nothing more)."""
