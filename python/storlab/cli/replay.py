"""`storlab replay LOG.darshan --target DIR`: an application's I/O, recorded by Darshan, replayed
on the storage at hand, with a fidelity table (the log's counters against the replay's) and the
what-if ratio of I/O times. `--emit FILE` writes the translated job without running it. Under
mpiexec each replay rank runs on its own MPI rank (suites/replay.py:run).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..jobs.options import OPTIONS, parse_option
from ..jobs.tables.replay import REPLAY_OPTIONS, SHARED
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
  mpiexec -n 64 -hosts n1,n2 storlab replay app.darshan --target /shared/r   # a rank per MPI rank
method, choices and limits: docs/replay.md
"""

def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay a Darshan log's I/O here; fidelity table and what-if ratio",
                       description="Replay an application's I/O recorded by Darshan on the storage at hand.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_table_arguments(p, REPLAY_OPTIONS, command="replay", title="replay options")
    # --json takes only '-' or a NAME.json as its path: the log is a positional word too
    add_table_arguments(p, OPTIONS, skip=[o.name for o in OPTIONS if o.name not in SHARED],
                        json_takes=takes_json_name)
    p.set_defaults(func=run)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    by_name = {o.name: o for o in OPTIONS}
    out: dict[str, Any] = {}
    for name in SHARED:
        raw = getattr(args, name, None)
        out[name] = parse_option(by_name[name], raw) if raw is not None else by_name[name].default
    return out


def run(args: argparse.Namespace) -> int:
    from ..jobs.darshan.translator import translate
    from ..measure.launch import detect as detect_mpi_launch

    parse_table_args(args, REPLAY_OPTIONS)
    settings = _settings(args)
    emit = Emitter("replay", settings, view="replay")   # the run document shown by its fidelity table
    launch = detect_mpi_launch()
    if launch is not None and args.emit:
        raise UsageError("emit: writes the job without running it; start it without mpiexec/srun")
    if launch is not None and args.ranks is not None:
        raise UsageError(f"ranks: under {launch.launcher} the replay ranks are the MPI ranks (mpiexec -n N); "
                         "leave out --ranks")
    if args.emit and args.emit != "-":
        check_destination(args.emit, "emit", allow_stdout=True)
    ranks = _open_ranks(settings) if launch is not None else None
    tr = translate(args.log, target=args.target, ranks=args.ranks, scale=args.scale,
                   dxt=not args.no_dxt, timed=args.timed, seed=args.seed, stdio_buffer=int(args.stdio_buffer or 0),
                   mpi_ranks=ranks.size if ranks is not None else None)
    folded = tr.details["replay"].get("folded")
    if folded and args.ranks is None and not settings.get("quiet") and (ranks is None or ranks.rank == 0):
        print(f"storlab replay: {folded}", file=sys.stderr)   # stderr: --emit - and --json - keep stdout
    if args.emit:
        tr.emit(args.emit)   # the job, its request logs in FILE.iologs/, the target's folders
        if args.emit != "-" and not settings.get("quiet"):
            from ..output.replay_table import render_translation

            print(render_translation(tr))
            print(f"job written to {args.emit}; its request logs in {os.path.abspath(args.emit)}.iologs/; "
                  f"run it with: storlab run {args.emit}")
        return ExitCode.OK
    return _replay(tr, args, emit, ranks)


def _open_ranks(settings: dict[str, Any]):
    """The MPI ranks of a replay under a launcher (one line naming what is missing otherwise)."""
    from ..measure.mpi.ranks import open_ranks

    return open_ranks(settings["rank_timeout"], "replay")


def _replay(tr, args: argparse.Namespace, emit: Emitter, ranks) -> int:
    from ..measure.ranks import LocalRanks
    from ..signals import STOP
    from ..suites.replay import run as run_replay

    ranks = ranks or LocalRanks()
    progress = progress_line(bool(emit.settings.get("quiet")) or ranks.rank != 0)
    argv = ["storlab", "replay", *sys.argv[2:]]
    if ranks.rank != 0:     # rank 0 reports the run; a rank that failed sets the exit code
        run_replay(tr, ranks, None, argv=argv, keep_files=args.keep_files)
        return STOP.exit_code or (ExitCode.FAILURE if ranks.failure is not None else ExitCode.OK)
    with emit.running(progress):
        doc = run_replay(tr, ranks, progress, argv=argv, keep_files=args.keep_files)
    return emit.finish(doc)
