"""Tests of storlab.store: round trip, filters, tags and notes, migration of a version-1 file, two
processes writing at once, and interrupted runs."""
from __future__ import annotations

import json
import multiprocessing
import sqlite3
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "results"
sys.path.insert(0, str(FIXTURES))

import rundoc  # noqa: E402
from storlab import store  # noqa: E402
from storlab.store import schema  # noqa: E402


@pytest.fixture
def db(tmp_path):
    return tmp_path / "results.db"


def test_round_trip_keeps_the_whole_document(db):
    doc = rundoc.make_run(engine="io_uring", qd=16, rw="randrw", phases=["warm", "randrw"])
    run_id = store.save(doc, db)
    assert run_id == doc["run_id"]
    back = store.load(run_id, db)
    assert back == doc    # job, environment, phases, histogram buckets, time series, workers
    assert back["phases"][1]["write"]["lat_hist"]["buckets"] == doc["phases"][1]["write"]["lat_hist"]["buckets"]


def test_load_by_unique_prefix_and_errors_for_unknown_or_ambiguous(db):
    a = rundoc.make_run(run_id="aaaa1111" + "0" * 24)
    b = rundoc.make_run(run_id="aaaa2222" + "0" * 24)
    store.save(a, db)
    store.save(b, db)
    assert store.load("aaaa1", db)["run_id"] == a["run_id"]
    with pytest.raises(store.StoreError, match="several runs"):
        store.load("aaaa", db)
    with pytest.raises(store.RunNotFound, match="no stored run"):
        store.load("ffff", db)
    with pytest.raises(store.StoreError, match="not a run id"):
        store.load("../x", db)


def test_summary_has_indexed_columns_and_totals(db):
    doc = rundoc.make_run(bs=65536, iops=1000, seconds=4.0, targets=["/mnt/a", "/mnt/b"])
    store.save(doc, db, tags=["nvme", "baseline"], note="first try")
    (s,) = store.list_runs(db)
    assert s["run_id"] == doc["run_id"]
    assert (s["kind"], s["rw"], s["bs"], s["engine"], s["host"]) == ("run", "randread", 65536, "psync", "node17")
    assert s["targets"] == ["/mnt/a", "/mnt/b"]
    assert s["tags"] == ["baseline", "nvme"]
    assert s["note"] == "first try"
    assert s["complete"] is True
    assert s["started_at"] == "2026-11-21T15:20:00.123Z"
    assert s["read_bw_bytes"] == pytest.approx(doc["phases"][0]["read"]["bw_bytes"])
    assert s["write_bw_bytes"] is None


def test_filters(db):
    store.save(rundoc.make_run(seed=1, started_at="2026-11-01T10:00:00.000Z", targets=["/mnt/x/f"]),
               db, tags=["old"])
    store.save(rundoc.make_run(seed=2, started_at="2026-11-20T10:00:00.000Z", targets=["/dev/nvme0n1"]),
               db, tags=["new"])
    store.save({**rundoc.make_plan(), "run_id": "p" * 32, "started_at": "2026-11-21T00:00:00Z"}, db)
    assert [s["tags"] for s in store.list_runs(db, tag="old")] == [["old"]]
    assert len(store.list_runs(db, target="/dev/nvme0n1")) == 1
    assert len(store.list_runs(db, target="/mnt/*")) == 1
    assert len(store.list_runs(db, since="2026-11-15")) == 2
    assert len(store.list_runs(db, until="2026-11-15")) == 1
    assert [s["kind"] for s in store.list_runs(db, kind="plan")] == ["plan"]
    assert len(store.list_runs(db, since="2026-11-15", kind="run")) == 1
    assert len(store.list_runs(db, limit=1)) == 1 and store.list_runs(db, limit=1)[0]["kind"] == "plan"
    with pytest.raises(store.StoreError, match="since"):
        store.list_runs(db, since="yesterday-ish")


def test_since_accepts_an_age():
    from datetime import datetime, timezone
    now = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)
    assert store.parse_when("2h", now=now) == "2026-11-21T10:00:00.000Z"
    assert store.parse_when("2026-11-21T13:00+01:00") == "2026-11-21T12:00:00.000Z"


def test_other_kinds_are_stored_without_run_fields(db):
    doc = rundoc.make_sweep()
    run_id = store.save(doc, db)
    assert run_id == doc["run_id"]
    back = store.load(run_id, db)
    assert back["runs"] == doc["runs"] and back["run_id"] == run_id
    plan_id = store.save(rundoc.make_plan(), db)      # a plan document has no run_id: one is made
    assert len(plan_id) == 32 and store.load(plan_id, db)["kind"] == "plan"
    with pytest.raises(store.StoreError, match="'schema' and a 'kind'"):
        store.save({"phases": []}, db)


def test_tags_notes_and_delete(db):
    a = store.save(rundoc.make_run(seed=1), db)
    b = store.save(rundoc.make_run(seed=2), db)
    assert store.add_tags(a[:8], ["x", "y"], db) == ["x", "y"]
    assert store.remove_tags(a, ["x"], db) == ["y"]
    with pytest.raises(store.StoreError, match="tag"):
        store.add_tags(a, ["a,b"], db)
    store.set_note(a, "re-run after firmware update", db)
    assert store.summary(a, db)["note"] == "re-run after firmware update"
    assert store.delete([a], db) == [a]
    assert [s["run_id"] for s in store.list_runs(db)] == [b]
    # the tag and target rows went with the run
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM tags").fetchone()[0] == 0
    assert con.execute("SELECT COUNT(*) FROM run_targets WHERE run_id = ?", (a,)).fetchone()[0] == 0


def test_interrupted_run_is_stored_as_incomplete_then_replaced_by_the_full_one(db):
    full = rundoc.make_run(seed=5)
    partial = rundoc.interrupted(full)
    run_id = store.save(partial, db, tags=["t"], note="n")
    s = store.summary(run_id, db)
    assert s["complete"] is False and s["stop_reason"] == "interrupted"
    assert store.load(run_id, db)["complete"] is False
    # saving the same run again replaces the document and keeps tags and note
    store.save(full, db)
    s = store.summary(run_id, db)
    assert s["complete"] is True and s["tags"] == ["t"] and s["note"] == "n"
    assert len(store.list_runs(db)) == 1


def test_new_store_is_at_latest_version_in_wal_mode(db):
    with store.Store(db) as s:
        assert s.schema_version() == schema.LATEST == 2
        assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_migrates_a_version_1_file(db):
    con = sqlite3.connect(db)
    con.executescript((FIXTURES / "store-v1.sql").read_text())
    con.close()
    expected = json.loads((FIXTURES / "store-v1-run.json").read_text())
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == 1
    runs = store.list_runs(db)                      # opening migrates
    assert [r["run_id"] for r in runs] == [expected["run_id"]]
    assert runs[0]["tags"] == [] and runs[0]["note"] is None
    assert runs[0]["engine"] == "io_uring"
    assert store.load(expected["run_id"], db) == expected
    # the v2 features work on the migrated file
    store.add_tags(expected["run_id"], ["migrated"], db)
    assert store.list_runs(db, tag="migrated")[0]["run_id"] == expected["run_id"]
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == 2


def test_refuses_a_store_from_a_newer_storlab(db):
    con = sqlite3.connect(db)
    con.execute(f"PRAGMA user_version = {schema.LATEST + 1}")
    con.close()
    with pytest.raises(ValueError, match="newer than this storlab"):
        store.list_runs(db)


def test_default_path_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("STORLAB_STORE", str(tmp_path / "env.db"))
    assert store.default_path() == tmp_path / "env.db"
    rid = store.save(rundoc.make_run(), None)
    assert (tmp_path / "env.db").exists() and store.load(rid)["run_id"] == rid
    monkeypatch.delenv("STORLAB_STORE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert store.default_path() == tmp_path / "home" / ".local" / "share" / "storlab" / "results.db"


def _writer(path: str, first_seed: int, count: int, barrier) -> None:
    sys.path.insert(0, str(FIXTURES))
    import rundoc as rd
    from storlab import store as st
    barrier.wait()          # both processes open the fresh file and write at the same moment
    for seed in range(first_seed, first_seed + count):
        st.save(rd.make_run(seed=seed), path, tags=[f"w{first_seed}"])


def test_two_concurrent_writer_processes_both_land(db):
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer, args=(str(db), first, 25, barrier)) for first in (1000, 2000)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert len(store.list_runs(db, tag="w1000")) == 25
    assert len(store.list_runs(db, tag="w2000")) == 25
    assert len(store.list_runs(db)) == 50


def test_engine_output_round_trips(db):
    docs = json.loads((FIXTURES / "engine-null-bs-sweep.json").read_text())
    for d in docs:
        store.save(d, db)
    runs = store.list_runs(db)
    assert [r["bs"] for r in runs] == [4096, 65536, 1 << 20]
    assert all(r["engine"] == "null" and r["host"] for r in runs)
    assert [store.load(r["run_id"], db) for r in runs] == docs


def test_a_store_created_by_another_process_while_opening_is_not_called_foreign(db, monkeypatch):
    """Regression: opening read the schema version (0: no store yet) and then the table list as two
    separate reads; a second process creating the store between them made a fresh store look like
    "an SQLite database but not a storlab results store". Under load two writers hit this."""
    import threading

    from storlab.store import db as store_db

    created: list[BaseException | None] = []

    def create_elsewhere() -> None:
        try:
            store.Store(db).close()
            created.append(None)
        except BaseException as e:     # reported by the test, not lost in the thread
            created.append(e)

    class _Rows(list):
        def fetchone(self):
            return self[0] if self else None

    class CreateBetweenReads:
        """The first connection: once it has read the schema version, another opener creates the
        store, given a second to commit (as it would if nothing held it off) before reading on."""
        def __init__(self, real):
            self.real, self.creator = real, None

        def execute(self, sql, *args):
            cur = self.real.execute(sql, *args)
            if sql != "PRAGMA user_version" or self.creator is not None:
                return cur
            rows = cur.fetchall()       # the statement done: only a transaction still holds a lock
            self.creator = threading.Thread(target=create_elsewhere)
            self.creator.start()
            self.creator.join(1.0)
            return _Rows(rows)

        def __getattr__(self, name):
            return getattr(self.real, name)

    connect = store_db.Store._connect
    proxies: list[CreateBetweenReads] = []

    def first_connection_proxied(self, *params):
        conn = connect(self, *params)
        if proxies:
            return conn
        proxies.append(CreateBetweenReads(conn))
        return proxies[0]

    monkeypatch.setattr(store_db.Store, "_connect", first_connection_proxied)
    store.Store(db).close()                 # raised StoreUnusable before the fix
    proxies[0].creator.join(30)
    assert created == [None]
    assert store.Store(db).schema_version() == schema.LATEST


@pytest.mark.parametrize("text, back", [("last", 0), ("LAST", 0), (" last~0 ", 0), ("last~3", 3),
                                        ("last~12", 12), ("lastx", None), ("3fa9", None), ("./last", None)])
def test_parse_last_reads_the_selectors(text, back):
    assert store.parse_last(text) == back


@pytest.mark.parametrize("text", ["last~", "last~x", "last~-1", "last~+1", "last~1.5", "last~²"])
def test_parse_last_refuses_malformed_selectors_naming_them(text):
    with pytest.raises(store.StoreError, match=r"is not a run selector; allowed: .*last~N"):
        store.parse_last(text)
