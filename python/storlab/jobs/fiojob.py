"""Translate fio jobs (a job file, or fio's command line read by jobs/fio/cmdline.py) into storlab
phases, with fio's semantics (`storlab fio`, `storlab run --fio job.fio`).

fio semantics kept: [global] sections set defaults for the jobs below them; jobs run concurrently
until one has `stonewall`/`wait_for_previous` (or `wait_for`), which starts a new phase;
`numjobs` clones of a job with a fixed `filename` share its files, while clones without one get
their own files, named `jobname.jobnum.filenum` (or `filename_format`) in `directory` (a `:` list
of directories is dealt to the clones round-robin); `size` is split over a job's files unless
`filesize` is given; `runtime` without `time_based` stops at whichever comes first, the time or
one pass (`loops` passes) over `size`; sizes follow `kb_base` (default 1024: k/m/g are binary and,
inverted for compatibility with old scripts, ki/mi/gi are decimal); `${VAR}` must be set.

Every fio option is looked up in jobs/fio/options.py: translated, accepted (changes nothing storlab
measures) or refused. Nothing is ignored silently: translate() raises one FioJobError of at most
200 characters that lists each unsupported option once and points to docs/fio.md. Every value
produced is canonical for storlab.jobs.options.parse_value.
"""
from __future__ import annotations

import ast
import operator
import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import UserError
from .fio.options import ALIASES, ENGINES, META_ENGINES, REFUSED_ENGINES, status_of
from .options import OptionError, parse_value

__all__ = ["FioJobError", "Section", "Setting", "FioJob", "Translation", "translate", "onto_targets",
           "translate_sections", "read_sections", "expand_value", "canonical_name", "parse_fio_size",
           "parse_fio_time", "MAX_MESSAGE", "BOOLEAN_OPTIONS", "BARE_OPTIONS"]

MAX_MESSAGE = 200       # a refusal is one line of at most this many characters
DOCS = "see docs/fio.md"


class FioJobError(UserError):
    """fio jobs storlab cannot run as written; one line listing each problem once."""


_RW = {"read": "read", "write": "write", "randread": "randread", "randwrite": "randwrite",
       "rw": "rw", "readwrite": "rw", "randrw": "randrw", "trim": "trim", "randtrim": "randtrim",
       "trimwrite": "trimwrite"}
BOOLEAN_OPTIONS = {"time_based", "stonewall", "group_reporting", "thread", "new_group", "norandommap",
          "unlink", "create_on_open", "overwrite", "end_fsync", "fsync_on_close", "direct",
          "buffered", "invalidate", "randrepeat", "allrandrepeat", "do_verify", "sqthread_poll",
          "registerfiles", "fixedbufs", "replay_no_stall", "lat_percentiles", "clat_percentiles",
          "slat_percentiles", "gtod_reduce", "disable_lat", "disable_clat", "disable_slat",
          "disable_bw_measurement", "per_job_logs", "unique_filename", "create_serialize",
          "create_fsync", "allow_file_create", "refill_buffers", "scramble_buffers", "stats",
          "disk_util", "nonvectored",
          "verify_fatal", "verify_dump", "softrandommap", "error_dump"}
# options that may stand alone without being booleans (a log prefix defaults to the job name)
BARE_OPTIONS = BOOLEAN_OPTIONS | {"write_bw_log", "write_iops_log", "write_lat_log"}
# accepted options that change nothing only with these values
_ONLY = {"lockfile": {"none"}, "io_submit_mode": {"inline"}, "continue_on_error": {"none", "0"},
         "unified_rw_reporting": {"none", "0"}}


# -- value parsing with fio's rules --------------------------------------------------------------
_NUM_RE = re.compile(r"^\s*(0[xX][0-9a-fA-F]+|[0-9]*\.?[0-9]+)\s*([A-Za-z%]*)\s*$")


def parse_fio_size(text: str, kb_base: int = 1024) -> int:
    """A fio size/int value in bytes: k, m, g, t, p (with optional b) are powers of kb_base;
    ki, mi, gi, ti, pi (with optional b) are powers of the other base, as fio's HOWTO describes."""
    m = _NUM_RE.match(text or "")
    if not m:
        raise ValueError(f"cannot read {text!r} as a fio size (e.g. 4k, 1m, 1g, 4096)")
    number, suffix = m.group(1), m.group(2).lower()
    if suffix == "%":
        raise ValueError(f"{text!r}: a percentage needs an existing file or device")
    value = float(int(number, 16)) if number.lower().startswith("0x") else float(number)
    other = 1000 if kb_base == 1024 else 1024
    if suffix in ("", "b"):
        mult = 1
    else:
        if suffix.endswith("b"):
            suffix = suffix[:-1]
        powers = {"k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
        if suffix in powers:
            mult = kb_base ** powers[suffix]
        elif len(suffix) == 2 and suffix[1] == "i" and suffix[0] in powers:
            mult = other ** powers[suffix[0]]
        else:
            raise ValueError(f"unknown size suffix in {text!r}; fio takes k, m, g, t, p, "
                             f"ki, mi, gi, ti, pi (optionally followed by b)")
    result = value * mult
    if result != int(result):
        raise ValueError(f"{text!r} is not a whole number of bytes")
    return int(result)


_TIME_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "msec": 1e-3, "us": 1e-6, "usec": 1e-6,
               "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def parse_fio_time(text: str, default_unit: float = 1.0) -> float:
    """A fio time value in seconds: no unit is `default_unit` seconds (1 for runtime, 1e-6 for
    thinktime); d, h, m, s/sec, ms/msec, us/usec."""
    m = _NUM_RE.match(text or "")
    unit = m.group(2).lower() if m else None
    if not m or unit not in _TIME_UNITS or m.group(1).lower().startswith("0x"):
        raise ValueError(f"cannot read {text!r} as a fio time (e.g. 30, 500ms, 10s, 2m, 1h)")
    return float(m.group(1)) * (_TIME_UNITS[unit] if unit else default_unit)


def _parse_bool(text: str | None) -> bool:
    if text is None:
        return True
    t = text.strip().lower()
    if t in ("0", "1", "true", "false", "yes", "no", "on", "off"):
        return t in ("1", "true", "yes", "on")
    raise ValueError(f"expected 0 or 1, got {text!r}")


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.Mod: operator.mod, ast.Pow: operator.pow,
        ast.USub: operator.neg, ast.UAdd: operator.pos}


def _arith(expr: str) -> float:
    """fio's arithmetic in parentheses: numbers with + - * / % ^ (power)."""
    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise ValueError("only numbers and + - * / % ^")
    try:
        return ev(ast.parse(expr.replace("^", "**"), mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError) as e:
        raise ValueError(f"cannot evaluate ({expr}): {e}") from None


# -- sections -------------------------------------------------------------------------------------
@dataclass
class Setting:
    key: str          # canonical fio name (aliases resolved)
    raw_key: str      # as written
    value: str | None
    line: int
    error: str | None = None     # the value could not be expanded (an unset ${VAR})


@dataclass
class Section:
    name: str
    line: int = 0
    settings: list[Setting] = field(default_factory=list)


_ENV_RE = re.compile(r"\$\{([^}]*)\}")


def _keywords() -> dict[str, str]:
    pagesize = os.sysconf("SC_PAGE_SIZE")
    memory_mb = pagesize * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    return {"$pagesize": str(pagesize), "$mb_memory": str(memory_mb), "$ncpus": str(os.cpu_count() or 1)}


def expand_value(value: str, environ: Mapping[str, str]) -> str:
    """${VAR} from the environment (unset: an error, as fio gives), $ncpus/$pagesize/$mb_memory,
    and arithmetic in parentheses, as fio expands option values."""
    def env(m: re.Match) -> str:
        if m.group(1) not in environ:
            raise ValueError(f"environment variable {m.group(1)} is not set")
        return environ[m.group(1)]
    value = _ENV_RE.sub(env, value)
    for word, number in _keywords().items():
        value = value.replace(word, number)
    m = re.fullmatch(r"\s*\((.*)\)\s*([A-Za-z%]*)\s*", value)
    if m:
        number = _arith(m.group(1))
        value = (str(int(number)) if float(number).is_integer() else repr(number)) + m.group(2)
    return value


def canonical_name(key: str) -> str:
    k = key.strip().lower()
    return ALIASES.get(k, k)


def read_sections(path_or_text: str | os.PathLike, environ: Mapping[str, str] | None = None
                  ) -> tuple[list[Section], str]:
    """The sections of a fio job file (or its text) and its name for messages; `include FILE`
    lines are read in place (relative to the including file)."""
    env = os.environ if environ is None else environ
    text, source, base = _read(path_or_text)
    sections: list[Section] = []
    _read_lines(text, source, base, sections, env, depth=0)
    return sections, source


def _read(path_or_text: str | os.PathLike) -> tuple[str, str, Path]:
    """(text, name for messages, folder for includes). A str with a newline or starting with '['
    or a comment is the text itself."""
    if isinstance(path_or_text, os.PathLike) or (
            isinstance(path_or_text, str) and "\n" not in path_or_text
            and not path_or_text.lstrip().startswith(("[", ";", "#"))):
        path = Path(path_or_text)
        if path.exists() and not path.is_file():   # a FIFO would block, a directory cannot be read
            raise FioJobError(f"fio job file {path}: cannot read it (not a regular file)")
        try:
            return path.read_text(), str(path), path.parent
        except OSError as e:
            raise FioJobError(f"fio job file {path}: cannot read it ({e.strerror or e})") from None
        except UnicodeDecodeError as e:
            raise FioJobError(f"fio job file {path}: cannot read it (byte {e.start} is not UTF-8: not a "
                              f"text file)") from None
    return str(path_or_text), "<text>", Path.cwd()


def _read_lines(text: str, source: str, base: Path, sections: list[Section],
                environ: Mapping[str, str], depth: int) -> None:
    for lineno, raw in enumerate(text.splitlines(), 1):
        # fio drops everything after ';' or '#' on a line, and blank lines
        line = re.split(r"[;#]", raw, maxsplit=1)[0].strip()
        if not line:
            continue
        if line.startswith("include ") or line == "include":
            name = line[len("include"):].strip()
            if not name or depth > 8:
                raise FioJobError(f"fio job file {source} line {lineno}: include needs a file "
                                  f"(at most 8 levels deep)")
            inc = Path(name) if os.path.isabs(name) else base / name
            itext, isource, ibase = _read(inc)
            _read_lines(itext, isource, ibase, sections, environ, depth + 1)
            continue
        if line.startswith("[") and line.endswith("]"):
            sections.append(Section(line[1:-1].strip(), lineno))
            continue
        if not sections:
            raise FioJobError(f"fio job file {source} line {lineno}: option {line!r} is outside "
                              f"any [section]")
        key, sep, value = line.partition("=")
        val: str | None = value.strip() if sep else None
        error = None
        if val is not None:
            try:
                val = expand_value(val, environ)
            except ValueError as e:     # reported with the job's other problems
                error = f"{key.strip()}: {e}"
        sections[-1].settings.append(Setting(canonical_name(key), key.strip(), val, lineno, error))


# -- problems -------------------------------------------------------------------------------------
class _Problems:
    """What cannot run: unsupported options (each named once) and bad values, in order."""

    def __init__(self) -> None:
        self.unsupported: list[str] = []
        self.values: list[str] = []
        self.engine: str | None = None

    def option(self, name: str) -> None:
        if name not in self.unsupported:
            self.unsupported.append(name)

    def value(self, text: str) -> None:
        if text not in self.values:
            self.values.append(text)

    def __bool__(self) -> bool:
        return bool(self.unsupported or self.values or self.engine)

    def message(self, source: str) -> str:
        head = f"fio job {os.path.basename(source)}: " if source != "<text>" else "fio job: "
        # the pointer to docs/fio.md is for what storlab does not do; a bad value alone reads as
        # it does from a flag or a TOML job file, ending in what is allowed
        tail = f" — {DOCS}" if (self.engine or self.unsupported) else ""
        if self.engine:
            return _fit(head + self.engine, tail)
        parts = []
        if self.unsupported:
            parts.append("not supported: " + ", ".join(self.unsupported))
        parts += self.values
        return _fit(head + "; ".join(parts), tail)


def _fit(text: str, tail: str) -> str:
    """One line of at most MAX_MESSAGE characters, cut at an item boundary with how many more."""
    if len(text) + len(tail) <= MAX_MESSAGE:
        return text + tail
    items = re.split(r"(?<=[,;]) ", text)
    room = MAX_MESSAGE - len(tail)
    if len(items[0]) > room - 20:
        items[0] = items[0][:room - 21] + "…"
    out = ""
    for i, item in enumerate(items):
        more = f" … (+{len(items) - i} more)"
        if len(out) + len(item) + 1 + len(more) + len(tail) > MAX_MESSAGE:
            return out.rstrip(",; ") + more + tail
        out += (" " if out else "") + item
    return out + tail


# -- the translation ------------------------------------------------------------------------------
@dataclass
class FioJob:
    """One fio job after translation: where its workers are and what the output does with it."""
    name: str
    report_group: int
    phase: int                              # index into Translation.phases
    groups: list[str]                       # storlab group names of its workers in that phase
    rw: str
    clones: int
    files: list[str]
    group_reporting: bool = False
    unlink: list[str] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)   # bw|lat|iops -> file prefix
    log_interval_s: float | None = None
    percentiles: tuple[float, ...] = ()


@dataclass
class Translation:
    phases: list[dict[str, Any]]
    run: dict[str, Any]                     # run-level storlab options (invalidate)
    notes: list[str]                        # one line each: engine mappings and differences
    jobs: list[FioJob]
    source: str = "<text>"


def translate(path_or_text: str | os.PathLike, environ: Mapping[str, str] | None = None
              ) -> list[dict[str, Any]]:
    """Phases of a fio job file: `[{"name", "groups": [{"name": job, "options": {...}}]}]`
    (a meta-engine job is a `{"type": "meta", ...}` phase). Jobs in one phase run concurrently;
    a job with stonewall starts the next phase. Raises FioJobError (one line) when the file asks
    for anything storlab would not do the same way."""
    sections, source = read_sections(path_or_text, environ)
    tr = translate_sections(sections, source)
    # what only `storlab fio` carries out (run-wide invalidation, unlink, logs) must not be lost
    only_fio = [f"invalidate={int(tr.run['invalidate'])}"] if tr.run.get("invalidate") is False else []
    only_fio += [f"[{j.name}] unlink" for j in tr.jobs if j.unlink]
    only_fio += [f"[{j.name}] write_{kind}_log" for j in tr.jobs for kind in j.logs]
    if only_fio:
        raise FioJobError(_fit(f"fio job {os.path.basename(source)}: {', '.join(only_fio)}: run it "
                               f"with `storlab fio` (or give --no-invalidate)", ""))
    return tr.phases


def onto_targets(phases: list[dict[str, Any]], targets: list[str]) -> list[dict[str, Any]]:
    """The phases with `--target` standing for fio's filename=: fio's numjobs clones each have a
    file of their own (job.N.0) unless a filename is given, and then all of them share it. So a
    job of N clones over T given targets runs N / T workers on each; a count that does not divide
    is refused in one line."""
    for phase in phases:
        for group in phase.get("groups") or []:
            opts = group.get("options") or {}
            files = opts.get("target")
            clones = len(files) if isinstance(files, (list, tuple)) else 1
            if clones <= 1 or clones == len(targets):
                continue
            if clones % len(targets):
                raise FioJobError(f"--target: job {group.get('name')!r} runs {clones} clones (numjobs); "
                                  f"give 1 target for them to share, or {clones}, one each")
            opts["threads"] = int(opts.get("threads") or 1) * clones // len(targets)
            opts["thread_layout"] = "shared"      # each clone covers the whole range, as in fio
    return phases


def translate_sections(sections: list[Section], source: str = "<text>",
                       only: set[str] | None = None) -> Translation:
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
        raise FioJobError(f"fio job {source}: no section [{', '.join(sorted(only))}]")
    if not jobs and not problems:
        raise FioJobError(f"fio job {source}: defines no job (only [global] sections)")

    out = Translation([], {}, [], [], source)
    report_group = 0
    names_seen: dict[str, int] = {}
    layout: list[dict[str, Any]] = []     # overwrite=1: files written once before any job
    for sec, settings in jobs:
        try:
            job = _Job(sec, settings, problems)
            made = job.translate()
        except ValueError as e:
            problems.value(str(e))
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
        for fio_key, key in (("steadystate", "ss"), ("steadystate_duration", "ss_dur"),
                             ("steadystate_ramp_time", "ss_ramp"), ("latency_target", "latency_target"),
                             ("latency_window", "latency_window"), ("latency_percentile", "latency_percentile")):
            if job.has(fio_key):
                try:
                    raw = job.raw(fio_key) if key in ("ss", "latency_percentile") else \
                        job.time(fio_key, 1e-6 if key.startswith("latency") else 1.0)   # fio: bare = us
                    value = parse_value(key, raw)
                except (OptionError, ValueError) as e:
                    problems.value(f"[{job.name}] {fio_key}={job.raw(fio_key)}: {e}")
                    continue
                if out.run.get(key, value) != value:
                    problems.value(f"[{job.name}] {fio_key}: storlab applies {key} to the whole run; "
                                   "give every job the same value")
                out.run[key] = value
        if job.has("steadystate_check_interval") and job.time("steadystate_check_interval") != 1.0:
            problems.value(f"[{job.name}] steadystate_check_interval: storlab samples every second; only 1s")
        inv = job.invalidate()
        if inv is not None:
            if out.run.get("invalidate", inv) != inv:
                problems.value(f"[{job.name}] invalidate={int(inv)}: storlab invalidates for the "
                               f"whole run; give every job the same value")
            out.run["invalidate"] = inv
        out.jobs.append(FioJob(
            name=job.name, report_group=report_group, phase=phase_index, groups=groups,
            rw=job.rw, clones=job.numjobs, files=job.all_files,
            group_reporting=job.flag("group_reporting"), unlink=job.unlink_paths(),
            logs=job.logs(), log_interval_s=job.log_interval(), percentiles=job.percentiles()))
    if problems:
        raise FioJobError(problems.message(source))
    if layout:   # fio lays the files of overwrite=1 jobs out before it starts any job
        out.phases.insert(0, {"name": "layout", "groups": layout})
        for j in out.jobs:
            j.phase += 1
    for p in out.phases[1 if layout else 0:]:
        if p.get("type") != "meta":
            p["name"] = "+".join(dict.fromkeys(j.name for j in out.jobs
                                               if j.phase == out.phases.index(p)))
    return out


def _add_meta(out: Translation, phase: dict[str, Any], new_phase: bool) -> int:
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
        problems.value(f"{st.raw_key}: not a fio option (fio ignores it, storlab refuses it)")
        return False
    if row.status == "refused":
        problems.option(st.raw_key)
        return False
    if st.error:
        problems.value(st.error)
        return False
    if st.value is None and st.key not in BARE_OPTIONS:
        problems.value(f"{st.raw_key}: needs a value")
        return False
    allowed = _ONLY.get(st.key)
    if allowed and (st.value or "").lower() not in allowed:
        problems.option(f"{st.raw_key}={st.value}")
        return False
    return True


def _split_list(text: str) -> list[str]:
    """fio's `:` lists, where `\\:` is a colon inside a name."""
    return [p.replace("\\:", ":") for p in re.split(r"(?<!\\):", text) if p]


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
        self.s = settings
        self.problems = problems
        self.name = self.raw("name") or sec.name
        self.kb_base = 1024
        self.numjobs = 1
        self.rw = "read"
        self.seq_hole = 0
        self.all_files: list[str] = []
        self.notes: list[str] = []
        self.layout: list[dict[str, Any]] = []

    # settings
    def raw(self, key: str) -> str | None:
        st = self.s.get(key)
        return st.value if st else None

    def has(self, key: str) -> bool:
        return key in self.s

    def flag(self, key: str) -> bool:
        return self.has(key) and _parse_bool(self.raw(key))

    def shown(self, key: str) -> str:
        st = self.s[key]
        return st.raw_key if st.value is None else f"{st.raw_key}={st.value}"

    def bad(self, key: str, why: str) -> None:
        self.problems.value(f"[{self.section}] {self.shown(key)}: {why}")

    def size(self, key: str) -> int:
        try:
            return parse_fio_size(self.raw(key), self.kb_base)
        except ValueError as e:
            raise ValueError(f"[{self.section}] {self.shown(key)}: {e}") from None

    def time(self, key: str, default_unit: float = 1.0) -> float:
        try:
            return parse_fio_time(self.raw(key), default_unit)
        except ValueError as e:
            raise ValueError(f"[{self.section}] {self.shown(key)}: {e}") from None

    def boolean(self, key: str) -> bool:
        try:
            return self.flag(key)
        except ValueError as e:
            raise ValueError(f"[{self.section}] {self.shown(key)}: {e}") from None

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
        engine = (self.raw("ioengine") or "psync").strip()
        engine_base = engine.split(":")[0]
        if engine_base in REFUSED_ENGINES:
            self.problems.engine = f"ioengine={engine}: {REFUSED_ENGINES[engine_base]}"
            return None
        if engine_base in META_ENGINES:
            return self.meta(engine_base)
        if engine_base not in ENGINES:
            self.problems.engine = (f"ioengine={engine}: not an engine storlab maps (it maps "
                                    f"{', '.join(ENGINES)} and the file/dir engines)")
            return None
        storlab_engine, line = ENGINES[engine_base]
        if line:
            self.notes.append(line)
        if not self.rw_pattern():
            return None
        opts: dict[str, Any] = {"rw": _RW[self.rw], "engine": storlab_engine}
        if self.seq_hole:
            opts["seq_hole"] = self.seq_hole
        if not self.block_size(opts):
            return None
        workers = self.targets(storlab_engine)
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
        mod = mod.strip()
        if mod and base.startswith("rand"):
            if mod != "1":
                self.bad("rw", f"storlab does one request per random offset (modifier :{mod})")
                return False
        elif mod:
            # fio's rw=read:SIZE: skip SIZE bytes after each request (seq_hole)
            try:
                self.seq_hole = parse_fio_size(mod, self.kb_base)
            except ValueError:
                self.seq_hole = -1
            if self.seq_hole < 0:
                self.bad("rw", f"modifier :{mod} is not a hole size; allowed: a size >= 0 "
                               "skipped after each sequential request")
                return False
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
        v = parse_fio_size(last.value or "", self.kb_base)
        if v > 100:
            raise ValueError(f"[{self.section}] {last.raw_key}={last.value}: must be 0..100")
        return v if last.key == "rwmixread" else 100 - v

    def targets(self, engine: str) -> list[tuple[int, list[str], int | None]] | None:
        """[(clone, its files, size of each file)]: fio's files of each clone."""
        dirs = _split_list(self.raw("directory")) if self.has("directory") else []
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
        if self.has("filename"):
            if self.raw("filename") == "-":
                self.bad("filename", "standard input/output is not a storlab target")
                return None
            names = _split_list(self.raw("filename"))
            base = dirs[0] if dirs else ""
            files = [n if not base or os.path.isabs(n) else os.path.join(base, n) for n in names]
            self.all_files = files
            clones = [(k, files) for k in range(self.numjobs)]
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
        # the bytes of each file: filesize, else size split over the job's files
        nfiles = len(clones[0][1])
        if self.has("filesize"):
            lo, _, hi = self.raw("filesize").partition("-")
            lo_b = parse_fio_size(lo, self.kb_base)
            if hi and parse_fio_size(hi, self.kb_base) != lo_b:
                self.bad("filesize", "storlab's files have one size; give one value")
                return None
            per_file = lo_b
        elif self.has("size"):
            per_file = self._size_value("size", clones[0][1]) // nfiles
        elif not self.has("filename"):
            self.problems.value(f"[{self.section}] size: missing; fio needs a size for the files "
                                f"it names itself (or give filename)")
            return None
        else:
            per_file = None    # the whole existing file or device, as fio
        if nfiles > 1 and self.has("filename"):
            self.notes.append("filename list → one storlab worker per file (fio: one job cycling "
                              "through its files)")
        return [(k, files, per_file) for k, files in clones]

    def _size_value(self, key: str, files: list[str]) -> int:
        """size/offset, where `N%` is a share of the existing file or device."""
        text = self.raw(key) or ""
        if text.strip().endswith("%"):
            pct = float(text.strip()[:-1])
            real = _target_bytes(files[0]) if files else None
            if real is None:
                raise ValueError(f"[{self.section}] {self.shown(key)}: a percentage needs an "
                                 f"existing file or device as filename")
            return int(real * pct / 100)
        return self.size(key)

    def common(self, opts: dict[str, Any], engine: str) -> None:
        """Options every worker of the job has alike."""
        if _RW[self.rw] in ("rw", "randrw") or self.has("rwmixread") or self.has("rwmixwrite"):
            opts["rwmix_read"] = self.rwmix_read()
        opts["qd"] = (self.size("iodepth") if self.has("iodepth") else 1) if engine != "psync" else 1
        last = self.later("direct", "buffered")
        direct = False
        if last is not None:
            direct = _parse_bool(last.value) if last.key == "direct" else not _parse_bool(last.value)
        opts["direct"] = direct
        sync = self.later("fsync", "fdatasync")
        if sync is not None:
            opts["fsync_every"] = parse_fio_size(sync.value or "", self.kb_base)
        opts["fsync_end"] = self.flag("end_fsync") or self.flag("fsync_on_close")
        if self.flag("norandommap"):
            opts["random_map"] = False
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
            self.problems.value(f"[{self.section}] time_based: needs runtime")
        if self.has("ramp_time"):
            opts["ramp"] = self.time("ramp_time")
        if self.has("startdelay"):
            if "-" in (self.raw("startdelay") or "").lstrip("-"):
                self.bad("startdelay", "storlab starts every worker after one delay; give one time")
            else:
                opts["start_delay"] = self.time("startdelay")
        _, writes, _ = self._directions()
        if writes and (self.raw("fallocate") or "").strip().lower() in ("none", "0"):
            self.problems.option("fallocate=none (storlab preallocates new files, as fio's default)")
        self.verification(opts)
        if engine == "io_uring":
            batch = self.later("iodepth_batch", "iodepth_batch_submit")
            if batch is not None:
                opts["uring.batch"] = parse_fio_size(batch.value or "", self.kb_base)
            for fio_key, key in (("sqthread_poll", "uring.sqpoll"),
                                 ("registerfiles", "uring.fixed_files"), ("fixedbufs", "uring.fixed_buffers")):
                if self.has(fio_key):
                    opts[key] = self.flag(fio_key)
        if self.has("log_avg_msec") and self.size("log_avg_msec") > 0:
            opts["interval"] = self.size("log_avg_msec") / 1000
        self.pacing(opts)

    def verification(self, opts: dict[str, Any]) -> None:
        kind = (self.raw("verify") or "").strip().lower()
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
                given[key] = ",".join(str(parse_fio_size(p, self.kb_base)) if p.strip() else "0"
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
        elif self.has("filename") and not incr:
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
                self.problems.value(f"[{self.section}] {e}")
                return False
        return True

    def meta(self, engine: str) -> tuple[str, dict[str, Any], list[str]] | None:
        """fio's file-system engines as a storlab meta phase."""
        phases = META_ENGINES[engine]
        nr = self.size("nrfiles") if self.has("nrfiles") else 1
        dirs = _split_list(self.raw("directory")) if self.has("directory") else []
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

    def percentiles(self) -> tuple[float, ...]:
        if not self.has("percentile_list"):
            return ()
        try:
            values = tuple(float(p) for p in self.raw("percentile_list").split(":") if p)
        except ValueError:
            raise ValueError(f"[{self.section}] {self.shown('percentile_list')}: numbers "
                             f"separated by ':'") from None
        if any(not 0 <= v <= 100 for v in values):
            raise ValueError(f"[{self.section}] {self.shown('percentile_list')}: each in 0..100")
        return values
