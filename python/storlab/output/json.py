"""JSON exporter: the stored documents themselves (one document, or a list of several), and the
one writer every command's `--json [PATH]` goes through."""
from __future__ import annotations

import json
from typing import Any, Sequence

from .files import write_output

__all__ = ["to_json", "write_json"]


def to_json(docs: Sequence[dict[str, Any]], indent: int | None = 2) -> str:
    """One document as an object, several as a list; strict JSON (no NaN), ends with a newline."""
    payload: Any = docs[0] if len(docs) == 1 else list(docs)
    return json.dumps(payload, indent=indent, allow_nan=False) + "\n"


def write_json(doc: Any, target: str, option: str = "json", indent: int | None = None) -> None:
    """`doc` as JSON: on stdout for '-'; into a regular file atomically (a reader never sees half
    a document); into anything else (/dev/null, a FIFO, a terminal) directly, since replacing it
    would destroy a device node. Failures are one OutputError line naming `option` and the path.
    `indent` None: compact on stdout, one space per level in a file (what `storlab run` writes)."""
    if indent is None:
        indent = None if target == "-" else 1
    write_output(json.dumps(doc, indent=indent) + "\n", target, option)
