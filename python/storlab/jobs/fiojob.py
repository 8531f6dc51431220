"""Translate a fio job file into storlab phases (`storlab run --fio job.fio`).

fio semantics kept: [global] sections set defaults for the jobs below them; jobs run concurrently
until one has `stonewall` (or `wait_for_previous`), which starts a new phase; `numjobs` clones of a
job with a fixed `filename` share that file (each covering all of it), while clones without one get
their own file, named `jobname.jobnum.filenum` in `directory`; `runtime` without `time_based` stops
at whichever comes first, the time or one pass over `size`; sizes follow `kb_base` (default 1024:
k/m/g are binary and, inverted for compatibility with old scripts, ki/mi/gi are decimal).

Options storlab cannot reproduce are never ignored: translate() raises one FioJobError listing each
of them with its section. Every value produced is canonical for storlab.jobs.options.parse_value.
"""
from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import UserError
from .options import parse_value

__all__ = ["FioJobError", "translate", "parse_fio_size", "parse_fio_time", "ENGINES"]


class FioJobError(UserError):
    """A fio job file storlab cannot run as written; the message lists every problem."""


# fio ioengine -> storlab engine. sync (read/write after lseek) and pvsync (preadv) issue the same
# one-at-a-time positioned I/O as psync.
ENGINES = {"psync": "psync", "sync": "psync", "pvsync": "psync", "io_uring": "io_uring", "null": "null"}
_RW = {"read": "read", "write": "write", "randread": "randread", "randwrite": "randwrite",
       "rw": "rw", "readwrite": "rw", "randrw": "randrw"}
_ALIASES = {"readwrite": "rw", "blocksize": "bs", "io_limit": "io_size", "timeout": "runtime",
            "wait_for_previous": "stonewall"}
# Options accepted with no effect on the I/O storlab does: reporting and process-model choices.
_NO_EFFECT = {"group_reporting": "storlab always aggregates the workers of a phase",
              "thread": "storlab workers are always threads",
              "new_group": "reporting groups only", "description": "free text"}
_SUPPORTED = {"name", "filename", "directory", "rw", "rwmixread", "rwmixwrite", "bs", "size",
              "io_size", "offset", "runtime", "time_based", "ramp_time", "numjobs", "iodepth",
              "ioengine", "direct", "buffered", "fsync", "end_fsync", "randrepeat", "randseed",
              "stonewall", "kb_base", "norandommap", "random_distribution"} | set(_NO_EFFECT)
_FLAGS = {"time_based", "stonewall", "group_reporting", "thread", "new_group",
          "norandommap"}   # may stand alone


# -- value parsing with fio's rules --------------------------------------------------------------
_NUM_RE = re.compile(r"^\s*(0[xX][0-9a-fA-F]+|[0-9]*\.?[0-9]+)\s*([A-Za-z%]*)\s*$")


def parse_fio_size(text: str, kb_base: int = 1024) -> int:
    """A fio size/int value in bytes: k, m, g, t, p (with optional b) are powers of kb_base;
    ki, mi, gi, ti, pi (with optional b) are powers of the other base, as fio's HOWTO describes."""
    m = _NUM_RE.match(text)
    if not m:
        raise ValueError(f"cannot read {text!r} as a fio size (e.g. 4k, 1m, 1g, 4096)")
    number, suffix = m.group(1), m.group(2).lower()
    if suffix == "%":
        raise ValueError(f"{text!r}: percentages of the device are not supported")
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


def parse_fio_time(text: str) -> float:
    """A fio time value in seconds: no unit is seconds; d, h, m, s/sec, ms/msec, us/usec."""
    m = _NUM_RE.match(text)
    unit = m.group(2).lower() if m else None
    if not m or unit not in _TIME_UNITS or m.group(1).lower().startswith("0x"):
        raise ValueError(f"cannot read {text!r} as a fio time (e.g. 30, 500ms, 10s, 2m, 1h)")
    return float(m.group(1)) * _TIME_UNITS[unit]


def _parse_bool(text: str | None) -> bool:
    if text is None:
        return True
    if text.strip() in ("0", "1"):
        return text.strip() == "1"
    raise ValueError(f"expected 0 or 1, got {text!r}")


# -- the job file ---------------------------------------------------------------------------------
@dataclass
class _Setting:
    key: str          # canonical fio name (aliases resolved)
    raw_key: str      # as written
    value: str | None
    section: str
    line: int


@dataclass
class _Section:
    name: str
    line: int
    settings: list[_Setting] = field(default_factory=list)
    rejected: set[str] = field(default_factory=set)   # keys already reported as problems


class _Problems:
    """Everything wrong with a job file, reported together in file order."""

    def __init__(self) -> None:
        self._items: list[tuple[int, str]] = []

    def add(self, section: str, what: str, why: str, line: int = 0) -> None:
        item = f"[{section}] {what}: {why}"
        if all(item != i for _, i in self._items):
            self._items.append((line, item))

    @property
    def items(self) -> list[str]:
        return [i for _, i in sorted(self._items, key=lambda x: x[0])]


_ENV_RE = re.compile(r"\$\{([^}]*)\}")
_KEYWORD_RE = re.compile(r"\$(pagesize|mb_memory|ncpus)\b")


def _read(path_or_text: str | os.PathLike) -> tuple[str, str]:
    """(text, name for messages). A str with a newline or starting with '[' or a comment is text."""
    if isinstance(path_or_text, os.PathLike) or (
            isinstance(path_or_text, str) and "\n" not in path_or_text
            and not path_or_text.lstrip().startswith(("[", ";", "#"))):
        path = Path(path_or_text)
        if path.exists() and not path.is_file():   # a FIFO would block, a directory cannot be read
            raise FioJobError(f"fio job file {path}: cannot read it (not a regular file)")
        try:
            return path.read_text(), str(path)
        except OSError as e:
            raise FioJobError(f"fio job file {path}: cannot read it ({e.strerror or e})") from None
        except UnicodeDecodeError as e:
            raise FioJobError(f"fio job file {path}: cannot read it (byte {e.start} is not UTF-8: not a "
                              f"text file)") from None
    return str(path_or_text), "<text>"


def _parse_sections(text: str, problems: _Problems, environ: Mapping[str, str]) -> list[_Section]:
    sections: list[_Section] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        # fio drops everything after ';' or '#' on a line, and blank lines
        line = re.split(r"[;#]", raw, maxsplit=1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            sections.append(_Section(line[1:-1].strip(), lineno))
            continue
        if not sections:
            raise FioJobError(f"line {lineno}: option {line!r} is outside any [section]")
        sec = sections[-1]
        if line.startswith("include ") or line == "include":
            problems.add(sec.name, line, "include directives are not supported; paste the "
                         "included options into the file", lineno)
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        val: str | None = value.strip() if sep else None
        if val is not None:
            # ${VAR} expands to the environment variable, or to nothing when unset (as in fio)
            val = _ENV_RE.sub(lambda mm: environ.get(mm.group(1), ""), val)
            if _KEYWORD_RE.search(val) or (val.startswith("(") and val.endswith(")")):
                problems.add(sec.name, f"{key}={val}", "fio keywords ($ncpus ...) and arithmetic "
                             "expressions are not supported; write the number", lineno)
                sec.rejected.add(_ALIASES.get(key.lower(), key.lower()))
                continue
        canon = _ALIASES.get(key.lower(), key.lower())
        sec.settings.append(_Setting(canon, key, val, sec.name, lineno))
    return sections


def _check_setting(s: _Setting, problems: _Problems) -> bool:
    """Reject what can be judged on its own: unknown options and unsupported values."""
    shown = s.raw_key if s.value is None else f"{s.raw_key}={s.value}"
    if s.key not in _SUPPORTED:
        problems.add(s.section, shown, "not supported by storlab", s.line)
        return False
    if s.value is None and s.key not in _FLAGS:
        problems.add(s.section, shown, "needs a value", s.line)
        return False
    v = s.value
    try:
        if s.key == "ioengine" and v not in ENGINES:
            problems.add(s.section, shown, f"engine not supported; use one of: {', '.join(ENGINES)}", s.line)
            return False
        if s.key == "rw":
            base, _, mod = v.partition(":")
            if base not in _RW:
                problems.add(s.section, shown, f"use one of: {', '.join(_RW)} (trim is not supported)", s.line)
                return False
            if mod:
                # the only modifiers that change nothing: one I/O per random offset, no seq holes
                neutral = "1" if base.startswith("rand") else "0"
                if mod.strip() != neutral:
                    problems.add(s.section, shown, "offset modifiers (':N') are not supported", s.line)
                    return False
        if s.key == "bs":
            parts = re.split(r"[,/]", v)
            if any(re.search(r"[-:]", p) for p in parts):
                problems.add(s.section, shown, "block size ranges are not supported; give one size", s.line)
                return False
            if len({p.strip() for p in parts if p.strip()}) > 1:
                problems.add(s.section, shown, "different read/write block sizes are not supported", s.line)
                return False
            for part in parts:
                if part.strip():
                    parse_fio_size(part)
        if s.key == "filename" and len(re.split(r"(?<!\\):", v)) > 1:
            problems.add(s.section, shown, "several files per job are not supported; "
                         "use one job per file", s.line)
            return False
        if s.key == "filename" and v == "-":
            problems.add(s.section, shown, "standard input/output is not a storlab target", s.line)
            return False
        if s.key == "directory" and len(re.split(r"(?<!\\):", v)) > 1:
            problems.add(s.section, shown, "several directories are not supported", s.line)
            return False
        if s.key == "kb_base" and v not in ("1000", "1024"):
            problems.add(s.section, shown, "use 1000 or 1024", s.line)
            return False
        if s.key in ("direct", "buffered", "end_fsync", "randrepeat") or s.key in _FLAGS:
            _parse_bool(v)
        if s.key in ("runtime", "ramp_time"):
            parse_fio_time(v)
        if s.key == "random_distribution":
            parse_value("random_distribution", v)   # the engine's rule: fio's forms but zoned_abs
        if s.key in ("size", "io_size", "offset", "numjobs", "iodepth", "rwmixread",
                     "rwmixwrite", "fsync", "randseed"):
            parse_fio_size(v)   # syntax only; the job's kb_base is applied later
    except ValueError as e:
        problems.add(s.section, shown, str(e), s.line)
        return False
    return True


def _job_options(name: str, settings: dict[str, _Setting], section: str, line: int,
                 rejected: set[str], problems: _Problems) -> tuple[dict[str, Any], bool] | None:
    """The storlab options of one fio job from its effective settings; None if it cannot be run.
    `rejected` holds the keys already reported: their absence is not reported again."""
    def raw(key: str) -> str | None:
        s = settings.get(key)
        return s.value if s else None

    def has(key: str) -> bool:
        return key in settings

    kb_base = int(raw("kb_base") or 1024)

    def size(key: str) -> int:
        return parse_fio_size(raw(key), kb_base)

    def flag(key: str) -> bool:
        return has(key) and _parse_bool(raw(key))

    jobname = raw("name") or name
    engine = ENGINES[raw("ioengine") or "psync"]
    numjobs = size("numjobs") if has("numjobs") else 1
    if numjobs < 1:
        problems.add(section, f"numjobs={raw('numjobs')}", "must be at least 1", line)
        return None
    out: dict[str, Any] = {}

    # targets: a fixed file is shared by the clones; otherwise each clone gets its own file
    directory = raw("directory")
    if has("filename"):
        fname = raw("filename").replace("\\:", ":")
        path = fname if not directory or os.path.isabs(fname) else os.path.join(directory, fname)
        out["target"] = (path,)
        out["threads"] = numjobs
        out["thread_layout"] = "shared"
    else:
        if not has("size"):
            if "size" not in rejected:
                problems.add(section, "size", "missing: fio needs a size for the files it names "
                             "itself (or give filename)", line)
            return None
        base = directory or "."
        out["target"] = tuple(os.path.join(base, f"{jobname}.{n}.0") for n in range(numjobs))
        out["threads"] = 1

    rw_base = (raw("rw") or "read").partition(":")[0]
    out["rw"] = _RW[rw_base]
    if out["rw"] in ("rw", "randrw") or has("rwmixread") or has("rwmixwrite"):
        # the later of rwmixread/rwmixwrite wins, as in fio
        mix = [s for s in (settings.get("rwmixread"), settings.get("rwmixwrite")) if s]
        mix.sort(key=lambda s: s.line)
        pct = 50
        if mix:
            last = mix[-1]
            v = parse_fio_size(last.value, kb_base)
            if v > 100:
                problems.add(last.section, f"{last.raw_key}={last.value}", "must be 0..100",
                             last.line)
                return None
            pct = v if last.key == "rwmixread" else 100 - v
        out["rwmix_read"] = pct
    bs_text = re.split(r"[,/]", raw("bs") or "4k")[0].strip() or "4k"
    out["bs"] = parse_fio_size(bs_text, kb_base)
    if has("size"):
        out["size"] = size("size")
    if has("offset"):
        out["offset"] = size("offset")

    out["engine"] = engine
    # fio's synchronous engines keep one I/O in flight whatever iodepth says
    out["qd"] = (size("iodepth") if has("iodepth") else 1) if engine != "psync" else 1

    # direct and buffered are two names for one switch; the one written last wins
    dirs = [s for s in (settings.get("direct"), settings.get("buffered")) if s]
    dirs.sort(key=lambda s: s.line)
    direct = False
    if dirs:
        last = dirs[-1]
        direct = _parse_bool(last.value) if last.key == "direct" else not _parse_bool(last.value)
    out["direct"] = direct

    if has("fsync"):
        out["fsync_every"] = size("fsync")
    out["fsync_end"] = flag("end_fsync")    # fio does not fsync at the end unless told; storlab does

    if flag("norandommap"):
        out["random_map"] = False
    if has("random_distribution"):
        out["random_distribution"] = parse_value("random_distribution", raw("random_distribution"))

    if has("randseed"):
        out["seed"] = size("randseed")
    elif has("randrepeat") and not _parse_bool(raw("randrepeat")):
        out["seed"] = secrets.randbelow(2**63)  # randrepeat=0: a new sequence every run

    time_based = flag("time_based")
    if has("runtime"):
        out["time"] = parse_fio_time(raw("runtime"))
        if not time_based:
            # fio stops at whichever comes first: the runtime or one pass of `size` per clone
            per_clone = size("io_size") if has("io_size") else out.get("size")
            if per_clone is None:
                if not {"size", "io_size", "time_based"} & rejected:
                    problems.add(section, f"runtime={raw('runtime')}", "without time_based fio "
                                 "also stops after one pass over the file; give size (or io_size) "
                                 "so storlab can do the same, or add time_based", line)
                return None
            out["io_size"] = per_clone
    elif time_based:
        if "runtime" not in rejected:
            problems.add(section, "time_based", "needs runtime", line)
        return None
    elif has("io_size"):
        out["io_size"] = size("io_size")
    if has("ramp_time"):
        out["ramp"] = parse_fio_time(raw("ramp_time"))

    # every value must be what storlab's option table accepts, unchanged
    for key, value in out.items():
        try:
            if parse_value(key, value) != value:
                raise ValueError(f"{value!r} is not canonical")
        except ValueError as e:
            problems.add(section, key, str(e), line)
            return None
    return out, flag("stonewall")


def translate(path_or_text: str | os.PathLike, environ: Mapping[str, str] | None = None
              ) -> list[dict[str, Any]]:
    """Phases of a fio job file: `[{"name", "groups": [{"name": job, "options": {...}}]}]`.

    Jobs in one phase run concurrently; a job with stonewall starts the next phase. Raises
    FioJobError (one message listing every unsupported option with its section) when the file
    asks for anything storlab would not do the same way.
    """
    text, source = _read(path_or_text)
    problems = _Problems()
    sections = _parse_sections(text, problems, os.environ if environ is None else environ)

    defaults: dict[str, _Setting] = {}
    default_rejected: set[str] = set()
    jobs: list[tuple[_Section, dict[str, _Setting], set[str]]] = []
    for sec in sections:
        own: dict[str, _Setting] = {}
        for st in sec.settings:
            if _check_setting(st, problems):
                own[st.key] = st
            else:
                sec.rejected.add(st.key)
        if sec.name.lower() == "global":
            # a job sees only the global sections above it
            defaults.update(own)
            default_rejected = (default_rejected - set(own)) | sec.rejected
        else:
            jobs.append((sec, {**defaults, **own}, (default_rejected - set(own)) | sec.rejected))
    if not jobs and not problems.items:
        raise FioJobError(f"fio job file {source}: defines no job (only [global] sections)")

    phases: list[dict[str, Any]] = []
    for sec, settings, rejected in jobs:
        name = sec.name
        # translated even after a problem, to collect the ones only visible per job
        try:
            result = _job_options(name, settings, name, sec.line, rejected, problems)
        except ValueError as e:   # a value valid on its own but not with this job's kb_base
            problems.add(name, "value", str(e), sec.line)
            result = None
        if result is None or problems.items:
            continue
        options, stonewall = result
        group = {"name": settings["name"].value if "name" in settings else name, "options": options}
        if stonewall and phases:
            phases.append({"name": "", "groups": []})
        if not phases:
            phases.append({"name": "", "groups": []})
        phases[-1]["groups"].append(group)
    if problems.items:
        raise FioJobError(f"fio job file {source}: not supported by storlab: "
                          + "; ".join(problems.items))
    for p in phases:
        p["name"] = "+".join(g["name"] for g in p["groups"])
    return phases
