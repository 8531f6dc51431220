"""`storlab meta` run in-process: output streams, JSON, store, job files, exit codes and
one-line errors, and that `storlab results` accepts meta documents."""
from __future__ import annotations

import json
import os
import subprocess

import pytest
from storlab import store
from storlab.cli.main import main


def entries(path) -> list[str]:
    out = []
    for d, dn, fn in os.walk(path):
        out += [os.path.relpath(os.path.join(d, n), path) for n in dn + fn]
    return sorted(out)


def test_default_run_in_the_current_directory_prints_a_table_and_leaves_nothing(shm_dir, monkeypatch, capsys):
    monkeypatch.chdir(shm_dir)
    rc = main(["meta", "--files-per-thread", "50", "--threads", "2"])
    out, err = capsys.readouterr()
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].startswith("2 thread(s) x 50 files, dir unique, depth 0")
    assert [line.split()[0] for line in lines[2:9]] == ["mkdir", "create", "stat", "read",
                                                        "rename", "remove", "rmdir"]
    # a 50-file phase is too short to trust: one warning naming the short phases
    (warning,) = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warning.startswith("warning: phases shorter than 0.1 s (create ")
    assert entries(shm_dir) == []
    (row,) = store.list_runs(kind="meta")
    assert row["complete"] is True


def test_json_to_stdout_is_the_only_stdout_output(shm_dir, capsys):
    rc = main(["meta", "--target", shm_dir, "--files-per-thread", "20", "--json", "-", "--depth", "1",
               "--fanout", "2", "--dir", "shared", "--file-size", "1k", "--order", "random"])
    out, err = capsys.readouterr()
    assert rc == 0
    doc = json.loads(out)
    assert doc["kind"] == "meta" and doc["job"]["dir"] == "shared" and doc["job"]["file_size"] == 1024
    assert {p["name"]: p["ops"] for p in doc["phases"]} == {
        "mkdir": 3, "create": 20, "stat": 20, "read": 20, "rename": 20, "remove": 20, "rmdir": 3}
    assert "phase" in err and "ops/s" in err  # the table went to stderr
    assert doc["argv"][:2] == ["storlab", "meta"]


def test_json_file_tags_and_note_are_kept_and_no_store_stores_nothing(shm_dir, tmp_path, capsys):
    target = tmp_path / "r.json"
    assert main(["meta", "--target", shm_dir, "--files-per-thread", "5", "-q", "--json", str(target),
                 "--tag", "a", "--tag", "b", "--note", "first"]) == 0
    assert capsys.readouterr().out == ""
    doc = json.loads(target.read_text())
    summary = store.summary(doc["run_id"])
    assert (summary["tags"], summary["note"], summary["kind"]) == (["a", "b"], "first", "meta")
    assert main(["meta", "--target", shm_dir, "--files-per-thread", "5", "-q", "--no-store"]) == 0
    assert len(store.list_runs()) == 1


def test_job_file_with_flags_overriding_it(shm_dir, tmp_path, capsys):
    job = tmp_path / "meta.toml"
    job.write_text(f'target = "{shm_dir}"\nthreads = 2\nfiles = 7\nphases = "create,stat"\n'
                   'stonewall = "30s"\nfsync_dirs = true\n')
    assert main(["meta", str(job), "--files-per-thread", "9", "--json", "-", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["job"]["threads"], doc["job"]["files"], doc["job"]["stonewall"]) == (2, 9, 30.0)
    assert [p["name"] for p in doc["phases"]] == ["mkdir", "create", "stat"]
    assert doc["phases"][1]["items_per_worker"] == [9, 9] and "dir_sync" in doc["phases"][1]
    assert entries(shm_dir) == []


@pytest.mark.parametrize("args,message", [
    (["--threads", "0"], "storlab meta: error: command line: threads: '0' is out of range; allowed: >= 1"),
    (["--dir", "both"], "storlab meta: error: command line: dir: 'both' is not allowed; use one of: unique, shared"),
    (["--phases", "create,frobnicate"], "storlab meta: error: phases: 'frobnicate' unknown; use some of create,stat"),
    (["--file-size", "lots"], "storlab meta: error: command line: file_size:"),
])
def test_bad_options_give_one_line_and_exit_2(shm_dir, capsys, args, message):
    assert main(["meta", "--target", shm_dir, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err
    assert entries(shm_dir) == []


def test_bad_job_file_key_names_the_file(tmp_path, capsys):
    job = tmp_path / "m.toml"
    job.write_text("filez = 3\n")
    assert main(["meta", str(job)]) == 2
    assert capsys.readouterr().err.startswith(f"storlab meta: error: {job}: unknown option 'filez' (did you mean 'files'?)")


def test_missing_target_exits_2_naming_it(tmp_path, capsys):
    assert main(["meta", "--target", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == f"storlab meta: error: target {tmp_path / 'nope'}: No such file or directory\n"


def test_keep_prints_where_the_files_are(shm_dir, capsys):
    assert main(["meta", "--target", shm_dir, "--files-per-thread", "4", "--keep", "--no-store"]) == 0
    out = capsys.readouterr().out
    (workdir,) = os.listdir(shm_dir)
    assert f"kept: the files are in {shm_dir}/{workdir}" in out
    # --keep alone runs every phase but remove and rmdir: the files carry their renamed names
    assert entries(os.path.join(shm_dir, workdir)) == ["w0"] + [f"w0/r0.{i}" for i in range(4)]


def test_results_list_and_show_accept_a_meta_run(shm_dir, capsys):
    assert main(["meta", "--target", shm_dir, "--files-per-thread", "10", "-q", "--tag", "md"]) == 0
    (row,) = store.list_runs(tag="md")
    capsys.readouterr()
    assert main(["results", "list", "--kind", "meta"]) == 0
    out = capsys.readouterr().out
    assert row["run_id"][:8] in out and " meta " in out
    assert main(["results", "show", row["run_id"][:8]]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"run {row['run_id']}  (storlab.run/1, kind meta)")
    assert main(["results", "show", row["run_id"][:8], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["phases"][1]["name"] == "create"
    assert main(["results", "export", "--kind", "meta", "-f", "csv"]) == 0


def test_help_lists_the_meta_options_and_examples(capsys):
    with pytest.raises(SystemExit):
        main(["meta", "--help"])
    out = capsys.readouterr().out
    for flag in ("--files-per-thread", "--file-size", "--dir {unique,shared}", "--depth", "--fanout", "--order",
                 "--fsync-files", "--fsync-dirs", "--stonewall", "--phases", "--keep",
                 "--name-prefix", "--json", "--no-store", "storlab meta --files-per-thread 1000000 --stonewall 10s"):
        assert flag in out, flag


@pytest.mark.root
def test_a_full_file_system_exits_1_with_the_path_and_leaves_nothing(tmp_path, capsys):
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tiny tmpfs")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,nr_inodes=200", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount tmpfs: {r.stderr.strip()}")
    try:
        rc = main(["meta", "--target", str(mnt), "--threads", "2", "--files-per-thread", "500"])
        out, err = capsys.readouterr()
        assert rc == 1
        last = err.strip().splitlines()[-1]
        assert last.startswith(f"storlab meta: error: create of {mnt}/storlab-meta-")
        assert last.endswith("failed at open: No space left on device (os error 28)")
        assert "incomplete (error" in out
        assert entries(mnt) == []
        (row,) = store.list_runs(kind="meta")
        assert row["complete"] is False and row["stop_reason"] == "error"
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.mark.root
def test_a_read_only_target_exits_2_naming_the_path(tmp_path, capsys):
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a read-only tmpfs")
    mnt = tmp_path / "ro"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount tmpfs: {r.stderr.strip()}")
    try:
        assert main(["meta", "--target", str(mnt)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"storlab meta: error: target {mnt}: cannot make the working folder {mnt}/storlab-meta-")
        assert err.endswith(": Read-only file system\n")
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
