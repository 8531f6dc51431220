"""Exporters: one module per format, all rendering the same rows (export/base.py).

`render_table(doc)` is the human table of any result document, the one printed after its run
(its kind's view: output/views.py); `EXPORTERS` maps a format name to a function `docs -> str` for
`storlab results export`.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from .csv import to_csv
from .json import to_json
from .markdown import to_markdown
from .openmetrics import to_openmetrics
from .views import render as render_table

__all__ = ["render_table", "to_json", "to_csv", "to_markdown", "to_openmetrics", "EXPORTERS", "export"]

EXPORTERS: dict[str, Callable[[Sequence[dict[str, Any]]], str]] = {
    "json": to_json,
    "csv": to_csv,
    "md": to_markdown,
    "openmetrics": to_openmetrics,
}


def export(docs: Sequence[dict[str, Any]], fmt: str) -> str:
    try:
        fn = EXPORTERS[fmt]
    except KeyError:
        raise ValueError(f"format: {fmt!r} is not supported; use one of: {', '.join(EXPORTERS)}") from None
    return fn(docs)
