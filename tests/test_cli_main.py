"""cli/main.py imports only the module of the command being run (issue 21 item 5, issue 25 item
4): a command's dependencies (matplotlib for charts, jsonschema, sqlite3, mpi4py) never load for
another. Checked in fresh interpreters, by the modules loaded when the command ends."""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from storlab.cli.main import SUBCOMMANDS, build_parser, commands_to_load

PYTHON_DIR = str(Path(__file__).resolve().parent.parent / "python")

# Run `main(argv)` in a fresh interpreter and print, as JSON on the last line of standard error,
# the top-level packages of interest that were imported by then and the storlab.cli modules.
_PROBE = """
import json, sys
from storlab.cli.main import main
argv = json.loads(sys.argv[1])
try:
    code = main(argv)
except SystemExit as e:
    code = e.code
watched = {"matplotlib", "jsonschema", "sqlite3", "_sqlite3", "mpi4py", "numpy"}
# standard modules a run used to import before its first I/O without using them (issue 25 item 4)
unused = {"importlib.metadata", "email", "uuid", "platform", "socket", "subprocess", "ctypes.util", "tomllib",
          "statistics", "csv", "traceback"}
print(json.dumps({"code": code, "loaded": sorted({m.split(".")[0] for m in sys.modules} & watched),
                  "unused": sorted(set(sys.modules) & unused),
                  "cli": sorted(m for m in sys.modules if m.startswith("storlab.cli.")),
                  "storlab": sorted(m for m in sys.modules if m.startswith("storlab."))}), file=sys.stderr)
"""


def loaded_by(argv: list[str], cwd: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": PYTHON_DIR, "STORLAB_STORE": str(cwd / "results.db")}
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argv)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["code"] in (0, None), proc.stderr
    return report


def test_version_loads_no_subcommand_and_nothing_heavy(tmp_path):
    report = loaded_by(["--version"], tmp_path)
    assert report["loaded"] == []
    assert report["cli"] == ["storlab.cli.main", "storlab.cli.options_cli"]


def test_run_help_loads_only_run(tmp_path):
    report = loaded_by(["run", "--help"], tmp_path)
    assert report["loaded"] == []   # no matplotlib, jsonschema, sqlite3, mpi4py, numpy
    assert set(report["cli"]) == {"storlab.cli.main", "storlab.cli.options_cli", "storlab.cli.run"}
    # the flags come from the option tables; what runs a job loads when one runs
    for running in ("storlab.measure.runner", "storlab.model", "storlab.jobs.job", "storlab.devices", "storlab.store"):
        assert running not in report["storlab"], running


def test_a_run_without_the_store_loads_no_chart_library(tmp_path):
    report = loaded_by(["run", "--no-store", "--target", str(tmp_path / "t.dat"), "--size", "1m",
                        "--rw", "read", "--time", "0.2s"], tmp_path)
    assert report["loaded"] == []   # sqlite3 too: nothing is stored
    assert "storlab.cli.report" not in report["cli"] and "storlab.cli.diagnose" not in report["cli"]


def test_a_run_imports_no_module_it_does_not_use(tmp_path):
    # storlab.__version__ comes from the engine, not importlib.metadata (with email, csv ...); the
    # run id is made without uuid (and platform), the host named without socket; libc's mincore is
    # bound without ctypes.util.find_library, which runs `ldconfig -p` in a subprocess; TOML,
    # statistics, CSV and tracebacks load where they are used, as do the metadata benchmark and the
    # steady-state check
    report = loaded_by(["run", "--no-store", "--target", str(tmp_path / "t.dat"), "--size", "1m",
                        "--rw", "read", "--time", "0.2s"], tmp_path)
    assert report["unused"] == []
    for elsewhere in ("storlab.measure.meta", "storlab.jobs.meta_options", "storlab.output.meta_table",
                      "storlab.measure.steady", "storlab.jobs.steadystate"):
        assert elsewhere not in report["storlab"], elsewhere   # metadata and steady-state runs only
    report = loaded_by(["--version"], tmp_path)
    assert report["unused"] == []


def test_the_version_is_the_engines():
    import storlab
    from storlab import _core

    assert storlab.__version__ == _core.__version__ and storlab.__version__[0].isdigit()


def test_a_stored_run_loads_sqlite_but_no_chart_library(tmp_path):
    report = loaded_by(["run", "--target", str(tmp_path / "t.dat"), "--size", "1m", "--rw", "read",
                        "--time", "0.2s", "--quiet"], tmp_path)
    assert report["loaded"] == ["_sqlite3", "sqlite3"]
    assert (tmp_path / "results.db").exists()


def test_help_of_a_command_that_draws_no_chart_loads_no_chart_library(tmp_path):
    for command in ("results", "diagnose", "meta", "plan", "doctor", "sweep", "scale", "fio"):
        if command in SUBCOMMANDS:
            report = loaded_by([command, "--help"], tmp_path)
            assert "matplotlib" not in report["loaded"] and "mpi4py" not in report["loaded"], command


@pytest.mark.parametrize("argv, commands", [
    (["run", "--time", "1s"], ("run",)),
    (["results", "show", "last"], ("results",)),
    (["--version"], ()),
    (["--help"], SUBCOMMANDS),
    (["-h", "run"], SUBCOMMANDS),
    ([], SUBCOMMANDS),
    (["no-such-command"], SUBCOMMANDS),     # argparse lists every command in its error
    (["--version", "run"], ()),
])
def test_commands_to_load(argv, commands):
    assert commands_to_load(argv) == commands


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_registers_on_its_own(name):
    # a command's module must not rely on another having registered first
    parser = build_parser((name,))
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            args = parser.parse_args([name, "--help"])
        except SystemExit as stop:
            assert stop.code == 0 and f"storlab {name}" in out.getvalue()
        else:   # `storlab fio` reads fio's own options, --help among them, and answers in its run
            assert args.command == name and callable(args.func)


def test_top_level_help_lists_every_subcommand():
    text = build_parser(commands_to_load(["--help"])).format_help()
    for name in SUBCOMMANDS:
        assert f"    {name} " in text or f"    {name}\n" in text, name


def test_an_unknown_command_names_the_choices(capsys):
    from storlab.cli.main import main

    with pytest.raises(SystemExit) as stop:
        main(["no-such-command"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'no-such-command'" in err and "'report'" in err
