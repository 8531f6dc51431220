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
from ..jobs.meta_options import META_BY_NAME
from ..jobs.options import BY_NAME, OPTIONS, Option, parse_value
from ..signals import STOP
from .main import ExitCode
from .options_cli import add_option_arguments, add_table_arguments, parse_table_args

EXAMPLES = """examples:
  storlab io500 config.ini                     # one rank, the .ini's datadir and resultdir
  mpiexec -n 4 storlab io500 config.ini        # four ranks
  storlab io500 config.ini --emit job.toml     # the translated storlab job, not run
  storlab io500 --list                         # every section and key io500 knows, with defaults
"""


# The command's own options (the output ones and rank_timeout are the run table's, shared).
IO500_OPTIONS: tuple[Option, ...] = (
    Option("config", "str", "io500 .ini file, run as written (`--list` shows every section and key)",
           positional="?", metavar="CONFIG.ini", category="io500", core=False, job_key=False),
    BY_NAME["emit"],           # one meaning for every translator
    Option("list", "bool", "print every section and key io500 knows, with its default, and stop",
           category="io500", core=False, job_key=False),
    Option("timestamp", "str", "name of the timestamp folders (io500 --timestamp; default: the start "
           "time as YYYY.MM.DD-HH.MM.SS)", metavar="TEXT", category="io500", core=False, job_key=False),
    META_BY_NAME["keep"],      # the same meaning as `storlab meta --keep`
    Option("mode", "choice", "io500 --mode: standard, or extended (adds find-easy and find-hard, scored in "
           "[SCOREX]; md-workbench is not built in and must be switched off in [mdworkbench])",
           choices={"standard": "io500's scored phases", "extended": "also the optional phases"},
           default="standard", category="io500", core=False, job_key=False),
)
SHARED = ("json", "quiet", "store", "no_store", "tag", "note", "rank_timeout")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("io500", help="the IO500 benchmark: io500's phases, score and result files",
                       description="Run the IO500 benchmark from an io500 .ini file: ior-easy/hard, "
                                   "mdtest-easy/hard, find and ior-rnd4K-easy-read, in io500's order "
                                   "with its stonewall and wear-out; scored as io500 scores.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_table_arguments(p, IO500_OPTIONS, command="io500", title="io500 options")
    add_option_arguments(p, skip=[o.name for o in OPTIONS if o.name not in SHARED])
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
    parse_table_args(args, IO500_OPTIONS)
    for name in SHARED:      # the run table's options, validated as `storlab run` validates them
        raw = getattr(args, name, None)
        setattr(args, name, BY_NAME[name].default if raw is None else parse_value(name, raw))
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

    from ..jobs.io500.translator import config_from_ini, extended_refusal
    from ..measure.ranks import LocalRanks
    from ..suites.io500.run import run_io500

    if args.mode == "extended":      # refused in one line before any rank starts
        with open(args.config, encoding="utf-8", errors="replace") as f:
            why = extended_refusal(config_from_ini(f.read(), args.config))
        if why:
            raise UserError(why)

    launch = detect_mpi_launch()
    if launch is not None:
        from ..measure.mpi.ranks import start_ranks

        ranks = start_ranks(args.rank_timeout, launch)
    else:
        ranks = LocalRanks()
    quiet = args.quiet or ranks.rank != 0
    progress = None if quiet else (lambda name: print(f"storlab io500: {name} ...", file=sys.stderr, flush=True))
    argv = ["storlab", "io500", *sys.argv[2:]]
    doc = run_io500(translation, ranks, argv, timestamp=args.timestamp, progress=progress, keep=args.keep,
                    mode=args.mode)
    STOP.saving()
    if doc is None:     # not rank 0: rank 0 reports the run
        return STOP.exit_code or ExitCode.OK
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
    settings = {"store": args.store, "no_store": args.no_store, "tag": tuple(args.tag or ()), "note": args.note}
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
