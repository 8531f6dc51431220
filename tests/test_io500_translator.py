"""jobs/io500: io500 .ini files read as io500 reads them (sections, keys, types, defaults, its
configuration hash) and translated into a storlab job with the translator faces: emit (the TOML
job resolves as a job file), refusal (one line naming file, line, key, value) and record."""
from __future__ import annotations

import os

import pytest
from storlab.jobs.io500.ini import IniError, config_hash, parse_ini
from storlab.jobs.io500.phases import PHASES, SCORED
from storlab.jobs.io500.translator import ior_size, translate, translate_text
from storlab.jobs.job import load_jobfile, resolve_job
from storlab.jobs.translation import MAX_REFUSAL, TRANSLATORS, Refusal, translator

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "io500")
SMALL = os.path.join(os.path.dirname(__file__), "fixtures", "translators", "io500", "good", "small.ini")


def test_registered_as_a_translator():
    assert TRANSLATORS["io500"] == "storlab.jobs.io500.translator"
    assert translator("io500").FORMAT == "io500"


def test_config_hash_is_io500s():
    # `io500 small.ini` printed config-hash = 8C99EB21 (tests/fixtures/io500/io500-result.txt);
    # `io500 config-sample-all.ini --config-hash` (every key at its default) printed 9736CCCB.
    assert config_hash(parse_ini(open(SMALL).read())) == "8C99EB21"
    assert config_hash(parse_ini("")) == "9736CCCB"
    with open(os.path.join(FIXTURES, "io500-result.txt")) as f:
        assert "config-hash     = 8C99EB21" in f.read()


def test_parser_follows_io500s_rules():
    ini = parse_ini("[GLOBAL]\n datadir = /x  # a comment\n[ior-easy]\ntransfersize = 4m\nblockSize =\n"
                    "filePerProc = 1\n; a comment line\n[debug]\nstonewall-time = 5\n")
    assert ini.get("global", "datadir") == "/x"
    assert ini.get("ior-easy", "transferSize") == "4m"          # names compare case-insensitively
    assert ini.get("ior-easy", "blockSize") == "9920000m"       # an empty value keeps the default
    assert ini.get("ior-easy", "filePerProc") is True
    assert ini.get("debug", "stonewall-time") == 5
    assert ini.line("ior-easy", "transferSize") == 4
    for bad, line in (("[nope]\n", 1), ("[global]\nfoo = 1\n", 2), ("[debug]\nstonewall-time = x\n", 2),
                      ("[global]\nscc = maybe\n", 2), ("[mdtest-easy]\nn = -1\n", 2), ("datadir = /x\n", 1),
                      ("[global]\nwhat is this\n", 2)):
        with pytest.raises(IniError) as e:
            parse_ini(bad)
        assert e.value.line == line


def test_ior_sizes():
    assert ior_size("2m") == 2 << 20 and ior_size("47008") == 47008 and ior_size("1G") == 1 << 30
    with pytest.raises(ValueError):
        ior_size("2 MiB")


def test_phases_in_io500s_order_with_its_parameters():
    t = translate(SMALL)
    assert t.details["phases"] == [n for n, _ in PHASES]
    assert len(SCORED) == 12 and "ior-rnd4K-easy-read" not in SCORED and "find" in SCORED
    job = {p["name"]: p for p in t.job["phase"]}
    easy, hard = job["ior-easy-write"], job["ior-hard-write"]
    assert (easy["bs"], easy["size"], easy["time"], easy["fsync_end"]) == (2 << 20, 256 << 20, "2s", True)
    assert easy["target"] == ["/dev/shm/io500r/data/ior_file_easy"] and easy["files"] == "per_thread"
    assert (hard["bs"], hard["size"], hard["thread_layout"]) == (47008, 47008 * 20000, "strided")
    assert job["mdtest-easy"]["files"] == 5000 and job["mdtest-easy"]["dir"] == "unique"
    mh = job["mdtest-hard"]
    assert (mh["files"], mh["dir"], mh["file_size"]) == (2000, "shared", 3901)
    assert job["ior-rnd4K-easy-read"]["bs"] == 4096 and t.job["reorder"] == 1
    assert any("!= 300 s" in n for n in t.notes)        # a 2 s stonewall is marked invalid


def test_defaults_are_io500s():
    t = translate_text("[global]\ndatadir = /d\n")
    job = {p["name"]: p for p in t.job["phase"]}
    assert job["ior-easy-write"]["size"] == 9920000 << 20 and job["ior-easy-write"]["time"] == "300s"
    assert job["ior-hard-write"]["size"] == 47008 * 10_000_000
    assert job["mdtest-easy"]["files"] == job["mdtest-hard"]["files"] == 1_000_000
    chosen = {m.key: m for m in t.mapped if m.how == "chosen"}
    assert chosen["debug.stonewall-time"].value == 300 and chosen["ior-easy.transferSize"].value == "2m"
    scc = translate_text("[global]\nscc = TRUE\n[debug]\nstonewall-time = 30\n")
    assert not any("!=" in n for n in scc.notes)     # 30 s is the student rule


def test_emit_is_a_storlab_job_file(tmp_path):
    t = translate(SMALL)
    out = tmp_path / "job.toml"
    t.emit(str(out))
    text = out.read_text()
    assert text.startswith("# storlab job translated from io500 small.ini")
    job = resolve_job({}, load_jobfile(str(out)), jobfile_name=str(out))
    assert [p.name for p in job.phases] == [p["name"] for p in t.job["phase"]]
    assert [p.kind for p in job.phases].count("meta") == 2
    assert t.resolve().phases[0].groups[0].values["bs"] == 2 << 20


def test_storlab_run_runs_the_emitted_job(shm_dir, tmp_path):
    import subprocess
    import sys

    ini = tmp_path / "c.ini"
    ini.write_text(f"[global]\ndatadir = {shm_dir}\n[debug]\nstonewall-time = 1\n[ior-easy]\ntransferSize = 1m\n"
                   "blockSize = 4m\n[mdtest-easy]\nn = 50\n[ior-hard]\nsegmentCount = 20\n[mdtest-hard]\nn = 50\n")
    job = tmp_path / "job.toml"
    translate(str(ini)).emit(str(job))
    out = tmp_path / "doc.json"
    p = subprocess.run([sys.executable, "-m", "storlab", "run", str(job), "--json", str(out), "--quiet", "--no-store"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    import json

    names = [ph["name"] for ph in json.loads(out.read_text())["phases"]]
    assert names[0] == "ior-easy-write" and "ior-hard-read" in names


def test_record_names_each_key_with_its_line():
    rec = translate(SMALL).record()
    assert rec["format"] == "io500" and len(rec["sha256"]) == 64
    by_key = {m["key"]: m for m in rec["mapped"]}
    assert by_key["debug.stonewall-time"]["line"] == 7 and by_key["debug.stonewall-time"]["how"] == "translated"
    assert by_key["mdtest-hard.n"]["value"] == 2000
    assert by_key["global.dataPacketType"]["how"] == "chosen"
    assert rec["details"]["config_hash"] == "8C99EB21"


@pytest.mark.parametrize("text, line, key", [
    ("[global]\napi = MPIIO\n", 2, "global.api"),
    ("[ior-easy]\nAPI = HDF5\n", 2, "ior-easy.API"),
    ("[global]\nio-buffers-on-gpu = TRUE\n", 2, "global.io-buffers-on-gpu"),
    ("[find]\nexternal-script = /bin/find.sh\n", 2, "find.external-script"),
    ("[mdtest-hard]\nfiles-per-dir = 100\n", 2, "mdtest-hard.files-per-dir"),
    ("[ior-hard-write]\ncollective = TRUE\n", 2, "ior-hard-write.collective"),
    ("[ior-easy]\nfilePerProc = FALSE\n", 2, "ior-easy.filePerProc"),
    ("[debug]\npause-dir = /tmp\n", 2, "debug.pause-dir"),
    ("\n[ior-easy]\ntransferSize = 3m\nblockSize = 10m\n", 4, "ior-easy.blockSize"),
    ("[global]\n\n[unknown-phase]\n", 3, "[unknown-phase]"),
    ("[ior-easy]\nbogus = 1\n", 2, "ior-easy.bogus"),
])
def test_refusals_are_one_line(tmp_path, text, line, key):
    f = tmp_path / "c.ini"
    f.write_text(text)
    with pytest.raises(Refusal) as e:
        translate(str(f))
    msg = str(e.value)
    assert msg.startswith(f"io500 c.ini:{line}: {key}") and "\n" not in msg and len(msg) <= MAX_REFUSAL
    assert e.value.line == line and e.value.key == key


def test_refusal_lists_every_refused_key(tmp_path):
    f = tmp_path / "c.ini"
    f.write_text("[global]\napi = S3\nio-buffers-on-gpu = TRUE\n[find]\nexternal-script = x\n")
    msg = str(pytest.raises(Refusal, translate, str(f)).value)
    assert "global.api = S3" in msg and "also: global.io-buffers-on-gpu (line 3), find.external-script (line 5)" in msg


def test_extended_mode_keys_are_accepted_and_recorded():
    t = translate_text("[find-easy]\nnproc = 2\n[mdworkbench]\nwaitingTime = 0.5\n")
    by_key = {m.key: m for m in t.mapped}
    assert by_key["find-easy.nproc"].how == "accepted" and "extended mode" in by_key["find-easy.nproc"].note
    assert by_key["mdworkbench.waitingTime"].value == 0.5


def test_run_false_switches_a_phase_off():
    t = translate_text("[ior-hard]\nrun = FALSE\n[mdtest-easy-stat]\nrun = false\n")
    assert "ior-hard-write" not in t.details["phases"] and "ior-hard-read" not in t.details["phases"]
    assert "mdtest-easy-stat" not in t.details["phases"]
    assert not any(p["name"].startswith("ior-hard") for p in t.job["phase"])
