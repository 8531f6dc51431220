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
    """Every row name of every command's table module (jobs/tables/*.py), and the run and meta tables."""
    import importlib
    import pkgutil

    import storlab.jobs.tables as tables
    from storlab.jobs.meta_options import META_OPTIONS
    from storlab.jobs.options import OPTIONS

    names = {o.name for o in (*OPTIONS, *META_OPTIONS)}
    for info in pkgutil.iter_modules(tables.__path__):
        module = importlib.import_module(f"storlab.jobs.tables.{info.name}")
        names |= {o.name for table in getattr(module, "COMMANDS", ()) for o in table.options}
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
# time, to draw a curve or sweep a profile: a list row (options.list_row) means what its base row
# means, so --rw, --qd and --request have one meaning (--threads keeps meta's own help).
# --accelerators: the accelerators workload emulates (per process), and those plan perf / recommend
# --workload predict for: the same count, said for each. --time: how long the work runs, a phase
# in run, each stream in net (as iperf3 -t)
SAME_NAME_OWN_HELP = {"--seed", "--threads", "--target", "--ranks", "--scale", "--list",
                      "--accelerators", "--mode", "--time"}


def _meaning(action: argparse.Action) -> tuple[str, str]:
    """What a flag means: its destination and help; a list row's is its base row's (a list of what
    that flag takes)."""
    return getattr(action, "list_of", None) or (action.dest, action.help)


def test_one_flag_name_has_one_meaning_across_commands():
    seen: dict[str, set[tuple[str, str]]] = {}
    for _, parser in _parsers(build_parser()):
        for action in parser._actions:
            if action.help == argparse.SUPPRESS:      # deprecated old spellings
                continue
            for flag in action.option_strings:
                seen.setdefault(flag, set()).add(_meaning(action))
    differing = {flag for flag, meanings in seen.items() if len(meanings) > 1}
    assert differing == SAME_NAME_OWN_HELP


# Flags whose value form still differs between commands, each with why; shrink this, never grow it.
# --target: run, sweep and scale take files or devices (repeatable paths), meta and replay one folder.
# --ranks: scale and diagnose take a list of rank counts, replay one count (its ranks, at most 256).
ONE_NAME_TWO_FORMS = {"--target", "--ranks"}


def test_one_flag_name_has_one_value_form_across_commands():
    """A flag takes the same kind of value everywhere; a list row takes a list of its base's kind
    (plan perf's --qd is a list of the int `run --qd` takes), which counts as the base's form."""
    forms: dict[str, set[str]] = {}
    for _, parser in _parsers(build_parser()):
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or not action.option_strings:
                continue
            for flag in action.option_strings:
                forms.setdefault(flag, set()).add(getattr(action, "value_form", "internal"))
    assert {flag for flag, kinds in forms.items() if len(kinds) > 1} == ONE_NAME_TWO_FORMS


def test_a_list_flag_means_a_list_of_what_its_base_flag_takes():
    """plan perf's --qd, --rw, --threads and --request take several of what `run --qd` (and plan
    geometry's --request) take one of: the base's parser reads each value, under the list's flag."""
    from storlab.jobs.options import BY_NAME, OptionError, parse_option, value_form
    from storlab.jobs.tables.plan import COMMANDS, REQUEST

    perf = {o.name: o for t in COMMANDS if t.command == "plan perf" for o in t.options}
    assert perf["qd"].list_of is BY_NAME["qd"] and perf["threads"].list_of is BY_NAME["threads"]
    assert perf["rw"].list_of is BY_NAME["rw"] and perf["request"].list_of is REQUEST
    assert value_form(perf["request"]) == "list of size" and perf["qd"].help.startswith(BY_NAME["qd"].help)
    assert parse_option(perf["qd"], "1,4,32") == (1, 4, 32)
    assert parse_option(perf["request"], "4k,1m") == (4096, 1 << 20)
    assert parse_option(perf["rw"], "read,randread") == ("read", "randread")
    for row, raw, words in [(perf["qd"], "70000", "--qd: '70000' is out of range; allowed: >= 1 and <= 65536"),
                            (perf["qd"], "two", "--qd: expected a whole number, got 'two'"),
                            (perf["rw"], "trim", "--rw: 'trim' is not allowed; use one of: read, write, randread, "
                                                 "randwrite"),
                            (perf["request"], "1000", "--request: 1000 bytes is out of range; allowed: multiples "
                                                      "of 512 bytes up to 1 GiB"),
                            (perf["threads"], ",".join(["1"] * 33), "--threads: give 1 to 32 comma-separated "
                                                                    "values, got 33"),
                            # issue 39: a value twice or an empty item is refused, never dropped silently
                            (perf["rw"], "read,randread,read", "--rw: 'read' is given twice (as 'read'); each value once"),
                            (perf["threads"], "1,,2", "--threads: '1,,2' has an empty item; give values separated "
                                                      "by single commas")]:
        with pytest.raises(OptionError) as e:
            parse_option(row, raw)
        assert str(e.value) == words
    # the docs name the value form: a list of the base's kind
    page = PAGES["options-plan.md"]()
    assert "| `--qd` | list of int |" in page and "| `--request` | size (bytes) |" in page


def test_no_cli_module_defines_an_option_row():
    """cli/ only wires commands together: every row and table is made in jobs/ (jobs/options.py,
    jobs/meta_options.py, jobs/tables/), so no cli module calls Option, CommandTable, list_row or
    command_row (nor replaces a row's fields)."""
    import ast

    makers = {"Option", "CommandTable", "list_row", "command_row"}
    cli = Path(__file__).resolve().parent.parent / "python" / "storlab" / "cli"
    made = []
    for path in sorted(cli.glob("*.py")):
        tree = ast.parse(path.read_text())
        rows = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for a in node.names if a.name in makers}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name in makers | rows:
                made.append(f"{path.name}:{node.lineno} calls {name}")
            # dataclasses.replace(ROW, ...) makes a row too
            if name == "replace" and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id.isupper():
                made.append(f"{path.name}:{node.lineno} replaces {node.args[0].id}")
    assert made == []


def test_every_command_has_its_table_module_and_takes_only_its_rows():
    """jobs/tables/<command>.py holds each command's rows (`storlab fio` reads fio's own command line);
    sweep and scale also take every run option, as documented on their pages."""
    import importlib

    from storlab.jobs.options import OPTIONS

    internal = {"help", "jobfile", "command", "plan_command", "results_command"}
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name in (n for n in cli_main.SUBCOMMANDS if n != "fio"):
        tables = importlib.import_module(f"storlab.jobs.tables.{name}").COMMANDS
        assert tables and all(t.command.split()[0] == name for t in tables), name
        names = {o.name for t in tables for o in t.options}
        if name in ("sweep", "scale"):
            names |= {o.name for o in OPTIONS}
        for path, sub in _parsers(commands[name], (name,)):
            for action in sub._actions:
                if isinstance(action, argparse._SubParsersAction) or action.dest in internal:
                    continue
                assert action.dest in names, f"storlab {' '.join(path)}: {action.option_strings or action.dest}"


def test_plan_table_values_are_the_models():
    """The plan table writes the model's value lists with their help; they must stay the model's."""
    from storlab.diagnose.run import DEFAULT_BUDGET_S
    from storlab.jobs.tables import diagnose, plan
    from storlab.model.notation import MAX_DRIVES
    from storlab.model.performance import SHARING_MODES
    from storlab.model.predict import MIRROR_READ_POLICIES, WORKLOAD_PATTERNS
    from storlab.model.stack import AGGREGATIONS, FILESYSTEMS, RAID_ENGINES
    from storlab.planner.recommend import DEFAULT_LEVELS

    assert tuple(plan.AGGREGATIONS) == AGGREGATIONS and tuple(plan.RAID_ENGINES) == RAID_ENGINES
    assert tuple(plan.FILESYSTEMS) == FILESYSTEMS and tuple(plan.SHARING_MODES) == SHARING_MODES
    assert tuple(plan.MIRROR_READ_POLICIES) == MIRROR_READ_POLICIES
    assert plan.MODELLED_PATTERNS == WORKLOAD_PATTERNS and tuple(plan.CURVE_RW.choices) == WORKLOAD_PATTERNS
    assert plan.MAX_DRIVES == MAX_DRIVES and plan.DEFAULT_LEVELS == DEFAULT_LEVELS
    assert diagnose.DEFAULT_BUDGET_S == DEFAULT_BUDGET_S


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
    (["plan", "perf", "R6/8", "--ssd", "--drive-latency", "fast"], "--drive-latency"),
    (["plan", "perf", "R6/8", "--ssd", "--drive-write-latency", "2s"], "--drive-write-latency"),
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
