"""Tests of storlab.jobs.fiojob: the job files in tests/fixtures/fio exercise every translated fio
option (and the rejection of the rest); values must be canonical for the option table."""
from __future__ import annotations

from pathlib import Path

import pytest
from storlab.jobs.fiojob import FioJobError, parse_fio_size, parse_fio_time, translate
from storlab.jobs.options import parse_value

FIO = Path(__file__).parent / "fixtures" / "fio"
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
ENV = {"SIZE": "32m", "NUMJOBS": "3", "DIR": "/scratch"}


def groups(phases):
    return {g["name"]: g["options"] for p in phases for g in p["groups"]}


@pytest.mark.parametrize("name", sorted(p.name for p in FIO.glob("*.fio")
                                        if p.name not in ("unsupported.fio", "runtime-without-size.fio")))
def test_every_translated_value_is_canonical_for_the_option_table(name):
    phases = translate(FIO / name, environ=ENV)
    assert phases
    for phase in phases:
        assert phase["name"] == "+".join(g["name"] for g in phase["groups"])
        for g in phase["groups"]:
            for key, value in g["options"].items():
                assert parse_value(key, value) == value, (name, key, value)


def test_shared_file_clones_time_based_ramp_seed_and_sync_engine_depth():
    (phase,) = translate(FIO / "randread-shared-file.fio")
    (g,) = phase["groups"]
    assert g["name"] == "randread"
    assert g["options"] == {
        "target": ("/dev/shm/storlab-fio.dat",), "threads": 4, "thread_layout": "shared",
        "rw": "randread", "bs": 4 * KiB, "size": GiB, "engine": "psync",
        "qd": 1,                       # iodepth=16 means nothing to fio's psync
        "direct": True, "fsync_end": False, "seed": 42, "time": 10.0, "ramp": 2.0,
    }


def test_stonewall_phases_generated_file_names_and_concurrent_jobs():
    phases = translate(FIO / "stonewall-phases.fio")
    assert [p["name"] for p in phases] == ["write", "read", "randrw+randread-alongside"]
    g = groups(phases)
    assert g["write"]["target"] == ("/tmp/storlab-fio/write.0.0",)
    assert g["write"]["bs"] == MiB and g["write"]["fsync_end"] is True and g["write"]["fsync_every"] == 8
    assert g["read"]["rw"] == "read" and g["read"]["bs"] == MiB
    # numjobs without filename: one file per clone, named like fio does, one thread each
    assert g["randrw"]["target"] == ("/tmp/storlab-fio/randrw.0.0", "/tmp/storlab-fio/randrw.1.0")
    assert g["randrw"]["threads"] == 1
    assert g["randrw"]["rw"] == "randrw" and g["randrw"]["rwmix_read"] == 70   # rwmixwrite=30
    assert g["randread-alongside"]["rw"] == "randread"                         # randread:1 is neutral
    for opts in g.values():
        assert opts["engine"] == "io_uring" and opts["qd"] == 32 and opts["size"] == 64 * MiB


def test_sizes_follow_kb_base_and_times_their_suffixes():
    g = groups(translate(FIO / "sizes-and-times.fio"))
    a, b = g["binary-default"], g["decimal-kb-base"]
    assert a["bs"] == 64 * KiB and a["size"] == GiB
    assert a["offset"] == 1_000_000            # 1mi is decimal with the default kb_base=1024
    assert a["ramp"] == 0.5 and a["time"] == 120.0
    # runtime without time_based: fio stops at the first of the time and one pass over size
    assert a["io_size"] == GiB
    assert b["size"] == 10**9 and b["bs"] == 4096   # kb_base=1000: 1g decimal, 4KiB binary
    assert b["time"] == 3600.0 and "io_size" not in b


def test_null_engine_mix_fsync_buffered_and_random_seed():
    (phase,) = translate(FIO / "null-engine.fio")
    opts = phase["groups"][0]["options"]
    assert opts["engine"] == "null" and opts["qd"] == 8
    assert opts["rw"] == "randrw" and opts["rwmix_read"] == 70
    assert opts["bs"] == 8 * KiB and opts["direct"] is False
    assert opts["fsync_every"] == 16 and opts["time"] == 5.0
    # randrepeat=0: a new sequence every time
    other = translate(FIO / "null-engine.fio")[0]["groups"][0]["options"]
    assert opts["seed"] != other["seed"]


def test_environment_variables_expand():
    (phase,) = translate(FIO / "env-vars.fio", environ=ENV)
    opts = phase["groups"][0]["options"]
    assert opts["size"] == 32 * MiB
    assert opts["target"] == tuple(f"/scratch/random-writers.{n}.0" for n in range(3))


def test_unsupported_options_are_listed_together_with_their_sections():
    with pytest.raises(FioJobError) as e:
        translate(FIO / "unsupported.fio")
    msg = str(e.value)
    assert "\n" not in msg
    assert len(msg) <= 200 and msg.endswith("see docs/fio.md")
    # each unsupported option named once, in file order
    assert "not supported: zero_buffers, cpus_allowed" in msg
    assert msg.count("zero_buffers") == 1


def test_runtime_without_time_based_needs_a_size():
    with pytest.raises(FioJobError, match=r"\[dev\] runtime=30: .*give size"):
        translate(FIO / "runtime-without-size.fio")


@pytest.mark.parametrize("text, problem", [
    ("[j]\nfilename=/x\nrw=randread:4\n", "one request per random offset"),
    ("[j]\nfilename=/x\nrw=write:4k\n", "no holes between sequential requests"),
    ("[j]\nfilename=/x\ntime_based\n", "time_based: needs runtime"),
    ("[j]\nrw=read\n", "size: missing"),
    ("[j]\nfilename=/x\ndirect=2\n", "expected 0 or 1"),
    ("[j]\nfilename=-\n", "standard input"),
    ("[j]\nfilename=/x\nkb_base=512\n", "1000 or 1024"),
    ("[j]\nfilename=/x\nbs=4k-8k\n", "one block size per worker"),
    ("[j]\nfilename=/x\nruntime=10parsecs\n", "fio time"),
    ("[j]\nfilename=/x\nnumjobs=0\n", "at least 1"),
    ("[j]\nfilename=/x\nrwmixread=120\n", "0..100"),
    ("[j]\nfilename=/x\nrw=rw\nbs=4k,8k\n", "share one block size"),
    ("[j]\nfilename=/x\nrandom_distribution=zoned_abs:60/20g:40/100g\n", "zoned_abs is not supported"),
    ("[j]\nfilename=/x\nrandom_distribution=zipf:1:0.5:2\n", "random_distribution"),
    ("[j]\nfilename=/x\nnorandommap=2\n", "expected 0 or 1"),
    ("[j]\nfilename=/x\nsize=50%\n", "needs an existing file"),
    ("[j]\nfilename=/x\nblockalign=512\n", "only blockalign=bs"),
    ("[j]\nfilename=/x\nstartdelay=1-5\n", "one delay"),
    ("[j]\nfilename=/x\nsize=1m\nbssplit=4k/50:8k/40\n", "add up to 100"),
])
def test_bad_values_name_the_option_and_the_reason(text, problem):
    with pytest.raises(FioJobError, match=problem) as e:
        translate(text)
    assert "[j]" in str(e.value)


def test_random_map_and_distribution_translate_to_the_engine_options():
    text = ("[global]\nfilename=/x\nrw=randread\n[a]\nnorandommap\n"
            "[b]\nrandom_distribution=zipf:1.20:0.25\n[c]\nrandom_distribution=zoned:60/10:40/90\n")
    g = groups(translate(text))
    assert g["a"]["random_map"] is False and "random_distribution" not in g["a"]
    assert "random_map" not in g["b"] and g["b"]["random_distribution"] == "zipf:1.2:0.25"
    assert g["c"]["random_distribution"] == "zoned:60/10:40/90"


def test_global_sections_apply_only_below_them_and_jobs_override():
    text = ("[global]\nbs=8k\nsize=1m\n[a]\nfilename=/a\n[global]\nbs=16k\n"
            "[b]\nfilename=/b\n[c]\nfilename=/c\nbs=32k\n")
    g = groups(translate(text))
    assert (g["a"]["bs"], g["b"]["bs"], g["c"]["bs"]) == (8 * KiB, 16 * KiB, 32 * KiB)
    assert len(translate(text)) == 1             # no stonewall: all three run at once


def test_stonewall_in_global_gives_each_job_its_own_phase_and_name_overrides():
    text = "[global]\nstonewall\nfilename=/f\n[a]\n[b]\nname=second\n"
    phases = translate(text)
    assert [p["name"] for p in phases] == ["a", "second"]


def test_later_setting_wins_for_direct_buffered_and_rwmix():
    g = groups(translate("[j]\nfilename=/x\nrw=rw\ndirect=1\nbuffered=1\nrwmixwrite=10\nrwmixread=40\n"))
    assert g["j"]["direct"] is False and g["j"]["rwmix_read"] == 40
    g = groups(translate("[j]\nfilename=/x\nrw=rw\nbuffered=1\ndirect=1\nrwmixread=40\nrwmixwrite=10\n"))
    assert g["j"]["direct"] is True and g["j"]["rwmix_read"] == 90


def test_comments_aliases_and_accepted_no_effect_options():
    text = ("; comment\n# another\n[j]  \nfilename=/x ; trailing comment\nreadwrite=write\n"
            "blocksize=2k\nio_limit=1m\ngroup_reporting\nthread\nnew_group\ndescription=hello\n")
    opts = groups(translate(text))["j"]
    assert opts["rw"] == "write" and opts["bs"] == 2 * KiB and opts["io_size"] == MiB
    assert opts["target"] == ("/x",)


def test_directory_prefixes_a_relative_filename_only():
    g = groups(translate("[a]\ndirectory=/d\nfilename=f\n[b]\ndirectory=/d\nfilename=/abs\n"))
    assert g["a"]["target"] == ("/d/f",) and g["b"]["target"] == ("/abs",)


def test_structural_errors():
    with pytest.raises(FioJobError, match="outside any"):
        translate("; x\nrw=read\n[j]\n")
    with pytest.raises(FioJobError, match="defines no job"):
        translate("[global]\nrw=read\n")
    with pytest.raises(FioJobError, match="cannot read"):
        translate(FIO / "does-not-exist.fio")


@pytest.mark.parametrize("text, kb_base, expected", [
    ("4096", 1024, 4096), ("4k", 1024, 4096), ("4K", 1024, 4096), ("4kb", 1024, 4096),
    ("4KB", 1024, 4096), ("1m", 1024, MiB), ("1g", 1024, GiB), ("1t", 1024, 1 << 40),
    ("1mi", 1024, 10**6), ("1000ki", 1024, 10**6), ("1MiB", 1024, 10**6),
    ("4ki", 1000, 4096), ("4KiB", 1000, 4096), ("1m", 1000, 10**6), ("1g", 1000, 10**9),
    ("0x1000", 1024, 4096), ("1.5k", 1024, 1536), ("512b", 1024, 512),
])
def test_fio_size_rules(text, kb_base, expected):
    assert parse_fio_size(text, kb_base) == expected


@pytest.mark.parametrize("text, seconds", [
    ("30", 30.0), ("10s", 10.0), ("10sec", 10.0), ("500ms", 0.5), ("500msec", 0.5),
    ("250us", 250e-6), ("250usec", 250e-6), ("2m", 120.0), ("1h", 3600.0), ("1d", 86400.0),
    ("2M", 120.0),
])
def test_fio_time_rules(text, seconds):
    assert parse_fio_time(text) == pytest.approx(seconds)


def test_fio_parse_errors():
    with pytest.raises(ValueError, match="suffix"):
        parse_fio_size("4q")
    with pytest.raises(ValueError, match="percentage needs an existing"):
        parse_fio_size("50%")
    with pytest.raises(ValueError, match="whole number"):
        parse_fio_size("1.5")
    with pytest.raises(ValueError, match="fio time"):
        parse_fio_time("3 weeks")
