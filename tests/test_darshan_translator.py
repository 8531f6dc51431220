"""jobs/darshan: Darshan logs read, counted and translated into storlab jobs.

The inputs are real logs only: the example logs shipped inside PyDarshan's wheel (opened by path:
its own name lookup maps dxt.darshan to another file) and, in tests/test_replay.py, logs the tests
record themselves with darshan-runtime.
"""
from __future__ import annotations

import functools
import os
import struct
from pathlib import Path

import pytest

darshan = pytest.importorskip("darshan", reason="PyDarshan (pip install darshan, the replay extra) is not installed")

from storlab.errors import UserError  # noqa: E402
from storlab.jobs.darshan import log as darshan_log  # noqa: E402
from storlab.jobs.darshan.counters import BINS, COUNT_KEYS, READ, WRITE, bin_bounds, bin_index, count_ops  # noqa: E402
from storlab.jobs.darshan.log import LogError  # noqa: E402
from storlab.jobs.darshan.synth import synthesize  # noqa: E402
from storlab.jobs.darshan.translator import FORMAT, default_ranks, translate  # noqa: E402
from storlab.jobs.job import load_jobfile  # noqa: E402
from storlab.jobs.translation import HOW, TRANSLATORS, Refusal, Translation, translator  # noqa: E402

EXAMPLES = Path(darshan.__file__).parent / "examples" / "example_logs"
MACSIO = EXAMPLES / "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan"


@functools.lru_cache(maxsize=None)
def load(path: str):
    """A log read once per test session (each read starts PyDarshan in a child process)."""
    return darshan_log.load(path)


def example(name: str) -> str:
    path = EXAMPLES / name
    if not path.exists():
        pytest.skip(f"{name} is not in this PyDarshan wheel ({EXAMPLES})")
    return str(path)


# -- Darshan's counting definitions, checked against Darshan itself ------------------------------
def _dxt_ops(d) -> list[tuple]:
    ops = [(READ, int(o), int(n), t) for o, n, t, _ in d.reads] + [(WRITE, int(o), int(n), t) for o, n, t, _ in d.writes]
    return [op[:3] for op in sorted(ops, key=lambda op: op[3])]


@pytest.mark.parametrize("name", ["ior_hdf5_example.darshan", "dxt.darshan"])
def test_counting_a_dxt_trace_gives_the_logs_own_counters(name):
    """count_ops over each DXT trace equals Darshan's POSIX counters of the same file: our
    definitions of SEQ, CONSEC, switches and the size bins are Darshan's."""
    log = load(example(name))
    traces: dict[int, list] = {}
    for d in log.dxt["DXT_POSIX"]:
        traces.setdefault(d.id, []).append(d)
    checked = reopened = 0
    for rec in log.module_records("POSIX"):
        ds = traces.get(rec.id)
        if not ds:
            continue
        if rec.c("POSIX_OPENS") > len(ds) and rec.rank != -1:
            reopened += 1   # each close resets Darshan's last byte: not one sequence per rank
            continue
        if sum(len(d.reads) + len(d.writes) for d in ds) != rec.c("POSIX_READS") + rec.c("POSIX_WRITES"):
            continue   # a trace cut short (DXT's buffer limit)
        total: dict[str, int] = {}
        for d in ds:
            for k, v in count_ops(_dxt_ops(d)).items():
                if k in COUNT_KEYS and not k.startswith("POSIX_MAX_BYTE"):
                    total[k] = total.get(k, 0) + v
        for k in total:
            if k != "POSIX_FSYNCS":   # DXT does not trace fsync
                assert total[k] == rec.c(k), (rec.path, k, total[k], rec.c(k))
        checked += 1
    assert checked >= 1 and checked >= reopened


def test_size_bins_are_darshans():
    assert [bin_index(s) for s in (0, 100, 101, 1024, 1025, 4194304, 4194305, 1 << 30, (1 << 30) + 1)] == \
        [0, 0, 1, 1, 2, 5, 6, 8, 9]
    for i in range(len(BINS) - 1):
        lo, hi = bin_bounds(i)
        assert bin_index(lo) == i and bin_index(hi) == i and bin_index(hi + 1) == i + 1


def test_seq_and_consec_as_darshan_counts_them():
    # first request at 0 is neither (the last byte starts at 0); 1 is consecutive; a gap is a stride
    c = count_ops([(WRITE, 0, 10, ), (WRITE, 10, 10), (WRITE, 30, 10), (WRITE, 5, 10), (READ, 0, 4)])
    assert (c["POSIX_WRITES"], c["POSIX_SEQ_WRITES"], c["POSIX_CONSEC_WRITES"]) == (4, 2, 1)
    assert c["strides"][10] == 1
    assert c["POSIX_RW_SWITCHES"] == 1 and c["POSIX_SEQ_READS"] == 0


# -- synthesis from counters ----------------------------------------------------------------------
def _records(name: str, limit: int = 60):
    log = load(example(name))
    out = [r for r in log.module_records("POSIX") if r.path.startswith("/")
           and (r.c("POSIX_READS") or r.c("POSIX_WRITES"))]
    return log, out[:limit]


@pytest.mark.parametrize("name", ["ior_hdf5_example.darshan", MACSIO.name, "dxt.darshan", "sample-badost.darshan"])
def test_synthesis_has_the_records_counters(name):
    """A sequence made from a record's counters alone, counted as Darshan counts, has the record's
    counts, bytes, size bins, SEQ and CONSEC within 5 % (0-byte reads excepted, said in a note)."""
    log, records = _records(name)
    exact = ("POSIX_WRITES", "POSIX_BYTES_WRITTEN", *(f"POSIX_SIZE_WRITE_{b}" for b in BINS))
    near = ("POSIX_READS", "POSIX_BYTES_READ", "POSIX_SEQ_READS", "POSIX_SEQ_WRITES", "POSIX_CONSEC_WRITES",
            *(f"POSIX_SIZE_READ_{b}" for b in BINS))
    for rec in records:
        parts = min(4, log.nprocs) if rec.rank == -1 else 1
        syn = synthesize(rec.counters, rec.fcounters, parts, seed=7, log_ranks=log.nprocs)
        got: dict[str, int] = {}
        for ops in syn.parts:
            for k, v in count_ops(ops).items():
                if k in COUNT_KEYS:
                    got[k] = got.get(k, 0) + v
        zero_reads = any("0 bytes" in n for n in syn.notes)
        for k in exact:
            assert got[k] == rec.c(k), (rec.path, k, got[k], rec.c(k), syn.notes)
        for k in near:
            if zero_reads and "READ" in k:
                continue
            assert abs(got[k] - rec.c(k)) <= max(1, 0.05 * rec.c(k)), (rec.path, k, got[k], rec.c(k), syn.notes)


def test_a_random_records_synthesis_stays_within_its_extent():
    """256 aligned 4 KiB reads over 1 MiB, about half of them sequential, with recorded strides (a
    random read as fio or `storlab run` makes it): for every seed, every request ends within the
    recorded extent (POSIX_MAX_BYTE_READ + 1), is aligned, and SEQ_READS is the record's within 5 %.
    A jump or a step back placed too near the end once left no room for the forward requests after
    it, which then ran past the extent."""
    base = {"POSIX_READS": 256, "POSIX_BYTES_READ": 256 * 4096, "POSIX_SIZE_READ_1K_10K": 256,
            "POSIX_ACCESS1_ACCESS": 4096, "POSIX_ACCESS1_COUNT": 256, "POSIX_MAX_BYTE_READ": (1 << 20) - 1,
            "POSIX_FILE_ALIGNMENT": 4096, "POSIX_FILE_NOT_ALIGNED": 0}
    for seed in range(150):
        c = dict(base, POSIX_SEQ_READS=110 + seed % 50, POSIX_CONSEC_READS=seed % 4)
        for i in range(1, 5):
            c[f"POSIX_STRIDE{i}_STRIDE"], c[f"POSIX_STRIDE{i}_COUNT"] = 4096 * (1 + (seed * i) % 37), 1 + i % 3
        reads = [op for op in synthesize(c, {}, 1, seed=seed).parts[0] if op[0] == "read"]
        assert max(o + n for _, o, n in reads) <= 1 << 20, seed
        assert all(o % 4096 == 0 for _, o, _ in reads), seed
        assert abs(count_ops(reads)["POSIX_SEQ_READS"] - c["POSIX_SEQ_READS"]) <= 0.05 * c["POSIX_SEQ_READS"], seed


def test_synthesis_is_seeded():
    log, records = _records("dxt.darshan", 5)
    a = [synthesize(r.counters, r.fcounters, 1, seed=3).parts for r in records]
    b = [synthesize(r.counters, r.fcounters, 1, seed=3).parts for r in records]
    assert a == b


# -- the translator's faces (as every translator: emit, refusal, record) -----------------------------
def test_registered_as_a_translator():
    assert TRANSLATORS["darshan"] == "storlab.jobs.darshan.translator"
    assert translator("darshan").FORMAT == FORMAT == "darshan"


def test_translation_is_a_storlab_job(tmp_path):
    path = example("ior_hdf5_example.darshan")
    tr = translate(path, target=str(tmp_path / "t"), iolog_dir=str(tmp_path / "logs"), log=load(path))
    assert isinstance(tr, Translation) and tr.format == "darshan"
    assert tr.mapped and all(m.how in HOW for m in tr.mapped)
    hows = {m.how for m in tr.mapped}
    assert {"translated", "derived"} <= hows
    (tmp_path / "job.toml").write_text(tr.to_toml())
    job = load_jobfile(str(tmp_path / "job.toml"))
    groups = [g for p in job["phase"] for g in p["group"]]
    assert len(groups) == 4 and all(g["target"][0].startswith(str(tmp_path / "t")) for g in groups)
    assert job["replay_no_stall"] is True
    rec = tr.record()
    assert rec["format"] == "darshan" and len(rec["sha256"]) == 64 and rec["mapped"]
    assert rec["details"]["replay"]["from_dxt"] == 4
    # nothing written yet: the iologs come with prepare/write_iologs, the data with the run
    assert not (tmp_path / "t").exists() and not (tmp_path / "logs").exists()
    resolved = tr.resolve()
    assert len(resolved.phases) == len(job["phase"])


def test_paths_map_under_the_target_never_at_the_log(tmp_path):
    path = example("sample-badost.darshan")
    tr = translate(path, target=str(tmp_path), ranks=8, scale=0.02, log=load(path))
    targets = {w.target for w in tr.workers}
    assert all(t.startswith(str(tmp_path) + "/") for t in targets)
    assert not targets & {w.log_path for w in tr.workers}
    assert len(targets) == len({w.log_path for w in tr.workers})


def test_ranks_fold_and_scale(tmp_path):
    path = example("example.darshan")
    tr = translate(path, target=str(tmp_path), ranks=8, scale=0.001, log=load(path))
    assert {w.rank for w in tr.workers} == set(range(8))
    assert tr.details["replay"]["scale"] == 0.001
    writes = sum(1 for w in tr.workers for op in w.ops if op[0] == WRITE)
    assert writes == round(16402 * 0.001)
    assert any("strides scaled" in n for n in tr.notes)


def test_more_ranks_than_one_process_holds_fold_by_default(tmp_path):
    path = example("example.darshan")                      # 2048 ranks
    tr = translate(path, target=str(tmp_path), scale=0.001, log=load(path))
    assert tr.details["replay"]["ranks"] == 256 and {w.rank for w in tr.workers} <= set(range(256))
    line = tr.details["replay"]["folded"]
    assert line.startswith("folded the log's 2048 ranks onto 256 replay ranks (8 log ranks each") and "--ranks N" in line
    assert tr.notes[0] == line and "\n" not in line
    nprocs = next(m for m in tr.record()["mapped"] if m["key"] == "job.nprocs")
    assert nprocs["how"] == "chosen" and "folded by default" in nprocs["note"]


@pytest.mark.parametrize("nprocs, ranks", [(1, 1), (256, 256), (257, 129), (512, 256), (1000, 250), (2048, 256),
                                           (100000, 256)])
def test_default_ranks_are_balanced_and_at_most_256(nprocs, ranks):
    assert default_ranks(nprocs) == ranks
    per = -(-nprocs // ranks)
    assert per == -(-nprocs // 256)     # the busiest rank carries no more log ranks than with 256


def test_ranks_given_beyond_one_process_are_refused_in_one_line(tmp_path):
    path = example("example.darshan")
    with pytest.raises(UserError) as e:
        translate(path, target=str(tmp_path), ranks=300, log=load(path))
    msg = str(e.value)
    assert msg.startswith("ranks: 300 is more than 256") and "--ranks N (1 <= N <= 256)" in msg and "\n" not in msg


# -- bad input: one line naming the file ------------------------------------------------------------
def _bad_logs(tmp_path) -> dict[str, tuple[str, str]]:
    src = Path(example("example.darshan")).read_bytes()
    (tmp_path / "text.darshan").write_text("hello\n")
    (tmp_path / "half.darshan").write_bytes(src[: len(src) // 2])
    (tmp_path / "head.darshan").write_bytes(src[:300])
    (tmp_path / "v2.darshan").write_bytes(b"2.06\0\0\0\0" + struct.pack("<q", 6567223) + b"\0" * 64)
    return {"not a log": (str(tmp_path / "text.darshan"), "not a Darshan log"),
            "truncated": (str(tmp_path / "half.darshan"), "truncated or corrupt"),
            "header only": (str(tmp_path / "head.darshan"), "truncated or corrupt"),
            "old version": (str(tmp_path / "v2.darshan"), "format version 2.06 is not supported"),
            "a folder": (str(tmp_path), "is a directory")}


def test_bad_logs_are_refused_in_one_line(tmp_path):
    for what, (path, words) in _bad_logs(tmp_path).items():
        with pytest.raises(LogError) as e:
            darshan_log.load(path)
        msg = str(e.value)
        assert words in msg and os.path.basename(path) in msg and "\n" not in msg, (what, msg)


def test_refusal_shape_is_shared():
    r = Refusal("darshan", "/x/app.darshan", None, "POSIX_MMAPS", 3, "memory-mapped I/O is not replayed")
    assert str(r) == "darshan app.darshan: POSIX_MMAPS = 3: memory-mapped I/O is not replayed"


def test_emit_writes_the_job_and_the_logs_it_names(tmp_path):
    path = example("ior_hdf5_example.darshan")
    tr = translate(path, target=str(tmp_path / "t"), log=load(path))
    tr.emit(str(tmp_path / "job.toml"))
    job = load_jobfile(str(tmp_path / "job.toml"))
    logs = [g["read_iolog"] for p in job["phase"] for g in p["group"]]
    assert logs and all(p.startswith(str(tmp_path / "job.toml.iologs")) and os.path.isfile(p) for p in logs)
    assert not [p for p in (tmp_path / "t").rglob("*") if p.is_file()]


def test_without_pydarshan_the_error_names_the_install_command(monkeypatch):
    monkeypatch.setattr(darshan_log, "pydarshan_available", lambda: False)
    with pytest.raises(Exception) as e:
        darshan_log.load(example("ior_hdf5_example.darshan"))
    assert "pip install 'storlab[replay]'" in str(e.value) and "\n" not in str(e.value)
