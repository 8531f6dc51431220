"""`storlab meta`: the metadata benchmark (after mdtest and NERSC's METABENCH).

Each worker thread creates N files (optionally writing B bytes to each) in a directory tree of its
own or one tree shared by all, then stats, reads, renames and removes them, and the trees are
removed; every operation is its own timed phase with ops/s and a per-operation latency histogram.
The hot loop is native (crates/storlab-core/src/meta); this module holds the meta option table,
turns options into the engine's spec, runs the phases one at a time with progress, Ctrl-C and
hooks for an orchestrator, and assembles the result document (`storlab.run/1`, kind `meta`,
docs/meta.md).

Nothing is left behind unless `keep` is set: after the last phase, after a failure and after
Ctrl-C, SIGTERM or SIGHUP the engine removes exactly the files and directories the run made; a
signal during the removal is recorded, not raised, so the removal always runs to its end.
"""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..document import RUN_SCHEMA, header, now_iso
from ..errors import StorlabError, TargetError, from_core
from ..jobs.options import BY_NAME, Option, OptionError, parse_option
from ..signals import STOP
from .checks import Finding
from .environment import host_environment

__all__ = [
    "META_OPTIONS", "META_BY_NAME", "FILE_PHASES", "MetaHooks", "parse_meta_value",
    "resolve_meta_options", "meta_spec", "run_meta_phase", "run_meta", "render_table",
    "render_reference", "SCHEMA",
]

SCHEMA = RUN_SCHEMA
# The phases that work on files, in their only possible order; `mkdir` always runs first.
FILE_PHASES = ("create", "stat", "read", "rename", "remove", "rmdir")
# Options of `storlab run` that mean the same here (output and store); shared, not copied.
SHARED_RUN_OPTIONS = ("json", "quiet", "store", "no_store", "tag", "note")
# Below this a phase's rate is mostly start-up and clock noise (metadata operations take
# microseconds, so 0.1 s is already ~10^4 operations on a local file system).
MIN_PHASE_SECONDS = 0.1

ProgressFn = Callable[[str, int, float], None]   # (phase, operations done, seconds since its start)


def _choices(**values: str) -> dict[str, str]:
    return dict(values)


META_OPTIONS: tuple[Option, ...] = (
    Option("target", "str", "directory to work in: a new folder storlab-meta-<id> is made in it "
           "and removed afterwards (default: the current directory)", default=None,
           category="target", metavar="DIR"),
    Option("threads", "int", "worker threads", default=1, minimum=1, maximum=4096, fio_name="numjobs"),
    Option("files", "int", "files each thread creates (mdtest -n)", default=10_000, minimum=1,
           maximum=2**32 - 1, unit="files", fio_name="nrfiles"),
    Option("file_size", "size", "bytes written to each file at create and read back by read "
           "(mdtest -w/-e)", default=0, minimum=0, unit="bytes", fio_name="filesize"),
    Option("dir", "choice", "where the threads' files live", default="unique",
           choices=_choices(unique="one directory tree per thread (mdtest -u)",
                            shared="one tree for all threads: they contend for the same "
                                   "directories (METABENCH's shared-directory case)")),
    Option("depth", "int", "levels of subdirectories below each tree root; files go into the "
           "deepest level, round-robin (mdtest -z)", default=0, minimum=0, maximum=64),
    Option("fanout", "int", "subdirectories per directory when depth > 0 (mdtest -b)",
           default=10, minimum=1, maximum=1_000_000),
    Option("order", "choice", "order in which stat and read visit the files", default="sequential",
           choices=_choices(sequential="creation order",
                            random="a random permutation per thread (mdtest -R)")),
    Option("fsync_files", "bool", "fsync each file after writing it, inside the create latency "
           "(mdtest -y)", default=False),
    Option("fsync_dirs", "bool", "fsync every directory a thread changed at the end of mkdir, "
           "create, rename, remove and rmdir, inside the phase's time", default=False),
    Option("stonewall", "duration", "time limit of each file phase; later phases work on exactly "
           "the files each thread finished (mdtest -W)", default=None, category="timing",
           unit="s", minimum=0.001),
    Option("phases", "str", "file phases to run, comma-separated, in this order: "
           + ",".join(FILE_PHASES) + " (the tree is always made first; default: all, or all "
           "but remove,rmdir with --keep)", default=None, metavar="LIST"),
    Option("keep", "bool", "leave the files and directories in place, also after a failure or "
           "Ctrl-C (the working folder is printed)", default=False, category="safety"),
    Option("seed", "int", "seed of the random stat/read order", default=0x5EED, minimum=0,
           maximum=2**63 - 1),
    Option("name_prefix", "str", "prefix of every file and per-thread tree name; {rank} becomes "
           "the MPI rank (0 without MPI)", default=None, category="target", metavar="TEXT"),
    *(BY_NAME[name] for name in SHARED_RUN_OPTIONS),
)

META_BY_NAME: dict[str, Option] = {o.name: o for o in META_OPTIONS}
# Options that are not part of the engine's spec (the output ones and the job-level target).
RUN_LEVEL = frozenset(SHARED_RUN_OPTIONS)


def parse_meta_value(name: str, raw: Any) -> Any:
    """Validate one meta option value (from the CLI or a job file) into canonical units."""
    opt = META_BY_NAME.get(name)
    if opt is None:
        import difflib

        close = difflib.get_close_matches(name, list(META_BY_NAME), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise OptionError(f"unknown option {name!r}{hint}; see `storlab meta --help` for the list")
    if raw is None:
        return None
    if name == "name_prefix" and raw == "":
        return None  # no prefix, as by default
    if name == "phases" and isinstance(raw, (list, tuple)):  # a TOML list
        if not all(isinstance(p, str) for p in raw):
            raise OptionError(f"phases: expected names of phases, got {list(raw)!r}")
        return ",".join(raw)
    return parse_option(opt, raw)


def _parse_phases(raw: Any, keep: bool) -> tuple[str, ...]:
    if raw is None:
        return FILE_PHASES[:4] if keep else FILE_PHASES
    items = [p.strip() for p in (raw.split(",") if isinstance(raw, str) else raw)]
    unknown = [p for p in items if p not in FILE_PHASES]
    if unknown:
        raise OptionError(f"phases: {', '.join(map(repr, unknown))} unknown; use some of "
                          f"{','.join(FILE_PHASES)}")
    if "create" not in items:
        raise OptionError("phases: must include create (the files the other phases work on)")
    if len(set(items)) != len(items) or items != sorted(items, key=FILE_PHASES.index):
        raise OptionError(f"phases: each at most once, in the order {','.join(FILE_PHASES)}")
    if "rmdir" in items and "remove" not in items:
        raise OptionError("phases: rmdir needs remove before it (directories must be empty)")
    return tuple(items)


def resolve_meta_options(cli: Mapping[str, Any] | None = None,
                         jobfile: Mapping[str, Any] | None = None,
                         jobfile_name: str = "job file") -> dict[str, Any]:
    """Every meta option in canonical units: defaults < job file < command line (raw values are
    validated). `phases` becomes a tuple of file-phase names."""
    values = {o.name: o.default for o in META_OPTIONS}
    for where, section in ((jobfile_name, jobfile or {}), ("command line", cli or {})):
        for key, raw in section.items():
            try:
                parsed = parse_meta_value(key, raw)
            except OptionError as e:
                raise OptionError(f"{where}: {e}") from None
            if parsed is not None:
                values[key] = parsed
    values["phases"] = _parse_phases(values["phases"], bool(values["keep"]))
    return values


def meta_spec(values: Mapping[str, Any], workdir: str, *, rank: int = 0,
              shared_tree_owner: bool = True) -> dict[str, Any]:
    """The engine's spec (crates/storlab-core/src/meta/spec.rs) for one process.

    `workdir` is the existing folder the trees are made in. Under MPI every rank passes its
    `rank` (substituted for {rank} in name_prefix, so names are rank-unique) and exactly one rank
    is the `shared_tree_owner` that makes and removes a shared tree.
    """
    spec = {o.name: values[o.name] for o in META_OPTIONS if o.name not in RUN_LEVEL}
    spec["target"] = workdir
    spec["phases"] = ["mkdir", *values["phases"]]
    spec["name_prefix"] = str(values.get("name_prefix") or "").replace("{rank}", str(rank))
    spec["shared_tree_owner"] = bool(shared_tree_owner)
    return spec


class MetaHooks:
    """Points where an orchestrator (MPI) joins a metadata run; every method is optional.

    `before_start` runs before each phase's clock starts (the place for a barrier, so the phases
    of all ranks line up as mdtest's do); `poll` runs at every progress tick (call
    `run.interrupt()` to stop, e.g. when another rank failed); `after_end` gets each phase result
    and may extend it; `before_cleanup` runs before leftovers are removed (a barrier, so the owner
    of a shared tree removes it only after every rank removed its files).
    """

    def before_start(self, phase: str, run) -> None:
        pass

    def poll(self, phase: str, run) -> None:
        pass

    def after_end(self, phase: str, run, result: dict) -> None:
        pass

    def before_cleanup(self, run) -> None:
        pass


def _wait(run, phase: str, hooks: MetaHooks, progress: ProgressFn | None, interval_s: float) -> bool:
    """Wait for the running phase; True if Ctrl-C interrupted it."""
    def report() -> None:
        if progress is not None:
            p = run.progress()
            if p is not None:
                progress(phase, p[2], p[3])
    interrupted = False
    try:
        while not run.wait(interval_s):
            report()
            hooks.poll(phase, run)
            if STOP.requested and not interrupted:  # a signal recorded while held: stop now
                interrupted = True
                run.interrupt()
    except KeyboardInterrupt:
        interrupted = True
        run.interrupt()
        while not run.wait(0.5):
            pass
    report()
    return interrupted


def run_meta_phase(values: Mapping[str, Any], workdir: str, *, progress: ProgressFn | None = None,
                   hooks: MetaHooks | None = None, rank: int = 0, shared_tree_owner: bool = True,
                   progress_interval_s: float = 0.5) -> dict[str, Any]:
    """Run the metadata benchmark in `workdir` (an existing folder): the `meta` phase type of job
    files, and what `storlab meta` and the MPI orchestrator call.

    Returns {"phases": [engine phase results], "complete", "stop_reason", "error", "workers",
    "cleanup": {"kept", "files_removed", "dirs_removed", "error"}}. Raises a StorlabError for a
    bad spec or an unusable folder (nothing was made then).
    """
    from .. import _core

    hooks = hooks or MetaHooks()
    spec = meta_spec(values, workdir, rank=rank, shared_tree_owner=shared_tree_owner)
    try:
        run = _core.MetaRun(json.dumps(spec))
    except _core.CoreError as e:
        raise from_core(*e.args) from None
    out: dict[str, Any] = {"phases": [], "complete": True, "stop_reason": "done", "error": None,
                           "workers": run.workers}
    try:
        while run.next_phase is not None:
            phase = run.next_phase
            if STOP.requested:  # a signal came between phases (while held): no new phase
                out.update(complete=False, stop_reason="interrupted", error=None)
                run.stop()
                break
            hooks.before_start(phase, run)
            run.start()
            interrupted = _wait(run, phase, hooks, progress, progress_interval_s)
            result = json.loads(run.result_json())
            hooks.after_end(phase, run, result)
            out["phases"].append(result)
            if interrupted or not result["complete"]:
                out["complete"] = False
                # Ctrl-C just after a phase ended still stops the run
                out["stop_reason"] = "interrupted" if result["error"] is None else "error"
                out["error"] = result["error"]
                run.stop()
                break
    except KeyboardInterrupt:  # a signal outside a phase's wait (a hook, between phases);
        out.update(complete=False, stop_reason="interrupted", error=None)  # clean-up stops the run
    finally:
        with STOP.held():
            out["cleanup"] = _cleanup(run, values, hooks)
    return out


def _cleanup(run, values: Mapping[str, Any], hooks: MetaHooks) -> dict[str, Any]:
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


def _make_workdir(target: str, run_id: str) -> str:
    """The run's own folder inside the target directory; one-line errors naming the path."""
    try:
        st = os.stat(target)
    except OSError as e:
        raise TargetError(f"target {target}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise TargetError(f"target {target}: not a directory (storlab meta works in a directory)")
    workdir = os.path.join(target, f"storlab-meta-{run_id[:12]}")
    try:
        os.mkdir(workdir, 0o755)
    except OSError as e:
        raise TargetError(f"target {target}: cannot make the working folder {workdir}: {e.strerror}") from None
    return workdir


def _warnings(doc: dict[str, Any]) -> list[Finding]:
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
        elif p["complete"] and p["name"] in FILE_PHASES[:5] and p["seconds"] < MIN_PHASE_SECONDS:
            short.append(f"{p['name']} {p['seconds'] * 1e3:.1f} ms")
    if short:
        out.append(Finding("short_phase", (
            f"phases shorter than {MIN_PHASE_SECONDS:g} s ({', '.join(short)}): their rates are "
            f"mostly start-up noise; use more --files (or a --stonewall with many files)")))
    cleanup = doc.get("cleanup") or {}
    if cleanup.get("error"):
        out.append(Finding("cleanup_incomplete", f"files were left behind: {cleanup['error']}"))
    return out


def _job_record(values: Mapping[str, Any], target: str, workdir: str) -> dict[str, Any]:
    job = {k: (list(v) if isinstance(v, tuple) else v) for k, v in values.items()}
    job.update({
        "target": [target],            # a list, as in `storlab run` documents (store filters)
        "workdir": workdir,
        "phases": ["mkdir", *values["phases"]],
        # fields of the run schema that have no meaning for a metadata run
        "engine": "posix", "rw": None, "bs": None,
    })
    return job


def run_meta(values: Mapping[str, Any], argv: list[str] | None = None,
             progress: ProgressFn | None = None, hooks: MetaHooks | None = None) -> dict[str, Any]:
    """Run `storlab meta` with resolved options and return the result document.

    Makes the working folder in the target, runs every phase, removes what the run made (unless
    keep) and the folder. Raises StorlabError subclasses when the target is unusable.
    """
    from ..devices.safety import describe_path

    target = os.path.abspath(values["target"] or os.getcwd())
    doc: dict[str, Any] = {
        **header("meta", argv=argv or ()), "job": {},
        "environment": {**host_environment(), "engine": "posix", "io_uring": None, "targets": [],
                        "directory": describe_path(target)},
        "warnings": [], "workers": values["threads"], "phases": [], "cleanup": None,
    }
    out, workdir = run_in_target(values, doc["run_id"], progress=progress, hooks=hooks)
    doc["job"] = _job_record(values, target, workdir)
    doc.update({k: out[k] for k in ("phases", "complete", "stop_reason", "error", "workers", "cleanup")})
    doc["warnings"] = [w.as_dict() for w in _warnings(doc)]
    doc["finished_at"] = now_iso()
    return doc


def run_in_target(values: Mapping[str, Any], run_id: str, *, progress: ProgressFn | None = None,
                  hooks: MetaHooks | None = None) -> tuple[dict[str, Any], str]:
    """Make the working folder `storlab-meta-<id>` in the target, run every phase there and remove
    what the run made and the folder (unless keep). Returns run_meta_phase's outcome and the
    folder. Used by `storlab meta` and by `meta` phases of `storlab run` job files."""
    target = os.path.abspath(values["target"] or os.getcwd())
    workdir = _make_workdir(target, run_id)
    try:
        out = run_meta_phase(values, workdir, progress=progress, hooks=hooks)
    except StorlabError:
        _remove_workdir(workdir, values)
        raise
    if not out["cleanup"]["error"]:
        with STOP.held():
            _remove_workdir(workdir, values)
    return out, workdir


def _remove_workdir(workdir: str, values: Mapping[str, Any]) -> None:
    if values["keep"]:
        return
    try:
        os.rmdir(workdir)
    except OSError:
        pass  # not empty: something the run did not make is in there; leave it to the user


# -- rendering ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Col:
    header: str
    get: Callable[[dict], Any]
    scale: float = 1.0
    numeric: bool = True


def _lat(phase: dict[str, Any], key: str) -> Any:
    """A latency figure of a phase; none when it did no operation or (an imported mdtest run) has
    no latency."""
    return (phase.get("lat_ns") or {}).get(key) if phase.get("ops") else None


_COLUMNS = (
    _Col("phase", lambda p: p["name"], numeric=False),
    _Col("ops", lambda p: p["ops"]),
    _Col("time ms", lambda p: p["seconds"], 1e-3),
    _Col("ops/s", lambda p: p["ops_per_s"]),
    _Col("mean us", lambda p: _lat(p, "mean"), 1e3),
    _Col("p50 us", lambda p: _lat(p, "p50"), 1e3),
    _Col("p99 us", lambda p: _lat(p, "p99"), 1e3),
    _Col("p99.9 us", lambda p: _lat(p, "p999"), 1e3),
    _Col("max us", lambda p: _lat(p, "max"), 1e3),
    _Col("stonewalled", lambda p: "yes" if p.get("stonewalled") else "no", numeric=False),
)


def phase_table(phases: list[dict[str, Any]]) -> list[str]:
    """Lines of the table of metadata phases: one row per phase, units in the headers."""
    from ..output.base import align, fmt_number

    cells = []
    for p in phases:
        row = []
        for c in _COLUMNS:
            v = c.get(p)
            row.append(str(v) if not c.numeric else fmt_number(None if v is None else v / c.scale))
        cells.append(row)
    return align([c.header for c in _COLUMNS], cells, [c.numeric for c in _COLUMNS]) if cells else [
        "(no phase ran)"]


def render_table(doc: dict[str, Any]) -> str:
    """Plain-text table of a meta result: the settings line, then one row per phase."""
    lines = phase_table(doc.get("phases") or [])
    job = doc.get("job") or {}
    lines.insert(0, f"{doc.get('workers')} thread(s) x {job.get('files')} files, dir {job.get('dir')}, "
                    f"depth {job.get('depth')}, fanout {job.get('fanout')}, "
                    f"file size {job.get('file_size')} bytes, in {job.get('workdir')}")
    if doc.get("complete") is False:
        detail = f": {doc['error']}" if doc.get("error") else ""
        lines.append(f"incomplete ({doc.get('stop_reason')}{detail}): figures cover the time until the stop")
    cleanup = doc.get("cleanup") or {}
    if cleanup.get("kept"):
        lines.append(f"kept: the files are in {job.get('workdir')}")
    return "\n".join(lines)


def render_reference() -> str:
    """The options section of docs/meta.md, generated from the table (a test keeps them equal)."""
    lines = ["| option | job-file key | type | default | help |", "|---|---|---|---|---|"]
    for o in META_OPTIONS:
        flag = o.flag + (f" / {o.negative}" if o.negative else "")
        default = "—" if o.default in (None, ()) else repr(o.default)
        text = o.help
        if o.choices:
            text += "<br>" + "<br>".join(f"`{k}`: {v}" for k, v in o.choices.items())
        unit = f" ({o.unit})" if o.unit else ""
        lines.append(f"| `{flag}` | `{o.name}` | {o.kind}{unit} | {default} | {text} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_reference())
