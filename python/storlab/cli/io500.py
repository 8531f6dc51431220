"""`storlab io500 [CONFIG.ini]`: the IO500 benchmark as io500 defines it (its phases, stonewall,
score and validity) on storlab's engine, from an io500 .ini run as written; result.txt and
result_summary.txt in io500's layout in the result folder, and a storlab document
(suites/io500/, jobs/io500/, docs/io500.md).
"""
from __future__ import annotations

import argparse
import sys

from ..errors import UserError
from ..jobs.options import BY_NAME, OPTIONS, parse_value
from ..jobs.tables.io500 import IO500_OPTIONS, SHARED
from ..output.emit import Emitter
from ..signals import STOP
from .main import ExitCode
from .options_cli import add_option_arguments, add_table_arguments, parse_table_args

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

    if args.config:
        translation = translate(args.config)
    else:
        translation = translate_text("", "<io500 defaults>")
    if args.emit:
        translation.emit(args.emit)
        return ExitCode.OK
    if not args.config:
        raise UserError("io500: give the .ini file to run (storlab io500 CONFIG.ini); --list shows every key")

    from ..measure.mpi.ranks import open_ranks
    from ..suites.io500.run import run as run_io500

    emit = Emitter("io500", {name: getattr(args, name) for name in SHARED}, view="io500")
    ranks = open_ranks(args.rank_timeout, "io500")     # one process, or MPI's under a launcher
    quiet = args.quiet or ranks.rank != 0
    progress = None if quiet else (lambda name: print(f"storlab io500: {name} ...", file=sys.stderr, flush=True))
    argv = ["storlab", "io500", *sys.argv[2:]]
    doc = run_io500(translation, ranks, progress, argv=argv, timestamp=args.timestamp, keep=args.keep,
                    mode=args.mode)
    STOP.saving()
    if doc is None:     # not rank 0: rank 0 reports the run (a rank that failed sets the code)
        return STOP.exit_code or (ExitCode.FAILURE if ranks.failure is not None else ExitCode.OK)
    return emit.finish(doc)   # io500's result files, the store, --json, the summary

