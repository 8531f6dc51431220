"""The option reference pages of every command, generated from the option tables: docs/options.md
(`storlab run`, rendered by jobs/options.py) and docs/options-<command>.md for the others (their
tables: jobs/meta_options.py and jobs/tables/).

Regenerate them all with `python -m storlab.cli.reference` (from the repository root, or give the
docs folder); `--check` only reports stale pages. tests/test_cli_options.py keeps them current.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from ..jobs.options import render_reference, render_rows
from ..jobs.tables.shared import CommandTable

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
    from ..jobs.tables.plan import COMMANDS

    return _page("plan", "python/storlab/jobs/tables/plan.py",
                 ["Sizes take k, m, g (binary) or KB, MB (decimal); rates are sizes per second; periods "
                  "take y, d, h, m, s. " + JSON_RULE.format(rule=JSON_NAME_RULE)], COMMANDS)


def doctor_page() -> str:
    from ..jobs.tables.doctor import COMMANDS

    return _page("doctor", "python/storlab/jobs/tables/doctor.py", [JSON_RULE.format(rule=JSON_NAME_RULE)], COMMANDS)


def results_page() -> str:
    from ..jobs.tables.results import COMMANDS

    return _page("results", "python/storlab/jobs/tables/results.py",
                 ["Runs are named by run id, a unique prefix of one, `last` (the most recent stored run), "
                  "`last~N` (N runs before it, as git's HEAD~N) or a JSON result file. "
                  + JSON_RULE.format(rule=JSON_NAME_RULE)], COMMANDS)


def report_page() -> str:
    from ..jobs.tables.report import COMMANDS

    return _page("report", "python/storlab/jobs/tables/report.py",
                 ["With no run named (and no `--with-tag`), the report is of the most recent stored run; "
                  "runs are named as in `storlab results` (id, prefix, `last`, `last~N`, JSON file)."],
                 COMMANDS)


def meta_page() -> str:
    from ..jobs.tables.meta import COMMANDS

    return _page("meta", "python/storlab/jobs/meta_options.py", [JSON_RULE.format(rule=JSON_JOBFILE_RULE)], COMMANDS)


def sweep_page() -> str:
    from ..jobs.tables.sweep import COMMANDS, SWEPT_BY_LIST

    return _page("sweep", "python/storlab/jobs/tables/sweep.py",
                 ["`storlab sweep` takes every option of `storlab run` (docs/options.md); a "
                  "comma-separated list of values sweeps it. " + JSON_RULE.format(rule=JSON_JOBFILE_RULE), "",
                  "Given a comma-separated list, each of these flags takes a list of what it takes in `storlab "
                  "run` (each value once): " + ", ".join(f"`{o.flag}`" for o in SWEPT_BY_LIST) + ". On/off "
                  "options, targets and texts are swept with `--sweep OPTION=V1,V2,...`."],
                 COMMANDS)


def scale_page() -> str:
    from ..jobs.tables.scale import COMMANDS

    return _page("scale", "python/storlab/jobs/tables/scale.py",
                 ["`storlab scale` takes every option of `storlab run` (docs/options.md). "
                  + JSON_RULE.format(rule=JSON_JOBFILE_RULE)], COMMANDS)


def io500_page() -> str:
    from ..jobs.tables.io500 import COMMANDS

    return _page("io500", "python/storlab/jobs/tables/io500.py", [], COMMANDS)


def diagnose_page() -> str:
    from ..jobs.tables.diagnose import COMMANDS

    return _page("diagnose", "python/storlab/jobs/tables/diagnose.py", [JSON_RULE.format(rule=JSON_NAME_RULE)], COMMANDS)


def replay_page() -> str:
    from ..jobs.tables.replay import COMMANDS

    return _page("replay", "python/storlab/jobs/tables/replay.py", [JSON_RULE.format(rule=JSON_NAME_RULE)], COMMANDS)


def net_page() -> str:
    from ..jobs.tables.net import COMMANDS

    return _page("net", "python/storlab/jobs/tables/net.py",
                 ["Run it under mpiexec or srun with a rank on every client node and every server node. "
                  + JSON_RULE.format(rule=JSON_NAME_RULE)], COMMANDS)


def workload_page() -> str:
    from ..jobs.tables.workload import COMMANDS

    return _page("workload", "python/storlab/jobs/tables/workload.py", [JSON_RULE.format(rule=JSON_NAME_RULE)],
                 COMMANDS)


def kvcache_page() -> str:
    from ..jobs.tables.kvcache import COMMANDS

    return _page("kvcache", "python/storlab/jobs/tables/kvcache.py",
                 ["Under mpiexec or srun every rank is one client with the full per-client load. "
                  + JSON_RULE.format(rule=JSON_NAME_RULE)], COMMANDS)


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
    "options-net.md": net_page,
    "options-kvcache.md": kvcache_page,
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
