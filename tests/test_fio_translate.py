"""Tests of the fio translator (storlab.jobs.fio: parse, map, translator): the job files in
tests/fixtures/fio exercise every translated fio option (and the refusal of the rest, in the shared
one-line wording of jobs/translation.py); values must be canonical for the option table. The faces
every translator shares (emit, record, refusal) are tested for fio with the other formats in
tests/jobs/test_translators.py."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from storlab.jobs.fio import translator
from storlab.jobs.fio.parse import FioJobError, parse_fio_size, parse_fio_time
from storlab.jobs.options import parse_value
from storlab.jobs.translation import Refusal

FIO = Path(__file__).parent / "fixtures" / "fio"
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
ENV = {"SIZE": "32m", "NUMJOBS": "3", "DIR": "/scratch"}


def translate(path_or_text, environ=None):
    """The fio jobs as map.py's phases `[{"name", "groups": [{"name", "options"}]}]`."""
    return translator.translate(path_or_text, environ=environ).plan.phases


def groups(phases):
    return {g["name"]: g["options"] for p in phases for g in p["groups"]}


ONE_REFUSAL = re.compile(r"^fio (<text>|[\w.-]+):\d+: [\w.]+( = .+?)?: \S")


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


def test_unsupported_options_are_listed_together_with_their_lines():
    with pytest.raises(Refusal) as e:
        translate(FIO / "unsupported.fio")
    msg = str(e.value)
    assert "\n" not in msg
    assert len(msg) <= 200
    # the first in full (file, line, key, why, where to read more), each other option once
    assert msg.startswith("fio unsupported.fio:3: exitall: not supported (docs/fio.md): ")
    assert msg.endswith("; also: numa_cpu_nodes")
    assert msg.count("exitall") == 1
    assert (e.value.key, e.value.line, e.value.more) == ("exitall", 3, ["numa_cpu_nodes"])


def test_runtime_without_time_based_needs_a_size():
    with pytest.raises(Refusal, match=r"^fio runtime-without-size.fio:5: runtime = 30: .*give size"):
        translate(FIO / "runtime-without-size.fio")


@pytest.mark.parametrize("text, problem", [
    ("[j]\nfilename=/x\nrw=randread:4\n", "one request per random offset"),
    ("[j]\nfilename=/x\nrw=read:x8k\n", r"rw = read:x8k: modifier :x8k is not a size"),
    ("[j]\nfilename=/x\ntime_based\n", "time_based: needs runtime"),
    ("[j]\nrw=read\n", "size: missing"),
    ("[j]\nfilename=/x\ndirect=2\n", "expected 0 or 1"),
    ("[j]\nfilename=-\n", "standard input"),
    ("[j]\nfilename=/x\nkb_base=512\n", "1000 or 1024"),
    ("[j]\nfilename=/x\nruntime=10parsecs\n", "fio time"),
    ("[j]\nfilename=/x\nnumjobs=0\n", "at least 1"),
    ("[j]\nfilename=/x\nrwmixread=120\n", "0..100"),
    ("[j]\nfilename=/x\nrandom_distribution=zoned_abs:60/20g:40/100g\n", "zoned_abs is not supported"),
    ("[j]\nfilename=/x\nrandom_distribution=zipf:1:0.5:2\n", "random_distribution"),
    ("[j]\nfilename=/x\nnorandommap=2\n", "expected 0 or 1"),
    ("[j]\nfilename=/x\nsize=50%\n", "needs an existing file"),
    ("[j]\nfilename=/x\nblockalign=512,4k\n", "give one value"),
    ("[j]\nfilename=/x\nbsrange=4k\n", "not MIN-MAX"),
    ("[j]\nfilename=/x\nstartdelay=1-5\n", "one delay"),
    ("[j]\nfilename=/x\nsize=1m\nbssplit=4k/50:8k/40\n", "add up to 100"),
])
def test_bad_values_name_the_option_and_the_reason(text, problem):
    with pytest.raises(Refusal, match=problem) as e:
        translate(text)
    msg = str(e.value)
    assert ONE_REFUSAL.match(msg) and len(msg) <= 200 and "\n" not in msg, msg
    # the line named is the key's own (a key the job lacks: its section's)
    line = text.splitlines()[e.value.line - 1]
    assert line == "[j]" if e.value.key == "size" and "missing" in msg else line.startswith(e.value.key)


def test_rw_modifier_of_a_sequential_pattern_is_the_hole_skipped_after_each_request():
    g = groups(translate("[global]\nfilename=/x\nsize=1m\n[a]\nrw=read:8k\n[b]\nrw=trim:4k\n"
                         "[c]\nrw=write:0\n[d]\nrw=randread:1\n[e]\nrw=read:8k\nrw_sequencer=identical\n"))
    assert g["a"]["seq_hole"] == 8192 and g["a"]["rw"] == "read"
    assert g["b"]["seq_hole"] == 4096 and g["b"]["rw"] == "trim"
    assert "seq_hole" not in g["c"] and "seq_hole" not in g["d"]
    # fio reads rw_sequencer only for random patterns' N
    assert g["e"]["seq_hole"] == 8192


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


def test_directory_prefixes_every_filename_as_fio_joins_them():
    """fio's add_file puts `directory` + "/" in front of any filename, an absolute one too: a job
    with directory=/scratch and filename=/data/f writes /scratch/data/f, never /data/f. A `:` list
    of directories is dealt to the clones."""
    g = groups(translate("[a]\ndirectory=/d\nfilename=f\n[b]\ndirectory=/d\nfilename=/abs\n"
                         "[c]\ndirectory=/d1:/d2\nfilename=x\nnumjobs=2\n"))
    assert g["a"]["target"] == ("/d/f",) and g["b"]["target"] == ("/d/abs",)
    assert sorted(t for name, v in g.items() if name.startswith("c") for t in v["target"]) == ["/d1/x", "/d2/x"]


def test_directory_and_an_absolute_filename_name_the_file_fio_writes(tmp_path):
    fio = shutil.which("fio")
    if fio is None:
        pytest.skip("fio is not installed")
    folder, name = tmp_path / "dir", str(tmp_path / "abs.dat")
    folder.mkdir()
    subprocess.run([fio, "--name=j", f"--directory={folder}", f"--filename={name}", "--size=4k", "--rw=write",
                    "--output=/dev/null"], check=True, timeout=60)
    written = [str(p) for p in folder.rglob("*") if p.is_file()]
    g = groups(translate(f"[j]\ndirectory={folder}\nfilename={name}\nsize=4k\nrw=write\n"))
    assert list(g["j"]["target"]) == written == [f"{folder}{name}"]


def test_structural_errors():
    with pytest.raises(Refusal, match=r"^fio <text>:2: rw = read: outside any \[section\]"):
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


def test_docs_fio_option_table_is_current():
    from storlab.jobs.fio.options import render_table

    page = (Path(__file__).parent.parent / "docs" / "fio.md").read_text()
    assert render_table() in page, ("docs/fio.md is out of date: "
                                    "PYTHONPATH=python python3 -m storlab.jobs.fio.options --write docs/fio.md")


# -- fio's command line, refusals and the semantics storlab fio added ------------------------------
from storlab.jobs.fio.cmdline import parse_command_line, show_command  # noqa: E402
from storlab.jobs.fio.map import translate_sections  # noqa: E402
from storlab.jobs.fio.options import FIO_OPTIONS, REFUSED_ENGINES  # noqa: E402


def _cmd(*argv):
    cmd = parse_command_line(list(argv), environ={})
    return translate_sections(cmd.sections, cmd.source, cmd.only or None), cmd


def test_command_line_forms_globals_and_several_name_jobs():
    tr, _ = _cmd("--filename=/tmp/x", "-size", "1m", "-thread", "--name=a", "-rw=write",
                 "-iodepth", "4", "-ioengine", "libaio", "--name", "b", "--bs=8k")
    g = groups(tr.phases)
    assert g["a"]["rw"] == "write" and g["a"]["qd"] == 4 and g["a"]["engine"] == "io_uring"
    assert g["b"]["rw"] == "read" and g["b"]["bs"] == 8 * KiB and g["b"]["size"] == MiB
    assert "libaio → io_uring: same asynchronous queue-depth semantics" in tr.notes


def test_command_line_globals_apply_to_job_files_and_section_picks_jobs():
    tr, cmd = _cmd("--directory=/scratch", str(FIO / "stonewall-phases.fio"), "--section=read",
                   "--output-format=json", "--output=/tmp/o.json")
    assert cmd.output_format == "json" and cmd.output == "/tmp/o.json"
    (phase,) = tr.phases
    assert phase["groups"][0]["options"]["target"] == ("/tmp/storlab-fio/read.0.0",)  # the file's own directory wins


def test_command_line_output_formats_and_unknown_options():
    assert parse_command_line(["--minimal", "--name=a"]).output_format == "terse"
    assert parse_command_line(["--output-format=json+", "--name=a"]).output_format == "json"
    with pytest.raises(FioJobError, match="one format at a time"):
        parse_command_line(["--output-format=normal,json", "--name=a"])
    with pytest.raises(FioJobError, match="use normal, json, json\\+ or terse"):
        parse_command_line(["--output-format=csv", "--name=a"])
    with pytest.raises(Refusal, match="^fio command line: frobnicate = 1: not a fio option"):
        parse_command_line(["--name=a", "--frobnicate=1"])


def test_showcmd_echoes_the_jobs_as_one_command_line():
    cmd = parse_command_line(["--size=1m", "--name=a", "-rw", "write", "-thread"], environ={})
    assert show_command(cmd.sections) == "fio --size=1m --name=a --rw=write --thread"


def test_refusal_is_one_line_of_at_most_200_characters_naming_each_option_once():
    text = "[global]\nfilename=/x\n" + "".join(f"[j{i}]\nnuma_cpu_nodes=1\nnice=1\nprio=2\n"
                                              f"zonemode=zbd\nexitall\ncgroup=x\nuid=1\n" for i in range(20))
    with pytest.raises(Refusal) as e:
        translate(text)
    msg = str(e.value)
    assert len(msg) <= 200 and "\n" not in msg and "(docs/fio.md)" in msg
    assert msg.startswith("fio <text>:4: numa_cpu_nodes = 1: not supported (docs/fio.md)")
    for name in ("numa_cpu_nodes", "nice", "prio", "zonemode", "exitall", "cgroup", "uid"):
        assert len(re.findall(rf"\b{name}\b", msg)) == 1, (name, msg)


@pytest.mark.parametrize("engine", sorted(REFUSED_ENGINES))
def test_engines_storlab_does_not_do_are_refused_in_one_short_line(engine):
    with pytest.raises(Refusal) as e:
        translate(f"[j]\nioengine={engine}\nfilename=/x\n")
    msg = str(e.value)
    assert len(msg) <= 200 and msg.startswith(f"fio <text>:2: ioengine = {engine}: not supported (docs/fio.md)")


def test_sync_engines_map_to_psync_and_libaio_to_io_uring():
    g = groups(translate("[a]\nfilename=/x\nioengine=sync\niodepth=8\n[b]\nfilename=/x\n"
                         "ioengine=posixaio\niodepth=8\n"))
    assert (g["a"]["engine"], g["a"]["qd"]) == ("psync", 1)
    assert (g["b"]["engine"], g["b"]["qd"]) == ("io_uring", 8)


def test_null_engine_names_no_file_of_its_own():
    (g,) = translate("[n]\nioengine=null\nfilename=/tmp/should-not-exist\nsize=1m\n")[0]["groups"]
    assert g["options"]["target"] == () and g["options"]["engine"] == "null"


def test_file_engines_become_meta_phases_with_concurrent_jobs_added_up():
    text = "[global]\nioengine=filecreate\nnrfiles=100\nfilesize=4k\n[t0]\n[t1]\n[t2]\n"
    (phase,) = translate(text)
    assert phase["type"] == "meta" and phase["threads"] == 3 and phase["files"] == 100
    assert phase["phases"] == "create"


def test_unset_environment_variable_is_an_error_like_fios():
    with pytest.raises(Refusal, match=r"^fio env-vars.fio:\d+: size = \$\{SIZE\}: environment variable SIZE is not set"):
        translate(FIO / "env-vars.fio", environ={})


def test_keywords_and_arithmetic_expand():
    g = groups(translate("[j]\nfilename=/x\nsize=(1024*4)k\nbs=$pagesize\n"))
    assert g["j"]["size"] == 4 * MiB and g["j"]["bs"] == os.sysconf("SC_PAGE_SIZE")


def test_include_reads_the_file_in_place(tmp_path):
    (tmp_path / "common.fio").write_text("bs=16k\nsize=2m\n")
    (tmp_path / "job.fio").write_text("[global]\ninclude common.fio\n[j]\nfilename=/x\n")
    assert groups(translate(tmp_path / "job.fio"))["j"]["bs"] == 16 * KiB


def test_loops_number_ios_and_offset_increment():
    g = groups(translate("[a]\nfilename=/x\nsize=1m\nloops=3\n[b]\nfilename=/x\nsize=1m\nbs=8k\n"
                         "number_ios=10\n[c]\nfilename=/x\nsize=1m\nnumjobs=2\noffset_increment=1m\n"))
    assert g["a"]["io_size"] == 3 * MiB
    assert g["b"]["io_size"] == 80 * KiB
    assert (g["c"]["offset"] if "offset" in g["c"] else 0) == 0 and g["c.1"]["offset"] == MiB


def test_size_percentage_of_an_existing_file(tmp_path):
    f = tmp_path / "data"
    f.write_bytes(b"\0" * 4 * MiB)
    g = groups(translate(f"[j]\nfilename={f}\nsize=25%\noffset=50%\n"))
    assert g["j"]["size"] == MiB and g["j"]["offset"] == 2 * MiB


def test_verify_kinds_map_to_crc32c_with_a_note():
    cmd = parse_command_line(["--name=v", "--filename=/x", "--rw=write", "--verify=md5",
                              "--do_verify=0"], environ={})
    tr = translate_sections(cmd.sections, cmd.source)
    opts = tr.phases[0]["groups"][0]["options"]
    assert opts["verify"] == "crc32c" and opts["verify_readback"] is False
    assert any(n.startswith("verify=md5 → crc32c") for n in tr.notes)


def test_invalidate_is_a_run_option():
    cmd = parse_command_line(["--name=v", "--filename=/x", "--invalidate=0"], environ={})
    assert translate_sections(cmd.sections, cmd.source).run == {"invalidate": False}


def test_every_table_row_has_a_known_status():
    assert {o.status for o in FIO_OPTIONS.values()} == {"mapped", "accepted", "refused"}


def test_zoned_blanks_are_filled_as_fio_fills_them():
    g = groups(translate("[j]\nfilename=/x\nrw=randread\nrandom_distribution=zoned:50/5:30/15:20/\n"))
    assert g["j"]["random_distribution"] == "zoned:50/5:30/15:20/80"


def test_log_options_stand_alone_or_take_a_prefix():
    cmd = parse_command_line(["--name=j", "--filename=/x", "--write_bw_log", "--write_iops_log=pre",
                              "--log_avg_msec=500"], environ={})
    tr = translate_sections(cmd.sections, cmd.source)
    assert tr.jobs[0].logs == {"bw": "j", "iops": "pre"}
    assert tr.phases[0]["groups"][0]["options"]["interval"] == 0.5


def test_set_only_flags_never_take_the_next_word_and_value_options_always_do():
    """fio's getopt: FIO_OPT_STR_SET options (time_based, zero_buffers, bs_unaligned, exitall ...)
    take a value only as `--opt=val`; every other option takes the next word, so `-direct 1` is
    direct=1 and `--time_based job.fio` a flag and a job file. A boolean that may stand alone,
    followed by another option, stands alone."""
    cmd = parse_command_line(["--name=j", "--bs_unaligned", "--size=64m", "--zero_buffers", "--bs=1m",
                              "--exitall", "--stonewall", "--time_based", "--runtime=1"], environ={})
    keys = {st.key: st.value for st in cmd.sections[0].settings}
    assert keys["size"] == "64m" and keys["bs"] == "1m" and keys["runtime"] == "1"
    assert keys["blocksize_unaligned"] is None and keys["zero_buffers"] is None and keys["exitall"] is None
    tr, _ = _cmd("-name=j", "-filename=/x", "-direct", "1", "-rw", "randread", "-thread", "-group_reporting",
                 "-end_fsync", "--size=1m")
    assert groups(tr.phases)["j"]["direct"] is True and groups(tr.phases)["j"]["size"] == MiB
    cmd = parse_command_line(["--name=j", "--time_based", str(FIO / "stonewall-phases.fio")], environ={})
    assert cmd.files == [str(FIO / "stonewall-phases.fio")]
    with pytest.raises(FioJobError, match="--iodepth needs a value"):
        parse_command_line(["--name=j", "--iodepth"], environ={})


@pytest.mark.parametrize("setting", ["--hipri=0", "--zero_buffers=0", "--exitall=false",
                                     "--nice=0", "--zonemode=none"])
def test_a_refused_option_at_fios_default_runs(setting):
    tr, _ = _cmd("--name=j", "--filename=/x", "--rw=randread", "--size=1m", setting)
    assert groups(tr.phases)["j"]["rw"] == "randread"


@pytest.mark.parametrize("setting", ["--hipri", "--hipri=1", "--exitall", "--zonemode=zbd"])
def test_the_same_options_asking_for_something_are_refused(setting):
    with pytest.raises(Refusal, match=setting.lstrip("-").split("=")[0]):
        _cmd("--name=j", "--filename=/x", "--rw=randread", "--size=1m", setting)


@pytest.mark.parametrize("value,mode", [("1", "sync"), ("sync", "sync"), ("true", "sync"), ("dsync", "dsync"),
                                        ("0", None), ("none", None)])
def test_sync_opens_the_files_with_o_sync_or_o_dsync(value, mode):
    """fio's sync: a boolean before fio 3.36 (1: O_SYNC), then none|sync|dsync."""
    tr, _ = _cmd("--name=j", "--filename=/x", "--rw=write", "--size=1m", f"--sync={value}")
    assert groups(tr.phases)["j"].get("open_sync") == mode


def test_a_bad_sync_value_is_refused_naming_the_allowed_ones():
    with pytest.raises(Refusal, match=r"sync = fsync: .*none, sync, dsync, 0 or 1"):
        _cmd("--name=j", "--filename=/x", "--rw=write", "--size=1m", "--sync=fsync")


def test_cpus_allowed_cpumask_and_policy_pin_the_threads():
    g = groups(_cmd("--name=j", "--filename=/x", "--size=1m", "--cpus_allowed=0-1", "--cpus_allowed_policy=split")[0].phases)
    assert g["j"]["cpus"] == "0-1" and g["j"]["cpus_policy"] == "split"
    assert groups(_cmd("--name=j", "--filename=/x", "--size=1m", "--cpumask=0x5")[0].phases)["j"]["cpus"] == "0,2"
    with pytest.raises(Refusal, match="cpus_allowed_policy = spread: 'spread' is not allowed; use shared or split"):
        _cmd("--name=j", "--filename=/x", "--size=1m", "--cpus_allowed_policy=spread")
    with pytest.raises(Refusal, match="cpumask = zz: 'zz' is not a CPU bit mask"):
        _cmd("--name=j", "--filename=/x", "--size=1m", "--cpumask=zz")


def test_rate_process_poisson_spaces_the_cap_as_a_poisson_process():
    g = groups(_cmd("--name=j", "--filename=/x", "--size=1m", "--rate_iops=500", "--rate_process=poisson")[0].phases)
    assert g["j"]["rate_process"] == "poisson" and g["j"]["rate_iops"] == (500, 500, 500)
    assert "rate_process" not in groups(_cmd("--name=j", "--filename=/x", "--size=1m", "--rate_iops=500",
                                             "--rate_process=linear")[0].phases)["j"]
    with pytest.raises(Refusal, match="rate_process = burst"):
        _cmd("--name=j", "--filename=/x", "--size=1m", "--rate_iops=500", "--rate_process=burst")


def test_zero_buffers_and_buffer_pattern_set_the_written_bytes():
    """zero_buffers: 0x00 and, as in fio, no scrambling unless scramble_buffers is given;
    buffer_pattern: fio's hex, quoted and decimal parts joined with |, written as given (fio's
    buffer_pattern turns scramble_buffers off) unless scramble_buffers=1 comes after it."""
    g = groups(_cmd("--name=j", "--filename=/x", "--size=1m", "--rw=write", "--zero_buffers")[0].phases)["j"]
    assert g["buffer_pattern"] == "0x00" and g["scramble"] is False
    g = groups(_cmd("--name=j", "--filename=/x", "--size=1m", "--rw=write", "--zero_buffers",
                    "--scramble_buffers=1")[0].phases)["j"]
    assert g["buffer_pattern"] == "0x00" and g["scramble"] is True
    g = groups(_cmd("--name=j", "--filename=/x", "--size=1m", "--rw=write",
                    "--buffer_pattern=0xdeadbeef|'ab'")[0].phases)["j"]
    assert g["buffer_pattern"] == "0xdeadbeef6162" and g["scramble"] is False
    g = groups(_cmd("--name=j", "--filename=/x", "--size=1m", "--rw=write", "--scramble_buffers=1",
                    "--buffer_pattern=0xdeadbeef")[0].phases)["j"]
    assert g["scramble"] is False, "fio's buffer_pattern resets an earlier scramble_buffers"
    g = groups(_cmd("--name=j", "--filename=/x", "--size=1m", "--rw=write", "--buffer_pattern=0xdeadbeef",
                    "--scramble_buffers=1")[0].phases)["j"]
    assert g["scramble"] is True
    with pytest.raises(Refusal, match="buffer_pattern = 0xzz: '0xzz' is not a hex number"):
        _cmd("--name=j", "--filename=/x", "--size=1m", "--rw=write", "--buffer_pattern=0xzz")


def test_engine_refusal_comes_before_an_unset_variable():
    with pytest.raises(Refusal, match=r"ioengine = rdma: not supported \(docs/fio.md\): storlab reads files"):
        translate("[j]\nioengine=rdma\nhostname=${HOST_UNSET}\n", environ={})


def test_overwrite_lays_the_files_out_in_a_phase_before_every_job():
    phases = translate("[global]\nfilename=/tmp/x\nsize=1m\n[a]\nrw=randwrite\noverwrite=1\n[b]\nrw=read\n")
    assert [p["name"] for p in phases] == ["layout", "a+b"]
    (lay,) = phases[0]["groups"]
    assert lay["options"]["rw"] == "write" and lay["options"]["target"] == ("/tmp/x",)
    assert lay["options"]["size"] == MiB and lay["options"]["fsync_end"] is True


@pytest.mark.parametrize("value,preallocate", [("none", False), ("0", False), ("posix", None), ("native", None),
                                               ("keep", None), ("1", None)])
def test_fallocate_none_turns_preallocation_off(value, preallocate):
    tr = translate(f"[j]\nfilename=/x\nsize=1m\nrw=write\nfallocate={value}\n")
    assert groups(tr)["j"].get("preallocate") == preallocate


def test_what_only_storlab_fio_does_is_refused_by_translate_not_dropped():
    with pytest.raises(Refusal, match=r"^fio <text>:4: unlink = 1: only `storlab fio` does this after the run: "
                                      r"run it with `storlab fio`; also: write_bw_log$"):
        translate("[j]\nfilename=/x\ninvalidate=0\nunlink=1\nwrite_bw_log=p\n")
    assert translate("[j]\nfilename=/x\nunlink=0\n")
    # invalidate is a run option of storlab's job: storlab run honours it
    assert translator.translate("[j]\nfilename=/x\ninvalidate=0\n").job["invalidate"] is False


# -- --target over a fio job with numjobs ------------------------------------------------------
NUMJOBS = "[global]\nsize=8m\nrw=read\nbs=4k\n[job]\nnumjobs=3\n"


def test_target_keeps_the_numjobs_clones_sharing_the_file_as_fio_filename_does(tmp_path, shm_dir, capsys):
    """`storlab run --fio F --target X` used to drop numjobs: 3 clones became 1 worker on X. fio with
    filename=X runs all 3 clones on X, each over the whole size."""
    import json

    from storlab.cli.main import main

    job = tmp_path / "nj.fio"
    job.write_text(NUMJOBS)
    out = tmp_path / "r.json"
    target = os.path.join(shm_dir, "shared.dat")
    assert main(["run", "--fio", str(job), "--target", target, "--no-store", "--quiet", "--json", str(out)]) == 0
    phase = json.loads(out.read_text())["phases"][0]
    assert [w["target"] for w in phase["workers"]] == [target] * 3
    assert phase["read"]["bytes"] == 3 * (8 << 20)


def test_target_count_that_does_not_divide_the_clones_is_refused_in_one_line(tmp_path, shm_dir, capsys):
    from storlab.cli.main import main

    job = tmp_path / "nj.fio"
    job.write_text(NUMJOBS)
    code = main(["run", "--fio", str(job), "--target", os.path.join(shm_dir, "a"), "--target",
                 os.path.join(shm_dir, "b"), "--no-store", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0
    assert "job 'job' runs 3 clones (numjobs); give 1 target for them to share, or 3, one each" in err


def test_a_combination_storlabs_rules_refuse_is_named_at_the_fio_line():
    tr = translator.translate("[j]\nfilename=/x\nsize=1m\nrate=1m\nrate_min=2m\n")
    with pytest.raises(Refusal, match=r"^fio <text>:5: rate_min = 2m: the floor of the read direction is above its cap"):
        tr.resolve()


def test_sizes_per_direction_bsrange_and_blockalign_translate_to_the_engine():
    g = groups(translate("[j]\nfilename=/x\nsize=1m\nrw=randrw\nbs=4k,8k\n"))["j"]
    assert (g["bs"], g["bssplit"]) == (4096, "4k,8k,8k")
    g = groups(translate("[j]\nfilename=/x\nsize=1m\nrw=randread\nbsrange=1k:16k\nba=1k\n"))["j"]
    assert (g["bsrange"], g["blockalign"]) == ("1k-16k", 1024)
    # the held-out real-world command: time-based, sizes drawn per request
    g = groups(translate("[j]\nfilename=/x\nsize=1g\nrw=randrw\nbssplit=4k/50:64k/30:1m/20\n"
                         "time_based\nruntime=10\n"))["j"]
    assert g["bssplit"] == "1m/20:64k/30:4k/50" and g["time"] == 10
    # a range of one size (fio's tiobench example: bsrange=4k-4k) is a fixed size that resolves
    # into a job; one size alone is not a range, and fio refuses it too
    tr = translator.translate("[j]\nfilename=/x\nsize=1m\nrw=write\nbsrange=4k-4k\n")
    assert groups(tr.plan.phases)["j"]["bsrange"] == "4k-4k"
    assert tr.resolve().phases[0].groups[0].values["bsrange"] == "4k-4k"
    with pytest.raises(Refusal, match=r"bsrange = 4k: '4k' is not MIN-MAX \(fio refuses"):
        translate("[j]\nfilename=/x\nsize=1m\nbsrange=4k\n")


def job_phases(text):
    """The translated job's `[[phase]]` tables (with a phase's own steady-state options)."""
    return translator.translate(text).job["phase"]


def test_steady_state_options_map_to_their_phases_ss():
    tr = translator.translate("[j]\nfilename=/x\nsize=1m\nrw=randread\ntime_based\nruntime=60\n"
                              "ss=iops_slope:0.3%\nss_dur=20\nss_ramp=5\nss_interval=2\n")
    phase = tr.job["phase"][0]
    assert (phase["ss"], phase["ss_dur"], phase["ss_ramp"], phase["ss_interval"]) == ("iops_slope:0.3%", 20.0, 5.0, 2.0)
    assert "ss" not in tr.job   # nothing at the run level
    assert tr.resolve().settings_of(tr.resolve().phases[0])["ss_interval"] == 2.0
    # lat (fio's mean completion latency), its bare number in microseconds as fio parses it
    assert job_phases("[j]\nfilename=/x\nsize=1m\nss=lat:500\nss_dur=10\n")[0]["ss"] == "lat:500us"
    with pytest.raises(Refusal, match=r"ss = lat:x: .lat:x. is not allowed; use iops:L, bw:L, lat:L"):
        translate("[j]\nfilename=/x\nsize=1m\nss=lat:x\nss_dur=10\n")
    # fio's defaults: ss_dur 0 turns the check off; ss_dur alone judges iops_slope:0.01%
    assert "ss" not in job_phases("[j]\nfilename=/x\nsize=1m\nss=iops:1%\n")[0]
    assert job_phases("[j]\nfilename=/x\nsize=1m\nss_dur=10\n")[0]["ss"] == "iops_slope:0.01%"
    # a window of fewer than two samples is named at its line
    with pytest.raises(Refusal, match=r":5: steadystate_duration = 5: 5 s holds fewer than 2 samples"):
        translate("[j]\nfilename=/x\nsize=1m\nss=iops:1%\nsteadystate_duration=5\nss_interval=10\n")


def test_stonewalled_jobs_judge_their_own_steady_state(tmp_path):
    """fio's examples/steadystate.fio: two jobs between stonewalls, each with its own criterion,
    window and ramp, become two phases each with its own check."""
    text = ("[global]\nthreads=1\ngroup_reporting\ntime_based\nsize=1m\nruntime=60\n"
            "[w]\nfilename=/dev/null\nrw=write\nbs=128k\nnumjobs=4\nss=iops:10%\nss_dur=30s\nss_ramp=10s\n"
            "[r]\nnew_group\nstonewall\nfilename=/dev/zero\nrw=randread\nbs=4k\nnumjobs=4\n"
            "ss=bw_slope:1%\nss_dur=10s\nss_ramp=5s\n")
    tr = translator.translate(text)
    w, r = tr.job["phase"]
    assert (w["name"], w["ss"], w["ss_dur"], w["ss_ramp"]) == ("w", "iops:10%", 30.0, 10.0)
    assert (r["name"], r["ss"], r["ss_dur"], r["ss_ramp"]) == ("r", "bw_slope:1%", 10.0, 5.0)
    job = tr.resolve()
    assert [job.settings_of(p)["ss"] for p in job.phases] == ["iops:10%", "bw_slope:1%"]
    # the emitted TOML runs the same
    from storlab.jobs.job import load_jobfile, resolve_job

    (tmp_path / "ss.toml").write_text(tr.to_toml())
    again = resolve_job({}, load_jobfile(str(tmp_path / "ss.toml")))
    assert [again.settings_of(p)["ss_dur"] for p in again.phases] == [30.0, 10.0]
    # a flag given beside it applies to every phase, as on the command line
    flagged = tr.with_options({"ss_dur": 4.0})
    assert [p.get("ss_dur") for p in flagged.job["phase"]] == [None, None] and flagged.job["ss_dur"] == 4.0
    flagged_job = tr.resolve({"ss_dur": "4"})
    assert [flagged_job.settings_of(p)["ss_dur"] for p in flagged_job.phases] == [4.0, 4.0]


def test_jobs_of_one_phase_must_agree_on_steady_state():
    base = "[global]\nfilename=/x\nsize=1m\nrw=randread\n"
    with pytest.raises(Refusal, match=r"^fio <text>:9: ss = bw:1%: jobs of one phase \(between stonewalls\) must "
                                      r"agree on ss: \[a\] has iops:1%; \[b\] has bw:1%; storlab judges steady state per phase$"):
        translate(base + "[a]\nss=iops:1%\nss_dur=5\n[b]\nss=bw:1%\nss_dur=5\n")
    # a job that sets none: named at the other job's setting
    with pytest.raises(Refusal, match=r":7: ss = iops:1%: jobs of one phase .* on ss: \[b\] does not set it; \[a\] has"):
        translate(base + "[b]\n[a]\nss=iops:1%\nss_dur=5\n")
    # the setting that differs is named, here the interval only one job gives
    with pytest.raises(Refusal, match=r":8: ss_interval = 2: .* agree on ss_interval: \[a\] has 2; \[b\] does not set it"):
        translate(base + "[a]\nss=iops:1%\nss_dur=5\nss_interval=2\n[b]\nss=iops:1%\nss_dur=5\n")
    # the same values agree; a stonewall makes a phase of its own, free to differ
    assert len(job_phases(base + "[a]\nss=iops:1%\nss_dur=5\n[b]\nss=iops:1%\nss_dur=5s\n")) == 1
    phases = job_phases(base + "[a]\nss=iops:1%\nss_dur=5\n[b]\nstonewall\n")
    assert phases[0]["ss"] == "iops:1%" and "ss" not in phases[1]


def test_latency_target_options_map_to_the_run_in_fios_units():
    tr = translator.translate("[j]\nfilename=/x\nsize=1m\nrw=randread\niodepth=32\n"
                                           "latency_target=500\nlatency_window=2s\nlatency_percentile=99.9\n").plan
    assert (tr.run["latency_target"], tr.run["latency_window"], tr.run["latency_percentile"]) == (500e-6, 2.0, 99.9)


def test_fixedbufs_is_on_or_off_and_unset_keeps_storlabs_auto_with_one_note():
    """fio's fixedbufs is off unless set; storlab's default registers where the kernel allows. Given,
    it is translated (1: on, 0: off); left unset in an io_uring job, storlab's auto stays, said once
    however many jobs leave it so, and recorded as a chosen key per job."""
    from storlab.jobs.fio.map import ASYNC_BUFFERS_NOTE, FIXEDBUFS_NOTE

    tr = translator.translate("[global]\nioengine=io_uring\nfilename=/x\nsize=1m\niodepth=4\n"
                              "[on]\nfixedbufs=1\n[off]\nfixedbufs=0\n[unset]\n[unset2]\nrw=randread\n"
                              "[sync]\nioengine=psync\niodepth=1\n")
    g = groups(tr.plan.phases)
    assert (g["on"]["uring.fixed_buffers"], g["off"]["uring.fixed_buffers"]) == ("on", "off")
    assert "uring.fixed_buffers" not in g["unset"] and "uring.fixed_buffers" not in g["sync"]
    assert tr.notes.count(FIXEDBUFS_NOTE) == 1
    assert "fio does not unless fixedbufs=1; add fixedbufs=0 for fio's behaviour" in FIXEDBUFS_NOTE
    chosen = [m for m in tr.mapped if m.how == "chosen"]
    assert [(m.key, m.value, m.storlab) for m in chosen] == [("fixedbufs", None, "uring.fixed_buffers = auto")] * 2
    assert [m.note.split(":")[0] for m in chosen] == ["[unset]", "[unset2]"]
    assert {(m.key, m.value, m.how) for m in tr.mapped if m.key == "fixedbufs" and m.how != "chosen"} == \
        {("fixedbufs", "1", "translated"), ("fixedbufs", "0", "translated")}
    job = tr.resolve()
    assert [g.values["uring.fixed_buffers"] for g in job.phases[0].groups] == ["on", "off", "auto", "auto", "auto"]
    assert "# note: " + FIXEDBUFS_NOTE in tr.to_toml()
    # every io_uring job sets it: nothing to say
    tr = translator.translate("[a]\nioengine=io_uring\nfilename=/x\nsize=1m\nfixedbufs=0\n")
    assert FIXEDBUFS_NOTE not in tr.notes and not [m for m in tr.mapped if m.how == "chosen"]
    # libaio runs on io_uring and has no fixedbufs in fio: the flag is the way to fio's behaviour
    tr = translator.translate("[a]\nioengine=libaio\nfilename=/x\nsize=1m\n")
    assert ASYNC_BUFFERS_NOTE.format(engine="libaio") in tr.notes
    assert "--uring-fixed-buffers off" in ASYNC_BUFFERS_NOTE


def test_io_uring_jobs_say_once_that_the_waiting_thread_spins():
    """fio's io_uring thread sleeps as soon as it waits; storlab's spins up to uring.wait_spin
    first: said once for the io_uring jobs (libaio runs on io_uring too), not for psync ones, and
    a --uring-wait-spin flag beside --fio replaces the note."""
    from storlab.jobs.fio.map import WAIT_SPIN_NOTE

    tr = translator.translate("[a]\nioengine=io_uring\nfilename=/x\nsize=1m\n[b]\nioengine=libaio\n"
                              "filename=/y\nsize=1m\n")
    assert tr.notes.count(WAIT_SPIN_NOTE) == 1 and "--uring-wait-spin 0" in WAIT_SPIN_NOTE
    assert WAIT_SPIN_NOTE not in translator.translate("[a]\nioengine=psync\nfilename=/x\nsize=1m\n").notes
    tr.flags_given({"uring.wait_spin": 0})
    assert WAIT_SPIN_NOTE not in tr.notes
    assert "uring.wait_spin = 0 given as a flag: storlab's choice for it does not apply" in tr.notes


def test_scramble_buffers_maps_to_scramble_and_refill_buffers_runs_as_it_with_a_note():
    """fio's scramble_buffers (on by default, as storlab's scramble): 1 → on, 0 → off, unset → the
    default, nothing said. refill_buffers (fresh random data every write) runs as scramble, said
    once however many jobs set it; under it scramble_buffers=0 is ignored, as in fio."""
    from storlab.jobs.fio.map import REFILL_NOTE

    tr = translator.translate("[global]\nfilename=/x\nsize=1m\nrw=randwrite\n"
                              "[on]\nscramble_buffers=1\n[off]\nscramble_buffers=0\n[unset]\n"
                              "[refill]\nrefill_buffers=1\nscramble_buffers=0\n[refill2]\nrefill_buffers\n"
                              "[norefill]\nrefill_buffers=0\nscramble_buffers=0\n")
    g = groups(tr.plan.phases)
    assert (g["on"]["scramble"], g["off"]["scramble"]) == (True, False)
    assert "scramble" not in g["unset"]
    assert (g["refill"]["scramble"], g["refill2"]["scramble"], g["norefill"]["scramble"]) == (True, True, False)
    assert tr.notes.count(REFILL_NOTE) == 1
    assert {(m.key, m.value, m.how) for m in tr.mapped if m.key == "scramble_buffers"} == \
        {("scramble_buffers", "1", "translated"), ("scramble_buffers", "0", "translated")}
    job = tr.resolve()
    assert [g.values["scramble"] for g in job.phases[0].groups] == [True, False, True, True, True, False]
    toml = tr.to_toml()
    assert "scramble = false" in toml and "# note: " + REFILL_NOTE in toml
    # without either key: storlab's default, which is fio's, and no note
    tr = translator.translate("[a]\nfilename=/x\nsize=1m\nrw=write\n")
    assert REFILL_NOTE not in tr.notes and tr.resolve().phases[0].groups[0].values["scramble"] is True


def test_nbd_and_nfs_engines_become_network_targets():
    g = groups(translate("[b]\nioengine=nbd\nuri=nbd://srv:10809/disk\nrw=randread\nbs=4k\niodepth=8\nnumjobs=2\n"
                         "[f]\nioengine=nfs\nnfs_url=nfs://srv/export?version=3\nrw=write\nbs=1m\nsize=64m\n"
                         "filename=data\n"))
    assert g["b"]["engine"] == "nbd" and g["b"]["target"] == ("nbd://srv:10809/disk",) and g["b"]["qd"] == 8
    assert g["b"]["threads"] == 2 and "size" not in g["b"]           # the whole export, as fio
    assert g["f"]["engine"] == "nfs" and g["f"]["target"] == ("nfs://srv/export/data?version=3",)
    assert g["f"]["size"] == 64 * MiB


@pytest.mark.parametrize("text, key", [("[b]\nioengine=nbd\nrw=read\n", "uri"),
                                       ("[f]\nioengine=nfs\nfilename=x\nrw=read\nsize=1m\n", "nfs_url")])
def test_a_network_engine_without_its_url_is_refused_in_one_line(text, key):
    with pytest.raises(Refusal) as e:
        translate(text)
    assert key in str(e.value) and "\n" not in str(e.value)


def test_compressible_and_duplicate_data_translate():
    g = groups(translate("[w]\nfilename=/x\nrw=write\nbs=4k\nsize=1m\nbuffer_compress_percentage=60\n"
                         "buffer_compress_chunk=4k\ndedupe_percentage=25\ndedupe_mode=repeat\n"))
    assert (g["w"]["compress_percentage"], g["w"]["compress_chunk"], g["w"]["dedupe_percentage"]) == (60, 4096, 25)
    with pytest.raises(Refusal) as e:
        translate("[w]\nfilename=/x\nrw=write\nsize=1m\ndedupe_percentage=25\ndedupe_mode=working_set\n")
    assert "dedupe_mode" in str(e.value) and "working_set" in str(e.value)


def test_max_latency_ends_the_phase_at_the_first_request_that_late():
    g = groups(translate("[w]\nfilename=/x\nrw=randread\nsize=1m\nmax_latency=250ms\n"))
    assert g["w"]["stall_after"] == 0.25 and g["w"]["stall_abort"] is True
    g = groups(translate("[w]\nfilename=/x\nrw=randread\nsize=1m\nmax_latency=5000\n"))    # fio's unit: us
    assert g["w"]["stall_after"] == pytest.approx(5e-3)
    with pytest.raises(Refusal) as e:
        translate("[w]\nfilename=/x\nrw=randread\nsize=1m\nmax_latency=500\n")
    assert "max_latency" in str(e.value) and ">= 1ms" in str(e.value)


def test_percentage_random_translates_with_one_value():
    g = groups(translate("[w]\nfilename=/x\nrw=randread\nsize=1m\npercentage_random=70\n"
                         "[s]\nfilename=/x\nrw=randread\nsize=1m\npercentage_sequential=20\n"))
    assert g["w"]["percentage_random"] == 70 and g["s"]["percentage_random"] == 80
    with pytest.raises(Refusal) as e:
        translate("[w]\nfilename=/x\nrw=randrw\nsize=1m\npercentage_random=70,20\n")
    assert "percentage_random" in str(e.value) and "one value" in str(e.value)


def test_exec_prerun_and_postrun_run_around_the_phase_holding_the_job():
    first, second = translate("[a]\nfilename=/x\nrw=write\nsize=1m\nexec_prerun=echo pre\nexec_postrun=echo post\n"
                              "[b]\nfilename=/y\nrw=read\nsize=1m\nstonewall\n")
    assert first["own"] == {"exec_prerun": "echo pre", "exec_postrun": "echo post"}
    assert "exec_prerun" not in second.get("own", {})
    with pytest.raises(Refusal) as e:
        translate("[a]\nfilename=/x\nrw=write\nsize=1m\nexec_prerun=echo a\n"
                  "[b]\nfilename=/y\nrw=write\nsize=1m\nexec_prerun=echo b\n")
    assert "exec_prerun" in str(e.value) and "one phase" in str(e.value)


def test_a_negative_offset_modifier_reads_backwards():
    g = groups(translate("[b]\nfilename=/x\nrw=read:-8k\nbs=4k\nsize=1m\n"))
    assert g["b"]["seq_rewind"] == 8192 and "seq_hole" not in g["b"]
