"""Runs a job on every rank of a communicator and merges the ranks' results on rank 0.

Per rank: rewrite the job for the rank (rewrite.py), run it with the ordinary runner, and join
it at three points through runner hooks: a barrier after the phase's plan is built and before
its clock starts; a check at every progress tick that interrupts the local phase when another
rank failed; and, after the phase, an exchange that makes a barrier, finds the cross-rank de-skew
window, has each rank count its own bytes in it, and carries the stonewall counts to the phase
that reads them back. Rank 0 then gathers every rank's results and merges them (aggregate.py)
into one `storlab.run/1` document with `mpi` sections.

Failure: a rank whose run raises, whose phase ends with an error, or that a signal stops (Ctrl-C,
SIGTERM, SIGHUP: at once, not at the end of its phase) tells the others (comm.py); they interrupt
their phase at the next tick, and every rank sends what it has to rank 0, which writes a document
marked incomplete whose error names the rank (stop_reason `interrupted` and the signal's name when
a signal was the cause). A rank that vanished is noticed by the missing
heartbeats within `rank_timeout`. No rank ever waits without a bound.
"""
from __future__ import annotations

import atexit
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from mpi4py import MPI

from ...document import header, now_iso
from ...errors import SpecError
from ...jobs.job import Job, core_spec
from ...signals import STOP
from ..environment import host_environment
from ..runner import PhaseHooks, ProgressFn, run_job
from . import clock
from .aggregate import deskew_window, merge_phase
from .comm import Comm, Liveness, RankFailure
from .launch import Launch
from .rewrite import data_rank, read_only, rewrite_job, rewrite_warnings, wearout_io_size, wearout_pairs

__all__ = ["Session", "job_record"]


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text if isinstance(e, (ValueError, OSError)) or type(e).__module__.startswith("storlab") \
        else f"{type(e).__name__}: {text}"


def job_record(job: Job) -> dict[str, Any]:
    """The `job` section of a result for the job as the user wrote it (target templates, not one
    rank's paths): the first group's options flat, the run-level ones, and every phase in full."""
    phases = [core_spec(p) for p in job.phases]
    first = dict(phases[0]["groups"][0])
    first.pop("name", None)
    run_level = {k: (list(v) if isinstance(v, tuple) else v) for k, v in job.run.items()}
    return {**first, **run_level, "phases": phases}


class _Hooks(PhaseHooks):
    """The three points at which a rank joins the others during a run (see the module doc)."""

    def __init__(self, comm: Comm, job: Job, template: Job, offsets: list[clock.Offset],
                 reorder: int) -> None:
        self.comm = comm
        self.job = job                     # this rank's job: the runner runs these very objects
        self.template = template
        self.offset_s = offsets[comm.rank].offset_s
        self.reorder = reorder
        self.pairs = wearout_pairs(template)
        self.index = 0
        self.failure: RankFailure | None = None
        self.local: list[dict[str, Any]] = []          # per phase: result plus rank facts
        self.window_bytes: dict[int, list[float | None]] = {}   # rank 0: per phase, per rank
        self.stonewall: list[dict[str, Any]] = []      # rank 0: wear-out counts applied

    def _fail(self, failure: RankFailure) -> None:
        if self.failure is None:
            self.failure = failure

    def before_start(self, phase, run) -> None:
        if self.failure is None:
            try:
                self.comm.barrier()
            except RankFailure as e:
                self._fail(e)
        if self.failure is not None:
            run.interrupt()   # the phase starts and stops at once: a partial result, no hang

    def poll(self, phase, run) -> None:
        if self.failure is None and self.comm.failure is not None:
            self._fail(self.comm.failure)
            run.interrupt()

    def interrupted(self) -> None:
        """A signal stopped this rank: the others stop at their next tick."""
        if self.failure is None:
            self._fail(self.comm.liveness.report(f"interrupted by {STOP.signal_name or 'a signal'}"))

    def after_end(self, phase, run, result: dict[str, Any]) -> None:
        k = self.index
        self.index += 1
        g0 = phase.groups[0].values
        self.local.append({"result": result, "offset_s": self.offset_s,
                           "data_rank": data_rank(self.comm.rank, self.comm.size, self.reorder, read_only(g0)),
                           "targets": [t["path"] for t in result.get("targets", [])]})
        if self.failure is None and result["stop_reason"] == "error":
            self._fail(self.comm.liveness.report(f"phase {phase.name}: {result['error']}"))
        if self.failure is None:
            try:
                self._exchange(k, phase, run, result)
            except RankFailure as e:
                self._fail(e)
        signalled_here = result["stop_reason"] == "interrupted" and STOP.requested
        if self.failure is not None and result["stop_reason"] != "error" and not signalled_here:
            result.update(complete=False, stop_reason="error", error=self.failure.args[0])

    def _exchange(self, k: int, phase, run, result: dict[str, Any]) -> None:
        comm = self.comm
        report = {"start_unix_s": result["start_unix_s"], "offset_s": self.offset_s,
                  "complete": result["complete"], "stop_reason": result["stop_reason"],
                  "error": result.get("error"),
                  "workers": [{k2: w[k2] for k2 in ("group", "start_s", "end_s", "read_bytes", "write_bytes")}
                              for w in result["workers"]]}
        reports = comm.gather(report)
        info = None
        if comm.rank == 0:
            _, shifts, window = deskew_window(reports)
            stop = next(({"rank": r, "stop_reason": x["stop_reason"], "error": x["error"]}
                         for r, x in enumerate(reports) if not x["complete"]), None)
            counts = None
            if k in self.pairs.values():
                names = [g.name for g in phase.groups]
                counts = [[[w["write_bytes"] for w in x["workers"] if w["group"] == name] for name in names]
                          for x in reports]
            info = {"shifts": shifts, "window": window, "stop": stop, "counts": counts}
        info = comm.bcast(info)   # also the barrier after the phase: rank 0 sent it after hearing all
        mine = None
        if info["window"] is not None:
            shift = info["shifts"][comm.rank]
            mine = run.bytes_in_window(info["window"][0] - shift, info["window"][1] - shift)
        everyone = comm.gather(mine)
        if comm.rank == 0:
            self.window_bytes[k] = everyone
        if info["counts"] is not None:
            self._apply_wearout(k, info["counts"])
        stop = info["stop"]
        if stop is not None and result["complete"]:
            why = stop["error"] or stop["stop_reason"]
            result.update(complete=False, stop_reason=stop["stop_reason"],
                          error=f"stopped with rank {stop['rank']}: {why}")

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


@dataclass
class Session:
    """MPI for one storlab command: liveness, the world communicator, node names and clock
    offsets, set up once and shared by every run (and by every rank count of `storlab scale`)."""
    launch: Launch | None
    liveness: Liveness
    world: Comm
    nodes: list[str]
    offsets: list[clock.Offset]
    exit_code: int = 0
    _subs: dict[int, Any] = field(default_factory=dict)

    @classmethod
    def start(cls, rank_timeout_s: float, launch: Launch | None = None, sub_sizes: tuple[int, ...] = ()) -> "Session":
        """Initialise (all ranks call this together); sub-communicators of the first n ranks are
        made now for each n in `sub_sizes`, while every rank is known to be alive."""
        world = MPI.COMM_WORLD
        liveness = Liveness(world, rank_timeout_s)
        comm = Comm(world, liveness)
        nodes = comm.allgather(MPI.Get_processor_name())
        liveness.nodes = list(nodes)
        offsets = clock.exchange(comm, nodes)
        session = cls(launch, liveness, comm, nodes, offsets)
        for n in sub_sizes:
            sub = world.Split(0 if world.Get_rank() < n else MPI.UNDEFINED, world.Get_rank())
            session._subs[n] = None if sub == MPI.COMM_NULL else Comm(sub, liveness)
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
            notify: Callable[[str], None] | None = None, kind: str = "run") -> dict[str, Any] | None:
        """Run `template` on the ranks of `comm`; the merged document on its rank 0, else None."""
        nodes = self.nodes[:comm.size]
        offsets = self.offsets[:comm.size]
        reorder = int(template.run.get("reorder") or 0)
        rank_timeout = float(template.run.get("rank_timeout") or 30.0)
        started_at = now_iso()
        self._check_same_shape(template, comm)
        job = rewrite_job(template, comm.rank, nodes, reorder)
        hooks = _Hooks(comm, job, template, offsets, reorder)
        doc = None
        error = None
        try:
            tell = None if notify is None else (lambda msg: notify(f"rank {comm.rank}: {msg}"))
            doc = run_job(job, argv=argv, progress=progress if comm.rank == 0 else None, hooks=hooks, notify=tell)
        except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001 - every failure must reach the others
            error = _one_line(e) if not isinstance(e, KeyboardInterrupt) else "interrupted (Ctrl-C)"
            hooks._fail(comm.liveness.report(error))
        payload = {"doc": doc, "phases": hooks.local if doc is None else None, "error": error,
                   "sides": [{k: x[k] for k in ("offset_s", "data_rank", "targets")} for x in hooks.local]}
        got, failure = self.final_gather(comm, payload, rank_timeout, hooks.failure)
        if comm.rank != 0:
            return None
        return self._merge(template, got, comm.size, nodes, offsets, hooks, failure, argv, kind, started_at)

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

    def _check_same_shape(self, template: Job, comm: Comm) -> None:
        """Every rank must run the same phases and groups (options may differ, e.g. under MPMD)."""
        shape = [(p.name, len(p.groups)) for p in template.phases]
        shapes = comm.allgather(shape)
        for r, s in enumerate(shapes):
            if s != shapes[0]:
                raise SpecError(f"rank {r} runs phases {s}, rank 0 runs {shapes[0]}: every rank needs the same job")

    # -- merging on rank 0 ------------------------------------------------------------------------
    def _merge(self, template: Job, got: dict[int, dict[str, Any]], size: int, nodes: list[str],
               offsets: list[clock.Offset], hooks: _Hooks, failure: RankFailure | None,
               argv: list[str], kind: str, started_at: str) -> dict[str, Any]:
        per_rank_phases: dict[int, list[dict[str, Any]]] = {}
        for r, payload in got.items():
            phases = payload["doc"]["phases"] if payload["doc"] is not None else [x["result"] for x in payload["phases"]]
            per_rank_phases[r] = [{**p, **side} for p, side in zip(phases, payload["sides"])]
        n_phases = max((len(v) for v in per_rank_phases.values()), default=0)
        merged_phases = []
        for k in range(n_phases):
            results = [per_rank_phases.get(r, [])[k] if k < len(per_rank_phases.get(r, [])) else None
                       for r in range(size)]
            merged_phases.append(merge_phase(results, hooks.window_bytes.get(k), nodes))

        docs = {r: p["doc"] for r, p in got.items() if p["doc"] is not None}
        base = docs.get(0) or next(iter(docs.values()), None)
        doc: dict[str, Any] = {
            **header(kind, argv=argv, started_at=started_at, finished_at=now_iso()),
            "job": job_record(template),
            "environment": dict(base["environment"]) if base else {**host_environment(), "io_uring": None,
                                                                  "engine": template.phases[0].groups[0].values["engine"]},
            "warnings": [], "phases": merged_phases,
        }
        targets: dict[str, Any] = {}
        for d in docs.values():
            for t in d["environment"].get("targets") or []:
                targets.setdefault(t["path"], t)
        doc["environment"]["targets"] = list(targets.values())
        doc["warnings"] = self._warnings(template, docs, nodes)
        if base and "model" in base:  # a stack attached with --stack: every rank computed the same
            doc["model"] = base["model"]

        errors = {r: p["error"] for r, p in got.items() if p["error"]}
        signalled = {r: d["signal"] for r, d in docs.items() if d.get("signal")}
        if failure is not None and failure.rank in signalled:  # stopped by a signal, not broken
            doc.update(complete=False, stop_reason="interrupted", error=failure.args[0],
                       signal=signalled[failure.rank])
        elif failure is not None:
            doc.update(complete=False, stop_reason="error", error=failure.args[0])
        elif errors:
            r, e = next(iter(errors.items()))
            doc.update(complete=False, stop_reason="error", error=f"rank {r}: {e}")
        else:
            bad = next((p for p in merged_phases if not p["complete"]), None)
            if bad is not None or len(merged_phases) < len(template.phases):
                doc.update(complete=False, stop_reason=bad["stop_reason"] if bad else "error",
                           error=bad["error"] if bad else "a phase did not run")
        doc["mpi"] = {
            "size": size,
            "launcher": self.launch.launcher if self.launch else None,
            "launch_variables": self.launch.source if self.launch else None,
            "library": MPI.Get_library_version().strip().splitlines()[0],
            "nodes": [{"node": n, "ranks": [r for r in range(size) if nodes[r] == n]} for n in dict.fromkeys(nodes)],
            "clock": [{"rank": r, "node": nodes[r], **offsets[r].as_dict()} for r in range(size)],
            "reorder": int(template.run.get("reorder") or 0),
            "rank_timeout_s": float(template.run.get("rank_timeout") or 30.0),
            "stonewall": hooks.stonewall,
            "ranks_reporting": sorted(got),
            "failed_rank": failure.rank if failure is not None else None,
        }
        return doc

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


def run_cli(job: Job, argv: list[str], launch: Launch, progress: ProgressFn | None,
            notify: Callable[[str], None] | None = None) -> tuple[dict[str, Any] | None, int]:
    """`storlab run` under an MPI launcher: (merged document on rank 0 / None elsewhere, exit
    code for the ranks other than 0). Falls back to one process when MPI sees a single rank."""
    session = Session.start(float(job.run.get("rank_timeout") or 30.0), launch)
    if session.size == 1:
        print(f"storlab run: warning: the {launch.launcher} launcher announced {launch.size} ranks but "
              "MPI sees 1: mpi4py is built against a different MPI than the launcher's (see docs/mpi.md)",
              file=sys.stderr)
    doc = session.run(job, session.world, argv, progress, notify)
    return doc, session.exit_code
