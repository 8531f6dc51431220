"""The I/O benchmark: runs a resolved job through the engine and assembles the result document.

`IoBenchmark` is the I/O kind of the benchmark protocol (benchmark.py); `run_job` runs it with
the local runner, the MPI orchestrator on every rank. Order of work: resolve the default scratch
target, refuse unsafe block-device writes, add the preconditioning phases (`precondition_method`:
run first, once, through the same gate, reported apart as the document's `precondition`), then
for each phase check again every path it opens (`checked_spec`), build the engine plan, run it
on a background thread while reporting progress, and collect its result. Ctrl-C, SIGTERM and
SIGHUP (storlab/signals.py) stop the current phase, or the layout of its files, cleanly; the
partial result is kept with `complete: false` and the signal's name. While a phase runs, a
checkpoint of the document (with the phase's progress so far) is handed out every
`checkpoint_every` seconds, and after every phase. When a run fails, the files it created are
removed. The document layout is docs/result-format.md.
"""
from __future__ import annotations

import copy
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..devices.safety import check_opened_paths, is_object_target, is_remote_target
from ..document import DIRECTIONS, RUN_SCHEMA, header, now_iso
from ..errors import StorlabError, UserError, from_core
from ..jobs.job import Job, PhaseDef, core_spec, phase_record
from ..signals import STOP
from . import cache, passes, stats
from .aggregate import merge_phase
from .benchmark import Benchmark, PhaseHooks, run_benchmark, wait_for_phase
from .checks import Finding, check_phase
from .cpu import CpuSample, cpu_usage
from .environment import describe_target, host_environment
from .scratch import SCRATCH_SIZE_BYTES, Scratch, finish_main_job, prepare_main_job

SCHEMA = RUN_SCHEMA

ProgressFn = Callable[[str, int, int, float], None]


def checked_spec(phase, allow_destroy) -> dict[str, Any]:
    """The engine spec of an I/O phase with `checked`: every path its plan opens (the engine
    names them, per-thread and per-rank names included) run through the write-safety gate, which
    refuses what must not be written; the engine compares each descriptor it opens with that."""
    from .. import _core

    spec = core_spec(phase)
    try:
        opened = json.loads(_core.opened_paths(json.dumps(spec)))
    except _core.CoreError as e:
        raise from_core(*e.args) from None
    spec["checked"] = check_opened_paths(opened, allow_destroy)
    return spec


# The pattern a replay's spec carries, by the directions its log issues (read, write, trim): it only
# tells the write-safety gate and the plan whether the target is written; the log drives the I/O.
_REPLAY_RW = {(True, False, False): "read", (False, True, False): "write", (False, False, True): "trim",
              (False, True, True): "trimwrite"}


def apply_replay_logs(job: Job) -> None:
    """Groups with read_iolog: the target is the one file the log names unless the job gives one
    (then the log's file is mapped onto each target), and rw follows the log's directions."""
    from .. import _core

    for phase in job.phases:
        named_by_rw = phase.name == "+".join(sorted({g.values["rw"] for g in phase.groups}))
        for g in phase.groups:
            path = g.values.get("read_iolog")
            if not path:
                continue
            try:
                summary = json.loads(_core.iolog_summary(path))
            except _core.CoreError as e:
                raise from_core(*e.args) from None
            if not g.values["target"]:
                if len(summary["files"]) != 1:
                    raise from_core("spec", f"read_iolog: {path} names {len(summary['files'])} files; "
                                            "give --target to replay a log of one file onto it")
                g.values["target"] = (summary["files"][0],)
            dirs = summary["directions"]
            g.values["rw"] = _REPLAY_RW.get((dirs["read"], dirs["write"], dirs["trim"]), "randrw")
        if named_by_rw:   # a name made from rw (jobs/job.py) follows the log's pattern
            phase.name = "+".join(sorted({g.values["rw"] for g in phase.groups}))


def check_targets_safe(job: Job) -> None:
    """Refuse, before anything runs, a job that would write to a block device holding data (unless
    named in --allow-destroy) or in use; each phase is checked again when it starts."""
    for phase in job.phases:
        if phase.kind != "meta":
            checked_spec(phase, job.run.get("allow_destroy") or ())


@dataclass
class IoBenchmark(Benchmark):
    """The I/O kind of the benchmark protocol: every pass of every phase of a job, with the page
    cache, the write-safety gate, checkpoints and the model's prediction (a `meta` phase of a job
    file runs the metadata benchmark in its place)."""
    job: Job
    progress: ProgressFn | None = None
    progress_interval_s: float = 0.5
    # Live messages while a phase runs (stalled I/O); the CLI prints them on stderr.
    notify: Callable[[str], None] | None = None
    # Called with the document after every phase and every `checkpoint_every` seconds within one
    # (marked running, complete: false), so a run that is killed still leaves what it measured;
    # the final document replaces it.
    checkpoint: Callable[[dict[str, Any]], None] | None = None
    # Files the run created (regular files a plan made), removed again if the run fails.
    created: list[str] = field(default_factory=list)
    kind = "run"

    def __post_init__(self) -> None:
        self.scratch = Scratch()
        self._targets: dict[str, dict[str, Any]] = {}
        self._written: set[str] = set()   # targets written so far: cache=auto drops before reading them
        self._doc: dict[str, Any] = {}
        self._preconditioning: list[PhaseDef] = []   # run once, before the job, reported apart

    # -- the protocol ---------------------------------------------------------------------------
    def new_document(self, argv) -> dict[str, Any]:
        self._doc = {
            **header("run", argv=argv),
            "job": {},
            "environment": {**host_environment(), "io_uring": None},
            "warnings": [],
            "phases": [],
        }
        if self.job.translation is not None:    # a foreign format's job: how it was translated
            self._doc["translation"] = self.job.translation.record()
        return self._doc

    def prepare(self, doc: dict[str, Any]) -> None:
        settings = self.job.run
        if self.job.main_job:
            doc["main_job"] = prepare_main_job(self.job, self.scratch.path())
        apply_replay_logs(self.job)
        self._use_scratch_where_no_target(self.scratch)
        check_targets_safe(self.job)
        doc["warnings"].extend(cache.apply_sizing(self.job, settings, doc["environment"]["memory_bytes"]))
        if (settings.get("precondition_method") or "off") != "off":
            self._prepare_preconditioning(doc)
        doc["job"] = self._job_record()
        # the engine of the first I/O phase (the engine confirms it with each result); a job of only
        # metadata phases makes POSIX calls, no I/O engine. Known now, so every checkpoint has it.
        io = [p for p in self.job.phases if p.kind != "meta"]
        doc["environment"]["engine"] = io[0].groups[0].values["engine"] if io else "posix"
        if settings.get("stack"):
            from .prediction import predict_for_run  # the model loads only for --stack

            doc["model"] = predict_for_run(settings["stack"], doc["job"])

    def phases(self, doc: dict[str, Any]) -> Iterator[tuple[PhaseDef, int | None]]:
        """Every phase of every pass, with the pass number when there are several."""
        settings = self.job.run
        pass_count = settings.get("passes") or 1
        for phase in self._preconditioning:
            yield phase, None
        for pass_no in range(1, pass_count + 1):
            if pass_no > 1 and settings.get("pass_delay"):
                time.sleep(settings["pass_delay"])
            label = pass_no if pass_count > 1 else None
            for phase in self.job.phases:
                yield (phase if phase.kind == "meta" else self._for_pass(phase, pass_no, pass_count)), label

    def run_phase(self, phase: tuple[PhaseDef, int | None], hooks: PhaseHooks, doc: dict[str, Any]) -> None:
        phase_def, pass_no = phase
        self._exec(phase_def, "prerun", doc)
        if phase_def.kind == "meta":
            self._run_meta(phase_def, doc, pass_no)
        else:
            self._run_io(phase_def, hooks, doc, pass_no, self._targets, self._written)
        self._exec(phase_def, "postrun", doc)
        self._checkpoint(doc, self._targets)

    def _exec(self, phase, when: str, doc: dict[str, Any]) -> None:
        """A phase's exec_prerun / exec_postrun (fio's): the shell command, its output in
        PHASE.WHEN.txt in the current folder as fio writes JOB.WHEN.txt, its exit status and time
        in the document's `exec`; a command that fails ends the run with an error."""
        command = self.job.settings_of(phase).get(f"exec_{when}")
        if not command:
            return
        import subprocess  # only a phase with a command starts a process (a run loads what it uses)

        output = f"{phase.name or 'phase'}.{when}.txt"
        t0 = time.monotonic()
        with open(output, "w") as out:
            returncode = subprocess.run(["sh", "-c", command], stdout=out, stderr=subprocess.STDOUT).returncode
        doc.setdefault("exec", []).append({"phase": phase.name, "when": when, "command": command,
                                           "returncode": returncode, "seconds": time.monotonic() - t0,
                                           "output": os.path.abspath(output)})
        if returncode != 0:
            raise StorlabError(f"exec_{when} of phase {phase.name}: `{command}` exited with {returncode} "
                               f"(its output: {output})")

    def summarise(self, doc: dict[str, Any]) -> None:
        settings = self.job.run
        pass_count = settings.get("passes") or 1
        if pass_count > 1:
            summaries, spread = passes.summarise(doc["phases"], settings.get("pass_spread", 10.0))
            doc["passes"] = {"count": pass_count, "delay_s": settings.get("pass_delay") or 0.0,
                             "phases": summaries}
            self._add_warnings(doc, spread)
        doc["environment"]["targets"] = list(self._targets.values())
        if self.job.main_job:
            finish_main_job(doc)

    def stopped(self, doc: dict[str, Any]) -> None:
        """Mark the document interrupted by the signal received."""
        if doc["stop_reason"] not in ("interrupted", "error"):
            doc.update(complete=False, stop_reason="interrupted", error=None)
        if STOP.signal_name and doc["stop_reason"] == "interrupted":
            doc["signal"] = STOP.signal_name
        doc["environment"]["targets"] = list(self._targets.values())

    def abort(self) -> None:
        self._remove_created()

    def clean_up(self, doc: dict[str, Any], hooks: PhaseHooks) -> None:
        if doc["stop_reason"] == "error":
            self._remove_created()
        elif not (doc["complete"] and self.job.run.get("keep_objects")):
            # An s3 run's objects are the run's, not the user's: removed at its end unless kept,
            # and after a signal in any case (docs/object.md).
            self._remove_created(is_object_target)
        self.scratch.remove()

    def finish(self, doc: dict[str, Any]) -> None:
        pass  # every field is in place as each phase ends (summarise adds the cross-phase ones)

    @staticmethod
    def merge_phase(results, window_amount, nodes) -> dict[str, Any]:
        return merge_phase(results, window_amount, nodes)

    # -- the phases -----------------------------------------------------------------------------
    def _remove_created(self, which: Callable[[str], bool] = lambda path: True) -> None:
        """A failed run leaves no file it made (the user named them, but asked for a benchmark,
        not for a half-written file); `which` picks the ones to remove."""
        from .. import _core

        for path in [p for p in self.created if which(p)]:
            try:
                if is_remote_target(path):
                    _core.remove_remote_file(path)
                else:
                    os.remove(path)
            except (OSError, _core.CoreError):
                pass  # already gone, or never finished being made
            self.created.remove(path)

    def _run_io(self, phase, hooks: PhaseHooks, doc: dict[str, Any], pass_no: int | None,
                targets: dict[str, dict[str, Any]], written: set[str]) -> None:
        """An I/O phase: drop the page cache first if the cache mode says so, run it (its targets'
        pages invalidated once laid out, unless --invalidate off or --cache in), and add its
        result, warnings, targets and engine facts to the document."""
        settings = self.job.run
        preconditioning = self._is_preconditioning(phase)
        to_drop = cache.should_drop(phase, settings.get("cache", "off"), written)
        dropped = cache.drop_page_cache(to_drop) if to_drop else None
        if settings.get("latency_target") and not preconditioning:   # the search is the job's
            result = self._run_at_latency_target(phase, hooks)
        else:
            result = self._run_phase(phase, hooks)
        if dropped:
            result["cache"] = {"mode": settings["cache"], "dropped": to_drop, **dropped}
        if pass_no is not None:
            result["pass"] = pass_no
        written |= cache.written_paths(phase)
        if not preconditioning:   # the warnings judge measurements; preconditioning only writes
            self._add_warnings(doc, check_phase(phase, result, doc["environment"], settings))
        for t in result.pop("targets", []):
            if t.get("created") and t.get("type") in ("file", "nfs", "s3") and t["path"] not in self.created:
                self.created.append(t["path"])
            if t["path"] not in targets:     # described once: sysfs and mountinfo cost ~0.35 ms a look
                targets[t["path"]] = describe_target(t)
                if targets[t["path"]].get("network_fs"):
                    d = targets[t["path"]]
                    self._add_warnings(doc, [Finding(
                        "network_filesystem",
                        f"{t['path']} is on {d['network_fs']} ({d.get('fs_type')} at {d.get('mount_point')}): the "
                        f"figures include the network and the server, and the client's cache; storlab net measures "
                        f"the fabric alone (docs/network-targets.md)")])
        engine = result.pop("engine", {})
        if engine.get("counters"):   # the backend's own (s3: requests throttled and retried)
            result["engine_counters"] = engine["counters"]
        doc["environment"].setdefault("engine", engine.get("name"))
        if any(g.values["engine"] == "io_uring" for g in phase.groups):
            doc["environment"]["io_uring"] = self._uring_record(phase, engine)
        if preconditioning:   # reported apart from the job's phases
            self._add_preconditioning_result(doc, phase, result)
        else:
            doc["phases"].append(result)
        if not result["complete"]:
            doc.update(complete=False, stop_reason=result["stop_reason"], error=result.get("error"))
            if result["stop_reason"] == "interrupted" and STOP.signal_name:
                doc["signal"] = STOP.signal_name

    def _run_meta(self, phase, doc: dict[str, Any], pass_no: int | None) -> None:
        """A metadata phase of a job file: the metadata benchmark, whose operations become phases
        `NAME:create` ..."""
        progress = None
        if self.progress is not None:
            progress = lambda op, ops, elapsed: self.progress(f"{phase.name}:{op}", 0, ops, elapsed)  # noqa: E731
        from .meta import MetaBenchmark  # only a job file's metadata phase needs it

        out = run_benchmark(MetaBenchmark(phase.meta, progress=progress, run_id=doc["run_id"]))
        workdir = out["job"]["workdir"]
        for p in out["phases"]:
            entry = {**p, "name": f"{phase.name}:{p['name']}", "kind": "meta", "workdir": workdir}
            if pass_no is not None:
                entry["pass"] = pass_no
            doc["phases"].append(entry)
        if out["cleanup"].get("error"):
            self._add_warnings(doc, [{"code": "cleanup_incomplete",
                                      "message": f"{phase.name}: files were left behind: {out['cleanup']['error']}"}])
        if not out["complete"]:
            doc.update(complete=False, stop_reason=out["stop_reason"], error=out.get("error"))
            if out["stop_reason"] == "interrupted" and STOP.signal_name:
                doc["signal"] = STOP.signal_name

    def _prepare_preconditioning(self, doc: dict[str, Any]) -> None:
        """The preconditioning phases (jobs/precondition_job.py), through the write-safety gate now:
        they write, whatever the job does."""
        from ..jobs.precondition_job import phases as precondition_phases

        self._preconditioning = precondition_phases(self.job, target_range_bytes)
        for phase in self._preconditioning:
            checked_spec(phase, self.job.run.get("allow_destroy") or ())
        doc["precondition"] = {"method": self.job.run["precondition_method"], "limit_s": self.job.run["precondition_time"],
                               "phases": [], "seconds": 0.0, "bytes": 0, "reached": None,
                               "reached_after_s": None, "steadystate": None}

    def _is_preconditioning(self, phase) -> bool:
        return any(phase is p for p in self._preconditioning)

    def _add_preconditioning_result(self, doc: dict[str, Any], phase, result: dict[str, Any]) -> None:
        """A preconditioning phase in `precondition` (not `phases`): its range, figures and end;
        the last one's steady-state verdict is the preconditioning's (a warning when not reached)."""
        record = doc["precondition"]
        written = result.get("write") or {}
        record["phases"].append({
            "name": phase.name, "rw": result["rw"], "complete": result["complete"],
            "stop_reason": result["stop_reason"], "seconds": result["seconds"],
            "bytes": written.get("bytes", 0), "bw_bytes": written.get("bw_bytes", 0.0),
            "iops": written.get("iops", 0.0),
            "ranges": [{"target": list(g.values["target"]), "offset": g.values["offset"], "size": g.values["size"],
                        "io_size": g.values["io_size"]} for g in phase.groups]})
        record["seconds"] += result["seconds"]
        record["bytes"] += written.get("bytes", 0)
        ss = result.get("steadystate")
        if ss is None:
            return
        record.update(steadystate=ss, reached=ss["attained"], reached_after_s=ss["attained_at_s"])
        if not ss["attained"] and result["complete"]:
            from ..jobs.precondition import verdict_line

            self._add_warnings(doc, [{"code": "precondition_not_steady",
                                      "message": f"{verdict_line(record)}: the job measures a device not yet in "
                                                 f"steady state; raise --precondition-time"}])

    def _checkpoint(self, doc: dict[str, Any], targets: dict[str, dict[str, Any]],
                    running: dict[str, Any] | None = None) -> None:
        """Hand out the document so far (plus the running phase's progress, mid-phase); a signal
        during the write is recorded and acted on afterwards, never half-way through it."""
        if self.checkpoint is None:
            return
        snapshot = {**doc, "complete": False, "stop_reason": "running", "finished_at": now_iso(),
                    "phases": [*doc["phases"], *([running] if running else [])],
                    "environment": {**doc["environment"], "targets": list(targets.values())}}
        with STOP.held():
            self.checkpoint(snapshot)

    def _checkpoint_mid_phase(self, phase, run) -> None:
        """A checkpoint while `phase` runs: its entry says running and carries the progress
        counters (bytes and operations so far, ramp included; no latencies until it ends). A
        preconditioning phase is not one of the job's: the checkpoint is the document so far."""
        if self._is_preconditioning(phase):
            self._checkpoint(self._doc, self._targets)
            return
        snap = json.loads(run.snapshot_json())
        elapsed, ramp = snap["elapsed_s"], snap["ramp_s"]
        workers = snap["workers"]
        total_bytes = sum(w["bytes"] for w in workers)
        total_ops = sum(w["ops"] for w in workers)
        by = {d: [w for w in workers if w["direction"] == d] for d in DIRECTIONS}
        if not by["trim"]:
            del by["trim"]   # only phases that trim count trims
        progress = {
            "elapsed_s": elapsed, "includes_ramp": ramp > 0, "bytes": total_bytes, "ops": total_ops,
            "bw_bytes": total_bytes / elapsed if elapsed > 0 else 0.0,
            "iops": total_ops / elapsed if elapsed > 0 else 0.0,
            **{f"{d}_bytes": sum(w["bytes"] for w in ws) for d, ws in by.items()},
            **{f"{d}_ops": sum(w["ops"] for w in ws) for d, ws in by.items()},
            "workers": workers,
        }
        self._doc["environment"].setdefault("engine", phase.groups[0].values["engine"])
        running = {"name": phase.name, "complete": False, "stop_reason": "running",
                   "seconds": max(elapsed - ramp, 0.0), "ramp_s": ramp,
                   "rw": "+".join(sorted({g.values["rw"] for g in phase.groups})),
                   "groups": [g.name for g in phase.groups], "workers": [], "progress": progress}
        self._checkpoint(self._doc, self._targets, running)

    @staticmethod
    def _add_warnings(doc: dict[str, Any], found) -> None:
        """Add warnings once each: passes repeat the same phases."""
        seen = {(w["code"], w["message"]) for w in doc["warnings"]}
        for w in found:
            w = w if isinstance(w, dict) else w.as_dict()
            if (w["code"], w["message"]) not in seen:
                seen.add((w["code"], w["message"]))
                doc["warnings"].append(w)

    def _use_scratch_where_no_target(self, scratch: Scratch) -> None:
        if not self.job.uses_default_target:
            return
        path = scratch.path()
        for p in self.job.phases:
            if p.kind == "meta" and not p.meta["target"]:
                p.meta["target"] = os.path.dirname(path)
            for g in p.groups:
                if not g.values["target"]:
                    g.values["target"] = (path,)
                    if g.values["size"] is None and self.job.run.get("cache", "off") not in ("in", "out"):
                        g.values["size"] = SCRATCH_SIZE_BYTES

    @staticmethod
    def _for_pass(phase, pass_no: int, pass_count: int):
        """With several passes, verified data carries its pass number, so a read finding data of
        an earlier pass reports it as stale."""
        if pass_count == 1 or not any(g.values["verify"] != "off" for g in phase.groups):
            return phase
        phase = copy.deepcopy(phase)
        for g in phase.groups:
            if g.values["verify"] != "off" and g.values["verify_pass"] == 0:
                g.values["verify_pass"] = pass_no
        return phase

    def _job_record(self) -> dict[str, Any]:
        """Flat options of the first group (for filtering) plus every phase in full."""
        phases = [phase_record(p) for p in self.job.phases]
        io = [p for p in phases if p.get("type") != "meta"]
        first = dict(io[0]["groups"][0]) if io else self._meta_only_record(phases)
        first.pop("name", None)
        run_level = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.job.run.items()}
        return {**first, **run_level, "phases": phases}

    @staticmethod
    def _meta_only_record(phases: list[dict[str, Any]]) -> dict[str, Any]:
        """The flat fields of a job made only of metadata phases: its folder as the target, `meta`
        as the pattern, the bytes written per file as the request size, POSIX calls as the engine
        (as `storlab meta` records them)."""
        meta = (phases[0] if phases else {}).get("options") or {}
        target = meta.get("target") or os.getcwd()
        return {"target": [target], "rw": "meta", "bs": int(meta.get("file_size") or 0), "engine": "posix"}

    @staticmethod
    def _uring_record(phase, engine: dict[str, Any]) -> dict[str, Any]:
        g = next(g for g in phase.groups if g.values["engine"] == "io_uring").values
        return {
            "setup_flags": engine.get("setup_flags", []),
            "fixed_buffers": "FIXED_BUFFERS" in engine.get("setup_flags", []),
            "fixed_files": "FIXED_FILES" in engine.get("setup_flags", []),
            "sqpoll": "SQPOLL" in engine.get("setup_flags", []),
            "requested": {k: g[k] for k in ("uring.fixed_buffers", "uring.fixed_files", "uring.sqpoll", "uring.batch",
                                                        "uring.wait_spin")},
        }

    def _run_phase(self, phase, hooks: PhaseHooks) -> dict[str, Any]:
        from .. import _core

        # A network file this run made is its own to write again in later phases (a local one
        # needs no naming: the user named the file).
        made_here = tuple(p for p in self.created if is_remote_target(p))
        spec = json.dumps(checked_spec(phase, (*(self.job.run.get("allow_destroy") or ()), *made_here)))
        try:
            run = _core.PhaseRun(spec)
        except _core.CoreError as e:
            raise from_core(*e.args) from None
        # After the plan laid the files out, before the clock: the layout's pages are dropped too.
        invalidated = cache.invalidate(*cache.invalidation_targets(phase, self.job.run))
        steady = None
        settings = self.job.settings_of(phase)   # the phase's own steady-state check, else the run's
        if settings.get("ss"):   # the steady-state check loads only where one is asked for
            from .steady import SteadyState

            steady = SteadyState.of(settings)
        # Its workers set up and waiting at the start line before the ranks' barrier (MPI), so
        # the barrier's end starts I/O, not thread creation.
        run.arm()
        hooks.before_start(phase, run)
        cpu_before = CpuSample.now()
        run.start()
        stalls_seen = 0
        every = self.job.run.get("checkpoint_every", 10.0) if self.checkpoint else 0
        next_checkpoint = time.monotonic() + every

        def on_tick(stopping: bool) -> None:
            nonlocal stalls_seen, next_checkpoint
            stalls_seen = self._notify_stalls(phase.name, run, stalls_seen)
            if every and time.monotonic() >= next_checkpoint and not stopping:
                self._checkpoint_mid_phase(phase, run)
                next_checkpoint = time.monotonic() + every
            if steady is not None and not stopping and not steady.attained:
                b, o, elapsed, _done, clat_ns = run.progress()
                if steady.feed(elapsed, o, b, clat_ns):
                    run.interrupt()   # steady: the phase ends here, complete (below)

        tick = self.progress_interval_s if steady is None else min(self.progress_interval_s, 0.1)
        wait_for_phase(run, phase, hooks, tick, lambda: self._report(phase.name, run), on_tick)
        cpu_after = CpuSample.now()
        result = json.loads(run.result_json())
        if steady is not None:
            result["steadystate"] = steady.record()
            if steady.attained and result["stop_reason"] == "interrupted" and not STOP.requested:
                result.update(complete=True, stop_reason="steady_state")
        bw = sum(result[d]["bw_bytes"] for d in DIRECTIONS if d in result)
        result["cpu"] = cpu_usage(cpu_before, cpu_after, bw)
        result["rw"] = "+".join(sorted({g.values["rw"] for g in phase.groups}))
        result["groups"] = [g.name for g in phase.groups]
        result["invalidate"] = invalidated
        hooks.after_end(phase, run, result)
        return result

    def _run_at_latency_target(self, phase, hooks: PhaseHooks) -> dict[str, Any]:
        """fio's latency_target: the highest queue depth, up to the phase's own, whose
        latency_percentile of lat stays within latency_target over latency_window. Depths 1, 2,
        4 ... are tried until one fails, then bisected (at most 4 more tries); the phase then runs
        as written at the depth found (1 when none held) with latency_run, as fio's latency_run
        keeps running; without it (fio's default) the phase's result is the trial at that depth.
        Either way the result carries the search."""
        settings = self.job.run
        if type(hooks) is not PhaseHooks:
            raise UserError("latency_target: not available under MPI (each rank would find its own depth)")
        target_ns = settings["latency_target"] * 1e9
        window = settings.get("latency_window") or 5.0
        pct = settings.get("latency_percentile") or 100.0
        top = max(g.values["qd"] for g in phase.groups)
        steps: list[dict[str, Any]] = []

        def at_depth(qd: int, trial: bool):
            p = copy.deepcopy(phase)
            for g in p.groups:
                g.values["qd"] = min(qd, g.values["qd"])
                if trial:
                    g.values.update(time=window, io_size=None, io_total=None, ramp=0.0)
            return p

        trials: dict[int, dict[str, Any]] = {}

        def holds(qd: int) -> bool:
            r = trials[qd] = self._run_phase(at_depth(qd, True), hooks)
            buckets = stats.merge(*(r[d]["lat_hist"]["buckets"] for d in DIRECTIONS if r.get(d)))
            lat = stats.percentile(buckets, pct)
            iops = sum(r[d]["iops"] for d in DIRECTIONS if r.get(d))
            ok = bool(r["complete"] and lat is not None and lat <= target_ns)
            steps.append({"qd": qd, "iops": iops, "lat_percentile_ns": lat, "held": ok})
            if not r["complete"]:
                raise _SearchStopped(r)
            return ok

        try:
            good, bad, qd = 0, None, 1
            while qd <= top:
                if not holds(qd):
                    bad = qd
                    break
                good, qd = qd, qd * 2
            if bad is None and good < top:
                bad = top + 1 if holds(top) else top
                good = top if bad > top else good
            for _ in range(4):
                if bad is None or bad - good <= 1:
                    break
                mid = (good + bad) // 2
                good, bad = (mid, bad) if holds(mid) else (good, mid)
        except _SearchStopped as stopped:
            result = stopped.result
        else:
            if settings.get("latency_run") or good not in trials:
                result = self._run_phase(at_depth(max(good, 1), False), hooks)
            else:
                result = trials[good]
        best = next((s for s in steps if s["qd"] == good and s["held"]), None)
        result["latency_target"] = {"target_s": settings["latency_target"], "window_s": window, "percentile": pct,
                                    "qd": good, "iops": best["iops"] if best else None,
                                    "lat_percentile_ns": best["lat_percentile_ns"] if best else None,
                                    "found": best is not None, "steps": steps}
        return result

    def _notify_stalls(self, name: str, run, seen: int) -> int:
        new = json.loads(run.stalls_json(seen))
        if self.notify:
            for e in new:
                self.notify(f"{name}: stalled I/O: offset {e['offset']} on {e['target']} outstanding "
                            f"for {e['age_s']:.1f} s (worker {e['worker']})")
        return seen + len(new)

    def _report(self, name: str, run) -> None:
        if self.progress is not None:
            b, o, elapsed, _done, _clat_ns = run.progress()
            self.progress(name, b, o, elapsed)


def target_range_bytes(target: str, values) -> int:
    """Bytes of a target's I/O range: `size` when the job gives it, else what the file or block
    device holds past `offset` (preconditioning's sprandom regions need it before the plan)."""
    from ..devices.signatures import device_size_bytes

    if values.get("size"):
        return int(values["size"])
    try:
        fd = os.open(target, os.O_RDONLY)
    except OSError as e:
        raise UserError(f"precondition_method: cannot size {target} ({e.strerror}); give size") from None
    try:
        total = device_size_bytes(fd)
    finally:
        os.close(fd)
    return max(total - int(values.get("offset") or 0), 0)


class _SearchStopped(Exception):
    """A latency-target trial ended early (a signal, an error): the search stops with its result."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result.get("stop_reason"))
        self.result = result


def run_job(job: Job, argv: list[str] | None = None, progress: ProgressFn | None = None,
            hooks: PhaseHooks | None = None, notify: Callable[[str], None] | None = None,
            checkpoint: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run a job in this process and return its result document. Raises StorlabError subclasses
    for bad targets."""
    return run_benchmark(IoBenchmark(job, progress, notify=notify, checkpoint=checkpoint), argv or [], hooks)


__all__ = ["IoBenchmark", "run_job", "check_targets_safe", "apply_replay_logs",
           "checked_spec", "SCHEMA", "StorlabError"]
