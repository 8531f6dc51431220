"""One protocol for every benchmark kind, and the one local runner over it.

A benchmark kind (I/O in runner.py, metadata in meta.py) says how to build its spec, run its
phases and write its document; `run_benchmark` runs any of them in this process with the same
order of work, hooks, signal handling and clean-up:

    new_document → prepare → for each phase: run_phase (hooks at its start, ticks and end)
    → summarise → clean_up (always, signals held) → finish

and the MPI orchestrator (mpi/orchestrator.py) runs the same benchmark on every rank, with its
hooks joining the ranks, and merges the ranks' phases with the kind's own `merge_phase`.

Signals: a signal during a phase's wait stops that phase (its result says interrupted); one
outside a wait (between phases, in a layout, in a hook) raises KeyboardInterrupt here and
`stopped` marks the document. A signal recorded while held (a checkpoint, a clean-up) starts no
new phase. Any other exception undoes what the run made (`abort`), cleans up and propagates.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Iterator, Sequence

from ..document import now_iso
from ..signals import STOP

__all__ = ["Benchmark", "PhaseHooks", "run_benchmark", "wait_for_phase"]


class PhaseHooks:
    """Points where an orchestrator (MPI) joins a run; every method is optional to override.

    `phase` is the benchmark's own phase: a PhaseDef for I/O, the operation's name for metadata.
    `before_start` runs when the phase is ready (an I/O plan built: targets opened and laid
    out) and before its clock starts: the place for a barrier. `poll` runs at every progress tick
    while it runs (call `run.interrupt()` to stop it, e.g. when another rank failed). `after_end`
    gets the finished engine object and the phase result, which it may extend. `interrupted` runs
    as soon as a signal stops this process's run (in a phase, in a layout or between phases): the
    place to tell other ranks. `before_cleanup` runs before a metadata run removes what it made
    (a barrier, so the owner of a shared tree removes it after every rank removed its files).
    """

    def interrupted(self) -> None:
        pass

    def before_start(self, phase, run) -> None:
        pass

    def poll(self, phase, run) -> None:
        pass

    def after_end(self, phase, run, result: dict) -> None:
        pass

    def before_cleanup(self, run) -> None:
        pass


def wait_for_phase(run, phase, hooks: PhaseHooks, interval_s: float, report: Callable[[], None],
                   on_tick: Callable[[bool], None] | None = None, tell_hooks: bool = True) -> bool:
    """Wait for a started engine phase (`PhaseRun` or `MetaRun`) with the GIL released. Every
    `interval_s`: `report` (progress), `hooks.poll`, then `on_tick(stopping)` (stalled I/O,
    checkpoints); `report` once more at the end. A signal interrupts the phase (the workers finish
    what is in flight); with `tell_hooks`, `hooks.interrupted` hears of it at once, so other ranks
    stop at their next tick rather than at the end of the phase. Returns True if a signal stopped
    the phase."""
    stopping = False
    try:
        while not run.wait(interval_s):
            report()
            hooks.poll(phase, run)
            if STOP.requested and not stopping:  # a signal recorded while held: stop now
                stopping = True
                run.interrupt()
                if tell_hooks:
                    hooks.interrupted()
            if on_tick is not None:
                on_tick(stopping)
    except KeyboardInterrupt:
        stopping = True
        run.interrupt()
        if tell_hooks:
            hooks.interrupted()
        while not run.wait(0.5):
            pass
    report()
    return stopping


class Benchmark(ABC):
    """A benchmark kind: what `run_benchmark` and the MPI orchestrator need of it.

    The document is a plain dict (docs/result-format.md); the kind's methods add to it in the
    order of the module doc. `kind` is the document kind it writes ("run" or "meta")."""

    kind: str

    @abstractmethod
    def new_document(self, argv: Sequence[str]) -> dict[str, Any]:
        """The document before anything runs: the common header and the kind's empty body."""

    @abstractmethod
    def prepare(self, doc: dict[str, Any]) -> None:
        """Build the spec and everything the phases need (targets checked and laid out, a
        working folder made); record the job. Raises StorlabError subclasses for bad input."""

    @abstractmethod
    def phases(self, doc: dict[str, Any]) -> Iterator[Any]:
        """The phases to run, in order (asked for one at a time: a phase may depend on the last)."""

    @abstractmethod
    def run_phase(self, phase: Any, hooks: PhaseHooks, doc: dict[str, Any]) -> None:
        """Run one phase with the hooks and add its result to the document; a phase that did not
        complete marks the document incomplete, which ends the run."""

    @abstractmethod
    def summarise(self, doc: dict[str, Any]) -> None:
        """After the phases (all, or those until one stopped the run; not after a signal outside
        a phase or an exception): figures across phases."""

    @abstractmethod
    def stopped(self, doc: dict[str, Any]) -> None:
        """A signal ended the run outside a phase's wait: mark the document interrupted."""

    @abstractmethod
    def abort(self) -> None:
        """An exception is ending the run: undo what it made that `clean_up` would keep."""

    @abstractmethod
    def clean_up(self, doc: dict[str, Any], hooks: PhaseHooks) -> None:
        """Always, with signals held: remove what the run made (scratch files, working folders)."""

    @abstractmethod
    def finish(self, doc: dict[str, Any]) -> None:
        """The document's last fields, when the run ended without an exception."""

    @staticmethod
    @abstractmethod
    def merge_phase(results: list[dict[str, Any] | None], window_amount: list[float | None] | None,
                    nodes: list[str]) -> dict[str, Any]:
        """One phase of every rank merged into the phase of the whole job (None: no result
        from that rank); `window_amount` is what each rank did in the de-skew window."""


def run_benchmark(benchmark: Benchmark, argv: Sequence[str] = (),
                  hooks: PhaseHooks | None = None) -> dict[str, Any]:
    """Run every phase of `benchmark` in this process and return its document (complete or
    partial). Raises StorlabError subclasses for bad targets or specs."""
    hooks = hooks or PhaseHooks()
    doc = benchmark.new_document(argv)
    try:
        benchmark.prepare(doc)
        for phase in benchmark.phases(doc):
            if STOP.requested:  # a signal recorded while held (a checkpoint): no new phase
                benchmark.stopped(doc)
                hooks.interrupted()
                break
            benchmark.run_phase(phase, hooks, doc)
            if not doc["complete"]:
                break
        benchmark.summarise(doc)
    except KeyboardInterrupt:  # a signal outside a phase's wait: between phases, in a layout
        benchmark.stopped(doc)
        hooks.interrupted()
    except BaseException:
        benchmark.abort()
        raise
    finally:
        with STOP.held():
            benchmark.clean_up(doc, hooks)
    benchmark.finish(doc)
    doc["finished_at"] = now_iso()
    return doc
