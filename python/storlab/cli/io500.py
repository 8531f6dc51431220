"""`storlab io500 [CONFIG.ini]`: the IO500 benchmark as io500 defines it (its phases, stonewall,
score and validity) on storlab's engine, from an io500 .ini run as written; result.txt and
result_summary.txt in io500's layout in the result folder, and a storlab document
(measure/io500.py, jobs/io500/, docs/io500.md).
"""
from __future__ import annotations

import argparse
import os
import sys

from ..errors import UserError
from ..signals import STOP
from .main import ExitCode

EXAMPLES = """examples:
  storlab io500 config.ini                     # one rank, the .ini's datadir and resultdir
  mpiexec -n 4 storlab io500 config.ini        # four ranks
  storlab io500 config.ini --emit job.toml     # the translated storlab job, not run
  storlab io500 --list                         # every section and key io500 knows, with defaults
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("io500", help="the IO500 benchmark: io500's phases, score and result files",
                       description="Run the IO500 benchmark from an io500 .ini file: ior-easy/hard, "
                                   "mdtest-easy/hard, find and ior-rnd4K-easy-read, in io500's order "
                                   "with its stonewall and wear-out; scored as io500 scores.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", nargs="?", help="io500 .ini file (default: io500's defaults, which need a ./datafiles folder)")
    p.add_argument("--emit", metavar="FILE", help="write the translated storlab TOML job to FILE ('-': stdout) and stop")
    p.add_argument("--list", action="store_true", help="print every section and key io500 knows, with defaults")
    p.add_argument("--timestamp", metavar="TEXT", help="name of the timestamp folders (io500 --timestamp)")
    p.add_argument("--keep", action="store_true", help="leave the data files in place (io500 removes them)")
    p.add_argument("--json", metavar="PATH", help="also write the result document as JSON to PATH ('-': stdout)")
    p.add_argument("--store", metavar="PATH", help="results database")
    p.add_argument("--no-store", action="store_true", help="do not save the run in the results store")
    p.add_argument("--tag", action="append", default=[], help="tag the stored run (repeatable)")
    p.add_argument("--note", help="free-text note kept with the stored run")
    p.add_argument("--quiet", action="store_true", help="no progress and no summary")
    p.set_defaults(func=run)


def _list() -> int:
    from ..jobs.io500.ini import SECTIONS

    print("# Supported and current values of the ini file:")
    for section, keys in SECTIONS.items():
        print(f"[{section}]")
        for k in keys:
            print(f"# {k.help}")
            print(f"{k.name} = {'' if k.default is None else k.default}")
        print()
    return ExitCode.OK


def run(args: argparse.Namespace) -> int:
    if args.list:
        return _list()
    from ..jobs.io500.translator import translate, translate_text
    from ..measure.launch import detect as detect_mpi_launch

    if args.config:
        translation = translate(args.config)
    else:
        translation = translate_text("", "<io500 defaults>")
    if args.emit:
        translation.emit(args.emit)
        return ExitCode.OK
    if not args.config:
        raise UserError("io500: give the .ini file to run (storlab io500 CONFIG.ini); --list shows every key")

    from ..measure.io500 import LocalRanks, MpiRanks, run_io500

    launch = detect_mpi_launch()
    ranks = MpiRanks() if launch is not None else LocalRanks()
    quiet = args.quiet or ranks.rank != 0
    progress = None if quiet else (lambda name: print(f"storlab io500: {name} ...", file=sys.stderr, flush=True))
    argv = ["storlab", "io500", *sys.argv[2:]]
    doc = run_io500(translation, ranks, argv, timestamp=args.timestamp, progress=progress, keep=args.keep)
    STOP.saving()
    if doc is None:
        return ExitCode.OK
    return _emit(doc, translation, args)


def _emit(doc: dict, translation, args: argparse.Namespace) -> int:
    from ..output.io500_files import render_summary, write_result_files
    from ..output.json import write_json
    from .run import store_result

    with open(translation.source, encoding="utf-8", errors="replace") as f:
        ini_text = f.read()
    code = ExitCode.OK
    try:
        write_result_files(doc, ini_text)
        write_json(doc, os.path.join(doc["io500"]["resultdir"], "storlab-io500.json"))
    except OSError as e:
        print(f"storlab io500: error: result files not written: {e}", file=sys.stderr)
        code = ExitCode.FAILURE
    settings = {"store": args.store, "no_store": args.no_store, "tag": tuple(args.tag), "note": args.note}
    if not store_result(doc, settings, "io500"):
        code = ExitCode.FAILURE
    if args.json:
        write_json(doc, args.json)
    if not args.quiet:
        out = sys.stderr if args.json == "-" else sys.stdout
        out.write(render_summary(doc))
        out.write(f"\nThe result files are stored in the directory: {doc['io500']['resultdir']}\n")
    for w in doc["warnings"]:
        print(f"warning: {w['message']}", file=sys.stderr)
    cleanup = doc.get("cleanup") or {}
    if cleanup.get("errors"):
        print(f"storlab io500: error: clean-up incomplete: {'; '.join(cleanup['errors'])}", file=sys.stderr)
        code = ExitCode.FAILURE
    if doc["stop_reason"] == "interrupted":
        print(f"storlab io500: {doc['error']}; the phases done are scored and kept", file=sys.stderr)
        return STOP.exit_code or ExitCode.INTERRUPTED
    if doc["stop_reason"] == "error":
        print(f"storlab io500: error: {doc['error']}", file=sys.stderr)
        return ExitCode.FAILURE
    return code
