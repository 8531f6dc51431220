"""Results store: every result document saved in a local SQLite file (see docs/store.md).

The functions below open the store (default: `default_path()`; `path` or $STORLAB_STORE change it),
do one thing and close it again, so callers never hold a connection across a long run. Reading
functions open it read-only and never create it; `save` creates it (and its folder) when missing;
`delete` and the tag functions need it to exist. Use `Store(path)` directly to do several things on
one connection. A store that cannot be used raises `StoreUnusable` (a `StoreError`, one line).
Wherever a run is named, `last` (the most recent run) and `last~N` (N runs before it) are accepted
beside a run id or a unique prefix: `Store.resolve` is the one place that reads them.
"""
from __future__ import annotations

import os
from datetime import datetime
from typing import Any, Iterable

from .db import (
    LAST,
    SELECTOR_FORMS,
    RunNotFound,
    Store,
    StoreError,
    StoreLocked,
    StoreReadOnly,
    StoreUnusable,
    default_path,
    parse_last,
    parse_when,
    wait_seconds,
)
from .schema import LATEST as SCHEMA_VERSION

__all__ = [
    "Store", "StoreError", "RunNotFound", "StoreUnusable", "StoreReadOnly", "StoreLocked",
    "SCHEMA_VERSION", "default_path", "parse_when", "wait_seconds", "LAST", "SELECTOR_FORMS", "parse_last",
    "save", "load", "summary", "list_runs", "delete", "add_tags", "remove_tags", "set_note",
]


def save(doc: dict[str, Any], path: str | os.PathLike | None = None, tags: Iterable[str] = (),
         note: str | None = None, wait: float | None = None) -> str:
    """Save a result document (replacing one with the same run_id); returns its run_id. A locked
    store is retried for `wait` seconds (default: $STORLAB_STORE_WAIT or 10)."""
    with Store(path, wait=wait) as s:
        return s.save(doc, tags=tags, note=note)


def load(run_id_or_prefix: str, path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The stored document of a run, by run_id or unique prefix."""
    with Store(path, write=False) as s:
        return s.load(run_id_or_prefix)


def summary(run_id_or_prefix: str, path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The summary of one run, as `list_runs` gives it (indexed columns, tags, note, totals)."""
    with Store(path, write=False) as s:
        return s.summary(run_id_or_prefix)


def list_runs(path: str | os.PathLike | None = None, tag: str | None = None,
              target: str | None = None, since: str | datetime | None = None,
              until: str | datetime | None = None, kind: str | None = None,
              host: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Summaries of stored runs matching every given filter, oldest first."""
    with Store(path, write=False) as s:
        return s.list_runs(tag=tag, target=target, since=since, until=until, kind=kind,
                           host=host, limit=limit)


def delete(run_ids: str | Iterable[str], path: str | os.PathLike | None = None) -> list[str]:
    """Delete runs by id or unique prefix; returns the full ids deleted."""
    with Store(path, create=False) as s:
        return s.delete([run_ids] if isinstance(run_ids, str) else run_ids)


def add_tags(run_id_or_prefix: str, tags: Iterable[str],
             path: str | os.PathLike | None = None) -> list[str]:
    """Add tags to a run; returns all its tags."""
    with Store(path, create=False) as s:
        return s.add_tags(run_id_or_prefix, [tags] if isinstance(tags, str) else tags)


def remove_tags(run_id_or_prefix: str, tags: Iterable[str],
                path: str | os.PathLike | None = None) -> list[str]:
    """Remove tags from a run; returns the tags left."""
    with Store(path, create=False) as s:
        return s.remove_tags(run_id_or_prefix, [tags] if isinstance(tags, str) else tags)


def set_note(run_id_or_prefix: str, note: str | None, path: str | os.PathLike | None = None) -> None:
    """Replace the note of a run (None or '' removes it)."""
    with Store(path, create=False) as s:
        s.set_note(run_id_or_prefix, note)
