"""The metadata benchmark (`storlab meta`, after mdtest and NERSC's METABENCH).

Each worker thread creates N files (optionally writing B bytes to each) in a directory tree of its
own or one tree shared by all, then stats, reads, renames and removes them, and the trees are
removed; every operation is its own timed phase with ops/s and a per-operation latency histogram.
The hot loop is native (crates/storlab-core/src/meta); `MetaBenchmark` is the metadata kind of the
benchmark protocol (benchmark.py): it turns the resolved options (jobs/meta_options.py) into the
engine's spec, makes the working folder, runs the phases one at a time with progress, signals and
hooks, and assembles the result document (`storlab.run/1`, kind `meta`, docs/meta.md). With
`--mix` an operation-mix phase (opmix.py, Python threads) runs between read and rename; on an
s3:// target it works on the objects create made, through the Python object client.

Nothing is left behind unless `keep` is set: after the last phase, after a failure and after
Ctrl-C, SIGTERM or SIGHUP the engine removes exactly the files and directories the run made; a
signal during the removal is recorded, not raised, so the removal always runs to its end.

On an s3://BUCKET/PREFIX target the working folder is the new prefix PREFIX/storlab-meta-<id>/
(checked to hold no object before the first phase; nothing to make), each name a key under it and
each operation one request (docs/object.md); the clean-up deletes every object of the run there.
"""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..devices.safety import describe_path
from ..document import RUN_SCHEMA, header
from ..errors import TargetError, from_core
from ..jobs.meta_options import (
    FILE_PHASES,
    LIST_PHASE,
    META_OPTIONS,
    META_RUN_LEVEL,
    MIX_PHASE,
    PHASE_ORDER,
    is_s3_target,
)
from .aggregate import merge_meta_phase
from .benchmark import Benchmark, PhaseHooks, run_benchmark, wait_for_phase
from .checks import Finding
from .environment import host_environment
from .opmix import MixLayout, ObjectMixLayout, ObjectMixRun, OpMixRun, open_object_store

__all__ = [
    "MetaBenchmark", "meta_spec", "make_workdir", "remove_workdir", "workdir_name", "meta_job_record",
    "meta_findings", "run_meta", "run_meta_phase", "SCHEMA",
]

SCHEMA = RUN_SCHEMA
# Below this a phase's rate is mostly start-up and clock noise (metadata operations take
# microseconds, so 0.1 s is already ~10^4 operations on a local file system).
MIN_PHASE_SECONDS = 0.1

ProgressFn = Callable[[str, int, float], None]   # (phase, operations done, seconds since its start)


def meta_spec(values: Mapping[str, Any], workdir: str, *, rank: int = 0,
              shared_tree_owner: bool = True) -> dict[str, Any]:
    """The engine's spec (crates/storlab-core/src/meta/spec.rs) for one process.

    `workdir` is the existing folder the trees are made in. Under MPI every rank passes its
    `rank` (substituted for {rank} in name_prefix, so names are rank-unique) and exactly one rank
    is the `shared_tree_owner` that makes and removes a shared tree.
    """
    spec = {o.name: values[o.name] for o in META_OPTIONS if o.name not in META_RUN_LEVEL}
    spec["target"] = workdir
    spec["phases"] = ["mkdir", *(p for p in values["phases"] if p != MIX_PHASE)]
    spec["name_prefix"] = str(values.get("name_prefix") or "").replace("{rank}", str(rank))
    spec["shared_tree_owner"] = bool(shared_tree_owner)
    return spec


def workdir_name(target: str, run_id: str) -> str:
    """The run's own folder in the target directory (or its own prefix under an s3:// target):
    `storlab-meta-<id>`."""
    if is_s3_target(target):
        return f"{target.rstrip('/')}/storlab-meta-{run_id[:12]}"
    return os.path.join(target, f"storlab-meta-{run_id[:12]}")


def make_workdir(target: str, run_id: str) -> str:
    """Make the run's own folder inside the target directory; one-line errors naming the path."""
    try:
        st = os.stat(target)
    except OSError as e:
        raise TargetError(f"target {target}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise TargetError(f"target {target}: not a directory (storlab meta works in a directory)")
    workdir = workdir_name(target, run_id)
    try:
        os.mkdir(workdir, 0o755)
    except OSError as e:
        raise TargetError(f"target {target}: cannot make the working folder {workdir}: {e.strerror}") from None
    return workdir


def remove_workdir(workdir: str, keep: bool) -> None:
    """Remove the run's folder once it is empty (unless `keep`)."""
    if keep:
        return
    try:
        os.rmdir(workdir)
    except OSError:
        pass  # not empty: something the run did not make is in there; leave it to the user


def meta_job_record(values: Mapping[str, Any], target: str, workdir: str) -> dict[str, Any]:
    """The `job` section of a meta document: the options, the target and the working folder."""
    job = {k: (list(v) if isinstance(v, tuple) else v) for k, v in values.items()}
    job.update({
        "target": [target],            # a list, as in `storlab run` documents (store filters)
        "workdir": workdir,
        "phases": ["mkdir", *values["phases"]],
        # fields of the run schema that have no meaning for a metadata run
        "engine": "s3" if is_s3_target(target) else "posix", "rw": None, "bs": None,
    })
    return job


def meta_findings(doc: dict[str, Any]) -> list[Finding]:
    """The warnings of a meta document: stonewalled phases, phases too short to trust, leftovers."""
    out: list[Finding] = []
    files = doc["job"]["files"]
    short: list[str] = []
    for p in doc["phases"]:
        if p.get("stonewalled"):
            items = p["items_per_worker"]
            out.append(Finding("stonewalled", (
                f"{p['name']} stopped at the {p['stonewall_s']:g} s stonewall: threads finished "
                f"{min(items)}-{max(items)} of their items"
                + (f" ({files} files each asked for); later phases work on exactly those"
                   if p["name"] == "create" else ""))))
        elif p["complete"] and p["name"] in (*FILE_PHASES[:5], LIST_PHASE, MIX_PHASE) and p["seconds"] < MIN_PHASE_SECONDS:
            short.append(f"{p['name']} {p['seconds'] * 1e3:.1f} ms")
    if short:
        out.append(Finding("short_phase", (
            f"phases shorter than {MIN_PHASE_SECONDS:g} s ({', '.join(short)}): their rates are "
            f"mostly start-up noise; use more --files (or a --stonewall with many files; for mix "
            f"more --mix-ops or a --mix-time)")))
    cleanup = doc.get("cleanup") or {}
    if cleanup.get("error"):
        out.append(Finding("cleanup_incomplete", f"files were left behind: {cleanup['error']}"))
    return out


@dataclass
class MetaBenchmark(Benchmark):
    """The metadata kind of the benchmark protocol, for one process (under MPI: one rank).

    With no `workdir` the run makes `storlab-meta-<id>` in the target and removes it again;
    given one (an MPI rank's shared folder, or a test's), it works there and leaves the folder.
    """
    values: Mapping[str, Any]
    progress: ProgressFn | None = None
    run_id: str | None = None
    workdir: str | None = None
    rank: int = 0
    shared_tree_owner: bool = True
    progress_interval_s: float = 0.5
    kind = "meta"

    def __post_init__(self) -> None:
        self.s3 = is_s3_target(self.values["target"])
        self.target = self.values["target"].rstrip("/") if self.s3 else os.path.abspath(self.values["target"] or os.getcwd())
        self.run = None                    # the engine's MetaRun, once prepared
        self.made_workdir = False

    def new_document(self, argv: Sequence[str]) -> dict[str, Any]:
        return {
            **header("meta", argv=argv, run_id=self.run_id), "job": {},
            "environment": {**host_environment(), "engine": "s3" if self.s3 else "posix", "io_uring": None,
                            "targets": [], "directory": None if self.s3 else describe_path(self.target)},
            "warnings": [], "workers": self.values["threads"], "phases": [], "cleanup": None,
        }

    def prepare(self, doc: dict[str, Any]) -> None:
        from .. import _core

        if self.workdir is None and self.s3:
            # a prefix is made by the objects put under it: the run's own is checked new below
            self.workdir = workdir_name(self.target, doc["run_id"])
            self.made_workdir = True
        elif self.workdir is None:
            self.workdir = make_workdir(self.target, doc["run_id"])
            self.made_workdir = True
        spec = meta_spec(self.values, self.workdir, rank=self.rank, shared_tree_owner=self.shared_tree_owner)
        try:
            self.run = _core.MetaRun(json.dumps(spec))
            if self.s3 and self.made_workdir and not self.run.is_new():
                self.run = None    # the objects there are not the run's: the clean-up leaves them
                raise TargetError(f"target {self.workdir}: already holds objects; the run's own prefix must be new")
        except _core.CoreError as e:
            raise from_core(*e.args) from None
        doc["workers"] = self.run.workers
        if self.s3:
            # the prefix and the server, never a credential
            doc["environment"]["targets"] = [{"path": self.workdir, "type": "s3", "server": self.run.server,
                                              "endpoint": self.run.server, "size_bytes": 0}]

    def phases(self, doc: dict[str, Any]) -> Iterator[str]:
        mix_pending = MIX_PHASE in self.values["phases"]
        while True:
            upcoming = self.run.next_phase
            # the mix runs in Python between the engine's phases: after create, stat and read
            if mix_pending and doc["complete"] and (upcoming is None or (
                    upcoming != "mkdir" and PHASE_ORDER.index(upcoming) > PHASE_ORDER.index(MIX_PHASE))):
                mix_pending = False
                yield MIX_PHASE
                continue
            if upcoming is None:
                return
            yield upcoming

    def mix_run(self, doc: dict[str, Any]) -> OpMixRun:
        """The mix phase over the files the create phase of this process finished."""
        create = next(p for p in doc["phases"] if p["name"] == "create")
        spec_prefix = meta_spec(self.values, self.workdir, rank=self.rank)["name_prefix"]
        if self.s3:
            # the same names as keys under the run's prefix, through the Python object client
            store = open_object_store(self.workdir, endpoint=self.values.get("endpoint") or None,
                                      insecure=bool(self.values.get("insecure")),
                                      virtual_host=bool(self.values.get("virtual_host")),
                                      connections=self.values["threads"])
            objects = ObjectMixLayout(store, self.values["dir"], self.values["depth"], self.values["fanout"], spec_prefix)
            return ObjectMixRun(self.values, objects, create["items_per_worker"], rank=self.rank)
        layout = MixLayout(self.workdir, self.values["dir"], self.values["depth"], self.values["fanout"], spec_prefix)
        return OpMixRun(self.values, layout, create["items_per_worker"], rank=self.rank)

    def run_phase(self, phase: str, hooks: PhaseHooks, doc: dict[str, Any]) -> None:
        run = self.mix_run(doc) if phase == MIX_PHASE else self.run

        def report() -> None:
            if self.progress is not None:
                p = run.progress()
                if p is not None:
                    self.progress(phase, p[2], p[3])

        hooks.before_start(phase, run)
        run.start()
        interrupted = wait_for_phase(run, phase, hooks, self.progress_interval_s, report, tell_hooks=False)
        result = json.loads(run.result_json())
        hooks.after_end(phase, run, result)
        doc["phases"].append(result)
        if interrupted or not result["complete"]:
            # Ctrl-C just after a phase ended still stops the run
            doc.update(complete=False, stop_reason="interrupted" if result["error"] is None else "error",
                       error=result["error"])
            if self.run is not None:
                self.run.stop()

    def summarise(self, doc: dict[str, Any]) -> None:
        pass  # the phases are independent operations: nothing spans them

    def stopped(self, doc: dict[str, Any]) -> None:
        doc.update(complete=False, stop_reason="interrupted", error=None)
        if self.run is not None and not self.run.running:
            self.run.stop()     # no new phase; a running one is stopped by the clean-up

    def abort(self) -> None:
        pass  # the clean-up that follows removes exactly what the run made, failure or not

    def clean_up(self, doc: dict[str, Any], hooks: PhaseHooks) -> None:
        if self.run is not None:
            doc["cleanup"] = _cleanup(self.run, self.values, hooks)
        if self.made_workdir and not self.s3 and not (doc["cleanup"] or {}).get("error"):
            remove_workdir(self.workdir, bool(self.values["keep"]))

    def finish(self, doc: dict[str, Any]) -> None:
        doc["job"] = meta_job_record(self.values, self.target, self.workdir)
        doc["warnings"] = [w.as_dict() for w in meta_findings(doc)]

    @staticmethod
    def merge_phase(results, window_amount, nodes) -> dict[str, Any]:
        return merge_meta_phase(results, window_amount, nodes)


def _cleanup(run, values: Mapping[str, Any], hooks: PhaseHooks) -> dict[str, Any]:
    if run.running:  # an exception (a hook's, say) left a phase running: stop it first
        run.interrupt()
        while not run.wait(0.5):
            pass
    if values["keep"]:
        return {"kept": True, "files_removed": 0, "dirs_removed": 0, "error": None}
    hooks.before_cleanup(run)
    from .. import _core

    try:
        report = json.loads(run.cleanup())
        return {"kept": False, **report, "error": None}
    except _core.CoreError as e:
        return {"kept": False, "files_removed": None, "dirs_removed": None, "error": e.args[1]}


def run_meta(values: Mapping[str, Any], argv: list[str] | None = None,
             progress: ProgressFn | None = None, hooks: PhaseHooks | None = None) -> dict[str, Any]:
    """Run `storlab meta` in this process with resolved options and return the result document.

    Makes the working folder in the target, runs every phase, removes what the run made (unless
    keep) and the folder. Raises StorlabError subclasses when the target is unusable.
    """
    return run_benchmark(MetaBenchmark(values, progress), argv or (), hooks)


def run_meta_phase(values: Mapping[str, Any], workdir: str, *, progress: ProgressFn | None = None,
                   hooks: PhaseHooks | None = None, rank: int = 0, shared_tree_owner: bool = True,
                   progress_interval_s: float = 0.5) -> dict[str, Any]:
    """Run the metadata benchmark in `workdir` (an existing folder, left in place).

    Returns {"phases": [engine phase results], "complete", "stop_reason", "error", "workers",
    "cleanup": {"kept", "files_removed", "dirs_removed", "error"}}. Raises a StorlabError for a
    bad spec or an unusable folder (nothing was made then).
    """
    bench = MetaBenchmark(values, progress, workdir=workdir, rank=rank, shared_tree_owner=shared_tree_owner,
                          progress_interval_s=progress_interval_s)
    doc = run_benchmark(bench, (), hooks)
    return {k: doc[k] for k in ("phases", "complete", "stop_reason", "error", "workers", "cleanup")}
