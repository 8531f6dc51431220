"""`storlab report [RUN...] -o report.html [--png DIR]`: a self-contained HTML report with charts of
stored runs (ids, unique prefixes, `last`, `last~N`), runs selected by tag, or JSON result files;
with no run named, the most recent stored run."""
from __future__ import annotations

import argparse
import sys

from .. import store
from ..jobs.tables.report import COMMANDS
from ..output.files import check_destination, check_folder
from .main import UsageError
from .options_cli import add_table_arguments, parse_table_args
from .results import load_docs

__all__ = ["register", "run", "COMMANDS"]


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
