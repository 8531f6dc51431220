"""CSV exporter: one row per run x phase x direction, canonical units named in the headers
(bytes, seconds, bw_bytes = bytes/s, *_ns), full precision, for spreadsheets and pandas."""
from __future__ import annotations

import io
from typing import Any, Sequence

from .base import RESULT_COLUMNS, RUN_COLUMNS, result_rows

__all__ = ["to_csv", "CSV_COLUMNS"]

CSV_COLUMNS = tuple(c.key for c in RUN_COLUMNS + RESULT_COLUMNS)


def to_csv(docs: Sequence[dict[str, Any]]) -> str:
    import csv

    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for row in result_rows(docs):
        w.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return out.getvalue()
