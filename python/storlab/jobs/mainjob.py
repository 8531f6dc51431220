"""The default main job: what `storlab run` with no job file and no target measures.

The scratch file's device at the four standard corners, writes before reads so reads find real
data: 1 MiB sequential write, 4 KiB random write, 1 MiB sequential read, 4 KiB random read, each
time-based (3 s unless --time says otherwise). This module is the job's definition only: when it
applies and its phases. Sizing and laying out the scratch file and choosing the method (O_DIRECT,
or buffered out of cache) touch the system, so they happen when the run starts, in
measure/scratch.py (`prepare_main_job`, `finish_main_job`).
"""
from __future__ import annotations

from typing import Any, Mapping

__all__ = ["CORNERS", "DEFAULT_TIME_S", "OVERRIDABLE", "applies", "phases"]

# (phase name, rw, bs): write phases first, so the read phases read what was written
CORNERS = (
    ("seqwrite-1m", "write", 1 << 20),
    ("randwrite-4k", "randwrite", 4096),
    ("seqread-1m", "read", 1 << 20),
    ("randread-4k", "randread", 4096),
)
DEFAULT_TIME_S = 3.0
# Core options that keep the main job (they tune it); any other core option makes an ordinary job.
OVERRIDABLE = frozenset({"time", "size"})


def applies(cli_values: Mapping[str, Any], jobfile: Mapping[str, Any] | None) -> bool:
    """True when `storlab run` was given no job file, no fio file and no core option other than
    those the main job takes (--time, --size); run-level options (--json, --tag …) are fine."""
    from .options import BY_NAME

    if jobfile is not None or cli_values.get("fio"):
        return False
    return all(not BY_NAME[k].core or k in OVERRIDABLE for k in cli_values)


def phases() -> list[dict[str, Any]]:
    """The main job's phases, in the structured form `resolve_job(phases=...)` takes."""
    return [{"name": name, "groups": [{"name": "", "options": {"rw": rw, "bs": bs, "time": DEFAULT_TIME_S}}]}
            for name, rw, bs in CORNERS]

