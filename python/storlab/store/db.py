"""The results store: a local SQLite file holding every result document with indexed columns.

Any document with a `schema` and a `kind` can be saved (run, sweep, meta, scale, plan ...); the
columns used for filtering are read from it where present and left empty otherwise. Writing
connections use WAL mode, and every write is one `BEGIN IMMEDIATE` transaction, so two storlab
processes saving at the same time both land. Reading connections are opened read-only and never
create, convert or migrate a file. Every SQLite failure, and a path that cannot hold a database (a
folder, a FIFO, a missing file for a reader), becomes one `StoreUnusable` line naming the store.
"""
from __future__ import annotations

import functools
import json
import math
import os
import sqlite3
import stat
import time
import urllib.parse
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..document import DIRECTIONS
from ..errors import UserError
from ..units import UnitError, parse_duration
from .schema import LATEST, migrate

__all__ = ["StoreError", "RunNotFound", "StoreUnusable", "StoreLocked", "StoreReadOnly",
           "default_path", "wait_seconds", "Store", "parse_when", "utc_text", "parse_last", "LAST",
           "SELECTOR_FORMS"]

DEFAULT_WAIT_S = 10.0       # how long a locked store is retried before giving up
WAIT_ENV = "STORLAB_STORE_WAIT"
# SQLite's own busy handler waits this long inside one attempt; the retry loop in `Store._retry`
# adds the backoff between attempts, stays responsive to Ctrl-C and bounds the whole wait.
_ATTEMPT_BUSY_MS = 100


class StoreError(UserError):
    """A mistake the user can fix (unknown run, ambiguous prefix, bad filter); one line."""


class RunNotFound(StoreError):
    pass


class StoreUnusable(StoreError):
    """The store file cannot be used: missing, not a database, corrupt, a folder or special file."""


class StoreReadOnly(StoreUnusable):
    """A write (or a needed migration) on a store that cannot be written."""


class StoreLocked(StoreUnusable):
    """Another process held the store locked for longer than the wait allows."""


def wait_seconds() -> float:
    """How long to retry a locked store: $STORLAB_STORE_WAIT seconds, else DEFAULT_WAIT_S."""
    text = os.environ.get(WAIT_ENV)
    if text is None or not text.strip():
        return DEFAULT_WAIT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or value > 86_400:
        raise StoreError(f"{WAIT_ENV}: {text!r} is not allowed; use seconds from 0 to 86400")
    return value


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


# `last` names the most recent stored run and `last~N` the one N runs before it (as git's HEAD~N).
LAST = "last"
SELECTOR_FORMS = "last (the most recent stored run) or last~N (N runs before it, N = 0, 1, 2 ...)"


def parse_last(text: str) -> int | None:
    """How many runs before the most recent one `text` selects: 0 for `last`, N for `last~N`;
    None when `text` is no selector (a run id, a prefix, a file). `last~x`, `last~-1` and the like
    are a StoreError naming the argument and the allowed forms."""
    t = str(text).strip().lower()
    if t == LAST:
        return 0
    if not t.startswith(LAST + "~"):
        return None
    n = t[len(LAST) + 1:]
    if not (n.isascii() and n.isdigit()):
        raise StoreError(f"run: {str(text).strip()!r} is not a run selector; allowed: a run id, a unique "
                         f"prefix of one, {SELECTOR_FORMS}")
    return int(n)


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
        for direction in DIRECTIONS:
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


def _code(e: sqlite3.Error) -> int | None:
    """The primary SQLite result code of an error (SQLITE_IOERR for SQLITE_IOERR_READ ...)."""
    code = getattr(e, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def _is_busy(e: sqlite3.Error) -> bool:
    if _code(e) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return True
    # errors raised by the sqlite3 module itself carry no code
    return _code(e) is None and "locked" in str(e)


def _can(path: Path, mode: int) -> bool:
    """Whether this process may read (write) `path`: by its effective ids, as SQLite's open will."""
    return os.access(path, mode, effective_ids=os.access in os.supports_effective_ids)


def _special_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    return "special file"


def _guarded(method):
    """A public Store method: retried while the store is locked, SQLite errors as one line."""
    @functools.wraps(method)
    def wrapper(self: "Store", *args, **kwargs):
        return self._retry(lambda: method(self, *args, **kwargs))
    return wrapper


_SUMMARY_COLUMNS = ("run_id, schema, kind, storlab_version, started_at, finished_at, complete, "
                    "stop_reason, host, engine, rw, bs, saved_at, note")


class Store:
    """One results database file, open for writing (the default) or for reading only.

    `Store(path)` opens for writing, creating the file and its folder when missing and migrating the
    schema; `create=False` refuses a missing file instead (delete, tag). `Store(path, write=False)`
    opens read-only: it never creates, converts or migrates anything, and works on a read-only file
    or file system. A locked store is retried for `wait` seconds (default: `wait_seconds()`).
    """

    def __init__(self, path: str | os.PathLike | None = None, *, write: bool = True,
                 create: bool = True, wait: float | None = None):
        self.path = Path(path).expanduser() if path else default_path()
        self.writable = write
        self._create = write and create
        self.wait = wait_seconds() if wait is None else wait
        self._deadline: float | None = None
        self.db: sqlite3.Connection | None = None
        exists = self._check_path(create=self._create)
        try:
            self._retry(lambda: self._open(exists))
        except BaseException:
            self.close()
            raise

    # -- opening ------------------------------------------------------------------------------
    def _unusable(self, what: str, kind: type[StoreUnusable] = StoreUnusable) -> StoreUnusable:
        return kind(f"store {self.path}: {what}")

    def _check_path(self, create: bool) -> bool:
        """Refuse what SQLite must not be handed (a FIFO would block the open) and, unless
        creating, a missing file. Returns whether the file exists."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            st = None
        except NotADirectoryError:
            raise self._unusable("a part of the path above it is a file, not a folder") from None
        except OSError as e:
            raise self._unusable(f"cannot be examined ({e.strerror})") from None
        if st is not None:
            if stat.S_ISDIR(st.st_mode):
                raise self._unusable("is a directory, not a database file; name a file in it, "
                                     f"e.g. {self.path / 'results.db'}")
            if not stat.S_ISREG(st.st_mode):
                raise self._unusable(f"is a {_special_kind(st.st_mode)}, not a database file")
            return True
        if not create:
            raise self._unusable("does not exist (nothing has been stored there; check --store "
                                 "or $STORLAB_STORE)")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise self._unusable(f"cannot create its folder: {self.path.parent} is not a folder") from None
        except OSError as e:
            raise self._unusable(f"cannot create its folder {self.path.parent} ({e.strerror})") from None
        return False

    def _uri(self, *params: str) -> str:
        return "file:" + urllib.parse.quote(str(self.path.absolute())) + "?" + "&".join(params)

    def _connect(self, *params: str) -> sqlite3.Connection:
        # isolation_level=None: we issue BEGIN ourselves, so every write is one explicit transaction
        db = sqlite3.connect(self._uri(*params), uri=True, timeout=_ATTEMPT_BUSY_MS / 1000,
                             isolation_level=None)
        db.row_factory = sqlite3.Row
        db.execute(f"PRAGMA busy_timeout = {_ATTEMPT_BUSY_MS}")
        return db

    def _open(self, existed: bool) -> None:
        if self.db is not None:         # a retry after a locked attempt starts afresh
            self.db.close()
            self.db = None
        if self.writable:
            self.db = self._connect("mode=rwc" if not existed else "mode=rw")
            self._version_checked(self.db)
            # a file system without shared-memory support answers with another mode; the store
            # still works there, one writer at a time
            self.db.execute("PRAGMA journal_mode = WAL").fetchone()
            self.db.execute("PRAGMA foreign_keys = ON")
            with self._write():
                migrate(self.db)
            return
        try:
            self.db = self._connect("mode=ro")
            found = self._version_checked(self.db)
        except sqlite3.OperationalError as e:
            # A WAL-mode file in a folder that cannot be written (a read-only file system, or
            # another user's folder) cannot get its shared-memory file; SQLite says CANTOPEN or
            # READONLY_DIRECTORY. Read it as immutable: nothing can be writing to it there (a
            # writer would need that file too), so no lock is missed.
            if (_code(e) not in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY)
                    or not _can(self.path, os.R_OK) or _can(self.path.parent, os.W_OK)):
                raise
            if self.db is not None:
                self.db.close()
            self.db = self._connect("mode=ro", "immutable=1")
            found = self._version_checked(self.db)
        if found < LATEST:
            # an older store is migrated once by a writing connection, then read as usual; a
            # read-only one cannot be, and saying so beats failing on a missing column later
            self.db.close()
            self.db = None
            try:
                Store(self.path, create=False, wait=self.wait).close()
            except StoreReadOnly:
                raise self._unusable(
                    f"has schema version {found} and needs migrating to {LATEST}, but it is "
                    "read-only; make it writable once (any storlab command that writes to it "
                    "migrates it)",
                    StoreReadOnly) from None
            self.db = self._connect("mode=ro")
            self._version_checked(self.db)

    def _version_checked(self, db: sqlite3.Connection) -> int:
        """The schema version, after refusing files that are not (or not yet) a results store."""
        # One read transaction for both reads: another process creating the store could otherwise
        # commit its tables (and version) between them, and a fresh store look like a foreign file.
        db.execute("BEGIN")
        try:
            found = db.execute("PRAGMA user_version").fetchone()[0]
            tables = [r[0] for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name LIMIT 4")]
        finally:
            if db.in_transaction:
                db.execute("COMMIT")
        if found > LATEST:
            raise self._unusable(f"schema version {found} is newer than this storlab understands "
                                 f"({LATEST}); upgrade storlab")
        if found == 0:
            if tables:
                raise self._unusable("is an SQLite database but not a storlab results store "
                                     f"(it has tables {', '.join(tables)})")
            if not self._create:
                size = self.path.stat().st_size
                raise self._unusable("is an empty file, not a results store" if size == 0 else
                                     "is an empty database, not a results store")
        return found

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- locking and errors -------------------------------------------------------------------
    def _retry(self, op):
        """Run `op`, retrying it with backoff while the store is locked, until the deadline of
        the outermost call; any SQLite failure leaves as one StoreUnusable line."""
        outermost = self._deadline is None
        if outermost:
            self._deadline = time.monotonic() + self.wait
        delay = 0.01
        try:
            while True:
                try:
                    return op()
                except sqlite3.Error as e:
                    if not _is_busy(e):
                        raise self._explain(e) from None
                    left = self._deadline - time.monotonic()
                    if not outermost or left <= 0:
                        if not outermost:
                            raise
                        raise self._unusable(
                            f"locked by another process; gave up after {self.wait:g} s (wait "
                            f"longer with {WAIT_ENV}=SECONDS)", StoreLocked) from None
                    time.sleep(min(delay, left))
                    delay = min(delay * 2, 0.5)
        finally:
            if outermost:
                self._deadline = None

    def _explain(self, e: sqlite3.Error) -> StoreUnusable:
        """One line saying what is wrong with the store, from an SQLite error."""
        code = _code(e)
        if code == sqlite3.SQLITE_NOTADB:
            return self._unusable("not an SQLite database (garbage or another kind of file)")
        if code == sqlite3.SQLITE_CORRUPT:
            return self._unusable(f"corrupt ({e}); restore it from a copy, or salvage it with "
                                  f"`sqlite3 {self.path} .recover`")
        if code == sqlite3.SQLITE_READONLY:
            return self._unusable("read-only; it can be listed, shown and exported, but "
                                  "nothing can be stored, deleted or tagged in it", StoreReadOnly)
        if code == sqlite3.SQLITE_CANTOPEN:
            return self._unusable(self._cannot_open_reason(),
                                  StoreReadOnly if self._is_read_only() else StoreUnusable)
        if code == sqlite3.SQLITE_FULL:
            return self._unusable("its file system is full")
        if code == sqlite3.SQLITE_IOERR:
            return self._unusable(f"I/O error ({e})")
        if code == sqlite3.SQLITE_PERM or code == sqlite3.SQLITE_AUTH:
            return self._unusable("permission denied")
        return self._unusable(str(e))

    def _is_read_only(self) -> bool:
        return self.path.exists() and (not _can(self.path, os.W_OK)
                                       or not _can(self.path.parent, os.W_OK))

    def _cannot_open_reason(self) -> str:
        if not self.path.exists():
            if not _can(self.path.parent, os.W_OK):
                return f"cannot be created: its folder {self.path.parent} is read-only"
            return "cannot be created"
        if not _can(self.path, os.R_OK):
            return "cannot be read (permission denied)"
        if self._is_read_only():
            return ("read-only (the file or its folder cannot be written); it can be listed, "
                    "shown and exported, but nothing can be stored, deleted or tagged in it")
        return "cannot be opened"

    # -- plumbing -----------------------------------------------------------------------------
    class _Txn:
        def __init__(self, db: sqlite3.Connection):
            self.db = db

        def __enter__(self):
            # IMMEDIATE takes the write lock up front, so waiting happens here and not half-way
            # through (a deferred transaction could fail to upgrade its lock).
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, exc_type, *_):
            if exc_type is None:
                try:
                    self.db.execute("COMMIT")
                    return
                except sqlite3.Error:
                    # a failed COMMIT (busy in rollback-journal mode) leaves the transaction open;
                    # roll back so that a retry starts clean
                    if self.db.in_transaction:
                        self.db.execute("ROLLBACK")
                    raise
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")

    def _write(self) -> "_Txn":
        if not self.writable:
            raise StoreError(f"store {self.path}: opened for reading only")
        return Store._Txn(self.db)

    @_guarded
    def schema_version(self) -> int:
        return self.db.execute("PRAGMA user_version").fetchone()[0]

    # -- writing ------------------------------------------------------------------------------
    @_guarded
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

    @_guarded
    def resolve(self, run_id_or_prefix: str) -> str:
        """The full run_id for a run_id, a unique prefix of one, or a selector: `last` (the most
        recent run, the last line of `results list`) or `last~N` (N runs before it)."""
        back = parse_last(run_id_or_prefix)
        if back is not None:
            return self._nth_newest(back, str(run_id_or_prefix).strip())
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

    def _nth_newest(self, back: int, selector: str) -> str:
        """The run `back` places before the most recent one, in `list_runs`'s order."""
        count = self.db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        if back < count:
            return self.db.execute("SELECT run_id FROM runs ORDER BY started_at DESC, saved_at DESC "
                                   "LIMIT 1 OFFSET ?", (back,)).fetchone()["run_id"]
        if count == 0:
            raise RunNotFound(f"run: {selector}: the store {self.path} holds no runs yet")
        allowed = "last" if count == 1 else f"last, last~1 .. last~{count - 1}"
        raise RunNotFound(f"run: {selector}: the store {self.path} holds {count} run(s); "
                          f"allowed: {allowed}")

    @_guarded
    def load(self, run_id_or_prefix: str) -> dict[str, Any]:
        run_id = self.resolve(run_id_or_prefix)
        row = self.db.execute("SELECT document FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return json.loads(row["document"])

    @_guarded
    def delete(self, run_ids: Iterable[str]) -> list[str]:
        """Delete runs (ids or unique prefixes); returns the full ids deleted."""
        full = [self.resolve(r) for r in run_ids]
        with self._write() as db:
            db.executemany("DELETE FROM runs WHERE run_id = ?", [(r,) for r in full])
        return full

    @_guarded
    def add_tags(self, run_id_or_prefix: str, tags: Iterable[str]) -> list[str]:
        run_id = self.resolve(run_id_or_prefix)
        tags = [_check_tag(t) for t in tags]
        with self._write() as db:
            db.executemany("INSERT OR IGNORE INTO tags (run_id, tag) VALUES (?, ?)",
                           [(run_id, t) for t in tags])
        return self.tags(run_id)

    @_guarded
    def remove_tags(self, run_id_or_prefix: str, tags: Iterable[str]) -> list[str]:
        run_id = self.resolve(run_id_or_prefix)
        with self._write() as db:
            db.executemany("DELETE FROM tags WHERE run_id = ? AND tag = ?",
                           [(run_id, _check_tag(t)) for t in tags])
        return self.tags(run_id)

    @_guarded
    def set_note(self, run_id_or_prefix: str, note: str | None) -> None:
        run_id = self.resolve(run_id_or_prefix)
        with self._write() as db:
            db.execute("UPDATE runs SET note = ? WHERE run_id = ?", (note or None, run_id))

    # -- reading ------------------------------------------------------------------------------
    @_guarded
    def tags(self, run_id: str) -> list[str]:
        return [r[0] for r in self.db.execute(
            "SELECT tag FROM tags WHERE run_id = ? ORDER BY tag", (run_id,))]

    @_guarded
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

    @_guarded
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
