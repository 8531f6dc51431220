"""The results store: a local SQLite file holding every result document with indexed columns.

Any document with a `schema` and a `kind` can be saved (run, sweep, meta, scale, plan ...); the
columns used for filtering are read from it where present and left empty otherwise. Connections use
WAL mode and a busy timeout, and every write is one `BEGIN IMMEDIATE` transaction, so two storlab
processes saving at the same time both land.
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..units import UnitError, parse_duration
from .schema import migrate

__all__ = ["StoreError", "RunNotFound", "default_path", "Store", "parse_when", "utc_text"]

BUSY_TIMEOUT_MS = 30_000    # a writer waits this long for another one before giving up


class StoreError(ValueError):
    """A mistake the user can fix (unknown run, ambiguous prefix, bad filter); one line."""


class RunNotFound(StoreError):
    pass


def default_path() -> Path:
    """$STORLAB_STORE, else $XDG_DATA_HOME/storlab/results.db (XDG default ~/.local/share)."""
    env = os.environ.get("STORLAB_STORE")
    if env:
        return Path(env).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "storlab" / "results.db"


def utc_text(dt: datetime) -> str:
    """The one timestamp form stored in indexed columns: 2026-11-21T15:20:00.123Z (sorts as text)."""
    dt = dt.astimezone(timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _parse_iso(text: str) -> datetime:
    t = text.strip()
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    dt = datetime.fromisoformat(t)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)  # storlab writes UTC; a bare date or time means UTC
    return dt


def parse_when(value: str | datetime, what: str = "since", now: datetime | None = None) -> str:
    """A filter bound: an ISO date/time (UTC unless it says otherwise) or an age such as '2h', '7d'."""
    if isinstance(value, datetime):
        return utc_text(value if value.tzinfo else value.replace(tzinfo=timezone.utc))
    try:
        return utc_text(_parse_iso(value))
    except ValueError:
        pass
    try:
        age = parse_duration(value, what)
    except UnitError:
        raise StoreError(f"{what}: cannot read {value!r}; use a date such as 2026-11-21, "
                         f"a time such as 2026-11-21T15:00, or an age such as 30m, 2h, 7d") from None
    return utc_text((now or datetime.now(timezone.utc)) - timedelta(seconds=age))


def _indexed(doc: dict[str, Any]) -> dict[str, Any]:
    """Columns for filtering, read from whatever the document has."""
    job = doc.get("job") if isinstance(doc.get("job"), dict) else {}
    env = doc.get("environment") if isinstance(doc.get("environment"), dict) else {}

    def when(key: str) -> str | None:
        v = doc.get(key)
        if not v:
            return None
        try:
            return utc_text(_parse_iso(str(v)))
        except ValueError:
            raise StoreError(f"{key}: {v!r} is not an ISO 8601 time") from None

    targets = job.get("target") or [t.get("path") for t in env.get("targets") or [] if t.get("path")]
    if isinstance(targets, str):
        targets = [targets]
    bs = job.get("bs")
    return {
        "schema": str(doc["schema"]), "kind": str(doc["kind"]),
        "storlab_version": doc.get("storlab_version"),
        "started_at": when("started_at"), "finished_at": when("finished_at"),
        # a document without `complete` (a plan, say) has nothing to interrupt: it is complete
        "complete": 0 if doc.get("complete") is False else 1,
        "stop_reason": doc.get("stop_reason"),
        "host": env.get("host"), "engine": env.get("engine") or job.get("engine"),
        "rw": job.get("rw"), "bs": bs if isinstance(bs, int) else None,
        "targets": [str(t) for t in targets],
    }


def _result_rows(doc: dict[str, Any]) -> Iterator[tuple]:
    for pi, phase in enumerate(doc.get("phases") or []):
        if not isinstance(phase, dict):
            continue
        for direction in ("read", "write"):
            d = phase.get(direction)
            if not isinstance(d, dict):
                continue
            lat = d.get("lat_ns") or {}
            yield (pi, str(phase.get("name", pi)), direction, d.get("bytes"), d.get("ops"),
                   d.get("seconds"), d.get("iops"), d.get("bw_bytes"), lat.get("mean"),
                   lat.get("p50"), lat.get("p99"), lat.get("p999"), lat.get("max"))


def _check_tag(tag: str) -> str:
    if not isinstance(tag, str) or not tag.strip() or "," in tag:
        raise StoreError(f"tag: {tag!r} is not allowed; use a non-empty word without commas")
    return tag.strip()


_SUMMARY_COLUMNS = ("run_id, schema, kind, storlab_version, started_at, finished_at, complete, "
                    "stop_reason, host, engine, rw, bs, saved_at, note")


class Store:
    """One results database file. Open it with `Store(path)`; the schema is migrated on open."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path).expanduser() if path else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we issue BEGIN ourselves, so every write is one explicit transaction
        self.db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000,
                                  isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._enable_wal()
        self.db.execute("PRAGMA foreign_keys = ON")
        with self._write():
            migrate(self.db)

    # -- plumbing -----------------------------------------------------------------------------
    def _enable_wal(self) -> None:
        # Switching a new file to WAL needs an exclusive lock and SQLite does not call the busy
        # handler for it, so two processes opening a fresh store at once would see "database is
        # locked". Once a file is in WAL mode it stays so; only this first switch is retried.
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        delay = 0.005
        while True:
            try:
                # a file system without shared-memory support answers with another mode; the store
                # still works there, one writer at a time
                self.db.execute("PRAGMA journal_mode = WAL").fetchone()
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    class _Txn:
        def __init__(self, db: sqlite3.Connection):
            self.db = db

        def __enter__(self):
            # IMMEDIATE takes the write lock up front, so the busy timeout applies here and not
            # half-way through (a deferred transaction could fail to upgrade its lock).
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, exc_type, *_):
            self.db.execute("ROLLBACK" if exc_type else "COMMIT")

    def _write(self) -> "_Txn":
        return Store._Txn(self.db)

    def schema_version(self) -> int:
        return self.db.execute("PRAGMA user_version").fetchone()[0]

    # -- writing ------------------------------------------------------------------------------
    def save(self, doc: dict[str, Any], tags: Iterable[str] = (), note: str | None = None) -> str:
        """Save (or replace, by run_id) a document; returns its run_id. Tags are added to any
        already there; a note replaces the previous one."""
        if not isinstance(doc, dict) or not doc.get("schema") or not doc.get("kind"):
            raise StoreError("document: needs a 'schema' and a 'kind' field to be stored")
        tags = [_check_tag(t) for t in tags]
        run_id = doc.get("run_id") or uuid.uuid4().hex
        if doc.get("run_id") != run_id:
            doc = dict(doc, run_id=run_id)
        if not isinstance(run_id, str) or not run_id.isalnum():
            raise StoreError(f"run_id: {run_id!r} is not allowed; use letters and digits (a uuid4 hex)")
        cols = _indexed(doc)
        text = json.dumps(doc, separators=(",", ":"), allow_nan=False)
        saved_at = utc_text(datetime.now(timezone.utc))
        with self._write() as db:
            db.execute(
                """INSERT INTO runs (run_id, schema, kind, storlab_version, started_at, finished_at,
                       complete, stop_reason, host, engine, rw, bs, saved_at, document, note)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT(run_id) DO UPDATE SET
                       schema=excluded.schema, kind=excluded.kind,
                       storlab_version=excluded.storlab_version, started_at=excluded.started_at,
                       finished_at=excluded.finished_at, complete=excluded.complete,
                       stop_reason=excluded.stop_reason, host=excluded.host,
                       engine=excluded.engine, rw=excluded.rw, bs=excluded.bs,
                       saved_at=excluded.saved_at, document=excluded.document,
                       note=COALESCE(excluded.note, runs.note)""",
                (run_id, cols["schema"], cols["kind"], cols["storlab_version"], cols["started_at"],
                 cols["finished_at"], cols["complete"], cols["stop_reason"], cols["host"],
                 cols["engine"], cols["rw"], cols["bs"], saved_at, text, note))
            db.execute("DELETE FROM run_targets WHERE run_id = ?", (run_id,))
            db.executemany("INSERT OR IGNORE INTO run_targets (run_id, path) VALUES (?, ?)",
                           [(run_id, t) for t in cols["targets"]])
            db.execute("DELETE FROM results WHERE run_id = ?", (run_id,))
            db.executemany("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           [(run_id, *row) for row in _result_rows(doc)])
            db.executemany("INSERT OR IGNORE INTO tags (run_id, tag) VALUES (?, ?)",
                           [(run_id, t) for t in tags])
        return run_id

    def resolve(self, run_id_or_prefix: str) -> str:
        """The full run_id for a run_id or a unique prefix of one."""
        p = str(run_id_or_prefix).strip().lower()
        if not p or not p.isalnum():
            raise StoreError(f"run: {run_id_or_prefix!r} is not a run id or a prefix of one")
        if self.db.execute("SELECT 1 FROM runs WHERE run_id = ?", (p,)).fetchone():
            return p
        # p is alphanumeric, so it holds no LIKE wildcards
        rows = self.db.execute("SELECT run_id FROM runs WHERE run_id LIKE ? ORDER BY run_id LIMIT 6",
                               (p + "%",)).fetchall()
        if not rows:
            raise RunNotFound(f"run: no stored run matches {run_id_or_prefix!r} (store {self.path})")
        if len(rows) > 1:
            some = ", ".join(r["run_id"][:12] for r in rows[:5])
            raise StoreError(f"run: {run_id_or_prefix!r} matches several runs ({some}...); "
                             f"give more characters")
        return rows[0]["run_id"]

    def load(self, run_id_or_prefix: str) -> dict[str, Any]:
        run_id = self.resolve(run_id_or_prefix)
        row = self.db.execute("SELECT document FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return json.loads(row["document"])

    def delete(self, run_ids: Iterable[str]) -> list[str]:
        """Delete runs (ids or unique prefixes); returns the full ids deleted."""
        full = [self.resolve(r) for r in run_ids]
        with self._write() as db:
            db.executemany("DELETE FROM runs WHERE run_id = ?", [(r,) for r in full])
        return full

    def add_tags(self, run_id_or_prefix: str, tags: Iterable[str]) -> list[str]:
        run_id = self.resolve(run_id_or_prefix)
        tags = [_check_tag(t) for t in tags]
        with self._write() as db:
            db.executemany("INSERT OR IGNORE INTO tags (run_id, tag) VALUES (?, ?)",
                           [(run_id, t) for t in tags])
        return self.tags(run_id)

    def remove_tags(self, run_id_or_prefix: str, tags: Iterable[str]) -> list[str]:
        run_id = self.resolve(run_id_or_prefix)
        with self._write() as db:
            db.executemany("DELETE FROM tags WHERE run_id = ? AND tag = ?",
                           [(run_id, _check_tag(t)) for t in tags])
        return self.tags(run_id)

    def set_note(self, run_id_or_prefix: str, note: str | None) -> None:
        run_id = self.resolve(run_id_or_prefix)
        with self._write() as db:
            db.execute("UPDATE runs SET note = ? WHERE run_id = ?", (note or None, run_id))

    # -- reading ------------------------------------------------------------------------------
    def tags(self, run_id: str) -> list[str]:
        return [r[0] for r in self.db.execute(
            "SELECT tag FROM tags WHERE run_id = ? ORDER BY tag", (run_id,))]

    def list_runs(self, tag: str | None = None, target: str | None = None,
                  since: str | datetime | None = None, until: str | datetime | None = None,
                  kind: str | None = None, host: str | None = None,
                  limit: int | None = None) -> list[dict[str, Any]]:
        """Summaries of stored runs, oldest first. `target` matches a path exactly or as a glob
        (`*`, `?`); `since`/`until` take ISO times or ages ('2h', '7d')."""
        where, args = [], []
        if tag is not None:
            where.append("run_id IN (SELECT run_id FROM tags WHERE tag = ?)")
            args.append(_check_tag(tag))
        if target is not None:
            op = "GLOB" if any(c in target for c in "*?[") else "="
            where.append(f"run_id IN (SELECT run_id FROM run_targets WHERE path {op} ?)")
            args.append(target)
        if since is not None:
            where.append("started_at >= ?")
            args.append(parse_when(since, "since"))
        if until is not None:
            where.append("started_at < ?")
            args.append(parse_when(until, "until"))
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        if host is not None:
            where.append("host = ?")
            args.append(host)
        sql = f"SELECT {_SUMMARY_COLUMNS} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        if limit is not None:
            # the newest `limit` runs, still shown oldest first
            sql = (f"SELECT * FROM ({sql} ORDER BY started_at DESC, saved_at DESC LIMIT {int(limit)})")
        sql += " ORDER BY started_at, saved_at"
        return [self._summary(row) for row in self.db.execute(sql, args).fetchall()]

    def summary(self, run_id_or_prefix: str) -> dict[str, Any]:
        run_id = self.resolve(run_id_or_prefix)
        row = self.db.execute(f"SELECT {_SUMMARY_COLUMNS} FROM runs WHERE run_id = ?",
                              (run_id,)).fetchone()
        return self._summary(row)

    def _summary(self, row: sqlite3.Row) -> dict[str, Any]:
        s = {k: row[k] for k in row.keys()}
        s["complete"] = bool(s["complete"])
        s["targets"] = [r[0] for r in self.db.execute(
            "SELECT path FROM run_targets WHERE run_id = ? ORDER BY path", (s["run_id"],))]
        s["tags"] = self.tags(s["run_id"])
        # Whole-run figures per direction: `_bw_bytes`/`_iops` are bytes and ops summed over every
        # phase and pass over their summed seconds (a time-weighted blend, not the pass mean);
        # `_bw_bytes_pass_mean` is the mean over passes of the phase's own bandwidth, what the
        # `passes` summary reports, defined only when one phase has that direction. The latency
        # is the highest p99 among the phases.
        for direction in ("read", "write"):
            r = self.db.execute(
                "SELECT SUM(bytes), SUM(ops), SUM(seconds), MAX(lat_p99_ns) FROM results "
                "WHERE run_id = ? AND direction = ?", (s["run_id"], direction)).fetchone()
            secs = r[2]
            s[f"{direction}_bytes"] = r[0]
            s[f"{direction}_bw_bytes"] = r[0] / secs if r[0] is not None and secs else None
            s[f"{direction}_iops"] = r[1] / secs if r[1] is not None and secs else None
            s[f"{direction}_lat_p99_ns"] = r[3]
            per_phase: dict[str, list[float | None]] = {}
            for name, bw in self.db.execute(
                    "SELECT phase, bw_bytes FROM results WHERE run_id = ? AND direction = ? ORDER BY phase_index",
                    (s["run_id"], direction)):
                per_phase.setdefault(name, []).append(bw)
            s[f"{direction}_phases"] = len(per_phase)
            s[f"{direction}_passes"] = max((len(v) for v in per_phase.values()), default=0)
            (only,) = per_phase.values() if len(per_phase) == 1 else (None,)
            s[f"{direction}_bw_bytes_pass_mean"] = (sum(only) / len(only)
                                                    if only and all(b is not None for b in only) else None)
        return s
