"""Every command's flags come from option tables: generated reference pages are current, one flag
name has one meaning, a bad value is one line naming the flag, renamed flags still work with a
deprecation notice, `--json [PATH]` has one form everywhere, and an unexpected error is reported
as a bug (exit 70) instead of passing for a user's mistake."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from storlab import store
from storlab.cli import main as cli_main
from storlab.cli.main import ExitCode, build_parser, main
from storlab.cli.reference import PAGES
from storlab.errors import UserError

DOCS = Path(__file__).resolve().parent.parent / "docs"
STACKS = Path(__file__).resolve().parents[1] / "examples" / "stacks"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("page", sorted(PAGES))
def test_reference_page_is_current(page):
    assert (DOCS / page).read_text() == PAGES[page]() + "\n", \
        f"docs/{page} is stale: python -m storlab.cli.reference"


def test_reference_check_reports_a_stale_page(tmp_path):
    from storlab.cli.reference import main as reference

    assert reference([str(tmp_path)]) == 0                      # writes every page
    assert reference([str(tmp_path), "--check"]) == 0
    (tmp_path / "options-plan.md").write_text("old\n")
    assert reference([str(tmp_path), "--check"]) == 1


def _parsers(parser, path=()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def _table_names() -> set[str]:
    from storlab.cli import diagnose, doctor, plan, report, results
    from storlab.cli.io500 import IO500_OPTIONS
    from storlab.cli.replay import REPLAY_OPTIONS
    from storlab.cli.scale import SCALE_OPTIONS
    from storlab.cli.workload import WORKLOAD_OPTIONS
    from storlab.jobs.meta_options import META_OPTIONS
    from storlab.jobs.options import OPTIONS
    from storlab.measure.sweep import SWEEP_OPTIONS

    names = {o.name for o in (*OPTIONS, *META_OPTIONS, *SWEEP_OPTIONS, *SCALE_OPTIONS, *REPLAY_OPTIONS, *IO500_OPTIONS, *WORKLOAD_OPTIONS)}
    for module in (plan, doctor, results, report, diagnose):
        names |= {o.name for table in module.COMMANDS for o in table.options}
    return names


def test_every_argument_of_every_command_is_a_table_row():
    names = _table_names()
    # fio_args: `storlab fio` hands its whole command line to fio's reader (jobs/fio/cmdline.py),
    # whose options are the rows of fio's table (jobs/fio/options.py, docs/fio.md)
    internal = {"help", "version", "jobfile", "command", "plan_command", "results_command", "fio_args"}
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction) or action.dest in internal:
                continue
            assert action.dest in names, f"storlab {' '.join(path)}: {action.option_strings or action.dest} " \
                                         "is not from an option table"


# Flags that keep a command-specific help: the same meaning in words fitting the command (seed,
# threads; --ranks: rank counts, a LIST in scale and diagnose), and meta's --target, a directory
# rather than run's repeatable file or device; --scale: the fraction of a foreign workload run for a
# trial (a replay's requests, a workload's dataset); --list: what the command knows, printed (io500's
# sections and keys, the built-in workloads).
# plan perf and plan profile take lists of what run (and plan geometry, --request) take one at a
# time, to draw a curve or sweep a profile: the same meaning per point, their own help.
# --accelerators: the accelerators workload emulates (per process), and those plan perf / recommend
# --workload predict for: the same count, said for each
SAME_NAME_OWN_HELP = {"--seed", "--threads", "--target", "--ranks", "--scale", "--list", "--rw", "--qd", "--request",
                      "--accelerators", "--mode"}


def test_one_flag_name_has_one_meaning_across_commands():
    seen: dict[str, set[tuple[str, str]]] = {}
    for _, parser in _parsers(build_parser()):
        for action in parser._actions:
            if action.help == argparse.SUPPRESS:      # deprecated old spellings
                continue
            for flag in action.option_strings:
                seen.setdefault(flag, set()).add((action.dest, action.help))
    differing = {flag for flag, meanings in seen.items() if len(meanings) > 1}
    assert differing == SAME_NAME_OWN_HELP


@pytest.mark.parametrize("argv, flag", [
    (["plan", "recommend", "--drives", "24", "--levels", "x"], "--levels"),
    (["plan", "recommend", "--drives", "24", "--levels", "5,61"], "--levels"),
    (["plan", "recommend", "--drives", "x"], "--drives"),
    (["plan", "recommend", "--drives", "24", "--bays", "0"], "--bays"),
    (["plan", "recommend", "--drives", "24", "--chunks", "64k,zz"], "--chunks"),
    (["plan", "recommend", "--drives", "24", "--max-annual-loss", "2"], "--max-annual-loss"),
    (["plan", "recommend", "--drives", "24", "--read-iops", "many"], "--read-iops"),
    (["plan", "geometry", "R6/8", "--chunk", "12q"], "--chunk"),
    (["plan", "geometry", "R6/8", "--count", "1.5"], "--count"),
    (["plan", "geometry", "R6/8", "--pattern", "zigzag"], "--pattern"),
    (["plan", "geometry", "R6/8", "--parity", "raid-card"], "--parity"),
    (["plan", "reliability", "R6/8", "--period", "soon"], "--period"),
    (["plan", "reliability", "R6/8", "--mtbf", "-5"], "--mtbf"),
    (["plan", "perf", "R6/8", "--cap", "nolimit"], "--cap"),
    (["plan", "perf", "R6/8", "--mode", "parallel"], "--mode"),
    (["doctor", "--fail-on", "sometimes"], "--fail-on"),
    (["results", "list", "--limit", "0"], "--limit"),
    (["results", "export", "--with-tag", "x", "--format", "xml"], "--format"),
    (["scale", "--ranks", "1,two"], "--ranks"),
])
def test_a_bad_value_is_one_line_naming_the_flag(argv, flag, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("STORLAB_STORE", str(tmp_path / "none.db"))
    code, out, err = run(capsys, *argv)
    assert code == ExitCode.USAGE
    lines = [line for line in err.splitlines() if not line.startswith("usage:") and line.startswith("storlab")]
    assert len(lines) == 1 and flag in lines[0], err
    assert "Traceback" not in err and "invalid literal" not in err


def test_plan_recommend_levels_x_no_longer_shows_python_text(capsys):
    code, _, err = run(capsys, "plan", "recommend", "--drives", "24", "--levels", "x")
    assert code == ExitCode.USAGE
    assert err.strip() == ("storlab plan: error: --levels: expected comma-separated whole numbers "
                           "(RAID levels), got 'x'")


def test_renamed_plan_engine_still_works_with_a_notice(capsys):
    code, out, err = run(capsys, "plan", "geometry", "R6/8", "--engine", "md", "--json")
    assert code == 0 and json.loads(out)["layout"] == "R6/8"
    assert err == "warning: --engine is deprecated for plan; use --parity\n"
    new = run(capsys, "plan", "geometry", "R6/8", "--parity", "md", "--json")
    assert new[2] == "" and json.loads(new[1]) | {"created_at": None} == json.loads(out) | {"created_at": None}


@pytest.fixture
def tagged(tmp_path, monkeypatch):
    import sys

    sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "results"))
    import rundoc

    db = tmp_path / "results.db"
    monkeypatch.setenv("STORLAB_STORE", str(db))
    docs = rundoc.bs_sweep(sizes=(4096, 65536))
    for d in docs:
        store.save(d, db, tags=["sweep"])
    return docs


def test_renamed_results_tag_and_target_still_work_with_a_notice(tagged, capsys):
    code, out, err = run(capsys, "results", "list", "--tag", "sweep", "--json")
    assert code == 0 and len(json.loads(out)) == 2
    assert err == "warning: --tag is deprecated for results; use --with-tag\n"
    code, out, err = run(capsys, "results", "list", "--with-tag", "sweep", "--json")
    assert code == 0 and len(json.loads(out)) == 2 and err == ""
    target = tagged[0]["job"]["target"][0]
    code, out, err = run(capsys, "results", "list", "--target", target, "--json")
    assert code == 0 and len(json.loads(out)) == 2
    assert err == "warning: --target is deprecated for results; use --target-glob\n"
    code, out, err = run(capsys, "results", "list", "--target-glob", target[:-1] + "*", "--json")
    assert code == 0 and len(json.loads(out)) == 2 and err == ""


def test_renamed_report_tag_still_works_with_a_notice(tagged, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    code, _, err = run(capsys, "report", "--tag", "sweep", "-o", str(tmp_path / "r.html"))
    assert code == 0 and (tmp_path / "r.html").stat().st_size > 0
    assert err.splitlines()[0] == "warning: --tag is deprecated for report; use --with-tag"


def test_renamed_meta_files_still_works_with_a_notice(capsys, tmp_path):
    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else tmp_path
    code, out, err = run(capsys, "meta", "--target", str(shm), "--files", "3", "--json", "-", "-q", "--no-store")
    assert code == 0 and json.loads(out)["job"]["files"] == 3
    assert "warning: --files is deprecated for meta; use --files-per-thread" in err.splitlines()


@pytest.mark.parametrize("argv", [
    ["plan", "geometry", "R6/8", "--json"],
    ["plan", "geometry", "--json", "R6/8"],            # a word that is no .json name stays the STACK
    ["plan", "geometry", "R6/8", "--json", "-"],
])
def test_json_alone_or_dash_goes_to_stdout(argv, capsys):
    code, out, _ = run(capsys, *argv)
    assert code == 0 and json.loads(out)["schema"] == "storlab.plan.geometry/1"


def test_json_path_writes_the_file_for_a_command_that_had_a_switch(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "plan", "reliability", "R6/8", "--mttr", "24", "--json", "rel.json")
    assert code == 0 and out == ""
    assert json.loads((tmp_path / "rel.json").read_text())["schema"] == "storlab.plan.reliability/1"
    code, out, _ = run(capsys, "plan", "perf", "R6/8", "--json=perf.out")
    assert code == 0 and out == "" and json.loads((tmp_path / "perf.out").read_text())["kind"] == "plan"


def test_json_into_a_missing_folder_is_refused_before_the_work(capsys, tmp_path):
    code, _, err = run(capsys, "plan", "geometry", "R6/8", f"--json={tmp_path}/gone/g.json")
    assert code == ExitCode.USAGE and err.startswith("storlab plan: error: json: folder") and err.count("\n") == 1


def test_results_list_json_path(tagged, capsys, tmp_path):
    code, out, _ = run(capsys, "results", "list", "--json", str(tmp_path / "list.json"))
    assert code == 0 and out == ""
    assert len(json.loads((tmp_path / "list.json").read_text())) == 2


def test_run_json_alone_means_stdout(capsys, tmp_path):
    code, out, _ = run(capsys, "run", "--target", str(tmp_path / "t.dat"), "--size", "64k", "--bs", "4k",
                       "--engine", "null", "--no-store", "-q", "--json")
    assert code == 0 and json.loads(out)["kind"] == "run"


def test_run_json_before_a_job_file_leaves_the_job_file(capsys, tmp_path):
    job = tmp_path / "job.toml"
    job.write_text(f'target = "{tmp_path / "t.dat"}"\nsize = "64k"\nbs = "4k"\nengine = "null"\n')
    code, out, _ = run(capsys, "run", "--no-store", "-q", "--json", str(job))
    assert code == 0 and json.loads(out)["job"]["bs"] == 4096
    assert job.read_text().startswith("target")                 # not overwritten with JSON


def test_plan_script_output_file(capsys, tmp_path):
    code, out, err = run(capsys, "plan", "script", "R6/8", "--parity", "md", "-o", str(tmp_path / "build.sh"))
    assert code == 0 and "wrote" in out
    assert "mdadm" in (tmp_path / "build.sh").read_text()


def _failing_command(exc: BaseException):
    def run_command(args):
        raise exc
    return run_command


@pytest.mark.parametrize("exc", [KeyError("phase"), ValueError("invalid literal for int() with base 10: 'x'"),
                                 TypeError("unsupported operand")])
def test_an_unexpected_error_is_a_bug_report_with_exit_70(exc, capsys, monkeypatch):
    from storlab.cli import doctor

    monkeypatch.setattr(doctor, "run", _failing_command(exc))
    code, out, err = run(capsys, "doctor")
    assert code == ExitCode.BUG == 70
    lines = err.splitlines()
    assert lines[0].startswith("storlab doctor: internal error (a bug in storlab") and type(exc).__name__ in lines[0]
    assert "please report this bug" in lines[-1]
    assert "test_cli_options.py" in err                      # the frame where it was raised
    assert len(lines) <= 2 + 2 * cli_main.BUG_FRAMES


def test_a_user_error_from_anywhere_is_one_line_with_exit_2(capsys, monkeypatch):
    from storlab.cli import doctor

    monkeypatch.setattr(doctor, "run", _failing_command(UserError("stack: no such file x.toml")))
    code, _, err = run(capsys, "doctor")
    assert code == ExitCode.USAGE and err == "storlab doctor: error: stack: no such file x.toml\n"


def test_model_and_option_errors_are_user_errors():
    from storlab.devices.safety import TargetRefused
    from storlab.jobs.fio.parse import FioJobError
    from storlab.jobs.options import OptionError
    from storlab.jobs.tomlfile import TomlFileError
    from storlab.jobs.translation import Refusal
    from storlab.model.notation import NotationError
    from storlab.model.stack import StackError
    from storlab.output.files import OutputError
    from storlab.store import StoreError
    from storlab.units import UnitError

    for cls in (StackError, NotationError, OptionError, UnitError, FioJobError, Refusal, TomlFileError, StoreError,
                TargetRefused, OutputError, cli_main.UsageError):
        assert issubclass(cls, UserError), cls
