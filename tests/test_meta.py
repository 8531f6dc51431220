"""Tests of storlab.measure.meta: the meta option table, the engine spec, every phase and option through
the native engine (what exists on disk after each phase, via a hook), stonewall accounting, the
result document and store, and failures that must name the path and leave nothing behind."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from importlib import resources

import pytest
from storlab import _core, store
from storlab.errors import SpecError, TargetError
from storlab.jobs import meta_options
from storlab.jobs.options import BY_NAME, OptionError
from storlab.measure import meta
from storlab.measure.benchmark import PhaseHooks
from storlab.output import meta_table


def values(**over):
    return meta_options.resolve_meta_options(over)


def listing(root: str) -> tuple[dict[str, int], list[str]]:
    """Files (relative path -> size) and directories below root."""
    files, dirs = {}, []
    for d, dn, fn in os.walk(root):
        rel = os.path.relpath(d, root)
        for n in dn:
            dirs.append(os.path.normpath(os.path.join(rel, n)))
        for n in fn:
            files[os.path.normpath(os.path.join(rel, n))] = os.path.getsize(os.path.join(d, n))
    return files, sorted(dirs)


class Snapshots(PhaseHooks):
    """Records what exists in the working folder after every phase, and the hook order."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.after: dict[str, tuple[dict[str, int], list[str]]] = {}
        self.calls: list[str] = []

    def before_start(self, phase, run):
        self.calls.append(f"start {phase}")

    def after_end(self, phase, run, result):
        self.calls.append(f"end {phase}")
        self.after[phase] = listing(self.workdir)

    def before_cleanup(self, run):
        self.calls.append("cleanup")


def run_in(workdir: str, hooks=None, **over):
    return meta.run_meta_phase(values(**over), workdir, hooks=hooks)


def by_name(out):
    return {p["name"]: p for p in out["phases"]}


# -- the option table ---------------------------------------------------------------------------
def test_table_and_rust_spec_have_the_same_fields():
    core = {o.name for o in meta_options.META_OPTIONS if o.core}
    assert core == set(_core.meta_spec_field_names()) - {"shared_tree_owner"}


def test_every_option_has_help_a_known_kind_and_shared_output_options_are_runs():
    for o in meta_options.META_OPTIONS:
        assert o.help and o.kind in {"size", "duration", "int", "choice", "bool", "str", "text", "paths"}
        if o.kind == "choice":
            assert o.default in o.choices and all(o.choices.values())
    for name in meta_options.SHARED_RUN_OPTIONS:
        assert meta_options.META_BY_NAME[name] is BY_NAME[name]


@pytest.mark.parametrize("name,raw,expected", [
    ("file_size", "4k", 4096), ("stonewall", "500ms", 0.5), ("threads", "8", 8),
    ("dir", "shared", "shared"), ("order", "random", "random"), ("fsync_dirs", "yes", True),
    ("depth", 3, 3), ("name_prefix", "r{rank}.", "r{rank}."), ("name_prefix", "", None),
])
def test_values_are_parsed_to_canonical_units(name, raw, expected):
    assert meta_options.parse_meta_value(name, raw) == expected


@pytest.mark.parametrize("over,field", [
    ({"threads": 0}, "threads"), ({"files": "many"}, "files"), ({"dir": "both"}, "dir"),
    ({"fanout": 0}, "fanout"), ({"depth": 65}, "depth"), ({"stonewall": "0s"}, "stonewall"),
    ({"phases": "stat"}, "phases"), ({"phases": "create,create"}, "phases"),
    ({"phases": "create,read,stat"}, "phases"), ({"phases": "create,rmdir"}, "phases"),
    ({"phases": "create,delete"}, "delete"), ({"filez": 3}, "filez"),
])
def test_bad_values_name_the_option(over, field):
    with pytest.raises(OptionError, match=field):
        values(**over)


def test_unknown_option_suggests_the_right_name():
    with pytest.raises(OptionError, match="did you mean 'files'"):
        meta_options.parse_meta_value("file", 3)


def test_phases_may_be_a_list_as_in_toml():
    assert meta_options.resolve_meta_options({}, {"phases": ["create", "remove"]})["phases"] == ("create", "remove")
    with pytest.raises(OptionError, match="job file: phases: expected names"):
        meta_options.resolve_meta_options({}, {"phases": ["create", 3]})


def test_precedence_and_phase_defaults():
    v = meta_options.resolve_meta_options({"threads": "4"}, {"threads": 2, "files": 5})
    assert (v["threads"], v["files"], v["phases"]) == (4, 5, meta_options.FILE_PHASES)
    assert values(keep=True)["phases"] == ("create", "stat", "read", "rename")
    assert values(keep=True, phases="create,remove")["phases"] == ("create", "remove")


def test_spec_has_rank_unique_names_and_the_engine_accepts_it():
    spec = meta.meta_spec(values(name_prefix="r{rank}.", dir="shared"), "/x", rank=3,
                          shared_tree_owner=False)
    assert spec["name_prefix"] == "r3." and spec["target"] == "/x"
    assert spec["phases"] == ["mkdir", *meta_options.FILE_PHASES]
    assert spec["shared_tree_owner"] is False and "json" not in spec
    _core.validate_meta_spec(json.dumps(spec))
    assert meta.meta_spec(values(), "/x")["name_prefix"] == ""


# -- phases and options -------------------------------------------------------------------------
def test_every_phase_leaves_exactly_what_it_should(shm_dir):
    hooks = Snapshots(shm_dir)
    out = run_in(shm_dir, hooks, threads=2, files=30, file_size="1k", depth=1, fanout=3)
    assert out["complete"] and out["stop_reason"] == "done" and out["workers"] == 2
    p = by_name(out)
    assert list(p) == ["mkdir", *meta_options.FILE_PHASES]
    # directories: 2 trees of 1 + 3
    files, dirs = hooks.after["mkdir"]
    assert (len(files), len(dirs)) == (0, 8)
    files, dirs = hooks.after["create"]
    assert len(files) == 60 and set(files.values()) == {1024}
    assert all(f.split("/")[2].startswith(("f0.", "f1.")) for f in files)
    assert hooks.after["stat"] == hooks.after["read"] == (files, dirs)
    renamed, _ = hooks.after["rename"]
    assert len(renamed) == 60 and all(os.path.basename(f)[0] == "r" for f in renamed)
    assert hooks.after["remove"] == ({}, dirs)
    assert hooks.after["rmdir"] == ({}, [])
    for name in meta_options.FILE_PHASES[:5]:
        ph = p[name]
        assert ph["ops"] == 60 and ph["items_per_worker"] == [30, 30], name
        assert sum(c for _, c in ph["lat_hist"]["buckets"]) == 60
        assert ph["lat_hist"]["scheme"] == "loglinear6"
        lat = ph["lat_ns"]
        assert 0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["p999"] <= lat["max"]
        assert ph["ops_per_s"] == pytest.approx(60 / ph["seconds"])
        assert ph["stonewalled"] is False
    assert (p["create"]["bytes"], p["read"]["bytes"], p["stat"]["bytes"]) == (61440, 61440, 0)
    assert (p["mkdir"]["ops"], p["rmdir"]["ops"]) == (8, 8)
    assert out["cleanup"] == {"kept": False, "files_removed": 0, "dirs_removed": 0, "error": None}
    assert hooks.calls == [c for ph in p for c in (f"start {ph}", f"end {ph}")] + ["cleanup"]


def test_shared_directory_holds_every_threads_files(shm_dir):
    hooks = Snapshots(shm_dir)
    out = run_in(shm_dir, hooks, threads=3, files=4, dir="shared")
    assert by_name(out)["mkdir"]["items_per_worker"] == [1, 0, 0]
    files, dirs = hooks.after["create"]
    assert dirs == ["shared"]
    assert sorted(files) == sorted(f"shared/f{w}.{i}" for w in range(3) for i in range(4))
    assert listing(shm_dir) == ({}, [])


def test_unique_directories_hold_one_threads_files_each(shm_dir):
    hooks = Snapshots(shm_dir)
    run_in(shm_dir, hooks, threads=3, files=4, dir="unique", name_prefix="r{rank}.")
    files, dirs = hooks.after["create"]
    assert dirs == ["r0.w0", "r0.w1", "r0.w2"]
    for w in range(3):
        assert sorted(f for f in files if f.startswith(f"r0.w{w}/")) == \
            sorted(f"r0.w{w}/r0.f{w}.{i}" for i in range(4))


@pytest.mark.parametrize("depth,fanout,files", [(0, 10, 5), (1, 4, 9), (2, 3, 30), (3, 2, 8)])
def test_tree_shapes(shm_dir, depth, fanout, files):
    hooks = Snapshots(shm_dir)
    out = run_in(shm_dir, hooks, files=files, depth=depth, fanout=fanout, phases="create,remove,rmdir")
    total_dirs = sum(fanout ** level for level in range(depth + 1))
    assert by_name(out)["mkdir"]["ops"] == total_dirs == by_name(out)["rmdir"]["ops"]
    found, dirs = hooks.after["create"]
    assert len(dirs) == total_dirs and len(found) == files
    per_leaf: dict[str, int] = {}
    for f in found:
        assert f.count("/") == depth + 1, f"{f} is not in a leaf"
        per_leaf[os.path.dirname(f)] = per_leaf.get(os.path.dirname(f), 0) + 1
    assert len(per_leaf) == min(files, fanout ** depth)
    assert max(per_leaf.values()) - min(per_leaf.values()) <= 1
    assert listing(shm_dir) == ({}, [])


def test_stonewall_records_what_each_thread_finished_and_later_phases_use_exactly_that(shm_dir):
    out = run_in(shm_dir, threads=2, files=2_000_000, stonewall=0.05)
    p = by_name(out)
    create = p["create"]
    assert create["stonewalled"] and create["stonewall_s"] == 0.05 and create["complete"]
    created = create["items_per_worker"]
    assert all(0 < n < 2_000_000 for n in created)
    assert create["ops"] == sum(created)
    assert [w["stonewalled"] for w in create["workers"]] == [True, True]
    for name in ("stat", "read", "rename", "remove"):
        for w, n in enumerate(p[name]["items_per_worker"]):
            assert n <= created[w], name
            if not p[name]["workers"][w]["stonewalled"]:
                assert n == created[w], f"{name}: worker {w} was not stopped, so it did all it had"
    assert p["mkdir"]["stonewall_s"] is None and p["rmdir"]["ops"] == 2
    assert listing(shm_dir) == ({}, [])


def test_random_order_visits_every_file(shm_dir):
    out = run_in(shm_dir, threads=2, files=500, order="random", file_size=100)
    p = by_name(out)
    assert p["stat"]["items_per_worker"] == p["read"]["items_per_worker"] == [500, 500]
    assert p["read"]["bytes"] == 100_000


def test_fsync_of_files_and_directories_is_reported(shm_dir):
    out = run_in(shm_dir, threads=2, files=5, file_size=10, fsync_files=True, fsync_dirs=True)
    p = by_name(out)
    assert p["create"]["file_sync"]["ops"] == 10
    assert sum(c for _, c in p["create"]["file_sync"]["lat_hist"]["buckets"]) == 10
    assert "file_sync" not in p["stat"] and "dir_sync" not in p["stat"]
    for name in ("mkdir", "create", "rename", "remove", "rmdir"):
        assert p[name]["dir_sync"]["ops"] >= 2, name
    plain = by_name(run_in(shm_dir, files=5))
    assert "file_sync" not in plain["create"] and "dir_sync" not in plain["create"]


def test_keep_leaves_the_files(shm_dir):
    out = run_in(shm_dir, threads=2, files=3, keep=True)
    assert list(by_name(out)) == ["mkdir", "create", "stat", "read", "rename"]
    assert out["cleanup"]["kept"] is True
    files, dirs = listing(shm_dir)
    assert len(files) == 6 and dirs == ["w0", "w1"]


def test_phases_without_remove_are_still_cleaned_up(shm_dir):
    out = run_in(shm_dir, threads=2, files=3, depth=1, fanout=2, phases="create,stat")
    assert list(by_name(out)) == ["mkdir", "create", "stat"]
    assert out["cleanup"] == {"kept": False, "files_removed": 6, "dirs_removed": 6, "error": None}
    assert listing(shm_dir) == ({}, [])


def test_ctrl_c_stops_the_phase_and_removes_everything(shm_dir):
    class Interrupt(PhaseHooks):
        def poll(self, phase, run):
            if phase == "create":
                run.interrupt()

    out = meta.run_meta_phase(values(threads=2, files=4_000_000), shm_dir, hooks=Interrupt(),
                              progress_interval_s=0.02)
    assert (out["complete"], out["stop_reason"], out["error"]) == (False, "interrupted", None)
    assert [p["name"] for p in out["phases"]] == ["mkdir", "create"]
    assert out["phases"][1]["stop_reason"] == "interrupted"
    assert out["cleanup"]["files_removed"] == out["phases"][1]["ops"] > 0
    assert listing(shm_dir) == ({}, [])


def test_progress_reports_the_running_phase(shm_dir):
    seen = []
    meta.run_meta_phase(values(files=200_000), shm_dir, progress=lambda *a: seen.append(a),
                        progress_interval_s=0.01)
    phases = [s[0] for s in seen]
    assert "create" in phases and phases.index("create") < phases.index("remove")
    last_create = [s for s in seen if s[0] == "create"][-1]
    assert last_create[1] == 200_000 and last_create[2] > 0


# -- failures: one clear error naming the path, nothing left behind ----------------------------
def test_a_missing_file_fails_stat_naming_it(shm_dir):
    class Sabotage(PhaseHooks):
        def after_end(self, phase, run, result):
            if phase == "create":
                os.unlink(os.path.join(shm_dir, "w0", "f0.7"))

    out = meta.run_meta_phase(values(files=20), shm_dir, hooks=Sabotage())
    assert (out["complete"], out["stop_reason"]) == (False, "error")
    assert out["error"] == (f"stat of {shm_dir}/w0/f0.7 failed at stat: "
                            f"No such file or directory (os error 2)")
    assert by_name(out)["stat"]["ops"] == 7
    assert out["cleanup"]["files_removed"] == 19
    assert listing(shm_dir) == ({}, [])


def test_a_file_in_the_way_fails_create_and_survives_cleanup(shm_dir):
    class Intruder(PhaseHooks):
        def after_end(self, phase, run, result):
            if phase == "mkdir":
                with open(os.path.join(shm_dir, "w0", "f0.3"), "w") as f:
                    f.write("not storlab's")

    out = meta.run_meta_phase(values(files=10), shm_dir, hooks=Intruder())
    assert "create of" in out["error"] and f"{shm_dir}/w0/f0.3" in out["error"]
    assert "File exists" in out["error"]
    assert f"{shm_dir}/w0" in out["cleanup"]["error"] and "not empty" in out["cleanup"]["error"]
    assert listing(shm_dir) == ({"w0/f0.3": 13}, ["w0"])


def test_target_must_be_an_existing_directory(tmp_path):
    with pytest.raises(TargetError, match=f"{tmp_path}/nope: cannot open the directory: No such file"):
        meta.run_meta_phase(values(), str(tmp_path / "nope"))
    (tmp_path / "f").write_text("x")
    with pytest.raises(TargetError, match="not a directory"):
        meta.run_meta(values(target=str(tmp_path / "f")))
    with pytest.raises(TargetError, match="No such file"):
        meta.run_meta(values(target=str(tmp_path / "nope")))


def test_a_bad_spec_is_a_spec_error(shm_dir):
    with pytest.raises(SpecError, match="name_prefix"):
        meta.run_meta_phase(values(name_prefix="a/b"), shm_dir)


@contextlib.contextmanager
def tmpfs(path, options: str):
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount tmpfs: {r.stderr.strip()}")
    try:
        yield str(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tiny tmpfs")


@pytest.mark.root
def test_running_out_of_inodes_names_the_path_and_leaves_nothing(tmp_path):
    need_root()
    with tmpfs(tmp_path / "mnt", "size=1m,nr_inodes=200") as mnt:
        out = meta.run_meta_phase(values(threads=2, files=300), mnt)
        assert out["stop_reason"] == "error"
        assert out["error"].startswith(f"create of {mnt}/w")
        assert "failed at open: No space left on device (os error 28)" in out["error"]
        create = by_name(out)["create"]
        assert 0 < create["ops"] < 600 and create["complete"] is False
        assert out["cleanup"]["error"] is None and out["cleanup"]["files_removed"] == create["ops"]
        assert listing(mnt) == ({}, [])


@pytest.mark.root
def test_running_out_of_space_while_writing_names_the_path_and_leaves_nothing(tmp_path):
    need_root()
    with tmpfs(tmp_path / "mnt", "size=1m,nr_inodes=1000") as mnt:
        out = meta.run_meta_phase(values(files=100, file_size="64k"), mnt)
        assert out["error"].startswith(f"create of {mnt}/w0/f0.")
        assert "failed at write: No space left on device" in out["error"]
        assert listing(mnt) == ({}, [])


@pytest.fixture
def readonly_dir(tmp_path):
    """A directory nobody may create in: a read-only tmpfs as root, mode 0555 otherwise."""
    if os.geteuid() == 0:
        with tmpfs(tmp_path / "ro", "size=1m,ro") as mnt:
            yield mnt, "Read-only file system"
    else:
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o555)
        yield str(d), "Permission denied"
        d.chmod(0o755)


def test_a_read_only_directory_fails_mkdir_naming_the_path(readonly_dir):
    path, reason = readonly_dir
    out = meta.run_meta_phase(values(threads=2), path)
    assert out["stop_reason"] == "error"
    assert out["error"].startswith(f"mkdir of {path}/w")
    assert f"failed at mkdir: {reason}" in out["error"]
    assert [p["name"] for p in out["phases"]] == ["mkdir"]
    assert out["cleanup"]["error"] is None
    assert listing(path) == ({}, [])
    with pytest.raises(TargetError, match=f"cannot make the working folder {path}/storlab-meta-.*: {reason}"):
        meta.run_meta(values(target=path))


def test_running_out_of_file_descriptors_names_the_path_and_leaves_nothing(tmp_path):
    # each worker has a descriptor table of its own (a copy of the process's, as each mdtest rank
    # has one): the limit leaves room for the target and a tree root, so a worker runs out at its
    # first file, whatever the others do
    script = f"""
import fcntl, json, os, resource
from storlab.jobs import meta_options
from storlab.measure import meta
def is_open(fd):
    try:
        return fcntl.fcntl(fd, fcntl.F_GETFD) >= 0
    except OSError:
        return False
free = [fd for fd in range(4096) if not is_open(fd)]
resource.setrlimit(resource.RLIMIT_NOFILE, (free[1] + 1, free[1] + 1))  # two descriptors more
out = meta.run_meta_phase(meta_options.resolve_meta_options({{'threads': 8, 'files': 50}}), {str(tmp_path)!r})
print(json.dumps({{'error': out['error'], 'cleanup': out['cleanup']}}))
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert "Too many open files" in out["error"] and str(tmp_path) in out["error"], out["error"]
    assert out["cleanup"]["error"] is None
    assert listing(str(tmp_path)) == ({}, [])


# -- the result document ------------------------------------------------------------------------
def run_schema() -> dict:
    return json.loads(resources.files("storlab.schemas").joinpath("run-1.schema.json").read_text())


def test_document_follows_the_run_schema_and_is_stored(shm_dir, private_store):
    import jsonschema

    doc = meta.run_meta(values(target=shm_dir, threads=2, files=50), argv=["storlab", "meta"])
    jsonschema.validate(doc, run_schema())
    assert (doc["schema"], doc["kind"], doc["complete"], doc["workers"]) == ("storlab.run/1", "meta", True, 2)
    assert [p["name"] for p in doc["phases"]] == ["mkdir", *meta_options.FILE_PHASES]
    assert doc["job"]["target"] == [shm_dir] and doc["job"]["workdir"].startswith(f"{shm_dir}/storlab-meta-")
    assert doc["environment"]["directory"]["fs_type"] == "tmpfs"
    assert not os.path.exists(doc["job"]["workdir"]), "the working folder is removed"
    assert os.listdir(shm_dir) == []
    store.save(doc)
    (row,) = store.list_runs(kind="meta")
    assert row["run_id"] == doc["run_id"] and row["targets"] == [shm_dir]
    assert store.load(doc["run_id"][:8]) == doc


def test_document_warns_about_stonewalls_and_short_phases(shm_dir):
    doc = meta.run_meta(values(target=shm_dir, files=1_000_000, stonewall=0.03, phases="create,stat"))
    stonewalled = [w["message"] for w in doc["warnings"] if w["code"] == "stonewalled"]
    assert stonewalled[0].startswith("create stopped at the 0.03 s stonewall: threads finished ")
    assert "(1000000 files each asked for); later phases work on exactly those" in stonewalled[0]
    assert "short_phase" in {w["code"] for w in meta.run_meta(values(target=shm_dir, files=5))["warnings"]}


def test_keep_leaves_the_working_folder(shm_dir):
    doc = meta.run_meta(values(target=shm_dir, files=3, keep=True))
    files, _ = listing(doc["job"]["workdir"])
    assert len(files) == 3
    assert f"kept: the files are in {doc['job']['workdir']}" in meta_table.render_table(doc)


def test_table_shows_a_row_per_phase_with_units(shm_dir):
    doc = meta.run_meta(values(target=shm_dir, threads=2, files=100))
    text = meta_table.render_table(doc)
    lines = text.splitlines()
    assert lines[0].startswith("2 thread(s) x 100 files, dir unique")
    assert lines[1].split() == ["phase", "ops", "time", "ms", "ops/s", "mean", "us", "p50", "us",
                                "p99", "us", "p99.9", "us", "max", "us", "stonewalled"]
    assert [line.split()[0] for line in lines[2:]] == ["mkdir", *meta_options.FILE_PHASES]
    assert lines[3].split()[1] == "200"


def test_docs_list_every_option_as_the_table_does():
    import pathlib
    import re

    text = (pathlib.Path(__file__).parent.parent / "docs" / "meta.md").read_text()
    section = re.search(r"<!-- options:begin -->\n(.*)\n<!-- options:end -->", text, re.S).group(1)
    assert section == meta_options.render_reference(), "regenerate with: python -m storlab.jobs.meta_options"


def test_a_failing_hook_stops_the_running_phase_and_still_cleans_up(shm_dir):
    class Broken(PhaseHooks):
        def poll(self, phase, run):
            if phase == "create":
                raise RuntimeError("orchestrator lost a rank")

    with pytest.raises(RuntimeError, match="lost a rank"):
        meta.run_meta_phase(values(threads=2, files=4_000_000), shm_dir, hooks=Broken(),
                            progress_interval_s=0.02)
    assert listing(shm_dir) == ({}, [])


def test_a_run_of_only_metadata_phases_follows_the_run_schema(tmp_path, shm_dir):
    """A job file (or an fio file of file engines) made only of metadata phases used to give a
    document without environment.engine or job.target/rw/bs/engine, which run-1 requires."""
    import json

    from storlab.cli.main import main
    from storlab.schemas import validate

    job = tmp_path / "meta-only.toml"
    job.write_text(f'[[phase]]\ntype = "meta"\ntarget = "{shm_dir}"\nfiles = 20\n')
    out = tmp_path / "r.json"
    assert main(["run", str(job), "--no-store", "--quiet", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert validate(doc) == "run-1.schema.json"
    assert doc["environment"]["engine"] == "posix"
    assert (doc["job"]["target"], doc["job"]["rw"], doc["job"]["engine"]) == ([shm_dir], "meta", "posix")


def test_an_s3_target_has_its_own_default_phases_and_refuses_what_s3_cannot_do():
    s3 = {"target": "s3://bench/p"}
    assert meta_options.resolve_meta_options(s3)["phases"] == ("create", "stat", "read", "list", "remove", "rmdir")
    assert meta_options.resolve_meta_options({**s3, "keep": True})["phases"] == ("create", "stat", "read", "list")
    assert meta_options.resolve_meta_options({})["phases"] == meta_options.FILE_PHASES, "a directory's are unchanged"
    for over, says in [
        ({**s3, "phases": "create,rename"}, "rename: S3 has no rename"),
        ({"phases": "create,list"}, "phases: list is a phase of s3:// targets"),
        ({"endpoint": "http://127.0.0.1:9"}, "endpoint: for an s3://BUCKET/PREFIX target"),
        ({**s3, "phases": "list,create"}, "in the order create,stat,read,list,mix,remove,rmdir$"),
    ]:
        with pytest.raises(OptionError, match=says):
            meta_options.resolve_meta_options(over)
    # the mix runs on objects too, between the engine's phases (tests/test_s3_objects.py)
    assert meta_options.resolve_meta_options({**s3, "mix": "read=100"})["phases"] == ("create", "mix", "remove", "rmdir")
