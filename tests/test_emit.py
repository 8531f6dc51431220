"""Tests of the emit step (output/emit.py) and its registry of views (output/views.py): the
destinations checked before a run, where the table goes, the exit codes, the checkpoint, the
store that cannot take a result, and that every command goes through it (no command imports
cli/run.py as a library)."""
from __future__ import annotations

import ast
import json
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "results"))

import rundoc  # noqa: E402
from storlab.cli.main import ExitCode  # noqa: E402
from storlab.document import MEASURED_KINDS  # noqa: E402
from storlab.errors import OutputError  # noqa: E402
from storlab.output import render_table  # noqa: E402
from storlab.output.emit import FAILURE, OK, Emitter, stop_exit_code  # noqa: E402
from storlab.output.views import VIEWS, View, fio_view, view_of  # noqa: E402

CLI = Path(__file__).resolve().parent.parent / "python" / "storlab" / "cli"


def no_store(**settings):
    return {"no_store": True, **settings}


def test_the_exit_codes_are_the_clis():
    assert (OK, FAILURE) == (ExitCode.OK, ExitCode.FAILURE)
    doc = rundoc.interrupted(rundoc.make_run())
    assert stop_exit_code("run", doc) == ExitCode.INTERRUPTED     # no signal recorded: Ctrl-C's code
    doc["signal"] = "SIGTERM"
    assert stop_exit_code("run", doc) == 128 + signal.SIGTERM == ExitCode.TERMINATED


def test_every_measured_kind_has_a_view_and_the_table_follows_the_kind():
    assert set(MEASURED_KINDS) <= set(VIEWS)
    run = rundoc.make_run()
    sweep = rundoc.make_sweep()
    from storlab.output import sweep_table, table

    assert render_table(run) == table.render_table(run)
    assert render_table(sweep) == sweep_table.render_table(sweep)
    assert view_of({"kind": "sweep"}) is VIEWS["sweep"] and view_of({}) is VIEWS["run"]


def test_destinations_are_checked_when_the_emitter_is_made(tmp_path):
    with pytest.raises(OutputError, match="^json: .* is a directory"):
        Emitter("run", no_store(json=str(tmp_path)))
    with pytest.raises(OutputError, match="^fio-json: standard output"):
        Emitter("run", no_store(fio_json="-"))
    with pytest.raises(OutputError, match="^csv: folder"):
        Emitter("sweep", no_store(csv=str(tmp_path / "missing" / "s.csv")), view="sweep")
    Emitter("run", no_store(csv=str(tmp_path / "missing" / "s.csv")))   # not an export of a run: ignored


def test_json_on_stdout_sends_the_table_to_stderr(capsys):
    doc = rundoc.make_run()
    assert Emitter("run", no_store(json="-")).finish(doc) == OK
    out, err = capsys.readouterr()
    assert json.loads(out) == doc
    assert err.startswith(render_table(doc))


def test_quiet_prints_no_table_but_the_warnings(capsys):
    doc = rundoc.make_run()
    doc["warnings"] = [{"code": "short", "message": "measured for only 0.1 s"}]
    assert Emitter("run", no_store(quiet=True)).finish(doc) == OK
    out, err = capsys.readouterr()
    assert out == "" and err == "warning: measured for only 0.1 s\n"


def test_a_file_that_cannot_be_written_after_the_run_is_one_line_and_exit_1(tmp_path, capsys):
    (tmp_path / "gone").mkdir()
    emit = Emitter("run", no_store(quiet=True, json=str(tmp_path / "gone" / "r.json"), fio_json=str(tmp_path / "f.json")))
    (tmp_path / "gone").rmdir()                  # the folder vanished during the run
    assert emit.finish(rundoc.make_run()) == FAILURE
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("storlab run: error: json: cannot write ")
    assert json.loads((tmp_path / "f.json").read_text())["jobs"]    # the other file is still written


def test_a_failed_or_incomplete_run_exits_1_in_one_line(capsys):
    doc = rundoc.make_run()
    doc.update(complete=False, stop_reason="error", error="read at offset 0: Input/output error")
    assert Emitter("run", no_store(quiet=True)).finish(doc) == FAILURE
    assert capsys.readouterr().err == "storlab run: error: read at offset 0: Input/output error\n"
    doc.update(stop_reason="unheard_of", error=None)
    assert Emitter("scale", no_store(quiet=True), view="scale").finish(doc) == FAILURE
    assert capsys.readouterr().err == "storlab scale: error: incomplete (unheard_of); partial results kept\n"


def test_an_interrupted_run_says_what_its_view_keeps(capsys):
    doc = rundoc.interrupted(rundoc.make_run())
    doc["signal"] = "SIGINT"
    assert Emitter("diagnose", no_store(quiet=True), view="diagnose").finish(doc) == 130
    assert capsys.readouterr().err == ("storlab diagnose: interrupted; the layers measured so far are kept "
                                       "(complete: false, SIGINT)\n")
    assert Emitter("workload", no_store(quiet=True), view="workload").finish(doc, kept="epochs done so far kept") == 130
    assert "interrupted; epochs done so far kept" in capsys.readouterr().err


def test_a_block_that_did_not_verify_fails_the_run(capsys):
    doc = rundoc.make_run()
    doc["phases"][0]["verify"] = {"kind": "crc32c", "checked_blocks": 10, "mismatches": 1, "bs_mismatches": 0,
                                  "first": [{"target": "/t", "offset": 4096, "message": "crc32c mismatch"}]}
    assert Emitter("run", no_store(quiet=True)).finish(doc) == FAILURE
    err = capsys.readouterr().err.splitlines()
    assert err == [f"storlab run: verification failed in {doc['phases'][0]['name']}: 1 of 10 blocks (crc32c)",
                   "  /t offset 4096: crc32c mismatch"]


def test_an_unfinished_clean_up_fails_the_command(capsys):
    doc = rundoc.make_run()
    doc["cleanup"] = {"errors": ["rank 0: rmdir /x: Directory not empty", "rank 1: rmdir /y: Busy"]}
    assert Emitter("io500", no_store(quiet=True), view=View(lambda d: "", checks=VIEWS["io500"].checks)).finish(doc) == FAILURE
    assert capsys.readouterr().err == ("storlab io500: error: clean-up incomplete: rank 0: rmdir /x: Directory "
                                       "not empty; rank 1: rmdir /y: Busy\n")


def test_a_store_that_cannot_take_the_result_fails_the_command_unless_it_need_not(tmp_path, capsys, monkeypatch):
    from storlab import store

    def broken(*a, **k):
        raise store.StoreUnusable("store /x/results.db: unable to open database file")

    monkeypatch.setattr(store, "save", broken)
    doc = rundoc.make_run()
    assert Emitter("run", {"quiet": True}).finish(doc) == FAILURE
    err = capsys.readouterr().err
    assert err == ("storlab run: error: result not stored: store /x/results.db: unable to open database file; "
                   "nothing else keeps the document: give --json FILE (or fix the store) and run again\n")
    assert Emitter("fio", {"quiet": True}, must_store=False).finish(doc) == OK
    assert "result not stored" in capsys.readouterr().err


def test_diagnose_stores_its_probes_with_its_tag_and_says_so(capsys, monkeypatch):
    from storlab import store

    saved = []
    monkeypatch.setattr(store, "save", lambda doc, **kw: saved.append((doc["run_id"], tuple(kw["tags"]))))
    probes = [rundoc.make_run(seed=1), rundoc.make_run(seed=2)]
    diag = {**rundoc.make_run(seed=3), "kind": "diagnose"}
    emit = Emitter("diagnose", {"tag": ["mine"]}, view=View(lambda d: "the table"))
    assert emit.finish(diag, store=probes, tags=["diagnose:1234"], note="probes stored as 2 run(s)") == OK
    assert saved == [(p["run_id"], ("mine", "diagnose:1234")) for p in probes]
    out, err = capsys.readouterr()
    assert out == "the table\n" and err.endswith("probes stored as 2 run(s)\n")


def test_a_checkpoint_rewrites_the_json_file_but_never_stdout(tmp_path, capsys):
    target = tmp_path / "r.json"
    partial = {**rundoc.make_run(), "complete": False, "stop_reason": "running"}
    Emitter("run", no_store(json=str(target))).checkpoint(partial)
    assert json.loads(target.read_text())["stop_reason"] == "running"
    Emitter("run", no_store(json="-")).checkpoint(partial)
    assert capsys.readouterr().out == ""


def test_the_fio_view_goes_to_fios_output_file_with_its_logs(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("storlab.output.fioview.RENDERERS", {"terse": lambda doc, plan: f"3;{plan};{doc['kind']}\n"})
    monkeypatch.setattr("storlab.output.fioview.log_files", lambda doc, plan: [(str(tmp_path / "x_bw.1.log"), "1, 2, 0, 0, 0\n")])
    out = tmp_path / "out.txt"
    assert Emitter("fio", {}, view=fio_view("PLAN", "terse"), table_to=str(out), must_store=False).finish(
        {**rundoc.make_run(), "warnings": []}) == OK
    assert out.read_text() == "3;PLAN;run\n" and capsys.readouterr().out == ""
    assert (tmp_path / "x_bw.1.log").read_text() == "1, 2, 0, 0, 0\n"


def test_no_command_uses_cli_run_as_a_library():
    """The emit step, the progress line and the job of `run` and `scale` live below cli/; the
    commands share them there, not through `storlab run`'s module."""
    users = []
    for path in CLI.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module == "run":
                users.append(path.name)
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("cli.run"):
                users.append(path.name)
    assert users == []


def test_the_emit_step_is_written_once():
    """What the emit step does (store, --json, table, exit code) is called, not written, in the
    commands: none of them writes JSON, stores or picks a table itself."""
    for path in CLI.glob("*.py"):
        if path.name in ("results.py", "plan.py", "doctor.py", "report.py", "reference.py", "main.py",
                         "options_cli.py", "__init__.py"):
            continue      # commands that make no result document of a run
        text = path.read_text()
        for written_again in ("store.save(", "write_json(", "render_table(", "stop_exit_code(", "store_result("):
            assert written_again not in text, (path.name, written_again)
