"""fio job files read as fio reads them: `[sections]` of `key[=value]` settings, `include FILE`,
comments after `;` or `#`, `${VAR}` from the environment (unset: an error, as fio gives),
`$ncpus`/`$pagesize`/`$mb_memory`, arithmetic in parentheses, and fio's sizes (k/m/g by
`kb_base`, ki/mi/gi the other base) and times. Only reading: what each setting becomes is
map.py's; the translator (translator.py) ties both into storlab's job.
"""
from __future__ import annotations

import ast
import operator
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ...errors import UserError
from ..translation import Refusal
from .options import ALIASES, shown_value

__all__ = ["FioJobError", "Section", "Setting", "read_sections", "read_source", "expand_value",
           "canonical_name", "parse_fio_size", "parse_fio_time", "parse_bool", "split_list",
           "BOOLEAN_OPTIONS", "SET_OPTIONS", "BARE_OPTIONS", "FORMAT", "COMMAND_LINE"]

FORMAT = "fio"
COMMAND_LINE = "command line"    # the source of settings given as fio's arguments (no line numbers)


class FioJobError(UserError):
    """A fio job storlab cannot read at all (no file, no job); a key it cannot honour is a Refusal."""


BOOLEAN_OPTIONS = {"time_based", "stonewall", "group_reporting", "thread", "new_group", "norandommap",
          "unlink", "create_on_open", "overwrite", "end_fsync", "fsync_on_close", "direct",
          "buffered", "invalidate", "randrepeat", "allrandrepeat", "do_verify", "sqthread_poll",
          "registerfiles", "fixedbufs", "replay_no_stall", "lat_percentiles", "clat_percentiles",
          "slat_percentiles", "gtod_reduce", "disable_lat", "disable_clat", "disable_slat",
          "disable_bw_measurement", "per_job_logs", "unique_filename", "create_serialize",
          "create_fsync", "allow_file_create", "refill_buffers", "scramble_buffers", "stats",
          "disk_util", "nonvectored",
          "verify_fatal", "verify_dump", "softrandommap", "error_dump"}
# fio's FIO_OPT_STR_SET options (options.c, the engines' options): on fio's command line they take
# a value only as `--opt=val` (getopt's optional_argument), so in `--opt word` the word is not
# theirs; every other option takes the next word as its value (required_argument)
SET_OPTIONS = {"blocksize_unaligned", "norandommap", "time_based", "verify_only", "exitall",
               "exitall_on_error", "stonewall", "new_group", "thread", "group_reporting",
               "zero_buffers", "refill_buffers", "hipri", "fixedbufs", "registerfiles", "sqthread_poll"}
# options that may stand alone without being booleans (a log prefix defaults to the job name)
BARE_OPTIONS = BOOLEAN_OPTIONS | SET_OPTIONS | {"write_bw_log", "write_iops_log", "write_lat_log"}


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


def parse_bool(text: str | None) -> bool:
    """fio's boolean value; alone (no value) it means 1."""
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
    line: int         # in `file`; on the command line, the argument's position (for ordering)
    error: str | None = None     # the value could not be expanded (an unset ${VAR})
    file: str = "<text>"         # the job file it was read from (an include's own), or COMMAND_LINE
    raw_value: str | None = None  # as written, before ${VAR} expansion

    @property
    def where(self) -> int | None:
        """Its line for a refusal (None on the command line, which has no lines)."""
        return None if self.file == COMMAND_LINE else self.line

    def refusal(self, reason: str, more: list[str] | tuple[str, ...] = ()) -> Refusal:
        """This setting refused in the shared one-line wording."""
        value = self.raw_value if self.value is None else self.value
        return Refusal(FORMAT, self.file, self.where, self.raw_key, "" if value is None else shown_value(self.key, value),
                       reason, more)


@dataclass
class Section:
    name: str
    line: int = 0
    file: str = "<text>"         # the job file it was read from, or COMMAND_LINE
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




def split_list(text: str) -> list[str]:
    """fio's `:` lists, where `\\:` is a colon inside a name."""
    return [p.replace("\\:", ":") for p in re.split(r"(?<!\\):", text) if p]


def read_sections(path_or_text: str | os.PathLike, environ: Mapping[str, str] | None = None
                  ) -> tuple[list[Section], str]:
    """The sections of a fio job file (or its text) and its name for messages; `include FILE`
    lines are read in place (relative to the including file)."""
    sections, source, _ = read_source(path_or_text, environ)
    return sections, source


def read_source(path_or_text: str | os.PathLike, environ: Mapping[str, str] | None = None
                ) -> tuple[list[Section], str, bytes]:
    """read_sections, with the bytes of the main file (or text) for its sha256."""
    env = os.environ if environ is None else environ
    text, source, base = _read(path_or_text)
    sections: list[Section] = []
    _read_lines(text, source, base, sections, env, depth=0)
    return sections, source, text.encode()


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
            return path.read_bytes().decode(), str(path), path.parent
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
                raise Refusal(FORMAT, source, lineno, "include", name, "needs a file (at most 8 levels deep)")
            inc = Path(name) if os.path.isabs(name) else base / name
            itext, isource, ibase = _read(inc)
            _read_lines(itext, isource, ibase, sections, environ, depth + 1)
            continue
        if line.startswith("[") and line.endswith("]"):
            sections.append(Section(line[1:-1].strip(), lineno, source))
            continue
        key, sep, value = line.partition("=")
        if not sections:
            raise Refusal(FORMAT, source, lineno, key.strip(), value.strip(), "outside any [section]")
        val: str | None = value.strip() if sep else None
        error = None
        if val is not None:
            try:
                val = expand_value(val, environ)
            except ValueError as e:     # reported with the job's other problems
                error = str(e)
        sections[-1].settings.append(Setting(canonical_name(key), key.strip(), val, lineno, error,
                                             source, value.strip() if sep else None))
