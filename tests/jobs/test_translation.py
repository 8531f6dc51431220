"""Tests of storlab.jobs.translation, the shape every translator shares: the Refusal's one line,
TOML writing, flags written into an emitted job, and a storlab rule's error traced back to the
source key. (Every registered translator's faces: tests/jobs/test_translators.py.)"""
from __future__ import annotations

import pytest
from storlab.jobs.job import core_spec
from storlab.jobs.tomlfile import read_toml
from storlab.jobs.translation import MAX_REFUSAL, Mapped, Refusal, Translation, to_toml


def test_refusal_wording_with_and_without_a_line_or_a_value():
    assert str(Refusal("fio", "/a/job.fio", 7, "bs", "4k-8k", "one size")) == "fio job.fio:7: bs = 4k-8k: one size"
    assert str(Refusal("darshan", "/a/x.darshan", None, "POSIX_OPENS", 3, "why")) == "darshan x.darshan: POSIX_OPENS = 3: why"
    assert str(Refusal("fio", "<text>", 2, "thread", "", "why")) == "fio <text>:2: thread: why"


def test_a_long_refusal_shortens_its_reason_before_it_drops_a_key():
    more = ["cpus_allowed", "nice", "prio", "zonemode", "exitall", "cgroup", "uid"]
    msg = str(Refusal("fio", "job.fio", 3, "zero_buffers", "1", "not supported: " + "x" * 150, more))
    assert len(msg) <= MAX_REFUSAL and "\n" not in msg
    assert msg.startswith("fio job.fio:3: zero_buffers = 1: not supported: x") and "…; also: " in msg
    assert msg.endswith("; also: " + ", ".join(more))
    many = [f"option_{i}" for i in range(40)]
    msg = str(Refusal("fio", "job.fio", 3, "zero_buffers", "1", "short", many))
    assert len(msg) <= MAX_REFUSAL and msg.endswith(" more)") and "option_0, option_1" in msg


def test_toml_writes_tables_after_values_and_leaves_out_none(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text(to_toml({"invalidate": False, "note": None, "phase": [{"name": "w", "group": [
        {"name": "a", "target": ["/x"], "bs": 4096, "time": 1.5, "rw": "write"}]}]}))
    assert read_toml(str(path), "job file") == {"invalidate": False, "phase": [{"name": "w", "group": [
        {"name": "a", "target": ["/x"], "bs": 4096, "time": 1.5, "rw": "write"}]}]}


JOB = {"phase": [{"name": "r", "group": [{"name": "a", "target": ["/x"], "size": 1 << 20, "rw": "read"},
                                          {"name": "b", "target": ["/y"], "size": 1 << 20, "rw": "randread"}]}]}


def test_flags_given_beside_a_translation_go_where_they_resolve():
    tr = Translation("fio", "j.fio", "0" * 64, JOB)
    flagged = tr.with_options({"bs": "64k", "passes": "2", "fio": "j.fio"})
    assert flagged.job["passes"] == "2" and "fio" in flagged.job          # run options at the top
    assert [g["bs"] for g in flagged.job["phase"][0]["group"]] == ["64k", "64k"]
    assert "bs" not in JOB["phase"][0]["group"][0]                         # the original is untouched
    a = flagged.resolve()
    b = tr.resolve({"bs": "64k", "passes": "2"})
    assert [core_spec(p) for p in a.phases] == [core_spec(p) for p in b.phases] and a.run["passes"] == 2


def test_a_storlab_rule_refused_at_resolution_names_the_source_key():
    job = {"phase": [{"name": "r", "group": [{"name": "a", "target": ["/x"], "size": 1 << 20,
                                              "rate": "1m", "rate_min": "2m"}]}]}
    mapped = [Mapped("rate", "1m", "rate", line=3), Mapped("rate_min", "2m", "rate_min (floor)", line=4)]
    with pytest.raises(Refusal) as e:
        Translation("fio", "j.fio", "0" * 64, job, mapped).resolve()
    assert str(e.value).startswith("fio j.fio:4: rate_min = 2m: the floor of the read direction is above its cap")
    with pytest.raises(Exception) as e:      # without a record of where it came from: the rule's own line
        Translation("fio", "j.fio", "0" * 64, job).resolve()
    assert not isinstance(e.value, Refusal) and "rate_min" in str(e.value)


def test_emit_writes_into_a_fifo_or_device_in_place(tmp_path):
    """--emit /dev/null (or a FIFO) writes through it: renaming a file over it, as a regular file
    is written, would replace the node with a file."""
    import os
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    Translation("fio", "x.fio", "0" * 64, {"bs": 4096}).emit(str(fifo))
    reader.join(5)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and "bs = 4096" in got[0]
    assert not list(tmp_path.glob("pipe.tmp-*"))
