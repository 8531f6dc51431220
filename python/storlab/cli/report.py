"""`storlab report RUN... -o report.html [--png DIR]`: a self-contained HTML report with charts of
stored runs (ids or unique prefixes), runs selected by tag, or JSON result files."""
from __future__ import annotations

import argparse
import sys

from .. import store
from .main import UsageError
from ..output.files import check_destination, check_folder
from .results import load_docs

__all__ = ["register", "run"]


def register(subparsers) -> None:
    p = subparsers.add_parser("report", help="HTML report with charts of stored or exported runs",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("runs", metavar="RUN", nargs="*",
                   help="run id, unique prefix, or JSON result file (several: they are compared)")
    p.add_argument("--tag", help="add every stored run with this tag")
    p.add_argument("-o", "--output", metavar="FILE", required=True, help="HTML file to write")
    p.add_argument("--png", metavar="DIR", help="also write each chart as a PNG file into DIR")
    p.add_argument("--title", help="title of the report (default: the runs and what varies)")
    p.add_argument("--store", metavar="PATH", default=None,
                   help="results database (default: $STORLAB_STORE or ~/.local/share/storlab/results.db)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        # matplotlib comes with storlab; a broken install gets one line, not a traceback
        from ..output.report import write_report
    except ImportError as e:
        raise UsageError(f"report: needs matplotlib ({e}), which is installed with storlab: reinstall with: pip install storlab") from None
    check_destination(args.output, "output", allow_stdout=False)
    check_folder(args.png, "png")
    docs = load_docs(args.runs, args.store)
    if args.tag:
        with store.Store(args.store, write=False) as s:
            seen = {d.get("run_id") for d in docs}
            docs += [s.load(r["run_id"]) for r in s.list_runs(tag=args.tag) if r["run_id"] not in seen]
    if not docs:
        raise UsageError("name the runs to report on (run ids, JSON files) or give --tag")
    files = write_report(docs, args.output, png_dir=args.png, title=args.title)
    print(f"wrote {files[0]}" + (f" and {len(files) - 1} chart(s) in {args.png}" if args.png else ""),
          file=sys.stderr)
    return 0
