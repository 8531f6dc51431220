"""The human table of one result: one row per phase x direction, units in the column headers.
`storlab run` prints it after a run and `storlab results show` prints it for a stored one."""
from __future__ import annotations

from typing import Any

from .base import RESULT_COLUMNS, align, human, result_rows

__all__ = ["render_table"]


def render_table(doc: dict[str, Any]) -> str:
    """Compact plain-text table of a run document (no colour, no trailing newline)."""
    rows = result_rows([doc], with_run=False)
    if not rows:
        lines = ["(no I/O was measured)"]
    else:
        cols = RESULT_COLUMNS
        cells = [[human(c, r.get(c.key)) for c in cols] for r in rows]
        lines = align([c.header for c in cols], cells, [c.kind == "num" for c in cols])
    if doc.get("complete") is False:
        reason = doc.get("stop_reason") or "interrupted"
        detail = f": {doc['error']}" if doc.get("error") else ""
        lines.append(f"incomplete ({reason}{detail}): figures cover the time until the stop")
    return "\n".join(lines)
