"""A Darshan log as plain data: header checks, then PyDarshan in a child process (reader.py).

Every way a log can be unusable is refused here in one line naming the file: not a Darshan log,
an unsupported format version, a truncated or corrupt log (darshan-util's own error, or records
missing that the header announces), no POSIX, MPI-IO or STDIO records. Nothing is written.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from ...errors import UserError
from ..translation import Refusal

__all__ = ["DarshanLog", "Record", "DxtRecord", "load", "LogError", "INSTALL_HINT", "MAGIC_NR",
           "SUPPORTED_MAJOR"]

INSTALL_HINT = "pip install 'storlab[replay]' (or: pip install darshan)"
MAGIC_NR = 6567223          # darshan-log-format.h DARSHAN_MAGIC_NR, after the 8-byte version string
SUPPORTED_MAJOR = 3         # PyDarshan 3.x reads format 3.x logs (2.x need darshan-convert first)
READ_TIMEOUT_S = 300


class LogError(Refusal):
    """A Darshan log storlab cannot use: the translators' one-line refusal, naming the file, the
    part of the log at fault (a log has no lines: `line` is None) and what is wrong."""

    def __init__(self, path: str, what: str, key: str = "log", value: object = "") -> None:
        super().__init__("darshan", path, None, key, value, what)


@dataclass
class Record:
    """One Darshan record: a file (its record id) as one rank saw it, or rank -1: all ranks shared it."""
    module: str
    id: int
    rank: int
    path: str
    counters: dict[str, int]
    fcounters: dict[str, float]

    def c(self, name: str) -> int:
        return self.counters.get(name, 0)

    def f(self, name: str) -> float:
        return self.fcounters.get(name, 0.0)


@dataclass
class DxtRecord:
    """A DXT trace of one file on one rank: its segments [offset, length, start s, end s]."""
    module: str
    id: int
    rank: int
    path: str
    read_count: int
    write_count: int
    reads: list[list[float]]
    writes: list[list[float]]


@dataclass
class DarshanLog:
    path: str
    version: str
    nprocs: int
    jobid: int
    run_time_s: float
    exe: str
    modules: dict[str, dict[str, Any]]
    records: dict[str, list[Record]] = field(default_factory=dict)
    dxt: dict[str, list[DxtRecord]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)   # module -> why it was left out

    def module_records(self, module: str) -> list[Record]:
        return self.records.get(module, [])


def pydarshan_available() -> bool:
    return importlib.util.find_spec("darshan") is not None


def check_header(path: str) -> str:
    """The log's format version ("3.21"); refuses what is not a Darshan log or not format 3."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except IsADirectoryError:
        raise LogError(path, "is a directory, not a Darshan log") from None
    except OSError as e:
        raise LogError(path, f"cannot be read: {e.strerror or e}") from None
    text = head[:8].split(b"\0", 1)[0].decode("ascii", "replace")
    if len(head) < 16 or not re.fullmatch(r"\d+\.\d+", text):
        raise LogError(path, "not a Darshan log (no Darshan header: it starts with a format version such as 3.21)")
    magic_le, = struct.unpack("<q", head[8:16])
    magic_be, = struct.unpack(">q", head[8:16])
    if MAGIC_NR not in (magic_le, magic_be):
        raise LogError(path, f"not a Darshan log (version string {text!r} but no Darshan magic number)")
    if int(text.split(".")[0]) != SUPPORTED_MAJOR:
        raise LogError(path, f"format version {text} is not supported: storlab reads Darshan 3.x logs "
                             "(convert older ones with darshan-convert)", key="version", value=text)
    return text


def load(path: str) -> DarshanLog:
    """The log read and checked (see the module's docstring for what is refused)."""
    version = check_header(path)
    if not pydarshan_available():
        raise UserError(f"darshan {os.path.basename(path)}: reading Darshan logs needs PyDarshan: {INSTALL_HINT}")
    try:
        proc = subprocess.run([sys.executable, "-m", "storlab.jobs.darshan.reader", os.path.abspath(path)],
                              capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=READ_TIMEOUT_S,
                              env={**os.environ, "PYTHONPATH": _python_path()})
    except subprocess.TimeoutExpired:
        raise LogError(path, f"PyDarshan did not finish reading it in {READ_TIMEOUT_S} s") from None
    errors = [line.removeprefix("Error:").strip() for line in proc.stderr.splitlines()
              if line.startswith("Error:") or "Assertion" in line]
    if proc.returncode != 0 or errors:
        first = next((e.rstrip(".") for e in errors if e and not e.startswith("RuntimeError")), "")
        if first:
            reason = f"darshan-util: {first[:100]}"
        elif proc.returncode < 0:
            reason = f"darshan-util crashed reading it, signal {-proc.returncode}"
        else:
            reason = f"PyDarshan stopped with exit status {proc.returncode}"
        raise LogError(path, f"truncated or corrupt log ({reason})")
    try:
        raw = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise LogError(path, "truncated or corrupt log (PyDarshan returned no readable records)") from None
    log = _from_raw(path, version, raw)
    for module, lines in raw.get("errors", {}).items():
        what = lines[0].removeprefix("Error:").strip().rstrip(".")
        if module.startswith("DXT_"):   # the counters stand: replay from them, and say why
            log.dxt.pop(module, None)
            log.skipped[module] = f"not readable by this PyDarshan ({what}); replayed from the counters"
            continue
        if "version" in what.lower():
            raise LogError(path, f"unsupported format version: the {module} module ({what}); "
                                 "a newer PyDarshan may read it: pip install -U darshan")
        raise LogError(path, f"truncated or corrupt log (darshan-util, {module}: {what})")
    return log


def _python_path() -> str:
    """The child imports this very storlab (a worktree or an install) and PyDarshan."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    rest = os.environ.get("PYTHONPATH", "")
    return here + (os.pathsep + rest if rest else "")


def _from_raw(path: str, version: str, raw: dict[str, Any]) -> DarshanLog:
    job = raw.get("job", {})
    names = {int(k): v for k, v in raw.get("names", {}).items()}
    log = DarshanLog(path=path, version=version, nprocs=int(job.get("nprocs", 0)), jobid=int(job.get("jobid", 0)),
                     run_time_s=float(job.get("run_time", 0.0)), exe=str(raw.get("exe", "")),
                     modules=raw.get("modules", {}))
    for module, rows in raw.get("records", {}).items():
        log.records[module] = [Record(module, r["id"], r["rank"], names.get(r["id"], ""), r["c"], r["f"]) for r in rows]
    for module, rows in raw.get("dxt", {}).items():
        log.dxt[module] = [DxtRecord(module, r["id"], r["rank"], names.get(r["id"], ""), r["read_count"],
                                     r["write_count"], r["read"], r["write"]) for r in rows]
    if log.nprocs < 1:
        raise LogError(path, f"truncated or corrupt log (nprocs = {log.nprocs} in its job header)")
    # A module whose region has bytes but gave no record, or records without names: cut short.
    for module in ("POSIX", "MPI-IO", "STDIO"):
        info = log.modules.get(module)
        if info and info.get("bytes", 0) > 0 and not log.records.get(module):
            raise LogError(path, f"truncated or corrupt log (the {module} module has {info['bytes']} bytes "
                                 "but no record could be read)")
    nameless = [r for rs in log.records.values() for r in rs if not r.path]
    if nameless:
        raise LogError(path, f"truncated or corrupt log ({len(nameless)} records have no file name)")
    if not any(log.records.get(m) for m in ("POSIX", "MPI-IO", "STDIO")):
        present = ", ".join(sorted(log.modules)) or "none"
        raise LogError(path, "no POSIX, MPI-IO or STDIO records to replay", key="modules", value=present)
    return log
