"""The table every exporter renders: one row per run x phase x direction, in canonical units
(bytes, seconds, ns, bytes/s), plus the column descriptions that say how to show each value to a
human (unit in the header, scaled value). Exporters differ only in how they print this table.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..document import DIRECTIONS

__all__ = ["Column", "RUN_COLUMNS", "RESULT_COLUMNS", "result_rows", "human", "fmt_number",
           "short_id", "iter_runs", "varying", "align", "normalise_target", "job_parameter"]

KiB, MiB = 1 << 10, 1 << 20


@dataclass(frozen=True)
class Column:
    key: str            # machine name, with its unit (bw_bytes, lat_p99_ns); the CSV header
    header: str         # human header with the unit shown after scaling ("bw MiB/s")
    scale: float = 1.0  # human value = canonical value / scale
    kind: str = "num"   # num | text | size (bytes shown with a binary unit) | bool
    decimals: int | None = None  # num: fixed decimals below 100, so a column reads alike ("3.00", not "3")


# Which run each row comes from (the job options that usually differ between runs).
RUN_COLUMNS: tuple[Column, ...] = (
    Column("run_id", "run", kind="text"),
    Column("started_at", "started (UTC)", kind="text"),
    Column("host", "host", kind="text"),
    Column("complete", "complete", kind="bool"),
    Column("engine", "engine", kind="text"),
    Column("rw", "rw", kind="text"),
    Column("bs", "bs", kind="size"),
    Column("threads", "threads"),
    Column("qd", "qd"),
    Column("direct", "direct", kind="bool"),
)

# The measured values of one phase and direction.
RESULT_COLUMNS: tuple[Column, ...] = (
    Column("phase", "phase", kind="text"),
    Column("direction", "dir", kind="text"),
    Column("bytes", "data MiB", MiB),
    Column("seconds", "time s", decimals=2),
    Column("iops", "IOPS"),
    Column("bw_bytes", "bw MiB/s", MiB),
    Column("lat_mean_ns", "mean us", 1e3),
    Column("lat_p50_ns", "p50 us", 1e3),
    Column("lat_p99_ns", "p99 us", 1e3),
    Column("lat_p999_ns", "p99.9 us", 1e3),
    Column("lat_max_ns", "max us", 1e3),
)

_LAT_KEYS = {"lat_mean_ns": "mean", "lat_p50_ns": "p50", "lat_p99_ns": "p99",
             "lat_p999_ns": "p999", "lat_max_ns": "max"}


_SCRATCH_DIR = re.compile(r"storlab-scratch-[^/]*/")


def normalise_target(path: Any) -> Any:
    """A target path with storlab's default scratch directory (a new temporary name each run,
    runner.py) replaced by `storlab-scratch/`, so runs on the default target compare equal."""
    return _SCRATCH_DIR.sub("storlab-scratch/", path) if isinstance(path, str) else path


def job_parameter(job: dict[str, Any], key: str) -> Any:
    """A job option as compared between runs: lists become tuples, scratch paths are normalised,
    and nested structures (the resolved `phases` a run records) give None: they are not one
    parameter but a copy of the others."""
    v = job.get(key)
    if isinstance(v, (list, tuple)):
        if not all(isinstance(x, (str, int, float, bool)) or x is None for x in v):
            return None
        return tuple(normalise_target(x) for x in v) if key == "target" else tuple(v)
    if isinstance(v, dict):
        return None
    if isinstance(v, bool):
        return _as_written_now(key, v)
    return normalise_target(v) if key == "target" else v


def _as_written_now(key: str, value: bool) -> Any:
    """A switch an earlier release recorded as true/false, in the form its option now takes: a
    choice that was an on/off switch (`uring.fixed_buffers`: false then meant `off`) keeps the
    switch's spellings as aliases, so runs of either release compare like for like."""
    from ..jobs.options import BY_NAME

    opt = BY_NAME.get(key)
    return opt.aliases.get(str(value).lower(), value) if opt is not None and opt.aliases else value


def iter_runs(docs: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    """Run documents, with the runs inside a sweep-like document (`runs: [...]`) expanded."""
    for doc in docs:
        if isinstance(doc.get("runs"), list):
            yield from iter_runs(doc["runs"])
        else:
            yield doc


def result_rows(docs: Iterable[dict[str, Any]], with_run: bool = True) -> list[dict[str, Any]]:
    """One row per run x phase x direction that did I/O, values in canonical units."""
    rows = []
    for doc in iter_runs(docs):
        job = doc.get("job") or {}
        env = doc.get("environment") or {}
        run = {"run_id": doc.get("run_id"), "started_at": doc.get("started_at"),
               "host": env.get("host"), "complete": doc.get("complete"),
               "engine": env.get("engine") or job.get("engine"), "rw": job.get("rw"),
               "bs": job.get("bs"), "threads": job.get("threads"), "qd": job.get("qd"),
               "direct": job.get("direct")}
        for phase in doc.get("phases") or []:
            for direction in DIRECTIONS:
                d = phase.get(direction)
                if not isinstance(d, dict):
                    continue
                lat = d.get("lat_ns") or {}
                row = dict(run) if with_run else {}
                row.update({"phase": phase.get("name"), "direction": direction,
                            "bytes": d.get("bytes"), "seconds": d.get("seconds"),
                            "iops": d.get("iops"), "bw_bytes": d.get("bw_bytes")})
                row.update({k: lat.get(src) for k, src in _LAT_KEYS.items()})
                rows.append(row)
    return rows


def fmt_number(v: float | None) -> str:
    """Compact human number: no decimals from 100 up or for whole numbers, else 3 significant digits."""
    if v is None:
        return "-"
    a = abs(v)
    if a >= 100 or v == int(v):
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a == 0:
        return "0"
    return f"{v:.3g}"


def _fmt_size(v: Any) -> str:
    if v is None:
        return "-"
    v = int(v)
    for unit, n in (("MiB", MiB), ("KiB", KiB)):
        if v >= n and v % n == 0:
            return f"{v // n}{unit}"
    return f"{v}B"


def human(col: Column, value: Any) -> str:
    """A value as shown to a human under `col.header`."""
    if value is None:
        return "-"
    if col.kind == "text":
        return short_id(value) if col.key == "run_id" else str(value)
    if col.kind == "bool":
        return "yes" if value else "no"
    if col.kind == "size":
        return _fmt_size(value)
    v = value / col.scale
    if col.decimals is not None and abs(v) < 100:
        return f"{v:.{col.decimals}f}"
    return fmt_number(v)


def short_id(run_id: Any) -> str:
    return str(run_id)[:8] if run_id else "-"


def varying(rows: Sequence[dict[str, Any]], cols: Sequence[Column]) -> list[Column]:
    """The columns whose value is not the same in every row (to keep multi-run tables narrow)."""
    return [c for c in cols if len({repr(r.get(c.key)) for r in rows}) > 1]


def align(headers: Sequence[str], cells: Sequence[Sequence[str]], numeric: Sequence[bool],
          gap: str = "  ") -> list[str]:
    """Plain-text columns: text left-aligned, numbers right-aligned, headers over them."""
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return gap.join(v.rjust(w) if num else v.ljust(w)
                        for v, w, num in zip(values, widths, numeric)).rstrip()
    return [line(headers)] + [line(r) for r in cells]
