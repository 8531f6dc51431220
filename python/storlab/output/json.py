"""JSON exporter: the stored documents themselves (one document, or a list of several)."""
from __future__ import annotations

import json
from typing import Any, Sequence

__all__ = ["to_json"]


def to_json(docs: Sequence[dict[str, Any]], indent: int | None = 2) -> str:
    """One document as an object, several as a list; strict JSON (no NaN), ends with a newline."""
    payload: Any = docs[0] if len(docs) == 1 else list(docs)
    return json.dumps(payload, indent=indent, allow_nan=False) + "\n"
