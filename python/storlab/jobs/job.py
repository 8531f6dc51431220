"""A job: what `storlab run` will do, resolved from defaults, a job file and command-line flags.

A job is a sequence of phases run one after the other (e.g. write, then read back); a phase is
one or more groups of identical workers that run at the same time (fio's jobs between two
stonewalls). Precedence, lowest first: option defaults, the job file's top level, its
`[[phase]]`, its `[[phase.group]]`, then command-line flags (which apply to every group).
Run-level options apply to the whole run, at the top of the file; those marked per phase in the
option table (the steady-state check: ss, ss_dur, ss_ramp, ss_interval) may also be set in a
`[[phase]]` for that phase alone, the top-level value being the default of the others.

Job file (TOML), keys are option names from the option table:

    target = ["/dev/shm/a.dat"]
    size = "1g"
    bs = "4k"

    [[phase]]
    name = "write"
    rw = "write"

    [[phase]]
    name = "read"
    rw = "randread"
    time = "10s"

    [[phase]]                  # a metadata phase: create, stat, read, rename, remove files
    type = "meta"
    target = "/mnt/fs"         # a folder; keys are `storlab meta` options (docs/meta.md)
    files = 10000

Parsing only validates; nothing on the system is touched here. Each value is checked by the option
table as it is read, then each group and each phase as a whole by the engine's spec validation
(crates/storlab-core/src/spec.rs), the one place the rules that combine options are written.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from .. import _core
from .options import BY_NAME, OPTIONS, OptionError, parse_value, suggest
from .tomlfile import TomlFileError, read_toml

__all__ = ["GroupDef", "PhaseDef", "Job", "resolve_job", "load_jobfile", "core_spec", "phase_record",
           "validate_phase", "JOB_ONLY_KEYS"]

# Options that make sense once per run, not per phase or group.
RUN_LEVEL = frozenset(o.name for o in OPTIONS if not o.core)
# Run-level options a phase may set for itself (the run's value is the others' default).
PER_PHASE = frozenset(o.name for o in OPTIONS if o.per_phase)
JOB_ONLY_KEYS = frozenset({"phase", "group", "groups", "options", "name", "type"})
PHASE_TYPES = ("io", "meta")


@dataclass
class GroupDef:
    name: str
    values: dict[str, Any]           # every engine-bound option, canonical units


@dataclass
class PhaseDef:
    name: str
    groups: list[GroupDef]
    kind: str = "io"                          # io: groups of I/O workers; meta: the metadata benchmark
    meta: dict[str, Any] | None = None        # resolved `storlab meta` options of a meta phase
    own: dict[str, Any] = field(default_factory=dict)   # per-phase options (PER_PHASE) this phase
                                              # sets for itself, over the run's values


@dataclass
class Job:
    phases: list[PhaseDef]
    run: dict[str, Any] = field(default_factory=dict)   # run-level options (json, store, ...)
    main_job: bool = False                              # the default main job (mainjob.py)
    translation: Any = None    # the foreign-format Translation it came from (jobs/translation.py)

    def settings_of(self, phase: PhaseDef) -> dict[str, Any]:
        """The run-level options as `phase` has them: the run's, with the phase's own over them."""
        return {**self.run, **phase.own}

    @property
    def uses_default_target(self) -> bool:
        # A replay without a target takes the file its log names (measure/runner.py).
        return any(not g.values["target"] and not g.values.get("read_iolog") for p in self.phases for g in p.groups) or \
            any(p.kind == "meta" and not p.meta["target"] for p in self.phases)


def _unknown(key: str, where: str) -> OptionError:
    return OptionError(f"{where}: unknown option {key!r}{suggest(key)}")


def _dotted(section: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The keys of a section with TOML's dotted keys put back together: `uring.fixed_buffers = "off"`
    unquoted (or a `[uring]` table) is a table `uring` to TOML, and the option `uring.fixed_buffers`
    here. A table that names no option stays as it is, for the unknown-option message."""
    out: list[tuple[str, Any]] = []
    for key, raw in section.items():
        prefix = f"{key}."
        if isinstance(raw, Mapping) and key not in BY_NAME and key not in JOB_ONLY_KEYS \
                and any(name.startswith(prefix) for name in BY_NAME):
            out += [(prefix + sub, value) for sub, value in raw.items()]
        else:
            out.append((key, raw))
    return out


def _parse_section(section: Mapping[str, Any], where: str, allow_run_level: bool,
                   flags: bool = False, allow_per_phase: bool = False) -> dict[str, Any]:
    if not isinstance(section, Mapping):
        raise OptionError(f"{where}: expected a table of options, got {section!r}")
    out: dict[str, Any] = {}
    for key, raw in _dotted(section):
        if key in JOB_ONLY_KEYS:
            continue
        if key not in BY_NAME:
            raise _unknown(key, where)
        if not flags and not BY_NAME[key].job_key:
            raise OptionError(f"{where}: {key!r} is a command-line flag ({BY_NAME[key].flag}), not a job-file key")
        if key in RUN_LEVEL and not allow_run_level and not (allow_per_phase and key in PER_PHASE):
            if key in PER_PHASE:
                raise OptionError(f"{where}: option {key!r} applies to a whole phase; put it in the "
                                  f"[[phase]] table, or at the top of the job file for every phase")
            raise OptionError(f"{where}: option {key!r} applies to the whole run; put it at the top of the job file")
        try:
            out[key] = parse_value(key, raw)
        except OptionError as e:
            raise OptionError(f"{where}: {e}") from None
    return out


def load_jobfile(path: str) -> dict[str, Any]:
    """Read a TOML job file into a plain dict, with a one-line error naming the file."""
    try:
        return read_toml(path, "job file")
    except TomlFileError as e:
        raise OptionError(str(e)) from None



def _phase_name(explicit: str | None, groups: list[GroupDef], index: int) -> str:
    if explicit:
        return explicit
    kinds = sorted({g.values["rw"] for g in groups})
    return "+".join(kinds) if kinds else f"phase{index + 1}"


def resolve_job(cli_values: Mapping[str, Any], jobfile: Mapping[str, Any] | None = None,
                jobfile_name: str = "job file", phases: list[dict] | None = None) -> Job:
    """Resolve options into a Job.

    cli_values: options given on the command line (raw text or values), only those set.
    jobfile: parsed TOML (see load_jobfile). phases: an already structured list
    [{"name", "groups": [{"name", "options": {...}}]}] (from a translated fio job file).
    """
    base = {o.name: o.default for o in OPTIONS}
    top = _parse_section(jobfile or {}, jobfile_name, allow_run_level=True)
    cli = _parse_section(cli_values, "command line", allow_run_level=True, flags=True)
    run = {k: v for k, v in {**base, **top, **cli}.items() if k in RUN_LEVEL}

    raw_phases: list[dict] = []
    if phases is not None:
        raw_phases = phases
    elif jobfile and "phase" in jobfile:
        raw_phases = jobfile["phase"]
        if not isinstance(raw_phases, list) or not all(isinstance(p, dict) for p in raw_phases):
            raise OptionError(f"{jobfile_name}: 'phase' must be a list of tables ([[phase]])")
    if not raw_phases:
        raw_phases = [{}]

    resolved: list[PhaseDef] = []
    for pi, p in enumerate(raw_phases):
        where = f"{jobfile_name} phase {pi + 1}"
        _check_name(p, where)
        kind = p.get("type", "io")
        if kind not in PHASE_TYPES:
            raise OptionError(f"{where}: type: {kind!r} is not allowed; use one of: {', '.join(PHASE_TYPES)}")
        if kind == "meta":
            from .meta_options import resolve_meta_options  # only a job file with a metadata phase

            section = {k: v for k, v in p.items() if k not in ("type", "name")}
            resolved.append(PhaseDef(name=p.get("name") or "meta", groups=[], kind="meta",
                                     meta=resolve_meta_options(None, section, where)))
            continue
        phase_opts = _parse_section(p.get("options", p), where, allow_run_level=False, allow_per_phase=True)
        own = {k: v for k, v in phase_opts.items() if k in PER_PHASE and k not in cli}
        phase_opts = {k: v for k, v in phase_opts.items() if k not in PER_PHASE}
        _check_steady({**run, **own}, where if own else "")
        raw_groups = p.get("group") or p.get("groups") or [{}]
        if not isinstance(raw_groups, list) or not all(isinstance(g, dict) for g in raw_groups):
            raise OptionError(f"{where}: 'group' must be a list of tables ([[phase.group]]), "
                              f"got {type(raw_groups).__name__}")
        groups: list[GroupDef] = []
        for gi, graw in enumerate(raw_groups):
            gwhere = f"{where} group {gi + 1}"
            _check_name(graw, gwhere)
            gopts = _parse_section(graw.get("options", graw), gwhere, allow_run_level=False)
            merged = {**base, **top, **phase_opts, **gopts, **cli}
            if not any("engine" in given for given in (top, phase_opts, gopts, cli)):
                merged["engine"] = _engine_of_targets(merged["target"], merged["engine"])
            values = {k: v for k, v in merged.items() if BY_NAME[k].core}
            name = graw.get("name") or (f"g{gi + 1}" if len(raw_groups) > 1 else "")
            _check_with_engine([GroupDef(name="", values=values)], gwhere)
            groups.append(GroupDef(name=name, values=values))
        _check_with_engine(groups, where)
        resolved.append(PhaseDef(name=_phase_name(p.get("name"), groups, pi), groups=groups, own=own))
    return Job(phases=resolved, run=run)


def _engine_of_targets(targets, default: str) -> str:
    """The engine a group runs when none is named: a network target's own (nbd:// is read by the
    nbd engine, as fio's ioengine=nbd), else the default."""
    for target in targets or ():
        remote = _core.remote_target(target)
        if remote:
            return remote[0]
    return default


def _check_steady(settings: Mapping[str, Any], where: str) -> None:
    """A phase's steady-state options hold together (loaded only where `ss` is set); `where`
    names the phase that set some of them itself ("" when all are the run's)."""
    if settings.get("ss"):
        from .steadystate import check

        problem = check(settings)
        if problem:
            raise OptionError(f"{where}: {problem}" if where else problem)


def _check_name(table: Mapping[str, Any], where: str) -> None:
    """`name` of a phase or group, when given, is a text."""
    name = table.get("name")
    if name is not None and not isinstance(name, str):
        raise OptionError(f"{where}: name: expected a text, got {name!r}")


def _check_with_engine(groups: list[GroupDef], where: str) -> None:
    """The engine's validation of a phase of these groups (combinations such as an option of
    another engine, qd with psync, io_size with io_total; groups sharing ramp and interval), without
    touching the system: a group without a target yet (the scratch file, named when the run
    starts) is checked with a stand-in path."""
    specs = [_group_spec(g.name, {**g.values, "target": g.values["target"] or ("scratch",)}) for g in groups]
    try:
        _core.validate_spec(json.dumps({"name": "", "groups": specs}))
    except _core.CoreError as e:
        raise OptionError(f"{where}: {e.args[1]}") from None


def validate_phase(phase: PhaseDef, where: str) -> None:
    """The engine's validation of a phase built outside a job file (preconditioning's); an
    OptionError naming `where` when it fails."""
    _check_with_engine(phase.groups, where)


def _group_spec(name: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """One group of the engine's phase spec: its name and every engine-bound value (JSON types)."""
    return {"name": name, **{k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}}


def core_spec(phase: PhaseDef) -> dict[str, Any]:
    """The plain-data phase spec handed to the Rust engine (JSON-serialisable); for a meta phase,
    its options as recorded in the result."""
    if phase.kind == "meta":
        return {"name": phase.name, "type": "meta",
                "options": {k: list(v) if isinstance(v, tuple) else v for k, v in phase.meta.items()}}
    return {"name": phase.name, "groups": [_group_spec(g.name, g.values) for g in phase.groups]}


def phase_record(phase: PhaseDef) -> dict[str, Any]:
    """A phase as the result's `job.phases` records it: its engine spec, and the run-level options
    it sets for itself (its own steady-state check)."""
    return {**core_spec(phase), **{k: list(v) if isinstance(v, tuple) else v for k, v in phase.own.items()}}
