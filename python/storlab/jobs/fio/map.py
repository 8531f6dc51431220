"""fio's settings as storlab phases, with fio's semantics: the map step of the fio translator.

fio semantics kept: [global] sections set defaults for the jobs below them; jobs run concurrently
until one has `stonewall`/`wait_for_previous` (or `wait_for`), which starts a new phase;
`numjobs` clones of a job with a fixed `filename` share its files, while clones without one get
their own files, named `jobname.jobnum.filenum` (or `filename_format`) in `directory` (a `:` list
of directories is dealt to the clones round-robin); `size` is split over a job's files unless
`filesize` is given; `runtime` without `time_based` stops at whichever comes first, the time or
one pass (`loops` passes) over `size`; sizes follow `kb_base` (parse.py).

Every fio option is looked up in options.py: translated, accepted (changes nothing storlab
measures) or refused. Nothing is ignored silently: translate_sections() raises one `Refusal`
(jobs/translation.py: one line, at most 200 characters) naming the first problem in full — file,
line, key, value, reason — and each further refused key once; what storlab does not do points to
docs/fio.md. Every value produced is canonical for storlab.jobs.options.parse_value.
"""
from __future__ import annotations

import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from typing import Any

from ..options import OptionError, parse_value
from ..translation import Refusal
from .options import ENGINES, HTTP_OPTIONS, META_ENGINES, REFUSED_ENGINES, shown_value, status_of
from .parse import (
    BARE_OPTIONS,
    BOOLEAN_OPTIONS,
    COMMAND_LINE,
    FORMAT,
    FioJobError,
    Section,
    Setting,
    parse_bool,
    parse_fio_size,
    parse_fio_time,
    split_list,
)

__all__ = ["FioJob", "FioPlan", "translate_sections", "DOCS"]

DOCS = "docs/fio.md"

_RW = {"read": "read", "write": "write", "randread": "randread", "randwrite": "randwrite",
       "rw": "rw", "readwrite": "rw", "randrw": "randrw", "trim": "trim", "randtrim": "randtrim",
       "trimwrite": "trimwrite"}
# accepted options that change nothing only with these values
_ONLY = {"lockfile": {"none"}, "io_submit_mode": {"inline"}, "continue_on_error": {"none", "0"}}
# fio's unified_rw_reporting values -> the report's mode
UNIFIED = {"none": "none", "0": "none", "mixed": "mixed", "1": "mixed", "both": "both", "2": "both"}
# refused options given fio's default value: they ask for nothing storlab does not do, so they run
# (`hipri=0`, `nice=0` ...); a boolean's off is any of fio's spellings of false
_OFF = {"0", "false", "no", "off"}
DEFAULT_VALUES = {
    **{key: _OFF for key in ("hipri", "blocksize_unaligned", "exitall", "exitall_on_error",
                             "verify_only", "pre_read", "allow_mounted_write", "atomic", "fdp", "write_barrier",
                             "end_syncfs", "create_only", "unlink_each_loop", "file_append")},
    "nice": {"0"}, "zonemode": {"none"},
    # the http engine's: the class fio sends by default, no SSE-C key, no webdav user
    "http_s3_storage_class": {"standard"}, "http_s3_sse_customer_key": {""}, "http_user": {""}, "http_pass": {""},
}

# A deliberate difference printed once (docs/fio.md): an io_uring job without fixedbufs. fio then
# lets the kernel pin each request's pages on every I/O; storlab registers its buffers where the
# kernel allows (uring.fixed_buffers = auto): the same requests, less CPU per request.
FIXEDBUFS_NOTE = ("fixedbufs not set: storlab registers the I/O buffers with the ring (fixedbufs) where "
                  "the kernel allows (uring.fixed_buffers = auto); fio does not unless fixedbufs=1; "
                  "add fixedbufs=0 for fio's behaviour")
# ... and a libaio or posixaio job, run on io_uring: fio's engine has no fixedbufs to set
ASYNC_BUFFERS_NOTE = ("{engine} → io_uring registers the I/O buffers with the ring (fixedbufs) where the "
                      "kernel allows (uring.fixed_buffers = auto); fio's {engine} does not; "
                      "`storlab run --fio JOB --uring-fixed-buffers off` for fio's behaviour")
# ... and every job run on io_uring: storlab's waiting thread spins briefly before it sleeps
WAIT_SPIN_NOTE = ("io_uring: a thread waiting for a completion spins up to 100 us before it sleeps "
                  "(uring.wait_spin = 100us); fio's sleeps at once: the same requests, only the waiting "
                  "thread's CPU differs; `--uring-wait-spin 0` for fio's behaviour")

# fio's http engine in S3 mode (engines/http.c): the settings it reads from the environment of the
# s3 engine instead, and the lines said once
S3_ENVIRONMENT = {"http_s3_keyid": "AWS_ACCESS_KEY_ID", "http_s3_key": "AWS_SECRET_ACCESS_KEY",
                  "http_s3_security_token": "AWS_SESSION_TOKEN", "http_s3_region": "AWS_REGION"}
S3_CREDENTIALS_NOTE = ("http_s3_keyid, http_s3_key (and http_s3_region) → AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY "
                       "(and AWS_REGION) of the run's environment: never in the job, its record or output "
                       "(an emitted job needs them exported)")
S3_ENV_NOTE = ("no http_s3_keyid/http_s3_key: the s3 engine takes the credentials from AWS_ACCESS_KEY_ID and "
               "AWS_SECRET_ACCESS_KEY or ~/.aws (fio would sign with an empty key); http_s3_region → AWS_REGION")
S3_BLOCK_NOTE = ("http_object_mode=block → one object per request (object_size = bs): fio names the object at "
                 "offset O KEY_O_BS, storlab KEY/obj-N (N = O / bs, twelve digits): the same requests, "
                 "other names, so neither reads the other's objects")
S3_RANGE_NAME_NOTE = ("http_object_mode=range → storlab's object is KEY/obj-000000000000, not fio's KEY: "
                      "name the object PREFIX/obj-NNNNNNNNNNNN in filename for fio and storlab to share it")
S3_MISSING_NOTE = ("http: a read of a missing object is laid out (PUT) before the run and removed after it; "
                   "fio reads zeroes for a missing object (its 404)")
S3_QD_NOTE = ("http is fio's synchronous engine: iodepth is capped at 1 (qd = 1), as fio caps it; run more "
              "requests at once with numjobs")

# refill_buffers (fio: new random data in every write) runs as scramble, said once (docs/fio.md)
REFILL_NOTE = ("refill_buffers → scramble: storlab makes every 512-byte sector written unique (its offset "
               "and a write number) instead of refilling the buffer with new random data: deduplication "
               "finds no block twice either way, but a reduction comparing similar blocks could find "
               "the rest of a slot's writes alike")



# -- problems -------------------------------------------------------------------------------------
class _Bad(ValueError):
    """A setting with a value storlab cannot take (raised from deep in a job's translation)."""

    def __init__(self, setting: Setting, reason: str) -> None:
        super().__init__(reason)
        self.setting, self.reason = setting, reason


@dataclass
class _Problem:
    rank: int            # 0 an engine storlab does not do, 1 an option it does not do, 2 a bad value
    file: str
    line: int | None
    key: str
    value: str
    reason: str


class _Problems:
    """What cannot run, in order: the engine, unsupported options, bad values (each in file order).
    The refusal names the first in full and each further key once."""

    ENGINE, UNSUPPORTED, VALUE = 0, 1, 2

    def __init__(self) -> None:
        self.items: list[_Problem] = []

    def setting(self, st: Setting, reason: str, rank: int = VALUE) -> None:
        value = st.raw_value if st.value is None else st.value
        self.items.append(_Problem(rank, st.file, st.where, st.raw_key, shown_value(st.key, value or ""), reason))

    def missing(self, sec: Section, key: str, reason: str) -> None:
        """A key the job lacks (or a value of storlab's making): named at its section's line."""
        line = None if sec.file == COMMAND_LINE else sec.line
        self.items.append(_Problem(self.VALUE, sec.file, line, key, "", reason))

    def __bool__(self) -> bool:
        return bool(self.items)

    def refusal(self) -> Refusal:
        items = sorted(self.items, key=lambda p: p.rank)      # stable: file order within a rank
        first = items[0]
        more = [k for k in dict.fromkeys(p.key for p in items[1:]) if k != first.key]
        return Refusal(FORMAT, first.file, first.line, first.key, first.value, first.reason, more)


# -- the translation ------------------------------------------------------------------------------
@dataclass
class FioJob:
    """One fio job after translation: where its workers are and what the output does with it."""
    name: str
    report_group: int
    phase: int                              # index into FioPlan.phases
    groups: list[str]                       # storlab group names of its workers in that phase
    rw: str
    clones: int
    files: list[str]
    group_reporting: bool = False
    unlink: list[str] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)   # bw|lat|iops -> file prefix
    log_interval_s: float | None = None
    percentiles: tuple[float, ...] = ()
    unified: str = "none"                   # unified_rw_reporting: none, mixed or both



@dataclass
class _S3:
    """An http job (http_mode=s3) on storlab's s3 engine: where its objects start in the prefix's
    range (range mode naming PREFIX/obj-N) and the AWS_* variables its settings give."""
    first_byte: int = 0
    environment: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass
class FioPlan:
    """fio's jobs as storlab phases `[{"name", "groups": [{"name", "options"}]}]` (a meta-engine job
    is a `{"type": "meta", ...}` phase), with what only `storlab fio` does with them."""
    phases: list[dict[str, Any]]
    run: dict[str, Any]                     # run-level storlab options (invalidate)
    notes: list[str]                        # one line each: engine mappings and differences
    jobs: list[FioJob]
    source: str = "<text>"
    # the AWS_* variables the s3 engine reads (fio's http_s3_keyid, http_s3_key, ...): set for the
    # run only (FioTranslation.resolve), never in the job, its record or a printed line
    environment: dict[str, str] = field(default_factory=dict, repr=False)


def translate_sections(sections: list[Section], source: str = "<text>",
                       only: set[str] | None = None) -> FioPlan:
    """The translation of fio sections; `only` keeps just those job sections (fio's --section)."""
    problems = _Problems()
    defaults: dict[str, Setting] = {}
    jobs: list[tuple[Section, dict[str, Setting]]] = []
    for sec in sections:
        own: dict[str, Setting] = {}
        for st in sec.settings:
            if _check_known(st, problems):
                own[st.key] = st
        if sec.name.lower() == "global":
            defaults.update(own)       # a job sees only the global sections above it
        elif not only or sec.name in only:
            jobs.append((sec, {**defaults, **own}))
    if only and not jobs and not problems:
        raise FioJobError(f"fio job {os.path.basename(source)}: no section [{', '.join(sorted(only))}]")
    if not jobs and not problems:
        raise FioJobError(f"fio job {os.path.basename(source)}: defines no job (only [global] sections)")

    out = FioPlan([], {}, [], [], source)
    report_group = 0
    names_seen: dict[str, int] = {}
    layout: list[dict[str, Any]] = []     # overwrite=1: files written once before any job
    steady_jobs: dict[int, list[_Job]] = {}   # phase -> its jobs so far, for their steady state
    for sec, settings in jobs:
        try:
            job = _Job(sec, settings, problems)
            made = job.translate()
        except _Bad as e:
            problems.setting(e.setting, e.reason)
            continue
        except ValueError as e:     # a value read without its setting at hand: named by its section
            problems.missing(sec, f"[{sec.name}]", str(e))
            continue
        if made is None or problems:
            continue
        kind, payload, notes = made
        layout += job.layout
        for n in notes:
            if n not in out.notes:
                out.notes.append(n)
        new_phase = (job.flag("stonewall") or job.has("wait_for")) and out.phases
        if (job.flag("new_group") or new_phase) and out.jobs:
            report_group += 1
        if kind == "meta":
            phase_index = _add_meta(out, payload, new_phase)
            groups = []
        else:
            if new_phase or not out.phases or out.phases[-1].get("type") == "meta":
                out.phases.append({"name": "", "groups": []})
            phase_index = len(out.phases) - 1
            groups = []
            for g in payload:
                base = g["name"]
                count = names_seen.get(base, 0)
                names_seen[base] = count + 1
                if count:
                    g["name"] = f"{base}#{count}"
                out.phases[-1]["groups"].append(g)
                groups.append(g["name"])
        steady = _steady_of(job, problems)
        if steady is not None:
            _agree_in_phase(out, phase_index, job, steady, steady_jobs, problems)
        _exec_commands(out.phases[phase_index], job, problems)
        for fio_key, key in (("latency_target", "latency_target"), ("latency_window", "latency_window"),
                             ("latency_percentile", "latency_percentile")):
            if job.has(fio_key):
                try:
                    raw = job.raw(fio_key) if key == "latency_percentile" else job.time(fio_key, 1e-6)  # fio: bare = us
                    value = parse_value(key, raw)
                except (OptionError, ValueError) as e:
                    problems.setting(job.s[fio_key], str(e).partition(": ")[2] or str(e))
                    continue
                if out.run.get(key, value) != value:
                    problems.setting(job.s[fio_key], f"storlab applies {key} to the whole run; give every "
                                                     "job the same value")
                out.run[key] = value
        if job.s3 is not None:
            _s3_run(out, job, problems)
        inv = job.invalidate()
        if inv is not None:
            if out.run.get("invalidate", inv) != inv:
                problems.setting(job.s["invalidate"], "storlab invalidates for the whole run; give "
                                                      "every job the same value")
            out.run["invalidate"] = inv
        out.jobs.append(FioJob(
            name=job.name, report_group=report_group, phase=phase_index, groups=groups,
            rw=job.rw, clones=job.numjobs, files=job.all_files,
            group_reporting=job.flag("group_reporting"), unlink=job.unlink_paths(),
            logs=job.logs(), log_interval_s=job.log_interval(), percentiles=job.percentiles(),
            unified=job.unified()))
    if problems:
        raise problems.refusal()
    if layout:   # fio lays the files of overwrite=1 jobs out before it starts any job
        out.phases.insert(0, {"name": "layout", "groups": layout})
        for j in out.jobs:
            j.phase += 1
    for p in out.phases[1 if layout else 0:]:
        if p.get("type") != "meta":
            p["name"] = "+".join(dict.fromkeys(j.name for j in out.jobs
                                               if j.phase == out.phases.index(p)))
    return out


# fio's steady-state options and storlab's names for them (per phase: jobs/steadystate.py)
STEADY_KEYS = (("steadystate", "ss"), ("steadystate_duration", "ss_dur"), ("steadystate_ramp_time", "ss_ramp"),
               ("steadystate_check_interval", "ss_interval"))
FIO_DEFAULT_SS = "iops_slope:0.01%"   # fio's steadystate default, judged once ss_dur is set


def _steady_of(job: "_Job", problems: _Problems) -> dict[str, Any] | None:
    """A job's steady-state check as storlab's per-phase options ({} for none, as fio does without
    ss_dur: its default 0 turns the check off); None when a value is refused."""
    given = [(fio_key, key) for fio_key, key in STEADY_KEYS if job.has(fio_key)]
    if not given:
        return {}
    out: dict[str, Any] = {}
    for fio_key, key in given:
        try:
            value = parse_value(key, job.raw(fio_key) if key == "ss" else job.time(fio_key, 1.0))
        except (OptionError, ValueError, _Bad) as e:
            st = e.setting if isinstance(e, _Bad) else job.s[fio_key]
            problems.setting(st, e.reason if isinstance(e, _Bad) else (str(e).partition(": ")[2] or str(e)))
            return None
        out[key] = value
    if not out.get("ss_dur"):
        return {}
    out.setdefault("ss", FIO_DEFAULT_SS)
    from ..steadystate import check

    problem = check(out)
    if problem:
        key, _, reason = problem.partition(": ")
        fio_key = dict((k, f) for f, k in STEADY_KEYS)[key]
        problems.setting(job.s.get(fio_key) or job.s["steadystate_duration"], reason)
        return None
    return out


def _s3_run(out: FioPlan, job: "_Job", problems: _Problems) -> None:
    """What an http job sets for the whole run: keep_objects (fio leaves the objects it wrote;
    unlink=1 asks for them to go, storlab's default) and the AWS_* environment its engine reads
    (one process environment: every http job must give the same)."""
    keep = not job.flag("unlink")
    if out.run.get("keep_objects", keep) != keep:
        problems.setting(job.s.get("unlink") or job.s["ioengine"], "storlab keeps or removes the objects of "
                                                                   "the whole run: give every http job the same unlink")
    out.run["keep_objects"] = keep
    for var, value in job.s3.environment.items():
        if out.environment.get(var, value) != value:
            key = {v: k for k, v in S3_ENVIRONMENT.items()}[var]
            problems.setting(job.s.get(key) or job.s["ioengine"], "the s3 engine takes one set of credentials "
                                                                  "and one region a run: give every http job the same")
            return
        out.environment[var] = value
    note = S3_CREDENTIALS_NOTE if {"AWS_ACCESS_KEY_ID"} <= set(out.environment) else S3_ENV_NOTE
    if note not in out.notes:
        out.notes.append(note)


def _exec_commands(phase: dict[str, Any], job: "_Job", problems: _Problems) -> None:
    """fio's exec_prerun / exec_postrun: a command run before / after the job, as the phase's own
    option (storlab runs them around the phase that holds the job; one command of each kind a
    phase, so the jobs of one phase must agree on it)."""
    for key in ("exec_prerun", "exec_postrun"):
        if not job.has(key):
            continue
        command = (job.raw(key) or "").strip()
        own = phase.setdefault("own", {})
        if own.get(key, command) != command:
            problems.setting(job.s[key], f"the jobs of one phase (a stonewall group) run one {key}; this job's "
                                         f"differs from {own[key]!r}")
            continue
        own[key] = command


def _agree_in_phase(out: FioPlan, phase_index: int, job: "_Job", steady: dict[str, Any],
                    seen: dict[int, list["_Job"]], problems: _Problems) -> None:
    """storlab judges steady state per phase (a stonewall group, as fio per reporting group with
    group_reporting): the jobs of one phase must ask for the same check, as fio requires. The
    phase's check becomes its own options (`own`: the phase table's ss, ss_dur ...)."""
    phase = out.phases[phase_index]
    if phase.get("type") == "meta":
        if steady:
            problems.setting(job.s["steadystate_duration"], "steady state is judged on I/O; a "
                             "metadata phase (file engines) has none")
        return
    jobs = seen.setdefault(phase_index, [])
    jobs.append(job)
    if len(jobs) == 1:
        phase["own"] = {**phase.get("own", {}), **steady}
    else:
        _same_as_first(phase["own"], jobs[0], job, steady, problems)
    if steady and (job.numjobs > 1 or len(jobs) > 1) and not job.flag("group_reporting"):
        note = ("steady state: fio judges each job (each numjobs clone) on its own without "
                "group_reporting; storlab judges each phase's total, as fio with group_reporting")
        if note not in out.notes:
            out.notes.append(note)


def _same_as_first(first_steady: dict[str, Any], first: "_Job", job: "_Job", steady: dict[str, Any],
                   problems: _Problems) -> None:
    """A job's steady-state check is its phase's first job's, else one line naming the setting
    that differs (this job's, else the first job's) and what each job has."""
    for fio_key, key in STEADY_KEYS:
        if first_steady.get(key) == steady.get(key):
            continue
        st = (job.s.get(fio_key) or first.s.get(fio_key)
              or next((j.s[f] for j in (job, first) for f, _ in STEADY_KEYS if f in j.s)))
        has = "; ".join(f"[{j.name}] " + (f"has {j.raw(fio_key)}" if j.has(fio_key) else "does not set it")
                        for j in (first, job))
        problems.setting(st, f"jobs of one phase (between stonewalls) must agree on {st.raw_key if st.key == fio_key else key}: "
                             f"{has}; storlab judges steady state per phase")
        return


def _add_meta(out: FioPlan, phase: dict[str, Any], new_phase: bool) -> int:
    """A meta-engine job: jobs alike running at the same time become one phase with their threads
    added up (fio runs them concurrently; storlab's meta phase runs its threads concurrently)."""
    last = out.phases[-1] if out.phases else None
    if (last is not None and not new_phase and last.get("type") == "meta"
            and {k: v for k, v in last.items() if k not in ("threads", "name")}
            == {k: v for k, v in phase.items() if k not in ("threads", "name")}):
        last["threads"] += phase["threads"]
        return len(out.phases) - 1
    out.phases.append(phase)
    return len(out.phases) - 1


def _check_known(st: Setting, problems: _Problems) -> bool:
    """An option fio has, and storlab does not refuse outright."""
    row = status_of(st.key)
    if row is None:
        problems.setting(st, "not a fio option (fio ignores it, storlab refuses it)")
        return False
    if row.status == "refused" and (st.value or "").strip().lower() not in DEFAULT_VALUES.get(st.key, ()):
        problems.setting(st, f"not supported ({DOCS}): {row.text}", problems.UNSUPPORTED)
        return False
    if st.error:
        problems.setting(st, st.error)
        return False
    if st.value is None and st.key not in BARE_OPTIONS:
        problems.setting(st, "needs a value")
        return False
    allowed = _ONLY.get(st.key)
    if allowed and (st.value or "").lower() not in allowed:
        problems.setting(st, f"not supported ({DOCS}): storlab does only {' or '.join(sorted(allowed))}", problems.UNSUPPORTED)
        return False
    return True



def fio_pattern_hex(text: str) -> str:
    """fio's buffer_pattern as `0x` and hex digits: parts joined with `|`, each a hex number
    (0xdeadbeef), a quoted string ('abc' or "abc") or a decimal number (its bytes, smallest first,
    as fio stores an integer).

    >>> fio_pattern_hex("0xdeadbeef|'ab'|1")
    '0xdeadbeef616201'
    """
    out = ""
    for part in (p.strip() for p in text.split("|")):
        if part[:2].lower() == "0x" and len(part) > 2 and all(c in "0123456789abcdefABCDEF" for c in part[2:]):
            digits = part[2:]
            out += ("0" + digits) if len(digits) % 2 else digits
        elif len(part) >= 2 and part[0] == part[-1] and part[0] in "'\"":
            out += part[1:-1].encode().hex()
        elif part.isdigit():
            n = int(part)
            out += n.to_bytes(max(1, (n.bit_length() + 7) // 8), "little").hex()
        else:
            raise ValueError(f"{part!r} is not a hex number (0x...), a quoted string or a decimal number")
    return "0x" + out


def _fill_zoned(text: str) -> str:
    """fio's zoned distribution with its blanks filled as fio fills them: a zone without an access
    or a range percentage gets an equal share of what the others leave; one set for all
    directions (`,` sets must be equal)."""
    if not text.startswith("zoned:"):
        return text
    sets = {s for s in text[len("zoned:"):].split(",") if s}
    if len(sets) != 1:
        raise OptionError("random_distribution: storlab uses one zoned set for reads and writes")
    zones = [z.partition("/")[::2] for z in sets.pop().split(":") if z]
    for col in (0, 1):
        given = [int(z[col]) for z in zones if z[col].strip()]
        missing = len(zones) - len(given)
        if missing:
            share = (100 - sum(given)) // missing
            zones = [(z[0] if col or z[0].strip() else str(share),
                      z[1] if not col or z[1].strip() else str(share)) for z in zones]
    return "zoned:" + ":".join(f"{a}/{r}" for a, r in zones)


def _target_bytes(path: str) -> int | None:
    """Size of an existing regular file or block device (for `N%` sizes); None when absent."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode):
        return st.st_size
    if stat.S_ISBLK(st.st_mode):
        fd = os.open(path, os.O_RDONLY)
        try:
            return os.lseek(fd, 0, os.SEEK_END)
        finally:
            os.close(fd)
    return None


class _Job:
    """One fio job section with its effective settings (globals above it, then its own)."""

    def __init__(self, sec: Section, settings: dict[str, Setting], problems: _Problems) -> None:
        self.section = sec.name
        self.sec = sec
        self.s = settings
        self.problems = problems
        self.name = self.raw("name") or sec.name
        self.kb_base = 1024
        self.numjobs = 1
        self.rw = "read"
        self.seq_hole = 0
        self.seq_rewind = 0
        self.all_files: list[str] = []
        self.notes: list[str] = []
        self.layout: list[dict[str, Any]] = []
        self.s3: _S3 | None = None      # an http job: its object layout and environment

    # settings
    def raw(self, key: str) -> str | None:
        st = self.s.get(key)
        return st.value if st else None

    def word(self, key: str) -> str:
        """The value of a keyword option, trimmed and lower-cased ('' when not given)."""
        return (self.raw(key) or "").strip().lower()

    def has(self, key: str) -> bool:
        return key in self.s

    def flag(self, key: str) -> bool:
        return self.has(key) and parse_bool(self.raw(key))

    def size_of(self, st: Setting, text: str | None = None) -> int:
        """A fio size: the setting's value, or `text` (a part of it)."""
        try:
            return parse_fio_size(st.value if text is None else text, self.kb_base)
        except ValueError as e:
            raise _Bad(st, str(e)) from None

    def bad(self, key: str, why: str) -> None:
        self.problems.setting(self.s[key], why.removeprefix(f"{key}: "))   # an option table's message names it

    def size(self, key: str) -> int:
        return self.size_of(self.s[key])

    def time(self, key: str, default_unit: float = 1.0) -> float:
        try:
            return parse_fio_time(self.raw(key), default_unit)
        except ValueError as e:
            raise _Bad(self.s[key], str(e)) from None

    def boolean(self, key: str) -> bool:
        try:
            return self.flag(key)
        except ValueError as e:
            raise _Bad(self.s[key], str(e)) from None

    def later(self, *keys: str) -> Setting | None:
        """Of several settings for one switch, the one written last (fio applies them in order)."""
        found = [self.s[k] for k in keys if k in self.s]
        return max(found, key=lambda st: st.line) if found else None

    # the translation
    def translate(self) -> tuple[str, Any, list[str]] | None:
        for key in [k for k in self.s if k in BOOLEAN_OPTIONS]:
            self.boolean(key)       # a bad flag value is named before anything else
        if self.has("kb_base"):
            if self.raw("kb_base") not in ("1000", "1024"):
                self.bad("kb_base", "use 1000 or 1024")
                return None
            self.kb_base = int(self.raw("kb_base"))
        self.numjobs = self.size("numjobs") if self.has("numjobs") else 1
        if self.numjobs < 1:
            self.bad("numjobs", "must be at least 1")
            return None
        try:   # the clones are storlab's threads: their bound is checked before any clone is made
            parse_value("threads", self.numjobs)
        except OptionError as e:
            self.bad("numjobs", str(e))     # "threads: ...", as the flag and a job file say it
            return None
        engine = (self.raw("ioengine") or "psync").strip()
        engine_base = engine.split(":")[0]
        if engine_base in REFUSED_ENGINES:
            self.problems.setting(self.s["ioengine"], f"not supported ({DOCS}): {REFUSED_ENGINES[engine_base]}",
                                  self.problems.ENGINE)
            return None
        if engine_base in META_ENGINES:
            return self.meta(engine_base)
        if engine_base not in ENGINES:
            self.problems.setting(self.s["ioengine"], f"not supported ({DOCS}): storlab maps "
                                  f"{', '.join(ENGINES)} and the file/dir engines", self.problems.ENGINE)
            return None
        stray = [k for k in self.s if k in HTTP_OPTIONS] if engine_base != "http" else []
        for key in stray:
            self.bad(key, f"an option of ioengine=http, not of {engine_base} (fio refuses it too)")
        if stray or (engine_base == "http" and not self.http_mode()):
            return None
        storlab_engine, line = ENGINES[engine_base]
        if line:
            self.notes.append(line)
        if not self.rw_pattern():
            return None
        opts: dict[str, Any] = {"rw": _RW[self.rw], "engine": storlab_engine}
        if self.seq_hole:
            opts["seq_hole"] = self.seq_hole
        if self.seq_rewind:
            opts["seq_rewind"] = self.seq_rewind
        if not self.block_size(opts):
            return None
        workers = self.s3_targets(opts) if engine_base == "http" else self.targets(storlab_engine)
        if workers is None:
            return None
        self.common(opts, storlab_engine)
        if self.problems:
            return None
        groups = self.groups(opts, workers)
        if groups is None:
            return None
        for g in groups:
            if not self.canonical(g["options"]):
                return None
        return "io", groups, self.notes

    def rw_pattern(self) -> bool:
        text = self.raw("rw") or "read"
        base, _, mod = text.partition(":")
        base = base.strip()
        if base not in _RW:
            self.bad("rw", f"use one of: {', '.join(_RW)}")
            return False
        self.rw = base
        self.seq_hole = 0
        self.seq_rewind = 0
        mod = mod.strip()
        if mod and base.startswith("rand"):
            if mod != "1":
                self.bad("rw", f"storlab does one request per random offset (modifier :{mod})")
                return False
        elif mod:
            # fio's rw=read:SIZE: skip SIZE bytes after each request (seq_hole); rw=read:-SIZE:
            # move back SIZE bytes from each request's end (seq_rewind: 2 x bs reads backwards)
            back = mod.startswith("-")
            try:
                size = parse_fio_size(mod[1:] if back else mod, self.kb_base)
            except ValueError:
                size = -1
            if size < 0:
                self.bad("rw", f"modifier :{mod} is not a size; allowed: a size skipped after each "
                               "sequential request, or -SIZE moved back from its end")
                return False
            if back:
                self.seq_rewind = size
            else:
                self.seq_hole = size
        return True

    def _directions(self) -> tuple[bool, bool, bool]:
        rw = _RW[self.rw]
        reads = rw in ("read", "randread", "rw", "randrw")
        writes = rw in ("write", "randwrite", "rw", "randrw", "trimwrite")
        trims = "trim" in rw
        if rw in ("rw", "randrw"):
            mix = self.rwmix_read()
            reads, writes = mix > 0, mix < 100
        return reads, writes, trims

    def block_size(self, opts: dict[str, Any]) -> bool:
        """bs, bsrange, bssplit and blockalign, straight to the engine's options of the same names
        (sizes in bytes, per direction as fio writes them): each request's size is drawn per I/O
        as in fio; sizes differing per direction become a bssplit of one size per direction."""
        reads, writes, trims = self._directions()
        for key in ("bssplit", "bsrange"):
            if self.has(key):
                parts = []
                for part in self.raw(key).split(","):
                    items = []
                    pieces = part.split(":") if key == "bssplit" else re.split(r"[-:]", part)
                    if key == "bsrange" and len(pieces) != 2:
                        self.bad(key, f"{part.strip()!r} is not MIN-MAX (fio refuses a bsrange without both ends)")
                        return False
                    for item in filter(None, (i.strip() for i in pieces)):
                        size_text, slash, pct = item.partition("/")
                        try:
                            items.append(f"{parse_fio_size(size_text, self.kb_base)}{slash}{pct}")
                        except ValueError as e:
                            self.bad(key, str(e))
                            return False
                    parts.append((":" if key == "bssplit" else "-").join(items))
                try:
                    opts[key] = parse_value(key, ",".join(parts))
                except OptionError as e:
                    self.bad(key, str(e))
                    return False
                break
        per_dir = (self.raw("bs") or "4k").split(",")
        sizes = []
        for i in range(3):
            item = (per_dir[i] if i < len(per_dir) else per_dir[-1] if len(per_dir) == 2 else per_dir[0]).strip()
            try:
                sizes.append(parse_fio_size(item or "4k", self.kb_base))
            except ValueError as e:
                self.bad("bs", str(e))
                return False
        used = [b for b, on in zip(sizes, (reads, writes, trims)) if on]
        opts["bs"] = used[0] if used else sizes[0]
        if len(set(used)) > 1 and "bssplit" not in opts and "bsrange" not in opts:
            opts["bssplit"] = parse_value("bssplit", ",".join(str(b) for b in sizes))
        if self.has("blockalign"):
            if "," in self.raw("blockalign"):
                self.bad("blockalign", "storlab aligns reads, writes and trims alike; give one value")
                return False
            opts["blockalign"] = self.size("blockalign")
        if self.has("offset_align") and self.size("offset_align") not in (0, opts["bs"]):
            self.bad("offset_align", "storlab aligns offsets to bs; only 0 or bs")
            return False
        return True

    def rwmix_read(self) -> int:
        last = self.later("rwmixread", "rwmixwrite")
        if last is None:
            return 50
        v = self.size_of(last)
        if v > 100:
            raise _Bad(last, "must be 0..100")
        return v if last.key == "rwmixread" else 100 - v

    def targets(self, engine: str) -> list[tuple[int, list[str], int | None]] | None:
        """[(clone, its files, size of each file)]: fio's files of each clone."""
        dirs = split_list(self.raw("directory")) if self.has("directory") else []
        if engine == "null":
            # storlab's null engine completes every request at once; its plan still wants a
            # target: `storlab fio` gives it a sparse file (the run's scratch file under
            # `storlab run --fio`), never the job's filename
            self.notes.append("null → storlab's null engine: requests complete at once; no file I/O "
                              "(the plan gets a sparse file, removed after the run)")
            per_file = self.size("size") if self.has("size") else None
            return [(0, [], per_file)]
        if self.has("read_iolog") and not self.has("filename"):
            return [(0, [], None)]    # the replayed log names its file, as in fio
        if engine == "nbd":
            # fio's nbd engine ignores filename: every clone reads and writes the export `uri` names
            if not self.has("uri"):
                self.problems.missing(self.sec, "uri", "missing; ioengine=nbd names its export with uri=nbd://...")
                return None
            self.all_files = [self.raw("uri").strip()]
            per_file = self._size_value("size", self.all_files) if self.has("size") else None
            return [(k, list(self.all_files), per_file) for k in range(self.numjobs)]
        if engine == "nfs" and not self.has("nfs_url"):
            self.problems.missing(self.sec, "nfs_url", "missing; ioengine=nfs names its server and export "
                                                       "with nfs_url=nfs://SERVER/EXPORT")
            return None
        if self.has("filename"):
            if self.raw("filename") == "-":
                self.bad("filename", "standard input/output is not a storlab target")
                return None
            names = split_list(self.raw("filename"))
            # as fio's add_file: directory (clone k takes the k-th of a `:` list, cycling) + "/" +
            # filename, an absolute filename too (directory=/scratch filename=/data/f is
            # /scratch/data/f in fio, never /data/f)
            clones = []
            for k in range(self.numjobs):
                folder = dirs[k % len(dirs)] if dirs else ""
                clones.append((k, [os.path.normpath(f"{folder}/{n}") if folder else n for n in names]))
            self.all_files = list(dict.fromkeys(f for _, fs in clones for f in fs))
        else:
            nr = self.size("nrfiles") if self.has("nrfiles") else 1
            if nr < 1:
                self.bad("nrfiles", "must be at least 1")
                return None
            fmt = self.raw("filename_format") or "$jobname.$jobnum.$filenum"
            clones = []
            for k in range(self.numjobs):
                folder = dirs[k % len(dirs)] if dirs else ""
                files = [os.path.join(folder, fmt.replace("$jobname", self.section)
                                      .replace("$jobnum", str(k)).replace("$filenum", str(f))
                                      .replace("$clientuid", "0"))
                         for f in range(nr)]
                clones.append((k, files))
            self.all_files = [f for _, fs in clones for f in fs]
            if nr > 1:
                self.notes.append("nrfiles → one storlab worker per file (fio: one job cycling "
                                  "through its files)")
        if engine == "nfs":
            # fio's nfs engine opens each file inside the export nfs_url names (its ?args kept)
            base, _, query = self.raw("nfs_url").strip().partition("?")
            clones = [(k, [base.rstrip("/") + "/" + f.lstrip("/") + (f"?{query}" if query else "") for f in files])
                      for k, files in clones]
            self.all_files = list(dict.fromkeys(f for _, fs in clones for f in fs))
        # the bytes of each file: filesize, else size split over the job's files
        nfiles = len(clones[0][1])
        if self.has("filesize"):
            lo, _, hi = self.raw("filesize").partition("-")
            lo_b = self.size_of(self.s["filesize"], lo)
            if hi and self.size_of(self.s["filesize"], hi) != lo_b:
                self.bad("filesize", "storlab's files have one size; give one value")
                return None
            per_file = lo_b
        elif self.has("size"):
            per_file = self._size_value("size", clones[0][1]) // nfiles
        elif not self.has("filename"):
            self.problems.missing(self.sec, "size", "missing; fio needs a size for the files it names "
                                                    "itself (or give filename)")
            return None
        else:
            per_file = None    # the whole existing file or device, as fio
        if nfiles > 1 and self.has("filename"):
            self.notes.append("filename list → one storlab worker per file (fio: one job cycling "
                              "through its files)")
        return [(k, files, per_file) for k, files in clones]

    def http_mode(self) -> bool:
        """fio's http engine speaks webdav unless told otherwise; storlab translates S3 only."""
        mode = self.word("http_mode") or "webdav"
        if mode == "s3":
            return True
        why = (f"not supported ({DOCS}): storlab translates ioengine=http with http_mode=s3 only (its s3 "
               f"engine); {mode} is not S3")
        if self.has("http_mode"):
            self.problems.setting(self.s["http_mode"], why, self.problems.ENGINE)
        else:
            self.problems.setting(self.s["ioengine"], why.replace(f"{mode} is not S3", "fio's default "
                                  "http_mode is webdav: add http_mode=s3"), self.problems.ENGINE)
        return False

    def s3_targets(self, opts: dict[str, Any]) -> list[tuple[int, list[str], int | None]] | None:
        """fio's http engine in S3 mode (engines/http.c) as an s3 target. fio sends each request to
        http(s)://http_host + the object's path and signs it for path style, so filename is
        /BUCKET/KEY (with a host BUCKET.s3.…, virtual-host style, it is /KEY). In block mode (fio's
        default) each request is its own object KEY_OFFSET_BS: a PUT, a whole GET or a DELETE of bs
        bytes, as storlab's objects of object_size = bs under the prefix KEY. In range mode the job
        is the one object KEY of `size` bytes: reads are ranged GETs of bs inside it (storlab's
        object_size = size), while each write PUTs bs bytes as the whole object, so a write (or
        trim) matches only when bs = size. Every other combination is refused in one line."""
        host = (self.raw("http_host") or "localhost").strip()     # fio's default host
        https = self.word("https") or "off"
        if https not in ("off", "on", "insecure"):
            self.bad("https", f"{https!r} is not allowed; use off, on or insecure")
            return None
        if not re.fullmatch(r"[A-Za-z0-9._-]+(:\d+)?|\[[0-9A-Fa-f:.]+\](:\d+)?", host):
            self.bad("http_host", "give HOST or HOST:PORT (fio puts filename right after it)")
            return None
        for key in ("directory", "nrfiles", "filename_format"):
            if self.has(key):
                self.bad(key, "ioengine=http names its object by filename=/BUCKET/KEY alone")
                return None
        if not self.has("filename"):
            self.problems.missing(self.sec, "filename", "missing; ioengine=http names its object with "
                                                        "filename=/BUCKET/KEY")
            return None
        names = split_list(self.raw("filename"))
        if len(names) != 1:
            self.bad("filename", "storlab's s3 target is one prefix a job: give one /BUCKET/KEY")
            return None
        name = names[0].strip()
        virtual = re.fullmatch(r"([a-z0-9][a-z0-9.-]*?)\.(s3[.-].+)", host.lower())
        if virtual:
            bucket, endpoint_host, key = virtual[1], host[len(virtual[1]) + 1:], name.lstrip("/")
            opts["virtual_host"] = True
        else:
            endpoint_host = host
            bucket, _, key = name.lstrip("/").partition("/")
        key = key.strip("/")
        if not name.startswith("/") or not bucket or not key:
            self.bad("filename", "give /BUCKET/KEY (/KEY with a virtual-host http_host): fio puts "
                                 "filename right after http_host")
            return None
        if "bssplit" in opts or "bsrange" in opts:
            which = "bsrange" if self.has("bsrange") else "bssplit" if self.has("bssplit") else "bs"
            self.bad(which, "storlab's s3 objects take requests of one size: give one bs")
            return None
        if self.has("filesize"):
            lo, _, hi = self.raw("filesize").partition("-")
            per_file = self.size_of(self.s["filesize"], lo)
            if hi and self.size_of(self.s["filesize"], hi) != per_file:
                self.bad("filesize", "storlab's objects have one size; give one value")
                return None
        elif self.has("size"):
            per_file = self.size("size")
        else:
            self.problems.missing(self.sec, "size", "missing; an S3 object has no size fio or storlab "
                                                    "could find: give size")
            return None
        size_key = "filesize" if self.has("filesize") else "size"
        offset = self.size("offset") if self.has("offset") else 0
        bs = opts["bs"]
        _, writes, trims = self._directions()
        mode = self.word("http_object_mode") or "block"
        s3 = _S3()
        if mode == "block":
            if per_file % bs or per_file == 0:
                self.bad(size_key, f"{per_file} bytes is not a whole number of objects of bs ({bs} bytes): "
                                   "in block mode every object is bs bytes")
                return None
            if offset % bs:
                self.bad("offset", f"{offset} is not a multiple of bs ({bs}): in block mode objects start "
                                   "at multiples of bs")
                return None
            prefix, object_size = key, bs
            self.notes.append(S3_BLOCK_NOTE)
        elif mode == "range":
            if offset:
                self.bad("offset", "in range mode the job is the one object from its first byte: "
                                   "leave offset out")
                return None
            if (writes or trims) and bs != per_file:
                self.bad("bs", f"in range mode fio's every {'write PUTs' if writes else 'trim DELETEs'} the "
                               f"whole object ({bs} bytes each time); storlab's objects are whole: give "
                               f"bs = {size_key} ({per_file}) or http_object_mode=block")
                return None
            if per_file % bs or per_file == 0:
                self.bad(size_key, f"{per_file} bytes is not a multiple of bs ({bs}): a read stays inside "
                                   "the object")
                return None
            named = re.fullmatch(r"(.+)/obj-(\d{12})", key)
            if named:
                prefix, s3.first_byte = named[1], int(named[2]) * per_file
            else:
                prefix = key
                self.notes.append(S3_RANGE_NAME_NOTE)
            object_size = per_file
        else:
            self.bad("http_object_mode", f"{mode!r} is not allowed; use block or range")
            return None
        opts["object_size"] = object_size
        opts["endpoint"] = f"{'http' if https == 'off' else 'https'}://{endpoint_host}"
        if https == "insecure":
            opts["insecure"] = True
        if self._directions()[0]:
            self.notes.append(S3_MISSING_NOTE)
        given = {k: (self.raw(k) or "") for k in S3_ENVIRONMENT if self.has(k)}
        if ("http_s3_keyid" in given) != ("http_s3_key" in given):
            missing = "http_s3_key" if "http_s3_keyid" in given else "http_s3_keyid"
            self.problems.missing(self.sec, missing, "missing; give http_s3_keyid and http_s3_key together")
            return None
        s3.environment = {S3_ENVIRONMENT[k]: v for k, v in given.items()}
        s3.environment.setdefault("AWS_REGION", "us-east-1")     # fio's default region
        self.s3 = s3
        url = f"s3://{bucket}/{prefix}"
        self.all_files = [url]
        return [(k, [url], per_file) for k in range(self.numjobs)]

    def _size_value(self, key: str, files: list[str]) -> int:
        """size/offset, where `N%` is a share of the existing file or device."""
        text = self.raw(key) or ""
        if text.strip().endswith("%"):
            pct = float(text.strip()[:-1])
            real = _target_bytes(files[0]) if files else None
            if real is None:
                raise _Bad(self.s[key], "a percentage needs an existing file or device as filename")
            return int(real * pct / 100)
        return self.size(key)

    def common(self, opts: dict[str, Any], engine: str) -> None:
        """Options every worker of the job has alike."""
        if _RW[self.rw] in ("rw", "randrw") or self.has("rwmixread") or self.has("rwmixwrite"):
            opts["rwmix_read"] = self.rwmix_read()
        depth = self.size("iodepth") if self.has("iodepth") else 1   # read (and refused when bad) for every engine, as fio does
        opts["qd"] = depth if engine not in ("psync", "s3") else 1   # s3: fio's http engine is synchronous
        if engine == "s3" and depth > 1:
            self.notes.append(S3_QD_NOTE)
        last = self.later("direct", "buffered")
        direct = False
        if last is not None:
            direct = parse_bool(last.value) if last.key == "direct" else not parse_bool(last.value)
        if engine != "s3":       # fio's http engine opens no file: direct changes nothing there
            opts["direct"] = direct
        sync = self.later("fsync", "fdatasync")
        if sync is not None:
            opts["fsync_every"] = self.size_of(sync)
        opts["fsync_end"] = self.flag("end_fsync") or self.flag("fsync_on_close")
        self.cpus(opts)
        self.open_sync(opts)
        if self.flag("norandommap"):
            opts["random_map"] = False
        # percentage_sequential is its complement; the later of the two counts, as fio reads them
        share = self.later("percentage_random", "percentage_sequential")
        if share is not None:
            if len({v.strip() for v in share.value.split(",")}) != 1:
                self.bad(share.key, "storlab takes one share for every direction; give one value")
            else:
                n = self.size_of(share)
                opts["percentage_random"] = n if share.key == "percentage_random" else 100 - n
        if self.has("max_latency"):
            # fio ends the job with ETIMEDOUT when a request's latency exceeds it; storlab ends the
            # phase with an error at the first request outstanding that long (seen while in flight)
            limit = self.time("max_latency", 1e-6)
            if limit < 0.001:
                self.bad("max_latency", f"{limit * 1e6:g} us: storlab watches for requests outstanding "
                                        "1 ms or longer; allowed: >= 1ms")
            opts["stall_after"] = max(limit, 0.001)
            opts["stall_abort"] = True
            self.notes.append("max_latency → stall_after with stall_abort: the phase ends with an error at the "
                              "first request outstanding that long (fio: ETIMEDOUT once one completes that late)")
        if self.has("random_distribution"):
            try:
                opts["random_distribution"] = parse_value(
                    "random_distribution", _fill_zoned(self.raw("random_distribution")))
            except OptionError as e:
                self.bad("random_distribution", str(e))
        if self.has("randseed"):
            opts["seed"] = self.size("randseed")
        elif (self.has("randrepeat") and not self.flag("randrepeat")) or (
                self.has("allrandrepeat") and not self.flag("allrandrepeat")):
            opts["seed"] = secrets.randbelow(2**63)  # a new sequence every run
        if self.has("runtime"):
            opts["time"] = self.time("runtime")
        elif self.flag("time_based"):
            self.bad("time_based", "needs runtime")
        if self.has("ramp_time"):
            opts["ramp"] = self.time("ramp_time")
        if self.has("startdelay"):
            if "-" in (self.raw("startdelay") or "").lstrip("-"):
                self.bad("startdelay", "storlab starts every worker after one delay; give one time")
            else:
                opts["start_delay"] = self.time("startdelay")
        if self.word("fallocate") in ("none", "0"):
            opts["preallocate"] = False   # native, posix, keep, 1: allocated, storlab's default
        self.verification(opts)
        self.buffers(opts)
        if engine == "io_uring":
            batch = self.later("iodepth_batch", "iodepth_batch_submit")
            if batch is not None:
                opts["uring.batch"] = self.size_of(batch)
            for fio_key, key in (("sqthread_poll", "uring.sqpoll"), ("registerfiles", "uring.fixed_files")):
                if self.has(fio_key):
                    opts[key] = self.flag(fio_key)
            self.fixed_buffers(opts)
            self.notes.append(WAIT_SPIN_NOTE)
        if self.has("log_avg_msec") and self.size("log_avg_msec") > 0:
            opts["interval"] = self.size("log_avg_msec") / 1000
        self.pacing(opts)

    def open_sync(self, opts: dict[str, Any]) -> None:
        """fio's sync: a boolean before fio 3.36 (alone: 1), then none|sync|dsync; 1 is sync."""
        if not self.has("sync"):
            return
        word = self.word("sync") or "1"
        mode = word if word in ("none", "sync", "dsync") else None
        if mode is None:
            try:
                mode = "sync" if parse_bool(word) else "none"
            except ValueError:
                self.bad("sync", f"{word!r} is not allowed; use none, sync, dsync, 0 or 1")
        if mode and mode != "none":
            opts["open_sync"] = mode

    def cpus(self, opts: dict[str, Any]) -> None:
        """cpus_allowed (a list) or cpumask (a bit mask) and cpus_allowed_policy: the threads' CPUs."""
        if self.has("cpus_allowed"):
            opts["cpus"] = (self.raw("cpus_allowed") or "").strip()
        elif self.has("cpumask"):
            text = (self.raw("cpumask") or "").strip()
            try:
                mask = int(text, 0)
            except ValueError:
                mask = 0
            if mask <= 0:
                self.bad("cpumask", f"{text!r} is not a CPU bit mask; use e.g. 0x3 (CPUs 0 and 1)")
            else:
                opts["cpus"] = ",".join(str(c) for c in range(mask.bit_length()) if mask >> c & 1)
        if self.has("cpus_allowed_policy"):
            policy = self.word("cpus_allowed_policy")
            if policy not in ("shared", "split"):
                self.bad("cpus_allowed_policy", f"{policy!r} is not allowed; use shared or split")
            else:
                opts["cpus_policy"] = policy

    def fixed_buffers(self, opts: dict[str, Any]) -> None:
        """fixedbufs=1 → uring.fixed_buffers = on, fixedbufs=0 → off (fio's default, given); not
        set, storlab's default (auto: registered where the kernel allows), a difference said once."""
        if self.has("fixedbufs"):
            opts["uring.fixed_buffers"] = "on" if self.flag("fixedbufs") else "off"
            return
        engine = (self.raw("ioengine") or "").strip().split(":")[0]
        self.notes.append(FIXEDBUFS_NOTE if engine == "io_uring" else ASYNC_BUFFERS_NOTE.format(engine=engine))

    def buffers(self, opts: dict[str, Any]) -> None:
        """scramble_buffers=1/0 → scramble = true/false (on by default in both tools, so a job
        without it keeps it on); refill_buffers → scramble = true and a note: the sectors are made
        unique, the buffer is not refilled. Under refill_buffers fio ignores scramble_buffers, and
        so does this."""
        if self.flag("refill_buffers"):
            opts["scramble"] = True
            self.notes.append(REFILL_NOTE)
        elif self.has("scramble_buffers"):
            opts["scramble"] = self.flag("scramble_buffers")
        if self.has("buffer_pattern"):
            try:
                opts["buffer_pattern"] = fio_pattern_hex(self.raw("buffer_pattern") or "")
            except ValueError as e:
                self.bad("buffer_pattern", str(e))
            # fio's buffer_pattern turns scramble_buffers off (options.c, str_buffer_pattern_cb):
            # the pattern is written as given unless scramble_buffers=1 comes after it
            later = self.later("buffer_pattern", "scramble_buffers")
            if not self.flag("refill_buffers"):
                opts["scramble"] = later.key == "scramble_buffers" and self.flag("scramble_buffers")
        elif self.flag("zero_buffers"):
            opts["buffer_pattern"] = "0x00"
            if not self.has("scramble_buffers") and not self.flag("refill_buffers"):
                opts["scramble"] = False     # fio scrambles zeroed buffers only when asked to
        # data that compresses and deduplicates by set shares (fio's buffer_compress_percentage,
        # buffer_compress_chunk, dedupe_percentage with dedupe_mode=repeat)
        for fio_key, key in (("buffer_compress_percentage", "compress_percentage"),
                             ("buffer_compress_chunk", "compress_chunk"), ("dedupe_percentage", "dedupe_percentage")):
            if self.has(fio_key):
                opts[key] = self.size(fio_key)
        mode = (self.raw("dedupe_mode") or "repeat").strip()
        if mode != "repeat":
            self.bad("dedupe_mode", f"{mode!r}: storlab repeats earlier writes (dedupe_mode=repeat); "
                                    "working_set is not built")

    def verification(self, opts: dict[str, Any]) -> None:
        kind = self.word("verify")
        pattern = self.has("verify_pattern")
        if kind in ("", "0", "null", "none") and not pattern:
            if self.has("do_verify"):
                opts["verify_readback"] = self.flag("do_verify")
            return
        if kind not in ("crc32c", "crc32c-intel", "", "pattern") or pattern:
            self.notes.append(f"verify={kind or 'pattern'} → crc32c: storlab stamps each block with a "
                              f"header and checksum and checks every block read")
        opts["verify"] = "crc32c"
        if self.has("do_verify"):
            opts["verify_readback"] = self.flag("do_verify")

    def pacing(self, opts: dict[str, Any]) -> None:
        """rate, rate_iops (per direction `R,W[,T]`), their minimums, think time and the I/O logs:
        storlab's options of the same names (its rate limiter and iolog replay), canonical."""
        given: dict[str, Any] = {}
        for key in ("rate", "rate_min", "rate_iops", "rate_iops_min"):
            if self.has(key):    # fio sizes (with kb_base) per direction; an empty part: no limit
                given[key] = ",".join(str(self.size_of(self.s[key], p)) if p.strip() else "0"
                                      for p in self.raw(key).split(",")[:3])
        for key in ("thinktime", "thinktime_spin"):
            if self.has(key):     # fio's unit here is microseconds
                given[key] = self.time(key, default_unit=1e-6)
        if self.has("thinktime_blocks"):
            given["thinktime_blocks"] = self.size("thinktime_blocks")
        for key in ("write_iolog", "read_iolog"):
            if self.has(key):
                given[key] = self.raw(key)
        if self.has("replay_no_stall"):
            given["replay_no_stall"] = self.flag("replay_no_stall")
        if self.has("rate_process") and self.word("rate_process") != "linear":
            given["rate_process"] = self.word("rate_process")
        for key, value in given.items():
            try:
                opts[key] = parse_value(key, value)
            except OptionError as e:
                self.bad(key, str(e))

    def groups(self, opts: dict[str, Any], workers: list[tuple[int, list[str], int | None]]
               ) -> list[dict[str, Any]] | None:
        """The storlab groups of the job: clones sharing a fixed file are threads of one group;
        clones with files of their own are one worker per file; offset_increment gives each clone
        a group at its offset."""
        time_based = self.flag("time_based") and "time" in opts
        per_file = workers[0][2]
        offset = self._size_value("offset", workers[0][1]) if self.has("offset") else 0
        if self.s3 is not None:
            offset += self.s3.first_byte      # range mode: where the object named in filename starts
        incr = self.size("offset_increment") if self.has("offset_increment") else 0
        nfiles = max(1, len(workers[0][1]))
        # bytes each worker moves: io_size/number_ios (per clone, split over its files) or loops
        # passes; a runtime without time_based stops after that too
        io_bytes: int | None = None
        if self.has("number_ios"):
            io_bytes = self.size("number_ios") * opts["bs"] // nfiles
        elif self.has("io_size"):
            io_bytes = self.size("io_size") // nfiles
        loops = self.size("loops") if self.has("loops") else 1
        if io_bytes is None and (loops != 1 or ("time" in opts and not time_based)):
            if per_file is None:
                key = "loops" if loops != 1 else "runtime"
                self.bad(key, "without time_based fio stops after one pass: give size or time_based")
                return None
            io_bytes = per_file * loops
        if time_based and not self.has("number_ios"):
            io_bytes = None     # time_based runs for the time whatever the size (number_ios still ends it)

        def base_options(files: list[str], threads: int, layout: str | None, off: int) -> dict[str, Any]:
            o = dict(opts)
            o["target"] = tuple(files)
            o["threads"] = threads
            if layout:
                o["thread_layout"] = layout
            if per_file is not None:
                o["size"] = per_file
            if off:
                o["offset"] = off
            if io_bytes is not None:
                o["io_size"] = io_bytes
            return o

        if self.raw("ioengine") == "null" or not workers[0][1]:
            plans = [(self.name, base_options([], self.numjobs, None, offset))]
        elif (self.has("filename") or self.has("uri")) and not incr and all(fs == workers[0][1] for _, fs, _ in workers):
            plans = [(self.name, base_options(workers[0][1], self.numjobs, "shared", offset))]
        elif incr:
            plans = [(self.name if k == 0 else f"{self.name}.{k}",
                      base_options(files, 1, None, offset + k * incr)) for k, files, _ in workers]
        else:
            plans = [(self.name, base_options([f for _, fs, _ in workers for f in fs], 1, None, offset))]
        _, writes, _ = self._directions()
        if self.flag("overwrite") and writes:
            self.notes.append("overwrite=1 → storlab writes the files once before the jobs (phase "
                              "'layout', in storlab's document only), as fio lays them out")
            for name, o in plans:
                if o["target"]:
                    self.layout.append({"name": f"{name}:layout", "options": {
                        **{k: o[k] for k in ("target", "size", "offset", "bs", "direct") if k in o},
                        "rw": "write", "threads": 1, "engine": "psync", "fsync_end": True}})
        return [{"name": name, "options": o} for name, o in plans]

    def canonical(self, opts: dict[str, Any]) -> bool:
        """Every value exactly what storlab's option table makes of it (the translator's contract)."""
        for key, value in opts.items():
            try:
                if parse_value(key, value) != value:
                    raise OptionError(f"{key}: {value!r} is not canonical")
            except OptionError as e:
                self.problems.missing(self.sec, key, str(e))
                return False
        return True

    def meta(self, engine: str) -> tuple[str, dict[str, Any], list[str]] | None:
        """fio's file-system engines as a storlab meta phase."""
        phases = META_ENGINES[engine]
        nr = self.size("nrfiles") if self.has("nrfiles") else 1
        dirs = split_list(self.raw("directory")) if self.has("directory") else []
        if len(dirs) > 1:
            self.bad("directory", "storlab's meta phase works in one directory")
            return None
        # fio's file engines open, stat or unlink without writing data: files of size 0
        phase = {"type": "meta", "name": self.name, "threads": self.numjobs, "files": nr,
                 "phases": ",".join(phases)}
        if dirs:
            phase["target"] = dirs[0]
        if engine.startswith("dir"):
            phase.update(depth=1, fanout=nr, files=nr)
        self.notes.append(f"ioengine={engine} → storlab meta phases {', '.join(phases)} (files of "
                          f"size 0; the tree's mkdir is timed as its own phase)")
        self.all_files = []
        return "meta", phase, self.notes

    def invalidate(self) -> bool | None:
        return self.flag("invalidate") if self.has("invalidate") else None

    def unlink_paths(self) -> list[str]:
        if self.s3 is not None:      # an http job's objects: keep_objects (_s3_run), not files
            return []
        return list(self.all_files) if self.flag("unlink") else []

    def logs(self) -> dict[str, str]:
        out = {}
        for kind in ("bw", "iops", "lat"):
            key = f"write_{kind}_log"
            if self.has(key):
                out[kind] = self.raw(key) if self.raw(key) not in (None, "1") else self.name
        return out

    def log_interval(self) -> float | None:
        return self.size("log_avg_msec") / 1000 if self.has("log_avg_msec") else None

    def unified(self) -> str:
        """unified_rw_reporting: none (0), mixed (1: reads, writes and trims reported as one
        direction) or both (2: each direction and the mixed one)."""
        if not self.has("unified_rw_reporting"):
            return "none"
        word = self.word("unified_rw_reporting")
        if word not in UNIFIED:
            self.bad("unified_rw_reporting", f"{word!r} is not allowed; use none, mixed, both, 0, 1 or 2")
        return UNIFIED.get(word, "none")

    def percentiles(self) -> tuple[float, ...]:
        if not self.has("percentile_list"):
            return ()
        try:
            values = tuple(float(p) for p in self.raw("percentile_list").split(":") if p)
        except ValueError:
            raise _Bad(self.s["percentile_list"], "numbers separated by ':'") from None
        if any(not 0 <= v <= 100 for v in values):
            raise _Bad(self.s["percentile_list"], "each in 0..100")
        return values
