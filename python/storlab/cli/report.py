"""`storlab report [RUN...] -o report.html [--png DIR]`: a self-contained HTML report with charts of
stored runs (ids, unique prefixes, `last`, `last~N`), runs selected by tag, or JSON result files;
with no run named, the most recent stored run."""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from .. import store
from ..jobs.options import BY_NAME, Option
from ..output.files import check_destination, check_folder
from .main import UsageError
from .options_cli import OUTPUT, CommandTable, add_table_arguments, parse_table_args
from .results import WITH_TAG, load_docs

__all__ = ["register", "run", "COMMANDS"]


COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("report", "HTML report with charts of stored or exported runs", (
        Option("runs", "str", "run id, unique prefix, last, last~N (N runs before the last) or JSON result "
               "file; several are compared; none (and no --with-tag): the most recent stored run",
               positional="*", default=(), metavar="RUN", core=False, job_key=False),
        WITH_TAG,
        replace(OUTPUT, required=True),
        Option("png", "str", "also write each chart as a PNG file into DIR", metavar="DIR",
               category="output", core=False, job_key=False),
        Option("title", "str", "title of the report (default: the runs and what varies)", metavar="TEXT",
               category="output", core=False, job_key=False),
        BY_NAME["store"])),
)


def register(subparsers) -> None:
    (table,) = COMMANDS
    p = subparsers.add_parser("report", help=table.summary, description=__doc__.split("\n\n")[0])
    add_table_arguments(p, table.options, command="report")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        # matplotlib comes with storlab; a broken install gets one line, not a traceback
        from ..output.report import write_report
    except ImportError as e:
        raise UsageError(f"report: needs matplotlib ({e}), which is installed with storlab: reinstall with: pip install storlab") from None
    parse_table_args(args, COMMANDS[0].options)
    check_destination(args.output, "output", allow_stdout=False)
    check_folder(args.png, "png")
    # No run named and no tag: the most recent stored run, as `git show` shows HEAD.
    runs = args.runs or ([] if args.with_tag else [store.LAST])
    docs = load_docs(runs, args.store)
    if args.with_tag:
        with store.Store(args.store, write=False) as s:
            seen = {d.get("run_id") for d in docs}
            docs += [s.load(r["run_id"]) for r in s.list_runs(tag=args.with_tag) if r["run_id"] not in seen]
    if not docs:
        raise UsageError("name the runs to report on (run ids, JSON files) or give --with-tag")
    files = write_report(docs, args.output, png_dir=args.png, title=args.title)
    print(f"wrote {files[0]}" + (f" and {len(files) - 1} chart(s) in {args.png}" if args.png else ""),
          file=sys.stderr)
    return 0
