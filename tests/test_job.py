"""Job resolution: precedence of defaults, job file, phases, groups and flags; clear errors."""
import pytest
from storlab.jobs.job import core_spec, load_jobfile, resolve_job
from storlab.jobs.options import OptionError


def test_defaults_only():
    job = resolve_job({})
    assert len(job.phases) == 1
    v = job.phases[0].groups[0].values
    assert (v["rw"], v["bs"], v["engine"], v["threads"]) == ("read", 4096, "psync", 1)
    assert job.uses_default_target


def test_precedence_defaults_file_phase_flags(tmp_path):
    f = tmp_path / "job.toml"
    f.write_text('target = ["/x"]\nbs = "64k"\nsize = "1g"\n'
                 '[[phase]]\nname = "w"\nrw = "write"\n'
                 '[[phase]]\nname = "r"\nrw = "randread"\nbs = "8k"\n')
    job = resolve_job({"threads": "4", "bs": "16k"}, load_jobfile(str(f)))
    assert [p.name for p in job.phases] == ["w", "r"]
    w, r = (p.groups[0].values for p in job.phases)
    assert (w["rw"], r["rw"]) == ("write", "randread")
    assert w["bs"] == r["bs"] == 16384          # the flag beats file and phase
    assert w["threads"] == r["threads"] == 4
    assert w["size"] == 1 << 30 and w["target"] == ("/x",)


def test_groups_run_together_in_one_phase(tmp_path):
    f = tmp_path / "job.toml"
    f.write_text('target = ["/x"]\nsize = "1m"\n[[phase]]\n'
                 '[[phase.group]]\nname = "writer"\nrw = "write"\n'
                 '[[phase.group]]\nname = "reader"\nrw = "read"\n')
    job = resolve_job({}, load_jobfile(str(f)))
    spec = core_spec(job.phases[0])
    assert [g["name"] for g in spec["groups"]] == ["writer", "reader"]
    assert spec["groups"][0]["target"] == ["/x"]


@pytest.mark.parametrize("text,words", [
    ('blocksize = "4k"\n', ["unknown option 'blocksize'", "storlab calls it 'bs'"]),
    ('thraeds = 2\n', ["unknown option 'thraeds'", "did you mean 'threads'"]),
    ('rw = "sideways"\n', ["rw", "read, write"]),
    ('[[phase]]\njson = "-"\n', ["json", "whole run"]),
    ('engine = "psync"\nqd = 8\n', ["qd 8", "io_uring"]),
    ('engine = "psync"\n"uring.sqpoll" = true\n', ["uring.sqpoll", "io_uring"]),
    ('io_size = "1m"\nio_total = "2m"\n', ["io_size", "io_total"]),
])
def test_job_file_errors_name_the_problem(tmp_path, text, words):
    f = tmp_path / "job.toml"
    f.write_text(text)
    with pytest.raises(OptionError) as e:
        resolve_job({}, load_jobfile(str(f)), jobfile_name=str(f))
    msg = str(e.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg


def test_bad_toml_and_missing_file(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("bs = = 4\n")
    with pytest.raises(OptionError, match="not valid TOML"):
        load_jobfile(str(f))
    with pytest.raises(OptionError, match="not found"):
        load_jobfile(str(tmp_path / "nope.toml"))


def test_meta_phases_take_storlab_meta_options(tmp_path):
    f = tmp_path / "job.toml"
    f.write_text('size = "1m"\n[[phase]]\nrw = "write"\n[[phase]]\nname = "md"\ntype = "meta"\n'
                 'files = 500\ndir = "shared"\ntarget = "/somewhere"\n')
    job = resolve_job({}, load_jobfile(str(f)))
    io, md = job.phases
    assert (io.kind, md.kind, md.name) == ("io", "meta", "md")
    assert md.meta["files"] == 500 and md.meta["dir"] == "shared" and md.meta["target"] == "/somewhere"
    assert core_spec(md)["type"] == "meta"


@pytest.mark.parametrize("text,words", [
    ('[[phase]]\ntype = "metadata"\n', ["type", "'metadata'", "io, meta"]),
    ('[[phase]]\ntype = "meta"\nfiles = "many"\n', ["phase 1", "files"]),
    ('[[phase]]\ntype = "meta"\nbs = "4k"\n', ["phase 1", "'bs'"]),
])
def test_meta_phase_errors(tmp_path, text, words):
    f = tmp_path / "job.toml"
    f.write_text(text)
    with pytest.raises(OptionError) as e:
        resolve_job({}, load_jobfile(str(f)), jobfile_name=str(f))
    for w in words:
        assert w in str(e.value), str(e.value)


def test_scramble_is_on_by_default_and_set_per_phase_from_a_job_file_or_the_flag(tmp_path):
    f = tmp_path / "job.toml"
    f.write_text('target = ["/x"]\nsize = "1m"\nrw = "write"\n[[phase]]\nname = "plain"\nscramble = false\n'
                 '[[phase]]\nname = "default"\n')
    job = resolve_job({}, load_jobfile(str(f)))
    assert [core_spec(p)["groups"][0]["scramble"] for p in job.phases] == [False, True]
    job = resolve_job({"scramble": "off"}, load_jobfile(str(f)))
    assert [p.groups[0].values["scramble"] for p in job.phases] == [False, False]
    f.write_text('scramble = "sometimes"\n')
    with pytest.raises(OptionError, match="scramble"):
        resolve_job({}, load_jobfile(str(f)), jobfile_name=str(f))
