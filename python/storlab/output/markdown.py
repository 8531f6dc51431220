"""Markdown exporter: a GitHub-flavoured table of results with units in the headers, for pasting
into reports and issues. Several runs share one table; only the run columns that differ are shown."""
from __future__ import annotations

from typing import Any, Sequence

from .base import RESULT_COLUMNS, RUN_COLUMNS, Column, human, iter_runs, result_rows, varying

__all__ = ["to_markdown"]


_BS = next(c for c in RUN_COLUMNS if c.key == "bs")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(cols: Sequence[Column], rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = ["| " + " | ".join(c.header for c in cols) + " |",
             "|" + "|".join("---:" if c.kind == "num" else "---" for c in cols) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(_cell(human(c, r.get(c.key))) for c in cols) + " |")
    return lines


def to_markdown(docs: Sequence[dict[str, Any]]) -> str:
    runs = list(iter_runs(docs))
    rows = result_rows(runs)
    lines = []
    if len(runs) == 1:
        d = runs[0]
        job, env = d.get("job") or {}, d.get("environment") or {}
        state = "" if d.get("complete", True) else f" — **incomplete ({d.get('stop_reason')})**"
        lines += [f"**run {d.get('run_id', '-')}** on {env.get('host', '?')} "
                  f"(kernel {env.get('kernel', '?')}), {d.get('started_at', '?')}{state}", "",
                  f"job: rw={job.get('rw')} bs={human(_BS, job.get('bs'))} "
                  f"threads={job.get('threads')} qd={job.get('qd')} engine={job.get('engine')} "
                  f"direct={job.get('direct')} targets={', '.join(map(str, job.get('target') or []))}",
                  ""]
        cols: list[Column] = list(RESULT_COLUMNS)
    else:
        run_cols = [RUN_COLUMNS[0]] + [c for c in varying(rows, RUN_COLUMNS[1:])]
        cols = run_cols + list(RESULT_COLUMNS)
    lines += _table(cols, rows) if rows else ["(no I/O was measured)"]
    return "\n".join(lines) + "\n"
