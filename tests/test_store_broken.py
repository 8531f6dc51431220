"""Broken stores: every `results` action, `report` and `run --store` against a truncated, garbage,
empty, read-only, missing, directory or FIFO store ends with an exit code and one line on stderr
naming the store and what is wrong, never a traceback; read-only stores can still be read; reads
never create a store; a locked store is retried, then named, within the configured bound."""
from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "results"
sys.path.insert(0, str(FIXTURES))

import rundoc  # noqa: E402
import storlab  # noqa: E402
from storlab import store  # noqa: E402
from storlab.cli.main import main  # noqa: E402

RUN_A, RUN_B = "aaaa" + "1" * 28, "bbbb" + "2" * 28

# what the one line says for each kind of broken store
SAYS = {
    "truncated": "corrupt",
    "garbage": "not an SQLite database",
    "empty": "is an empty file",
    "directory": "is a directory",
    "fifo": "is a FIFO",
    "missing": "does not exist",
    "readonly": "read-only",
}
KINDS = tuple(SAYS)
READS = ("list", "show", "compare", "export", "export-tag", "report", "report-tag")
WRITES = ("delete", "tag")


def _fill(path: Path) -> None:
    """A store of a dozen runs with large documents, tagged `t`: big enough that cutting it in
    half loses pages every action needs."""
    for n in range(12):
        rid = RUN_A if n == 0 else RUN_B if n == 1 else None
        doc = rundoc.make_run(seed=100 + n, phases=["write", "read"])
        if rid:
            doc["run_id"] = rid
        store.save(doc, path, tags=["t"])
    assert not Path(str(path) + "-wal").exists()   # the last close checkpointed everything


def _read_only_mount(folder: Path):
    """Make `folder` read-only for this process: a read-only bind mount when root (root writes
    through file modes), file modes otherwise. Returns an undo function."""
    if os.geteuid() != 0:
        modes = [(p, p.stat().st_mode) for p in (*folder.iterdir(), folder)]
        for p, _ in modes:
            p.chmod(0o555 if p.is_dir() else 0o444)
        return lambda: [p.chmod(m) for p, m in reversed(modes)]
    for cmd in (["mount", "--bind", str(folder), str(folder)],
                ["mount", "-o", "remount,bind,ro", str(folder)]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            subprocess.run(["umount", str(folder)], capture_output=True)
            pytest.skip(f"cannot make a read-only bind mount as root: {r.stderr.strip()}")
    # lazy: a connection left open by a failing command must not fail the teardown
    return lambda: subprocess.run(["umount", "-l", str(folder)], check=True)


@pytest.fixture
def broken_store(tmp_path):
    """Factory: the path of a store of the given kind (a read-only one holds RUN_A and RUN_B)."""
    undo = []

    def make(kind: str) -> Path:
        folder = tmp_path / "stores"
        folder.mkdir()
        path = folder / "results.db"
        if kind == "truncated":
            _fill(path)
            size = path.stat().st_size
            with open(path, "r+b") as f:
                f.truncate(size // 2)
        elif kind == "garbage":
            path.write_bytes(random.Random(13).randbytes(16384))
        elif kind == "empty":
            path.write_bytes(b"")
        elif kind == "directory":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "missing":
            path = tmp_path / "typo" / "deeper" / "results.db"
        elif kind == "readonly":
            _fill(path)
            undo.append(_read_only_mount(folder))
        return path

    yield make
    for u in undo:
        u()


def _argv(action: str, path: Path, tmp_path: Path) -> list[str]:
    s = ["--store", str(path)]
    return {
        "list": ["results", "list", *s],
        "show": ["results", "show", RUN_A[:8], *s],
        "compare": ["results", "compare", RUN_A[:8], RUN_B[:8], *s],
        "export": ["results", "export", RUN_A[:8], *s],
        "export-tag": ["results", "export", "--with-tag", "t", "--format", "csv", *s],
        "delete": ["results", "delete", RUN_A[:8], *s],
        "tag": ["results", "tag", RUN_A[:8], "later", *s],
        "report": ["report", RUN_A[:8], "-o", str(tmp_path / "report.html"), *s],
        "report-tag": ["report", "--with-tag", "t", "-o", str(tmp_path / "report.html"), *s],
        "run": ["run", "--target", str(tmp_path / "t.dat"), "--size", "256k", "--bs", "64k",
                "--engine", "null", "--json", str(tmp_path / "out.json"), "-q", *s],
    }[action]


def _storlab(argv: list[str], capsys) -> tuple[int, str, str]:
    """In process, except for a FIFO: old code handed it to SQLite, whose open() blocks
    uninterruptibly, so that case runs in a child with a time limit."""
    store_path = Path(argv[argv.index("--store") + 1])
    if store_path.is_fifo():
        # the child imports the storlab under test, wherever it was imported from
        env = dict(os.environ, PYTHONPATH=str(Path(storlab.__file__).resolve().parents[1]))
        try:
            r = subprocess.run([sys.executable, "-m", "storlab.cli.main", *argv], capture_output=True,
                               text=True, timeout=60, env=env)
        except subprocess.TimeoutExpired:
            pytest.fail(f"storlab {' '.join(argv)} hung on a FIFO store")
        return r.returncode, r.stdout, r.stderr
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _one_store_line(err: str, path: Path, says: str) -> str:
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "store" in line]
    assert len(lines) == 1, err
    assert str(path) in lines[0] and says in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("action", READS + WRITES)
@pytest.mark.parametrize("kind", KINDS)
def test_broken_store_gives_one_line_not_a_traceback(kind, action, broken_store, tmp_path, capsys):
    path = broken_store(kind)
    code, out, err = _storlab(_argv(action, path, tmp_path), capsys)
    if kind == "readonly" and action in READS:       # reading a read-only store works
        assert code == 0, err
        assert out or (tmp_path / "report.html").exists()
        return
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    _one_store_line(err, path, SAYS[kind])
    if kind == "missing":
        assert not path.parent.parent.exists()     # neither the store nor its folders


@pytest.mark.parametrize("kind", KINDS)
def test_run_with_a_broken_store_still_writes_its_json_and_says_where(kind, broken_store, tmp_path,
                                                                      capsys):
    path = broken_store(kind)
    code, _, err = _storlab(_argv("run", path, tmp_path), capsys)
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["kind"] == "run" and doc["complete"] is True
    if kind in ("missing", "empty"):       # a store is created (or an empty file initialised) by run
        assert code == 0, err
        assert store.load(doc["run_id"], path)["run_id"] == doc["run_id"]
        return
    assert code == 1, err
    line = _one_store_line(err, path, SAYS[kind])
    assert "result not stored" in line and f"goes to {tmp_path / 'out.json'}" in line


def test_run_without_json_says_nothing_else_keeps_the_result(broken_store, tmp_path, capsys):
    path = broken_store("garbage")
    argv = [a for a in _argv("run", path, tmp_path) if a not in ("--json", str(tmp_path / "out.json"))]
    code, _, err = _storlab(argv, capsys)
    assert code == 1
    assert "nothing else keeps the document" in _one_store_line(err, path, SAYS["garbage"])


def test_read_only_store_lists_shows_and_exports(broken_store, tmp_path, capsys):
    path = broken_store("readonly")
    code, out, err = _storlab(["results", "list", "--json", "--store", str(path)], capsys)
    assert code == 0, err
    assert len(json.loads(out)) == 12
    code, out, err = _storlab(["results", "show", RUN_A[:8], "--json", "--store", str(path)], capsys)
    assert code == 0 and json.loads(out)["run_id"] == RUN_A
    code, out, err = _storlab(_argv("export-tag", path, tmp_path), capsys)
    assert code == 0 and len(out.strip().splitlines()) > 12
    assert sorted(p.name for p in path.parent.iterdir()) == ["results.db"]   # no -wal, -shm


@pytest.mark.root
def test_another_user_s_store_can_be_read_not_written(capsys):
    # a WAL store in a folder the reader cannot write: SQLite cannot make its shared-memory file
    # (READONLY_DIRECTORY), which failed every read before
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user (seteuid)")
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="storlab-foreign-"))
    try:
        folder.chmod(0o755)
        path = folder / "results.db"
        _fill(path)
        path.chmod(0o644)
        # as root first: every module these commands import is loaded before the interpreter's
        # own files may be out of the other user's reach
        assert _storlab(["results", "list", "--json", "--store", str(path)], capsys)[0] == 0
        assert _storlab(["results", "tag", RUN_A[:8], "--note", "", "--store", str(path)], capsys)[0] == 0
        os.setegid(65534)
        os.seteuid(65534)
        try:
            listed = _storlab(["results", "list", "--json", "--store", str(path)], capsys)
            tagged = _storlab(["results", "tag", RUN_A[:8], "x", "--store", str(path)], capsys)
        finally:
            os.seteuid(0)
            os.setegid(0)
        assert listed[0] == 0, listed[2]
        assert len(json.loads(listed[1])) == 12
        assert tagged[0] == 2
        _one_store_line(tagged[2], path, "read-only")
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize("action", READS)
def test_reads_leave_a_writable_store_byte_for_byte_unchanged(action, tmp_path, capsys):
    # reads used to open for writing: switch the journal to WAL and take write transactions
    path = tmp_path / "results.db"
    _fill(path)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode = DELETE").fetchone()
    con.close()
    before = path.read_bytes()
    code, _, err = _storlab(_argv(action, path, tmp_path), capsys)
    assert code == 0, err
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.glob("results.db*")) == ["results.db"]


def test_read_only_store_that_needs_migrating_says_so(tmp_path, capsys):
    folder = tmp_path / "old"
    folder.mkdir()
    path = folder / "results.db"
    con = sqlite3.connect(path)
    con.executescript((FIXTURES / "store-v1.sql").read_text())
    con.close()
    undo = _read_only_mount(folder)
    try:
        code, _, err = _storlab(["results", "list", "--store", str(path)], capsys)
    finally:
        undo()
    assert code == 2
    assert "schema version 1 and needs migrating to 2, but it is read-only" in _one_store_line(
        err, path, "read-only")


@pytest.mark.parametrize("action", READS + WRITES)
def test_mistyped_store_for_a_read_creates_nothing(action, tmp_path, capsys):
    typo = tmp_path / "resluts" / "results.db"
    code, _, err = _storlab(_argv(action, typo, tmp_path), capsys)
    assert code == 2 and "does not exist" in err
    assert not typo.parent.exists()


def test_store_in_another_program_s_database_is_refused_not_migrated(tmp_path, capsys):
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE accounts (id INTEGER)")
    con.commit()
    con.close()
    code, _, err = _storlab(_argv("run", path, tmp_path), capsys)
    assert code == 1
    _one_store_line(err, path, "not a storlab results store (it has tables accounts)")
    assert [r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")] == ["accounts"]


# -- locks ---------------------------------------------------------------------------------------
def _hold_lock(path: Path, sql: str, journal: str, release: threading.Event, hold_s: float | None,
               ready: threading.Event) -> None:
    """Another connection holding the store locked: for hold_s seconds, or (None) until `release`
    is set, so a test's action cannot outlast the lock however slowly a loaded host runs it."""
    con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    con.execute(f"PRAGMA journal_mode = {journal}").fetchone()
    con.execute(sql)
    con.execute("UPDATE runs SET note = 'held' WHERE run_id = ?", (RUN_B,))
    ready.set()
    release.wait(hold_s if hold_s is not None else 120)
    con.execute("COMMIT")
    con.close()


@pytest.fixture
def locked_store(tmp_path, monkeypatch):
    """Factory: a filled store held by another connection (BEGIN IMMEDIATE in WAL mode, or
    BEGIN EXCLUSIVE in rollback-journal mode, which also keeps readers out), until the test ends
    or for hold_s seconds."""
    threads = []
    release = threading.Event()

    def make(sql: str = "BEGIN IMMEDIATE", journal: str = "WAL", hold_s: float | None = None) -> Path:
        path = tmp_path / "results.db"
        _fill(path)
        ready = threading.Event()
        t = threading.Thread(target=_hold_lock, args=(path, sql, journal, release, hold_s, ready), daemon=True)
        t.start()
        threads.append(t)
        assert ready.wait(10)
        return path

    yield make
    release.set()
    for t in threads:
        t.join(30)


# The retry bound is checked against the default one (10 s, store.db.DEFAULT_WAIT_S), not against a
# margin around 0.5 s: the lock is held until the test ends, so only giving up can end the action.
@pytest.mark.parametrize("action", ["delete", "tag", "run"])
def test_locked_store_retries_then_says_so_within_the_bound(action, locked_store, tmp_path, capsys,
                                                            monkeypatch):
    monkeypatch.setenv("STORLAB_STORE_WAIT", "0.5")
    path = locked_store()
    started = time.monotonic()
    code, _, err = _storlab(_argv(action, path, tmp_path), capsys)
    took = time.monotonic() - started
    assert 0.5 <= took < 8, took            # retried for the bound, not the default 10 s
    assert code == (1 if action == "run" else 2)
    line = _one_store_line(err, path, "locked by another process; gave up after 0.5 s")
    assert "STORLAB_STORE_WAIT" in line


def test_locked_store_lands_once_the_lock_is_released(locked_store, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("STORLAB_STORE_WAIT", "20")
    path = locked_store(hold_s=1.0)
    code, _, err = _storlab(_argv("tag", path, tmp_path), capsys)
    assert code == 0, err
    assert store.summary(RUN_A, path)["tags"] == ["later", "t"]


def test_reads_go_on_while_a_writer_holds_a_wal_store(locked_store, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("STORLAB_STORE_WAIT", "0.5")
    path = locked_store()
    code, out, err = _storlab(["results", "list", "--json", "--store", str(path)], capsys)
    assert code == 0, err
    assert len(json.loads(out)) == 12


def test_exclusive_lock_keeps_readers_out_then_says_so(locked_store, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("STORLAB_STORE_WAIT", "0.5")
    path = locked_store(sql="BEGIN EXCLUSIVE", journal="DELETE")
    started = time.monotonic()
    code, _, err = _storlab(["results", "list", "--store", str(path)], capsys)
    assert time.monotonic() - started < 8     # gave up after its 0.5 s, not the default 10 s
    assert code == 2
    _one_store_line(err, path, "locked by another process")


def test_store_wait_must_be_a_number_of_seconds(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("STORLAB_STORE_WAIT", "nan")
    code, _, err = _storlab(["results", "list", "--store", str(tmp_path / "x.db")], capsys)
    assert code == 2 and "STORLAB_STORE_WAIT: 'nan' is not allowed; use seconds from 0 to 86400" in err


def test_meta_with_a_broken_store_still_writes_its_json_and_fails(broken_store, tmp_path, shm_dir,
                                                                  capsys):
    path = broken_store("garbage")
    out = tmp_path / "meta.json"
    code, _, err = _storlab(["meta", "--target", shm_dir, "--files", "5", "-q", "--json", str(out),
                             "--store", str(path)], capsys)
    assert code == 1
    assert json.loads(out.read_text())["kind"] == "meta"
    assert f"goes to {out}" in _one_store_line(err, path, SAYS["garbage"])


def test_store_wait_defaults_to_ten_seconds_and_takes_seconds(monkeypatch):
    monkeypatch.delenv("STORLAB_STORE_WAIT", raising=False)
    assert store.wait_seconds() == 10.0
    monkeypatch.setenv("STORLAB_STORE_WAIT", "2.5")
    assert store.wait_seconds() == 2.5
    for bad in ("-1", "inf", "10s", "100000"):
        monkeypatch.setenv("STORLAB_STORE_WAIT", bad)
        with pytest.raises(store.StoreError, match="use seconds from 0 to 86400"):
            store.wait_seconds()
