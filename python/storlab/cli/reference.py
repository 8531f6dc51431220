"""The option reference pages of every command, generated from the option tables: docs/options.md
(`storlab run`, rendered by jobs/options.py) and docs/options-<command>.md for the others.

Regenerate them all with `python -m storlab.cli.reference` (from the repository root, or give the
docs folder); `--check` only reports stale pages. tests/test_cli_options.py keeps them current.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from ..jobs.options import BY_NAME, render_reference, render_rows
from .options_cli import CommandTable

EXIT_CODES = ("Exit codes: 0 done; 1 the work failed (an I/O error, a failed run, --fail-on findings, an "
              "output that could not be written after the run); 2 a bad option, value, job or stack "
              "file, target or output path (one line naming it and what is allowed); 70 an internal "
              "error: a bug in storlab, shown with the last frames of its traceback (please report it); "
              "129, 130, 143 stopped by SIGHUP, Ctrl-C, SIGTERM (what was measured is kept).")

JSON_RULE = ("`--json [PATH]`: alone or `-` writes the document to standard output; `--json=PATH` writes "
             "it into PATH atomically (a reader never sees half a file). As a separate word after "
             "`--json`, {rule}.")
JSON_NAME_RULE = "only `-` or a name ending in `.json` is taken as the PATH (any other word is a positional argument)"
JSON_JOBFILE_RULE = "any word but a `.toml` job file is taken as the PATH"


def _page(command: str, source: str, intro: list[str], tables: tuple[CommandTable, ...]) -> str:
    lines = [f"# `storlab {command}` options", "",
             f"Generated from the option tables in `{source}`; do not edit by hand "
             "(`python -m storlab.cli.reference`).", "", *intro, "", EXIT_CODES, ""]
    for table in tables:
        lines += [f"## `storlab {table.command}`", "", table.summary[:1].upper() + table.summary[1:] + ".", "",
                  *render_rows(table.options, job_keys=table.job_keys), ""]
    return "\n".join(lines)


def plan_page() -> str:
    from .plan import COMMANDS

    return _page("plan", "python/storlab/cli/plan.py",
                 ["Sizes take k, m, g (binary) or KB, MB (decimal); rates are sizes per second; periods "
                  "take y, d, h, m, s. " + JSON_RULE.format(rule=JSON_NAME_RULE)], COMMANDS)


def doctor_page() -> str:
    from .doctor import COMMANDS

    return _page("doctor", "python/storlab/cli/doctor.py", [JSON_RULE.format(rule=JSON_NAME_RULE)], COMMANDS)


def results_page() -> str:
    from .results import COMMANDS

    return _page("results", "python/storlab/cli/results.py",
                 ["Runs are named by run id, a unique prefix of one, `last` (the most recent stored run), "
                  "`last~N` (N runs before it, as git's HEAD~N) or a JSON result file. "
                  + JSON_RULE.format(rule=JSON_NAME_RULE)], COMMANDS)


def report_page() -> str:
    from .report import COMMANDS

    return _page("report", "python/storlab/cli/report.py",
                 ["With no run named (and no `--with-tag`), the report is of the most recent stored run; "
                  "runs are named as in `storlab results` (id, prefix, `last`, `last~N`, JSON file)."],
                 COMMANDS)


def meta_page() -> str:
    from ..jobs.meta_options import META_OPTIONS, SHARED_RUN_OPTIONS
    from .meta import MPI_RUN_OPTIONS

    table = CommandTable("meta", "the metadata benchmark (docs/meta.md); the options are also job-file keys",
                         (*(o for o in META_OPTIONS if o.name not in SHARED_RUN_OPTIONS),
                          *(BY_NAME[n] for n in SHARED_RUN_OPTIONS + MPI_RUN_OPTIONS)), job_keys=True)
    return _page("meta", "python/storlab/measure/meta.py", [JSON_RULE.format(rule=JSON_JOBFILE_RULE)], (table,))


def sweep_page() -> str:
    from ..measure.sweep import SWEEP_OPTIONS

    table = CommandTable("sweep", "the sweep's own options (docs/sweep.md)", SWEEP_OPTIONS)
    return _page("sweep", "python/storlab/measure/sweep.py",
                 ["`storlab sweep` takes every option of `storlab run` (docs/options.md); a "
                  "comma-separated list of values sweeps it. " + JSON_RULE.format(rule=JSON_JOBFILE_RULE)],
                 (table,))


def scale_page() -> str:
    from .scale import SCALE_OPTIONS

    table = CommandTable("scale", "the scaling run's own options (docs/mpi.md)", SCALE_OPTIONS)
    return _page("scale", "python/storlab/cli/scale.py",
                 ["`storlab scale` takes every option of `storlab run` (docs/options.md). "
                  + JSON_RULE.format(rule=JSON_JOBFILE_RULE)], (table,))


def io500_page() -> str:
    from .io500 import IO500_OPTIONS, SHARED

    table = CommandTable("io500", "the IO500 benchmark (docs/io500.md); the .ini file holds the benchmark's own settings",
                         (*IO500_OPTIONS, *(BY_NAME[n] for n in SHARED)))
    return _page("io500", "python/storlab/cli/io500.py", [], (table,))


def diagnose_page() -> str:
    from .diagnose import COMMANDS

    return _page("diagnose", "python/storlab/cli/diagnose.py", [JSON_RULE.format(rule=JSON_NAME_RULE)], COMMANDS)


def replay_page() -> str:
    from .replay import REPLAY_OPTIONS, SHARED_OUTPUT

    table = CommandTable("replay", "a Darshan log replayed under a target folder (docs/replay.md)",
                         (*REPLAY_OPTIONS, *(BY_NAME[n] for n in SHARED_OUTPUT)))
    return _page("replay", "python/storlab/cli/replay.py", [JSON_RULE.format(rule=JSON_NAME_RULE)], (table,))


def workload_page() -> str:
    from .workload import COMMON, WORKLOAD_OPTIONS

    table = CommandTable("workload", "AI training and checkpoint I/O as MLPerf Storage / DLIO define it "
                         "(docs/workloads.md); the workload file holds the workload's own settings",
                         (*WORKLOAD_OPTIONS, *(BY_NAME[n] for n in COMMON)))
    return _page("workload", "python/storlab/cli/workload.py", [JSON_RULE.format(rule=JSON_NAME_RULE)], (table,))


def run_page() -> str:
    return render_reference()


# Page file (under docs/) -> its text.
PAGES: dict[str, Callable[[], str]] = {
    "options.md": run_page,
    "options-sweep.md": sweep_page,
    "options-meta.md": meta_page,
    "options-scale.md": scale_page,
    "options-plan.md": plan_page,
    "options-doctor.md": doctor_page,
    "options-results.md": results_page,
    "options-report.md": report_page,
    "options-diagnose.md": diagnose_page,
    "options-replay.md": replay_page,
    "options-io500.md": io500_page,
    "options-workload.md": workload_page,
}



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m storlab.cli.reference", description=__doc__.split("\n\n")[0])
    parser.add_argument("docs", nargs="?", default="docs", help="the docs folder (default: ./docs)")
    parser.add_argument("--check", action="store_true", help="only list stale pages; exit 1 if any")
    args = parser.parse_args(argv)
    stale = []
    for name, render in PAGES.items():
        path = Path(args.docs) / name
        text = render() + "\n"
        if not path.exists() or path.read_text() != text:
            stale.append(name)
            if not args.check:
                path.write_text(text)
    verb = "stale" if args.check else "written"
    for name in stale:
        print(f"{verb}: {Path(args.docs) / name}", file=sys.stderr)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
