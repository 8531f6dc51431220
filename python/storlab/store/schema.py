"""SQLite schema of the results store and its migrations, one list of statements per version.

The version lives in `PRAGMA user_version`. A migration only ever adds to what the previous version
created (new tables, new columns, new indexes) and back-fills them, so a file written by an older
storlab opens in a newer one. Never edit a released migration: add the next one.
"""
from __future__ import annotations

import sqlite3

from ..errors import UserError

__all__ = ["MIGRATIONS", "LATEST", "migrate"]


# Each migration is a list of statements run one by one inside the caller's transaction
# (sqlite3's executescript would COMMIT first, so two processes could both migrate).
# v1: runs with their whole document, indexed columns, per-target rows and per-result rows.
V1 = (
    """CREATE TABLE runs (
            run_id          TEXT PRIMARY KEY,
            schema          TEXT NOT NULL,          -- e.g. storlab.run/1
            kind            TEXT NOT NULL,          -- run | sweep | meta | scale | plan ...
            storlab_version TEXT,
            started_at      TEXT,                   -- UTC, YYYY-MM-DDTHH:MM:SS.mmmZ (sorts as text)
            finished_at     TEXT,
            complete        INTEGER NOT NULL,       -- 0 when interrupted or failed
            stop_reason     TEXT,
            host            TEXT,
            engine          TEXT,
            rw              TEXT,
            bs              INTEGER,                -- bytes
            saved_at        TEXT NOT NULL,
            document        TEXT NOT NULL           -- the whole JSON document
        )""",
    "CREATE INDEX runs_started_at ON runs(started_at)",
    "CREATE INDEX runs_kind ON runs(kind)",
    "CREATE INDEX runs_host ON runs(host)",
    """CREATE TABLE run_targets (
            run_id  TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            path    TEXT NOT NULL,
            PRIMARY KEY (run_id, path)
        )""",
    "CREATE INDEX run_targets_path ON run_targets(path)",
    # one row per phase and direction, for SQL users and quick listings
    """CREATE TABLE results (
            run_id      TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            phase_index INTEGER NOT NULL,
            phase       TEXT NOT NULL,
            direction   TEXT NOT NULL,              -- read | write
            bytes       INTEGER,
            ops         INTEGER,
            seconds     REAL,
            iops        REAL,
            bw_bytes    REAL,                       -- bytes per second
            lat_mean_ns REAL,
            lat_p50_ns  REAL,
            lat_p99_ns  REAL,
            lat_p999_ns REAL,
            lat_max_ns  REAL,
            PRIMARY KEY (run_id, phase_index, direction)
        )""",
)

# v2: tags (many per run) and a free-text note per run.
V2 = (
    "ALTER TABLE runs ADD COLUMN note TEXT",
    """CREATE TABLE tags (
            run_id  TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            tag     TEXT NOT NULL,
            PRIMARY KEY (run_id, tag)
        )""",
    "CREATE INDEX tags_tag ON tags(tag)",
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (V1, V2)
LATEST = len(MIGRATIONS)


def migrate(db: sqlite3.Connection, target: int = LATEST) -> int:
    """Bring the database up to version `target` inside the caller's write transaction.

    Returns the version found before migrating. A file newer than this storlab is refused, since
    writing to it could lose columns we do not know about.
    """
    found = db.execute("PRAGMA user_version").fetchone()[0]
    if found > LATEST:
        raise UserError(f"results store: schema version {found} is newer than this storlab "
                         f"understands ({LATEST}); upgrade storlab")
    for version in range(found + 1, target + 1):
        for statement in MIGRATIONS[version - 1]:
            db.execute(statement)
        db.execute(f"PRAGMA user_version = {version}")
    return found
