"""`storlab replay LOG.darshan --target DIR`: an application's I/O, recorded by Darshan, replayed
on the storage at hand, with a fidelity table (the log's counters against the replay's) and the
what-if ratio of I/O times. `--emit FILE` writes the translated job without running it.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..jobs.options import OPTIONS, parse_option
from ..jobs.tables.replay import REPLAY_OPTIONS, SHARED_OUTPUT
from ..output.emit import Emitter
from ..output.files import check_destination
from ..output.progress import progress_line
from .main import ExitCode, UsageError
from .options_cli import add_table_arguments, parse_table_args, takes_json_name

EXAMPLES = """examples:
  storlab replay app.darshan --target /mnt/newfs/replay        # replay, fidelity table, what-if
  storlab replay app.darshan --target /mnt/newfs/r --emit app.toml   # the job only (and its iologs)
  storlab replay big.darshan --target /scratch/r --ranks 16 --scale 0.01
  storlab replay traced.darshan --target /scratch/r --timed    # DXT start times kept
method, choices and limits: docs/replay.md
"""

def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay a Darshan log's I/O here; fidelity table and what-if ratio",
                       description="Replay an application's I/O recorded by Darshan on the storage at hand.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_table_arguments(p, REPLAY_OPTIONS, command="replay", title="replay options")
    # --json takes only '-' or a NAME.json as its path: the log is a positional word too
    add_table_arguments(p, OPTIONS, skip=[o.name for o in OPTIONS if o.name not in SHARED_OUTPUT],
                        json_takes=takes_json_name)
    p.set_defaults(func=run)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    by_name = {o.name: o for o in OPTIONS}
    out: dict[str, Any] = {}
    for name in SHARED_OUTPUT:
        raw = getattr(args, name, None)
        out[name] = parse_option(by_name[name], raw) if raw is not None else by_name[name].default
    return out


def run(args: argparse.Namespace) -> int:
    from ..jobs.darshan.translator import translate
    from ..measure.launch import detect as detect_mpi_launch

    parse_table_args(args, REPLAY_OPTIONS)
    settings = _settings(args)
    emit = Emitter("replay", settings, view="replay")   # the run document shown by its fidelity table
    if detect_mpi_launch() is not None:
        raise UsageError("replay runs the log's ranks as workers in one process; start it without mpiexec/srun")
    if args.emit and args.emit != "-":
        check_destination(args.emit, "emit", allow_stdout=True)
    tr = translate(args.log, target=args.target, ranks=args.ranks, scale=args.scale,
                   dxt=not args.no_dxt, timed=args.timed, seed=args.seed, stdio_buffer=int(args.stdio_buffer or 0))
    folded = tr.details["replay"].get("folded")
    if folded and args.ranks is None and not settings.get("quiet"):
        print(f"storlab replay: {folded}", file=sys.stderr)   # stderr: --emit - and --json - keep stdout
    if args.emit:
        tr.emit(args.emit)   # the job, its request logs in FILE.iologs/, the target's folders
        if args.emit != "-" and not settings.get("quiet"):
            from ..output.replay_table import render_translation

            print(render_translation(tr))
            print(f"job written to {args.emit}; its request logs in {os.path.abspath(args.emit)}.iologs/; "
                  f"run it with: storlab run {args.emit}")
        return ExitCode.OK
    return _replay(tr, args, emit)


def _replay(tr, args: argparse.Namespace, emit: Emitter) -> int:
    from ..measure.runner import run_job
    from ..suites.replay import finish_replay, prepare, remove_replay_files

    prepare(tr)
    job = tr.resolve({})
    progress = progress_line(bool(emit.settings.get("quiet")))
    try:
        with emit.running(progress):
            doc = run_job(job, argv=["storlab", "replay", *sys.argv[2:]], progress=progress,
                          notify=lambda msg: None)
            finish_replay(tr, doc)
    finally:
        remove_replay_files(tr, keep_data=args.keep_files)
    return emit.finish(doc)
