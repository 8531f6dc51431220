"""Runs `storlab meta` on every rank of an MPI job and merges the ranks' phases on rank 0.

Per rank: the metadata benchmark of storlab/measure/meta.py in one working folder shared by the ranks
(`storlab-meta-<id>` in the target, which may name {rank}/{node}/{size}), with rank-unique names
(`--name-prefix`, by default `r{rank}.`) and, with `--dir shared`, one tree that rank 0 makes and
removes. Each rank joins the others through MetaHooks: a barrier before every phase's clock starts
(so a shared tree exists before anyone creates in it, and is removed only after everyone removed
their files); at every progress tick a sample of its operation count and a check that stops the
phase when another rank failed; after every phase an exchange that carries the rank's phase result
to rank 0 (a barrier too), finds the window in which every worker of every rank was active and has
each rank count its operations in it; and before the clean-up, rank 0 waits until the others have
removed their files (then removes the shared tree and the working folder).

Stonewall: each rank's engine stops its workers at the deadline (counted from the common start
after the barrier) and keeps what each worker finished, so later phases work on exactly those
items; the counts of every rank are in `mpi.stonewall`. The engine has no wear-out that lets a
lagging rank catch up to the others' counts (mdtest's), so ranks may finish different counts.

Failure: a rank whose phase fails or whose run raises tells the others (comm.py); they stop their
running phase at the next tick (or do not start the next), remove what they made, and send what
they measured; rank 0 writes a document marked incomplete whose error names the rank.
"""
from __future__ import annotations

import json
import os
import sys
import uuid
from typing import Any, Mapping

from mpi4py import MPI

from ...document import header, now_iso
from ...errors import SpecError, TargetError
from ...signals import STOP
from .. import meta as single
from ..environment import host_environment
from .aggregate import count_in_window, deskew_window, merge_meta_phase
from .comm import TAG_CLEANUP, Comm, RankFailure
from .launch import Launch
from .orchestrator import Session, _one_line
from .rewrite import substitute

__all__ = ["run_ranks", "run_cli", "POLL_S", "DEFAULT_PREFIX"]

# Progress tick under MPI: how soon a rank notices that another failed, and the sampling interval
# of the operation counts the de-skewed rate is interpolated from.
POLL_S = 0.05
# Names must differ between ranks that share a folder: mdtest puts the rank in every name too.
DEFAULT_PREFIX = "r{rank}."


def _describe(e: BaseException) -> str:
    return "interrupted (Ctrl-C)" if isinstance(e, KeyboardInterrupt) else _one_line(e)


def _files_and_dirs(states_json: str) -> tuple[int, int]:
    states = json.loads(states_json)
    return sum(s["created"] - s["removed"] for s in states), sum(s["dirs"] for s in states)


class _Hooks(single.MetaHooks):
    """The points at which a rank joins the others during a metadata run (see the module doc)."""

    def __init__(self, comm: Comm, offset_s: float) -> None:
        self.comm = comm
        self.offset_s = offset_s
        self.failure: RankFailure | None = None
        self.local: list[dict[str, Any]] = []      # this rank's phase results, in order
        self.exchanged = 0                         # phases whose exchange this rank completed
        self.results: dict[int, list[dict[str, Any]]] = {}       # rank 0: phase -> every rank's result
        self.window_ops: dict[int, list[float | None]] = {}      # rank 0: phase -> ops in the window
        self.samples: list[tuple[float, int]] = []  # (seconds since the phase start, ops) this phase
        self.run = None
        self.before_cleanup_left: tuple[int, int] | None = None  # files, dirs before the clean-up
        self.cleaned: dict[int, Any] | None = None  # rank 0: the ranks that reported their clean-up

    def _fail(self, failure: RankFailure) -> None:
        if self.failure is None:
            self.failure = failure

    def before_start(self, phase: str, run) -> None:
        self.run = run
        if self.failure is None:
            try:
                self.comm.barrier()
            except RankFailure as e:
                self._fail(e)
        if self.failure is not None:
            # A MetaRun cannot be interrupted before its phase starts: end the run here instead;
            # run_meta_phase cleans up and re-raises, and run_ranks takes it from there.
            raise self.failure
        self.samples = [(0.0, 0)]

    def poll(self, phase: str, run) -> None:
        p = run.progress()
        if p is not None:
            self.samples.append((p[3], p[2]))
        if self.failure is None and self.comm.failure is not None:
            self._fail(self.comm.failure)
            run.interrupt()

    def after_end(self, phase: str, run, result: dict[str, Any]) -> None:
        k = len(self.local)
        result["offset_s"] = self.offset_s
        self.samples.append((result["seconds"], result["ops"]))
        self.local.append(result)
        if self.failure is None and result["stop_reason"] == "error":
            self._fail(self.comm.liveness.report(result["error"]))
        elif self.failure is None and result["stop_reason"] == "interrupted":  # a signal, here
            self._fail(self.comm.liveness.report(f"interrupted by {STOP.signal_name or 'a signal'}"))
        if self.failure is None:
            try:
                self._exchange(k, result)
            except RankFailure as e:
                self._fail(e)
        if self.failure is not None and result["stop_reason"] != "error":
            result.update(complete=False, stop_reason="error", error=self.failure.args[0])

    def _exchange(self, k: int, result: dict[str, Any]) -> None:
        comm = self.comm
        reports = comm.gather(result)
        info = None
        if comm.rank == 0:
            _, shifts, window = deskew_window(reports)
            stop = next(({"rank": r, "stop_reason": x["stop_reason"], "error": x["error"]}
                         for r, x in enumerate(reports) if not x["complete"]), None)
            if stop is not None:   # every rank marks its copy the same way below
                for x in reports:
                    _mark_stopped(x, stop)
            self.results[k] = reports
            info = {"shifts": shifts, "window": window, "stop": stop}
        info = comm.bcast(info)   # also the barrier after the phase: rank 0 sent it after hearing all
        mine = None
        if info["window"] is not None:
            shift = info["shifts"][comm.rank]
            mine = count_in_window(self.samples, info["window"][0] - shift, info["window"][1] - shift)
        everyone = comm.gather(mine)
        if comm.rank == 0:
            self.window_ops[k] = everyone
        self.exchanged = k + 1
        if info["stop"] is not None:
            _mark_stopped(result, info["stop"])

    def before_cleanup(self, run) -> None:
        self.run = run
        raised = sys.exc_info()[1]   # set when an exception is ending run_meta_phase
        if raised is not None and self.failure is None:
            # tell the others now, not after the clean-up: they may be waiting in a barrier
            self._fail(self.comm.liveness.report(_describe(raised)))
        self.before_cleanup_left = _files_and_dirs(run.states_json())
        if self.comm.rank == 0:
            # The shared tree and the folder go last: wait for every rank still alive to have
            # removed its files (no time limit: a dead rank drops out through the heartbeats).
            self.cleaned = self.comm.gather_surviving(None, float("inf"), tag=TAG_CLEANUP)

    def cleanup_after_raise(self, workdir: str, keep: bool) -> dict[str, Any]:
        """The clean-up report when run_meta_phase raised (it cleaned up but could not return):
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


def _mark_stopped(result: dict[str, Any], stop: dict[str, Any]) -> None:
    if result["complete"]:
        why = stop["error"] or stop["stop_reason"]
        result.update(complete=False, stop_reason=stop["stop_reason"], error=f"stopped with rank {stop['rank']}: {why}")


def _join_workdir(target: str, run_id: str) -> str:
    """The run's folder in the target: made by the first rank to get there, joined by the others
    (ranks with the same target share it; a {rank}/{node} target gives each its own)."""
    try:
        return single._make_workdir(target, run_id)
    except TargetError:
        workdir = os.path.join(target, f"storlab-meta-{run_id[:12]}")
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


def run_ranks(session: Session, values: Mapping[str, Any], argv: list[str], rank_timeout_s: float,
              progress: single.ProgressFn | None = None) -> dict[str, Any] | None:
    """Run the metadata benchmark on every rank of the session; the merged document on rank 0,
    None on the others (whose failure sets `session.exit_code`)."""
    comm = session.world
    started_at = now_iso()
    run_id = comm.bcast(uuid.uuid4().hex if comm.rank == 0 else None)
    template = values["target"] or os.getcwd()
    hooks = _Hooks(comm, session.offsets[comm.rank].offset_s)
    target = workdir = out = error = None
    cleanup: dict[str, Any] = {"kept": bool(values["keep"]), "files_removed": 0, "dirs_removed": 0, "error": None}
    try:
        target = os.path.abspath(substitute(template, comm.rank, session.nodes[comm.rank], comm.size))
        mine = _rank_values(values, comm, target)
        workdir = _join_workdir(target, run_id)
        out = single.run_meta_phase(mine, workdir, progress=progress if comm.rank == 0 else None,
                                    hooks=hooks, rank=comm.rank, shared_tree_owner=comm.rank == 0,
                                    progress_interval_s=POLL_S)
        cleanup = out["cleanup"]
    except RankFailure as e:   # another rank failed (or this one, already reported in after_end)
        hooks._fail(e)
        if workdir is not None:
            cleanup = hooks.cleanup_after_raise(workdir, bool(values["keep"]))
    except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001 - every failure must reach the others
        error = _describe(e)
        if hooks.failure is None:   # else before_cleanup already told the others
            hooks._fail(comm.liveness.report(error))
        if workdir is not None:
            cleanup = hooks.cleanup_after_raise(workdir, bool(values["keep"]))
    if comm.rank != 0:
        if workdir is not None and not cleanup["error"]:
            single._remove_workdir(workdir, values)   # fails harmlessly while other ranks' files remain
        comm.gather_surviving(None, float("inf"), tag=TAG_CLEANUP)
    else:
        if hooks.cleaned is None:   # kept, or the run ended before its clean-up: the notices still come
            hooks.cleaned = comm.gather_surviving(None, float("inf"), tag=TAG_CLEANUP)
        if workdir is not None and not cleanup["error"]:
            single._remove_workdir(workdir, values)
    payload = {"first": hooks.exchanged, "phases": hooks.local[hooks.exchanged:], "error": error,
               "cleanup": cleanup, "target": target, "workdir": workdir, "threads": values["threads"]}
    got, failure = session.final_gather(comm, payload, rank_timeout_s, hooks.failure)
    if comm.rank != 0:
        return None
    return _merge(session, values, template, got, hooks, failure, argv, started_at, rank_timeout_s)


def _merge(session: Session, values: Mapping[str, Any], template: str, got: dict[int, dict[str, Any]],
           hooks: _Hooks, failure: RankFailure | None, argv: list[str], started_at: str,
           rank_timeout_s: float) -> dict[str, Any]:
    """Rank 0: one `meta` document from every rank's phases (aggregate.merge_meta_phase)."""
    from ...devices.safety import describe_path

    size = session.size
    per_rank: dict[int, list[dict[str, Any]]] = {
        r: [hooks.results[k][r] for k in range(p["first"])] + p["phases"] for r, p in got.items()}
    n_phases = max((len(v) for v in per_rank.values()), default=0)
    phases = []
    for k in range(n_phases):
        results = [per_rank[r][k] if r in per_rank and k < len(per_rank[r]) else None for r in range(size)]
        phases.append(merge_meta_phase(results, hooks.window_ops.get(k), session.nodes))

    own = got[0]
    cleanups = {r: p["cleanup"] for r, p in got.items()}
    counts = [c[key] for c in cleanups.values() for key in ("files_removed", "dirs_removed")]
    cleanup_error = next((f"rank {r}: {c['error']}" for r, c in cleanups.items() if c["error"]), None)
    doc: dict[str, Any] = {
        **header("meta", argv=argv, started_at=started_at),
        "job": single._job_record(values, template, own["workdir"] or ""),
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
    errors = {r: p["error"] for r, p in got.items() if p["error"]}
    if failure is not None:
        doc.update(complete=False, stop_reason="error", error=failure.args[0])
    elif errors:
        r, e = next(iter(errors.items()))
        doc.update(complete=False, stop_reason="error", error=f"rank {r}: {e}")
    else:
        bad = next((p for p in phases if not p["complete"]), None)
        if bad is not None or n_phases < 1 + len(values["phases"]):
            doc.update(complete=False, stop_reason=bad["stop_reason"] if bad else "error",
                       error=bad["error"] if bad else "a phase did not run")
    doc["warnings"] = [w.as_dict() for w in single._warnings(doc)]
    nodes = session.nodes
    doc["mpi"] = {
        "size": size,
        "launcher": session.launch.launcher if session.launch else None,
        "launch_variables": session.launch.source if session.launch else None,
        "library": MPI.Get_library_version().strip().splitlines()[0],
        "nodes": [{"node": n, "ranks": [r for r in range(size) if nodes[r] == n]} for n in dict.fromkeys(nodes)],
        "clock": [{"rank": r, "node": nodes[r], **session.offsets[r].as_dict()} for r in range(size)],
        "rank_timeout_s": rank_timeout_s,
        "dir": values["dir"],
        "shared_tree_owner": 0 if values["dir"] == "shared" else None,
        "stonewall": [{"phase": p["name"], "stonewall_s": p["stonewall_s"],
                       "ranks": [{"rank": x["rank"], "items_per_worker": x["items_per_worker"]}
                                 for x in p["mpi"]["ranks"]]}
                      for p in phases if p["stonewalled"]],
        "ranks_reporting": sorted(got),
        "failed_rank": failure.rank if failure is not None else None,
    }
    doc["finished_at"] = now_iso()
    return doc


def run_cli(values: Mapping[str, Any], argv: list[str], launch: Launch, rank_timeout_s: float,
            progress: single.ProgressFn | None = None) -> tuple[dict[str, Any] | None, int]:
    """`storlab meta` under an MPI launcher: (merged document on rank 0 / None elsewhere, exit
    code for the ranks other than 0)."""
    session = Session.start(rank_timeout_s, launch)
    if session.size == 1:
        print(f"storlab meta: warning: the {launch.launcher} launcher announced {launch.size} ranks but "
              "MPI sees 1: mpi4py is built against a different MPI than the launcher's (see docs/mpi.md)",
              file=sys.stderr)
    doc = run_ranks(session, values, argv, rank_timeout_s, progress)
    return doc, session.exit_code
