"""Runs a benchmark (I/O or metadata) on every rank of a communicator and merges the ranks'
results on rank 0.

One `Session` per command sets MPI up (liveness, node names, clock offsets); `Session.run_ranks`
runs one benchmark kind on the ranks of a communicator the same way for every kind:

1. each rank runs its share with the local runner (benchmark.run_benchmark) and hooks that join
   it to the others (`RankHooks`): a barrier after a phase is ready and before its clock starts;
   a check at every progress tick that interrupts the local phase when another rank failed; and,
   after the phase, an exchange that finds the cross-rank de-skew window and has each rank count
   what it did in it (for an I/O run with private files, carried by the next phase's barrier);
2. rank 0 gathers what every surviving rank has along the tree (`final_gather`; each rank's
   window counts included), merges each phase with the benchmark's own `merge_phase`
   (aggregate.py), and writes one document of the kind with an `mpi` section.

The kinds differ in what a rank runs and what the exchange carries, so each has its rank side:
`IoRanks` (`storlab run`/`scale`: the job rewritten for the rank by rewrite.py, stonewall counts
carried to the phase that reads them back, bytes counted in the window from the engine's progress
logs) and `MetaRanks` (`storlab meta`: one working folder shared by the ranks, `storlab-meta-<id>`
in the target, which may name {rank}/{node}/{size}, with rank-unique names (`--name-prefix`, by
default `r{rank}.`) and, with `--dir shared`, one tree that rank 0 makes and removes; a phase's
exchange merges the few numbers its window needs up the tree, each rank keeps its results for the
final gather, operations in the window are interpolated from samples
taken at every tick, and before the clean-up rank 0 waits until the others have removed their
files, then removes the shared tree and the working folder).

Stonewall (metadata): each rank's engine stops its workers at the deadline (counted from the
common start after the barrier) and keeps what each worker finished, so later phases work on
exactly those items; the counts of every rank are in `mpi.stonewall`. The engine has no wear-out
that lets a lagging rank catch up to the others' counts (mdtest's), so ranks may finish different
counts.

Failure: a rank whose run raises, whose phase ends with an error, or that a signal stops (Ctrl-C,
SIGTERM, SIGHUP: at once, not at the end of its phase) tells the others (comm.py); they interrupt
their phase at the next tick (or do not start the next), remove what they made, and every rank
sends what it has to rank 0, which writes a document marked incomplete whose error names the rank
(stop_reason `interrupted` and the signal's name when a signal was the cause of an I/O run). A
rank that vanished is noticed by the missing heartbeats within `rank_timeout`. No rank ever waits
without a bound.
"""
from __future__ import annotations

import atexit
import json
import os
import sys
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ...devices.safety import describe_path
from ...document import header, now_iso
from ...errors import SpecError, TargetError
from ...jobs.job import Job, phase_record
from ...signals import STOP
from ..aggregate import count_in_window, deskew_window, merge_window_summaries, window_of_summary, window_summary
from ..benchmark import Benchmark, PhaseHooks, run_benchmark
from ..environment import host_environment
from ..launch import Launch
from ..meta import MetaBenchmark, make_workdir, meta_findings, meta_job_record, remove_workdir, workdir_name
from ..meta import ProgressFn as MetaProgressFn
from ..runner import IoBenchmark, ProgressFn
from . import clock
from .comm import TAG_CLEANUP, Comm, Liveness, RankFailure, library_version, processor_name, split_first, world
from .live import LiveReports, LiveSink
from .rewrite import data_rank, private_targets, read_only, rewrite_job, rewrite_warnings, substitute, wearout_io_size, wearout_pairs

__all__ = ["Session", "RankHooks", "IoRanks", "MetaRanks", "job_record", "run_cli", "run_meta_cli",
           "POLL_S", "DEFAULT_PREFIX"]

# Progress tick of a metadata run under MPI: how soon a rank notices that another failed, and the
# sampling interval of the operation counts the de-skewed rate is interpolated from.
POLL_S = 0.05
# Names must differ between ranks that share a folder: mdtest puts the rank in every name too.
DEFAULT_PREFIX = "r{rank}."


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text if isinstance(e, (ValueError, OSError)) or type(e).__module__.startswith("storlab") \
        else f"{type(e).__name__}: {text}"


def _describe(e: BaseException) -> str:
    return "interrupted (Ctrl-C)" if isinstance(e, KeyboardInterrupt) else _one_line(e)


def job_record(job: Job) -> dict[str, Any]:
    """The `job` section of a result for the job as the user wrote it (target templates, not one
    rank's paths): the first group's options flat, the run-level ones, and every phase in full."""
    phases = [phase_record(p) for p in job.phases]
    first = dict(phases[0]["groups"][0])
    first.pop("name", None)
    run_level = {k: (list(v) if isinstance(v, tuple) else v) for k, v in job.run.items()}
    return {**first, **run_level, "phases": phases}


def _files_and_dirs(states_json: str) -> tuple[int, int]:
    states = json.loads(states_json)
    return sum(s["created"] - s["removed"] for s in states), sum(s["dirs"] for s in states)


class RankHooks(PhaseHooks):
    """What every rank's hooks share: the first failure seen (this rank's or another's), the
    barrier before each phase's clock starts, and the failure check at every progress tick."""

    def __init__(self, comm: Comm, offset_s: float) -> None:
        self.comm = comm
        self.offset_s = offset_s
        self.failure: RankFailure | None = None
        self.live: LiveReports | None = None     # an I/O run's live figures to rank 0

    def fail(self, failure: RankFailure) -> None:
        """Keep the first failure: it is the one the document names."""
        if self.failure is None:
            self.failure = failure

    def barrier(self) -> bool:
        """The barrier before a phase's clock starts; False when a rank has failed."""
        if self.failure is None:
            try:
                self.comm.barrier()
            except RankFailure as e:
                self.fail(e)
        return self.failure is None

    def poll(self, phase, run) -> None:
        if self.failure is None and self.comm.failure is not None:
            self.fail(self.comm.failure)
            run.interrupt()

    def window_barrier(self, report: dict[str, Any]) -> dict[str, Any]:
        """A barrier carrying a phase's de-skew window: each rank's few numbers (`window_summary`
        of its report) merged pairwise up the tree, and back down the window (seconds after the
        common time base `t0`), the first rank that stopped, and this rank's `shift` (its own
        time base after `t0`)."""
        comm = self.comm
        summary = comm.reduce(window_summary(comm.rank, report), merge_window_summaries)
        info = None
        if comm.rank == 0:
            t0, window = window_of_summary(summary)
            info = {"t0": t0, "window": window, "stop": summary["stop"]}
        info = comm.bcast(info)   # also the barrier: rank 0 sent it after hearing all
        info["shift"] = report["start_unix_s"] + report["offset_s"] - info["t0"]
        return info


class IoRankHooks(RankHooks):
    """The points at which a rank joins the others during an I/O run (see the module doc).

    Where no rank touches another's files (`private_targets`), one phase boundary is one
    barrier, two tree sweeps: phase k's window summary climbs the tree in the barrier's reduce
    before phase k+1 starts, and the window and stop of phase k come down in its broadcast. Where
    ranks share files, or a later read phase takes its io_size from phase k's counts (wear-out),
    phase k's exchange runs at its end, so every rank has finished phase k before any builds the
    next plan (lays a shared file out, reads what another wrote), and a plain barrier precedes
    phase k+1. The last phase's exchange runs after the run (`flush`). What each rank did in each
    phase's window stays with it until the final gather."""

    def __init__(self, comm: Comm, job: Job, template: Job, offsets: list[clock.Offset],
                 reorder: int) -> None:
        super().__init__(comm, offsets[comm.rank].offset_s)
        self.job = job                     # this rank's job: the runner runs these very objects
        self.template = template
        self.reorder = reorder
        self.pairs = wearout_pairs(template)
        self.index = 0
        self.local: list[dict[str, Any]] = []          # per phase: result plus rank facts
        self.window_bytes: dict[int, float | None] = {}   # per phase: this rank's bytes in the window
        self.stonewall: list[dict[str, Any]] = []      # rank 0: wear-out counts applied
        self.pending: tuple[int, Any, Any, dict[str, Any]] | None = None  # phase k awaiting its exchange
        self.fused = private_targets(template, reorder)   # the exchange may wait for the next barrier

    def before_start(self, phase, run) -> None:
        if self.failure is None:
            try:
                self._exchange()        # the previous phase's, as this phase's barrier
            except RankFailure as e:
                self.fail(e)
        if self.failure is not None:
            run.interrupt()   # the phase starts and stops at once: a partial result, no hang

    def poll(self, phase, run) -> None:
        super().poll(phase, run)
        if self.live is not None:
            self.live.tick(self.index, phase.name, run)

    def interrupted(self) -> None:
        """A signal stopped this rank: the others stop at their next tick."""
        if self.failure is None:
            self.fail(self.comm.liveness.report(f"interrupted by {STOP.signal_name or 'a signal'}"))

    def after_end(self, phase, run, result: dict[str, Any]) -> None:
        k = self.index
        if self.live is not None:
            self.live.tick(k, phase.name, run, done=True)
        self.index += 1
        g0 = phase.groups[0].values
        self.local.append({"result": result, "offset_s": self.offset_s,
                           "data_rank": data_rank(self.comm.rank, self.comm.size, self.reorder, read_only(g0)),
                           "targets": [t["path"] for t in result.get("targets", [])]})
        if self.failure is None and result["stop_reason"] == "error":
            self.fail(self.comm.liveness.report(f"phase {phase.name}: {result['error']}"))
        if self.failure is None:
            self.pending = (k, phase, run, result)
            if k in self.pairs.values() or not self.fused:   # needed before the next plan is built
                try:
                    self._exchange()
                except RankFailure as e:
                    self.fail(e)
        signalled_here = result["stop_reason"] == "interrupted" and STOP.requested
        if self.failure is not None and result["stop_reason"] != "error" and not signalled_here:
            result.update(complete=False, stop_reason="error", error=self.failure.args[0])

    def flush(self) -> None:
        """After the run: the last phase's exchange (every rank has one pending unless a rank failed)."""
        if self.failure is None and self.pending is not None:
            try:
                self._exchange()
            except RankFailure as e:
                self.fail(e)
                self.local[-1]["result"].update(complete=False, stop_reason="error", error=e.args[0])

    def _exchange(self) -> None:
        """One barrier carrying the pending phase's report up and its window down (a plain
        barrier when nothing is pending)."""
        comm = self.comm
        pending, self.pending = self.pending, None
        if pending is None:
            comm.barrier()
            return
        k, phase, run, result = pending
        report = {"start_unix_s": result["start_unix_s"], "offset_s": self.offset_s,
                  "complete": result["complete"], "stop_reason": result["stop_reason"],
                  "error": result.get("error"),
                  "workers": [{k2: w[k2] for k2 in ("group", "start_s", "end_s", "read_bytes", "write_bytes")}
                              for w in result["workers"]]}
        if k in self.pairs.values():
            info = self._exchange_counts(k, phase, report)
        else:
            info = {**self.window_barrier(report), "counts": None}
        mine = None
        if info["window"] is not None:
            shift = info["shift"]
            mine = run.bytes_in_window(info["window"][0] - shift, info["window"][1] - shift)
        self.window_bytes[k] = mine
        if info["counts"] is not None:
            self._apply_wearout(k, info["counts"])
        if info["stop"] is not None:
            _mark_stopped(result, info["stop"])

    def _exchange_counts(self, k: int, phase, report: dict[str, Any]) -> dict[str, Any]:
        """The exchange of a write phase whose counts a later read takes (wear-out): every
        rank's per-worker written bytes go to rank 0 and the counts come back to all."""
        comm = self.comm
        reports = comm.gather(report)
        info = None
        if comm.rank == 0:
            _, shifts, window = deskew_window(reports)
            names = [g.name for g in phase.groups]
            counts = [[[w["write_bytes"] for w in x["workers"] if w["group"] == name] for name in names]
                      for x in reports]
            info = {"shifts": shifts, "window": window, "stop": _first_stop(reports), "counts": counts}
        info = comm.bcast(info)
        info["shift"] = info["shifts"][comm.rank]
        return info

    def _apply_wearout(self, k: int, counts: list[list[list[int]]]) -> None:
        """Give each read phase that mirrors write phase k the io_size its data rank wrote."""
        for target, source in self.pairs.items():
            if source != k:
                continue
            phase = self.job.phases[target]
            role = data_rank(self.comm.rank, self.comm.size, self.reorder, True)
            sizes = []
            for gi, g in enumerate(phase.groups):
                g.values["io_size"] = wearout_io_size(counts[role][gi], g.values["bs"])
                sizes.append(g.values["io_size"])
            if self.comm.rank == 0:
                per_rank = [[wearout_io_size(counts[(r + self.reorder) % self.comm.size][gi], g.values["bs"])
                             for gi, g in enumerate(phase.groups)] for r in range(self.comm.size)]
                self.stonewall.append({"phase": phase.name, "from_phase": self.job.phases[k].name,
                                       "written_bytes": [[sum(c) for c in groups] for groups in counts],
                                       "io_size_bytes": per_rank})


class MetaRankHooks(RankHooks):
    """The points at which a rank joins the others during a metadata run (see the module doc)."""

    def __init__(self, comm: Comm, offset_s: float) -> None:
        super().__init__(comm, offset_s)
        self.local: list[dict[str, Any]] = []      # this rank's phase results, in order (to rank 0 at the end)
        self.window_ops: dict[int, float | None] = {}   # per phase: this rank's operations in the window
        self.samples: list[tuple[float, int]] = []  # (seconds since the phase start, ops) this phase
        self.run = None
        self.before_cleanup_left: tuple[int, int] | None = None  # files, dirs before the clean-up
        self.cleaned: dict[int, Any] | None = None  # rank 0: the ranks that reported their clean-up

    def before_start(self, phase: str, run) -> None:
        self.run = run
        if not self.barrier():
            # A MetaRun cannot be interrupted before its phase starts: end the run here instead;
            # the runner cleans up and re-raises, and MetaRanks.run_here takes it from there.
            raise self.failure
        self.samples = [(0.0, 0)]

    def poll(self, phase: str, run) -> None:
        p = run.progress()
        if p is not None:
            self.samples.append((p[3], p[2]))
        super().poll(phase, run)

    def after_end(self, phase: str, run, result: dict[str, Any]) -> None:
        k = len(self.local)
        result["offset_s"] = self.offset_s
        self.samples.append((result["seconds"], result["ops"]))
        self.local.append(result)
        if self.failure is None and result["stop_reason"] == "error":
            self.fail(self.comm.liveness.report(result["error"]))
        elif self.failure is None and result["stop_reason"] == "interrupted":  # a signal, here
            self.fail(self.comm.liveness.report(f"interrupted by {STOP.signal_name or 'a signal'}"))
        if self.failure is None:
            try:
                self._exchange(k, result)
            except RankFailure as e:
                self.fail(e)
        if self.failure is not None and result["stop_reason"] != "error":
            result.update(complete=False, stop_reason="error", error=self.failure.args[0])

    def _exchange(self, k: int, result: dict[str, Any]) -> None:
        """The barrier after phase k: the few numbers the window needs, merged up the tree (as
        an I/O phase's), and the window and the first rank that stopped brought down. Each rank
        keeps its result (marked as that rank stopped) for the final gather."""
        info = self.window_barrier(result)
        mine = None
        if info["window"] is not None:
            shift = info["shift"]
            mine = count_in_window(self.samples, info["window"][0] - shift, info["window"][1] - shift)
        self.window_ops[k] = mine   # goes to rank 0 in the final gather
        if info["stop"] is not None:
            _mark_stopped(result, info["stop"])

    def before_cleanup(self, run) -> None:
        self.run = run
        raised = sys.exc_info()[1]   # set when an exception is ending the run
        if raised is not None and self.failure is None:
            # tell the others now, not after the clean-up: they may be waiting in a barrier
            self.fail(self.comm.liveness.report(_describe(raised)))
        self.before_cleanup_left = _files_and_dirs(run.states_json())
        if self.comm.rank == 0:
            # The shared tree and the folder go last: wait for every rank still alive to have
            # removed its files (no time limit: a dead rank drops out through the heartbeats).
            self.cleaned = self.comm.gather_surviving(None, float("inf"), tag=TAG_CLEANUP)

    def cleanup_after_raise(self, workdir: str, keep: bool) -> dict[str, Any]:
        """The clean-up report when the run raised (it cleaned up but could not return):
        counted from what exists before and after."""
        if keep:
            return {"kept": True, "files_removed": 0, "dirs_removed": 0, "error": None}
        if self.run is None or self.before_cleanup_left is None:
            return {"kept": False, "files_removed": 0, "dirs_removed": 0, "error": None}
        files, dirs = _files_and_dirs(self.run.states_json())
        before = self.before_cleanup_left
        error = None if files == dirs == 0 else f"{files} files and {dirs} directories left in {workdir}"
        return {"kept": False, "files_removed": before[0] - files, "dirs_removed": before[1] - dirs,
                "error": error}


def _first_stop(reports: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first rank whose phase did not complete: its rank, stop reason and error."""
    return next(({"rank": r, "stop_reason": x["stop_reason"], "error": x["error"]}
                 for r, x in enumerate(reports) if not x["complete"]), None)


def _mark_stopped(result: dict[str, Any], stop: dict[str, Any]) -> None:
    """A phase that completed here ends as the rank `stop` ended it (the ranks stop together)."""
    if result["complete"]:
        why = stop["error"] or stop["stop_reason"]
        result.update(complete=False, stop_reason=stop["stop_reason"], error=f"stopped with rank {stop['rank']}: {why}")


def _join_workdir(target: str, run_id: str) -> str:
    """The run's folder in the target: made by the first rank to get there, joined by the others
    (ranks with the same target share it; a {rank}/{node} target gives each its own)."""
    try:
        return make_workdir(target, run_id)
    except TargetError:
        workdir = workdir_name(target, run_id)
        if os.path.isdir(workdir):
            return workdir
        raise


def _rank_values(values: Mapping[str, Any], comm: Comm, target: str) -> dict[str, Any]:
    """This rank's options, after checking that the ranks agree: the same phases, one target for
    a shared tree, and names that cannot collide."""
    mine = dict(values)
    everyone = comm.allgather({"phases": list(values["phases"]), "dir": values["dir"], "target": target})
    for r, x in enumerate(everyone):
        if x["phases"] != everyone[0]["phases"] or x["dir"] != everyone[0]["dir"]:
            raise SpecError(f"rank {r} runs phases {','.join(x['phases'])} with --dir {x['dir']}, rank 0 "
                             f"{','.join(everyone[0]['phases'])} with --dir {everyone[0]['dir']}: "
                             "every rank needs the same phases")
        if values["dir"] == "shared" and x["target"] != everyone[0]["target"]:
            raise SpecError(f"--dir shared: rank {r} works in {x['target']}, rank 0 in "
                             f"{everyone[0]['target']}; every rank needs the same target (no {{rank}} or {{node}})")
    shared_folder = len({x["target"] for x in everyone}) < len(everyone)
    prefix = values.get("name_prefix")
    if prefix is None:
        mine["name_prefix"] = DEFAULT_PREFIX
    elif "{rank}" not in prefix and shared_folder:
        raise SpecError(f"--name-prefix {prefix!r}: ranks share a folder, so names need {{rank}} "
                         f"(e.g. {prefix}{{rank}}.)")
    return mine


class RankSide(ABC):
    """One benchmark kind on the ranks of a communicator: what a rank runs and how rank 0 makes
    the document of the kind from what the ranks sent."""

    benchmark_kind: type[Benchmark]     # whose merge_phase merges the ranks' phases
    hooks: RankHooks
    rank_timeout_s: float

    @abstractmethod
    def run_here(self, session: "Session", comm: Comm, argv: list[str], progress: Any,
                 notify: Callable[[str], None] | None) -> dict[str, Any]:
        """Run this rank's share; the payload it sends to rank 0 (failures are reported to the
        other ranks here, never raised past the final gather)."""

    @abstractmethod
    def per_rank_phases(self, got: dict[int, dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
        """Rank 0: every rank's phase results, in order."""

    @abstractmethod
    def windows(self, got: dict[int, dict[str, Any]], size: int) -> dict[int, list[float | None]]:
        """Rank 0: per phase, what each rank did in the de-skew window (from the payloads)."""

    @abstractmethod
    def document(self, session: "Session", comm: Comm, got: dict[int, dict[str, Any]],
                 phases: list[dict[str, Any]], failure: RankFailure | None, argv: list[str],
                 started_at: str) -> dict[str, Any]:
        """Rank 0: the merged document, all but its `mpi` section."""

    @abstractmethod
    def mpi_fields(self, phases: list[dict[str, Any]]) -> dict[str, Any]:
        """The kind's own keys of the `mpi` section."""


def _compact(doc: dict[str, Any]) -> dict[str, Any]:
    """What rank 0 needs of another rank's document: its phases, warnings, targets and signal;
    not the job and host description every rank shares (about a third of a small run's document)."""
    return {"phases": doc["phases"], "warnings": doc["warnings"], "signal": doc.get("signal"),
            "environment": {"targets": doc["environment"].get("targets") or []}}


def _windows(got: dict[int, dict[str, Any]], phases: int, size: int) -> dict[int, list[float | None]]:
    """Per phase, each rank's amount in the de-skew window, from the final payloads (a rank
    counts its own when the window comes down after the phase; a missing rank is None)."""
    out: dict[int, list[float | None]] = {}
    for k in range(phases):
        if any(k in p.get("window", {}) for p in got.values()):
            out[k] = [got[r]["window"].get(k) if r in got else None for r in range(size)]
    return out


def _outcome(doc: dict[str, Any], phases: list[dict[str, Any]], expected: int, failure: RankFailure | None,
             got: dict[int, dict[str, Any]], signalled: Mapping[int, str] | None = None) -> None:
    """Mark the merged document with how the run ended: the first failure, a rank's error, or
    the first phase that did not complete (or a phase that never ran)."""
    errors = {r: p["error"] for r, p in got.items() if p["error"]}
    signalled = signalled or {}
    if failure is not None and failure.rank in signalled:  # stopped by a signal, not broken
        doc.update(complete=False, stop_reason="interrupted", error=failure.args[0],
                   signal=signalled[failure.rank])
    elif failure is not None:
        doc.update(complete=False, stop_reason="error", error=failure.args[0])
    elif errors:
        r, e = next(iter(errors.items()))
        doc.update(complete=False, stop_reason="error", error=f"rank {r}: {e}")
    else:
        bad = next((p for p in phases if not p["complete"]), None)
        if bad is not None or len(phases) < expected:
            doc.update(complete=False, stop_reason=bad["stop_reason"] if bad else "error",
                       error=bad["error"] if bad else "a phase did not run")


class IoRanks(RankSide):
    """`storlab run` (and each rank count of `storlab scale`) on the ranks of a communicator."""
    benchmark_kind = IoBenchmark

    def __init__(self, template: Job, kind: str = "run", live: LiveSink | None = None) -> None:
        self.template = template
        self.kind = kind
        self.live = live     # rank 0: where the live figures go (None: nobody wants them)
        self.reorder = int(template.run.get("reorder") or 0)
        self.rank_timeout_s = float(template.run.get("rank_timeout") or 30.0)

    def run_here(self, session, comm, argv, progress, notify) -> dict[str, Any]:
        template = self.template
        session.check_same_shape(template, comm)
        job = rewrite_job(template, comm.rank, session.nodes[:comm.size], self.reorder)
        self.hooks = hooks = IoRankHooks(comm, job, template, session.offsets[:comm.size], self.reorder)
        hooks.live = LiveReports(comm, self.live, session.nodes[:comm.size], session.live)
        doc = None
        error = None
        try:
            tell = None if notify is None else (lambda msg: notify(f"rank {comm.rank}: {msg}"))
            doc = run_benchmark(IoBenchmark(job, progress if comm.rank == 0 else None, notify=tell), argv, hooks)
            hooks.flush()
        except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001 - every failure must reach the others
            error = _one_line(e) if not isinstance(e, KeyboardInterrupt) else "interrupted (Ctrl-C)"
            hooks.fail(comm.liveness.report(error))
        hooks.live.close()
        if doc is not None and comm.rank != 0:
            doc = _compact(doc)
        return {"doc": doc, "phases": hooks.local if doc is None else None, "error": error,
                "sides": [{k: x[k] for k in ("offset_s", "data_rank", "targets")} for x in hooks.local],
                "window": hooks.window_bytes}

    def per_rank_phases(self, got):
        out = {}
        for r, payload in got.items():
            phases = payload["doc"]["phases"] if payload["doc"] is not None else [x["result"] for x in payload["phases"]]
            out[r] = [{**p, **side} for p, side in zip(phases, payload["sides"])]
        return out

    def windows(self, got, size):
        return _windows(got, len(self.template.phases), size)

    def document(self, session, comm, got, phases, failure, argv, started_at) -> dict[str, Any]:
        template = self.template
        nodes = session.nodes[:comm.size]
        docs = {r: p["doc"] for r, p in got.items() if p["doc"] is not None}
        base = docs.get(0)   # the others sent only what differs between ranks (_compact)
        doc: dict[str, Any] = {
            **header(self.kind, argv=argv, started_at=started_at, finished_at=now_iso()),
            "job": job_record(template),
            "environment": dict(base["environment"]) if base else {**host_environment(), "io_uring": None,
                                                                  "engine": template.phases[0].groups[0].values["engine"]},
            "warnings": [], "phases": phases,
        }
        targets: dict[str, Any] = {}
        for d in docs.values():
            for t in d["environment"].get("targets") or []:
                targets.setdefault(t["path"], t)
        doc["environment"]["targets"] = list(targets.values())
        doc["warnings"] = self._warnings(template, docs, nodes)
        if base and "model" in base:  # a stack attached with --stack: every rank computed the same
            doc["model"] = base["model"]
        if template.translation is not None:    # a foreign format's job: how it was translated
            doc["translation"] = template.translation.record()
        signalled = {r: d["signal"] for r, d in docs.items() if d.get("signal")}
        _outcome(doc, phases, len(template.phases), failure, got, signalled)
        return doc

    def mpi_fields(self, phases) -> dict[str, Any]:
        return {"reorder": self.reorder, "rank_timeout_s": self.rank_timeout_s, "stonewall": self.hooks.stonewall}

    @staticmethod
    def _warnings(template: Job, docs: dict[int, dict[str, Any]], nodes: list[str]) -> list[dict[str, Any]]:
        """Warnings of every rank, each once, with the ranks that raised it."""
        seen: dict[tuple[str, str], dict[str, Any]] = {}
        for r in sorted(docs):
            for w in docs[r]["warnings"]:
                entry = seen.setdefault((w["code"], w["message"]), {**w, "ranks": []})
                entry["ranks"].append(r)
        out = list(seen.values())
        out.extend(rewrite_warnings(template, nodes, int(template.run.get("reorder") or 0)))
        return out


class MetaRanks(RankSide):
    """`storlab meta` on the ranks of a communicator (see the module doc)."""
    benchmark_kind = MetaBenchmark

    def __init__(self, values: Mapping[str, Any], rank_timeout_s: float) -> None:
        self.values = values
        self.rank_timeout_s = rank_timeout_s
        self.template = values["target"] or os.getcwd()

    def run_here(self, session, comm, argv, progress, notify) -> dict[str, Any]:
        values = self.values
        run_id = comm.bcast(uuid.uuid4().hex if comm.rank == 0 else None)
        self.hooks = hooks = MetaRankHooks(comm, session.offsets[comm.rank].offset_s)
        target = workdir = error = None
        keep = bool(values["keep"])
        cleanup: dict[str, Any] = {"kept": keep, "files_removed": 0, "dirs_removed": 0, "error": None}
        try:
            target = os.path.abspath(substitute(self.template, comm.rank, session.nodes[comm.rank], comm.size))
            mine = _rank_values(values, comm, target)
            workdir = _join_workdir(target, run_id)
            bench = MetaBenchmark(mine, progress if comm.rank == 0 else None, run_id=run_id, workdir=workdir,
                                  rank=comm.rank, shared_tree_owner=comm.rank == 0, progress_interval_s=POLL_S)
            cleanup = run_benchmark(bench, argv, hooks)["cleanup"]
        except RankFailure as e:   # another rank failed (or this one, already reported in after_end)
            hooks.fail(e)
            if workdir is not None:
                cleanup = hooks.cleanup_after_raise(workdir, keep)
        except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001 - every failure must reach the others
            error = _describe(e)
            if hooks.failure is None:   # else before_cleanup already told the others
                hooks.fail(comm.liveness.report(error))
            if workdir is not None:
                cleanup = hooks.cleanup_after_raise(workdir, keep)
        if comm.rank != 0:
            if workdir is not None and not cleanup["error"]:
                remove_workdir(workdir, keep)   # fails harmlessly while other ranks' files remain
            comm.gather_surviving(None, float("inf"), tag=TAG_CLEANUP)
        else:
            if hooks.cleaned is None:   # kept, or the run ended before its clean-up: the notices still come
                hooks.cleaned = comm.gather_surviving(None, float("inf"), tag=TAG_CLEANUP)
            if workdir is not None and not cleanup["error"]:
                remove_workdir(workdir, keep)
        return {"phases": hooks.local, "error": error,
                "window": hooks.window_ops,
                "cleanup": cleanup, "target": target, "workdir": workdir, "threads": values["threads"]}

    def per_rank_phases(self, got):
        return {r: p["phases"] for r, p in got.items()}

    def windows(self, got, size):
        return _windows(got, 1 + len(self.values["phases"]), size)

    def document(self, session, comm, got, phases, failure, argv, started_at) -> dict[str, Any]:
        values = self.values
        own = got[0]
        cleanups = {r: p["cleanup"] for r, p in got.items()}
        counts = [c[key] for c in cleanups.values() for key in ("files_removed", "dirs_removed")]
        cleanup_error = next((f"rank {r}: {c['error']}" for r, c in cleanups.items() if c["error"]), None)
        doc: dict[str, Any] = {
            **header("meta", argv=argv, started_at=started_at),
            "job": meta_job_record(values, self.template, own["workdir"] or ""),
            "environment": {**host_environment(), "engine": "posix", "io_uring": None, "targets": [],
                            "directory": describe_path(own["target"]) if own["target"] else None},
            "warnings": [], "workers": sum(p["threads"] for p in got.values()), "phases": phases,
            "cleanup": {"kept": bool(values["keep"]),
                        "files_removed": sum(c["files_removed"] for c in cleanups.values()) if None not in counts else None,
                        "dirs_removed": sum(c["dirs_removed"] for c in cleanups.values()) if None not in counts else None,
                        "error": cleanup_error,
                        "ranks": [{"rank": r, **c} for r, c in sorted(cleanups.items())]},
        }
        doc["job"]["name_prefix"] = values.get("name_prefix") or DEFAULT_PREFIX
        _outcome(doc, phases, 1 + len(values["phases"]), failure, got)
        doc["warnings"] = [w.as_dict() for w in meta_findings(doc)]
        return doc

    def mpi_fields(self, phases) -> dict[str, Any]:
        values = self.values
        return {
            "rank_timeout_s": self.rank_timeout_s,
            "dir": values["dir"],
            "shared_tree_owner": 0 if values["dir"] == "shared" else None,
            "stonewall": [{"phase": p["name"], "stonewall_s": p["stonewall_s"],
                           "ranks": [{"rank": x["rank"], "items_per_worker": x["items_per_worker"]}
                                     for x in p["mpi"]["ranks"]]}
                          for p in phases if p["stonewalled"]],
        }


@dataclass
class Session:
    """MPI for one storlab command: liveness, the world communicator, node names and clock
    offsets, set up once and shared by every run (and by every rank count of `storlab scale`)."""
    launch: Launch | None
    liveness: Liveness
    world: Comm
    nodes: list[str]
    offsets: list[clock.Offset]
    live: bool = False     # rank 0 keeps live figures: the ranks report to it while phases run
    exit_code: int = 0
    _subs: dict[int, Any] = field(default_factory=dict)

    @classmethod
    def start(cls, rank_timeout_s: float, launch: Launch | None = None, sub_sizes: tuple[int, ...] = (),
              live: bool = False) -> "Session":
        """Initialise (all ranks call this together); sub-communicators of the first n ranks are
        made now for each n in `sub_sizes`, while every rank is known to be alive. `live`: rank 0
        keeps live figures (its value is every rank's, carried by the exchange of node names)."""
        everyone = world()
        liveness = Liveness(everyone, rank_timeout_s)
        comm = Comm(everyone, liveness)
        named = comm.allgather((processor_name(), bool(live)))
        nodes = [name for name, _ in named]
        liveness.nodes = list(nodes)
        offsets = clock.exchange(comm, nodes)
        session = cls(launch, liveness, comm, nodes, offsets, live=named[0][1])
        for n in sub_sizes:
            sub = split_first(everyone, n)
            session._subs[n] = None if sub is None else Comm(sub, liveness)
        atexit.register(session._close)
        return session

    @property
    def rank(self) -> int:
        return self.world.rank

    @property
    def size(self) -> int:
        return self.world.size

    def sub(self, n: int) -> Comm | None:
        """The communicator of ranks 0 .. n-1 (None on the other ranks)."""
        return self.world if n == self.size else self._subs[n]

    def _close(self) -> None:
        """At exit: the goodbye handshake; if a rank is gone, skip MPI_Finalize (it could wait for
        the dead rank forever) and leave at once with a failure code."""
        if not self.liveness.close():
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(self.exit_code or 1)

    # -- one run --------------------------------------------------------------------------------
    def run(self, template: Job, comm: Comm, argv: list[str], progress: ProgressFn | None = None,
            notify: Callable[[str], None] | None = None, kind: str = "run",
            live: LiveSink | None = None) -> dict[str, Any] | None:
        """Run the I/O job `template` on the ranks of `comm`; the merged document on its rank 0,
        else None. `live`: rank 0's sink of every rank's live figures (mpi/live.py)."""
        return self.run_ranks(IoRanks(template, kind, live), comm, argv, progress, notify)

    def run_ranks(self, side: RankSide, comm: Comm, argv: list[str], progress: Any = None,
                  notify: Callable[[str], None] | None = None) -> dict[str, Any] | None:
        """Run one benchmark kind on the ranks of `comm`: every rank its share, then rank 0 merges
        each phase (the benchmark's `merge_phase`) and writes the document; None on other ranks."""
        started_at = now_iso()
        payload = side.run_here(self, comm, argv, progress, notify)
        got, failure = self.final_gather(comm, payload, side.rank_timeout_s, side.hooks.failure)
        if comm.rank != 0:
            return None
        if side.hooks.live is not None:
            side.hooks.live.take()   # the last reports, so none is left unreceived
        size, nodes = comm.size, self.nodes[:comm.size]
        per_rank = side.per_rank_phases(got)
        windows = side.windows(got, comm.size)
        merge = side.benchmark_kind.merge_phase
        phases = []
        for k in range(max((len(v) for v in per_rank.values()), default=0)):
            results = [per_rank[r][k] if r in per_rank and k < len(per_rank[r]) else None for r in range(size)]
            phases.append(merge(results, windows.get(k), nodes))
        doc = side.document(self, comm, got, phases, failure, argv, started_at)
        doc["mpi"] = {
            "size": size,
            "launcher": self.launch.launcher if self.launch else None,
            "launch_variables": self.launch.source if self.launch else None,
            "library": library_version(),
            "nodes": [{"node": n, "ranks": [r for r in range(size) if nodes[r] == n]} for n in dict.fromkeys(nodes)],
            "clock": [{"rank": r, "node": nodes[r], **self.offsets[r].as_dict()} for r in range(size)],
            **side.mpi_fields(phases),
            "ranks_reporting": sorted(got),
            "failed_rank": failure.rank if failure is not None else None,
        }
        doc["finished_at"] = now_iso()
        return doc

    def final_gather(self, comm: Comm, payload: dict[str, Any], timeout_s: float,
                     local_failure: RankFailure | None) -> tuple[dict[int, dict[str, Any]], RankFailure | None]:
        """The end of every MPI command: rank 0 gathers each surviving rank's payload; any failure
        sets the exit code on every rank, and a failure of rank 0 itself is reported by the other
        ranks (rank 0 will not). Returns the payloads (meaningful on rank 0) and the failure."""
        got = comm.gather_surviving(payload, timeout_s)
        failure = local_failure or comm.failure
        if failure is not None:
            self.exit_code = 1
            if comm.rank != 0 and failure.rank == 0:
                print(f"storlab: error: {failure.args[0]}", file=sys.stderr)   # nobody else will say it
        return got, failure

    def check_same_shape(self, template: Job, comm: Comm) -> None:
        """Every rank must run the same phases and groups (options may differ, e.g. under MPMD)."""
        shape = [(p.name, len(p.groups)) for p in template.phases]
        shapes = comm.allgather(shape)
        for r, s in enumerate(shapes):
            if s != shapes[0]:
                raise SpecError(f"rank {r} runs phases {s}, rank 0 runs {shapes[0]}: every rank needs the same job")


def run_cli(job: Job, argv: list[str], launch: Launch, progress: ProgressFn | None = None,
            notify: Callable[[str], None] | None = None,
            live: LiveSink | None = None) -> tuple[dict[str, Any] | None, int]:
    """`storlab run` under an MPI launcher: (merged document on rank 0 / None elsewhere, exit
    code for the ranks other than 0). Falls back to one process when MPI sees a single rank.
    `live`: where rank 0 keeps every rank's live figures (None on the other ranks)."""
    session = Session.start(float(job.run.get("rank_timeout") or 30.0), launch, live=live is not None)
    _warn_single_rank(session, launch, "run")
    doc = session.run(job, session.world, argv, progress, notify, live=live)
    return doc, session.exit_code


def run_meta_cli(values: Mapping[str, Any], argv: list[str], launch: Launch, rank_timeout_s: float,
                 progress: MetaProgressFn | None = None) -> tuple[dict[str, Any] | None, int]:
    """`storlab meta` under an MPI launcher: (merged document on rank 0 / None elsewhere, exit
    code for the ranks other than 0)."""
    session = Session.start(rank_timeout_s, launch)
    _warn_single_rank(session, launch, "meta")
    doc = session.run_ranks(MetaRanks(values, rank_timeout_s), session.world, argv, progress)
    return doc, session.exit_code


def _warn_single_rank(session: Session, launch: Launch, command: str) -> None:
    if session.size == 1:
        print(f"storlab {command}: warning: the {launch.launcher} launcher announced {launch.size} ranks but "
              "MPI sees 1: mpi4py is built against a different MPI than the launcher's (see docs/mpi.md)",
              file=sys.stderr)
