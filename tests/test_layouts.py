"""Access layouts: IOR segments, strided, file per thread, participants — checked on the written bytes.

With qd 1 and scramble off each worker writes the same buffer every time (filled from its own seed),
so the writer of every chunk of the file can be told from its content (scrambled, as by default,
every chunk would differ).
"""
from __future__ import annotations

import os

import pytest
from test_cli_run import run_cli  # tests/ is on sys.path (pytest prepend mode)

KiB = 1024


def chunk_owners(path: str, chunk: int) -> list[bytes]:
    with open(path, "rb") as f:
        data = f.read()
    return [data[i:i + chunk] for i in range(0, len(data), chunk)]


def label(chunks: list[bytes]) -> list[int]:
    """Number distinct contents in order of first appearance: 0, 1, 2 ..."""
    seen: dict[bytes, int] = {}
    return [seen.setdefault(c, len(seen)) for c in chunks]


def test_segmented_layout_matches_ior(shm_dir):
    path = f"{shm_dir}/seg.dat"
    # 3 participants, 4 segments, blocks of 64 KiB done in 16 KiB transfers: 768 KiB in all
    r = run_cli("--target", path, "--rw", "write", "--thread-layout", "segmented", "--segments", "4",
                "--block", "64k", "--bs", "16k", "--threads", "3", "--no-scramble")
    assert r["rc"] == 0, r
    assert os.path.getsize(path) == 4 * 3 * 64 * KiB
    owners = label(chunk_owners(path, 16 * KiB))
    # each segment: 4 transfers of participant 0, 4 of participant 1, 4 of participant 2
    expected = ([0] * 4 + [1] * 4 + [2] * 4) * 4
    assert owners == expected
    w = r["doc"]["phases"][0]["write"]
    assert w["bytes"] == 768 * KiB and w["ops"] == 48


def test_strided_layout_is_round_robin(shm_dir):
    path = f"{shm_dir}/str.dat"
    with open(path, "wb") as f:
        f.truncate(64 * KiB)
    r = run_cli("--target", path, "--rw", "write", "--thread-layout", "strided", "--bs", "4k", "--threads", "2",
                "--no-scramble")
    assert r["rc"] == 0, r
    assert label(chunk_owners(path, 4 * KiB)) == [0, 1] * 8


def test_file_per_thread(shm_dir):
    base = f"{shm_dir}/fpp"
    r = run_cli("--target", base, "--files", "per_thread", "--threads", "3", "--size", "256k",
                "--rw", "write", "--bs", "64k")
    assert r["rc"] == 0, r
    for n in range(3):
        assert os.path.getsize(f"{base}.{n}") == 256 * KiB
    assert not os.path.exists(base)
    targets = sorted(t["path"] for t in r["doc"]["environment"]["targets"])
    assert targets == [f"{base}.{n}" for n in range(3)]
    assert r["doc"]["phases"][0]["write"]["bytes"] == 3 * 256 * KiB


def test_participant_base_selects_this_process_slices(shm_dir):
    # as rank 1 of 2 with 2 threads each: participants 2 and 3 of 4 own the second half
    path = f"{shm_dir}/part.dat"
    with open(path, "wb") as f:
        f.truncate(64 * KiB)
    r = run_cli("--target", path, "--rw", "write", "--bs", "4k", "--threads", "2",
                "--participants", "4", "--participant-base", "2", "--no-scramble")
    assert r["rc"] == 0, r
    chunks = chunk_owners(path, 4 * KiB)
    assert all(c == bytes(4 * KiB) for c in chunks[:8])      # first half untouched
    assert label(chunks[8:]) == [0] * 4 + [1] * 4


@pytest.mark.parametrize("args,words", [
    (["--thread-layout", "segmented", "--block", "10k", "--bs", "4k"], ["block", "whole number of transfers"]),
    (["--thread-layout", "segmented", "--files", "per_thread"], ["segmented", "files=shared"]),
    (["--participants", "2", "--participant-base", "1", "--threads", "2"], ["participant_base", "participants = 2"]),
    (["--thread-layout", "segmented", "--segments", "4", "--block", "1m", "--size", "1m"], ["exceeds the range"]),
])
def test_layout_errors_are_one_line(shm_dir, args, words, capsys):
    from storlab.cli.main import main

    rc = main(["run", "--target", f"{shm_dir}/e.dat", "--size", "1m", "--rw", "write", "--no-store", "-q", *args])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    for w in words:
        assert w in err, err
