"""`storlab replay LOG.darshan --target DIR`: an application's I/O, recorded by Darshan, replayed
on the storage at hand, with a fidelity table (the log's counters against the replay's) and the
what-if ratio of I/O times. `--emit FILE` writes the translated job without running it.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..jobs.options import BY_NAME, OPTIONS, Option, parse_option
from ..output.files import check_destination
from ..signals import STOP
from .main import ExitCode, UsageError
from .options_cli import add_table_arguments, parse_table_args, takes_json_name

EXAMPLES = """examples:
  storlab replay app.darshan --target /mnt/newfs/replay        # replay, fidelity table, what-if
  storlab replay app.darshan --target /mnt/newfs/r --emit app.toml   # the job only (and its iologs)
  storlab replay big.darshan --target /scratch/r --ranks 16 --scale 0.01
  storlab replay traced.darshan --target /scratch/r --timed    # DXT start times kept
method, choices and limits: docs/replay.md
"""

# The output options shared with `storlab run` (same flags, same meaning).
SHARED_OUTPUT = ("json", "quiet", "store", "no_store", "tag", "note")

REPLAY_OPTIONS: tuple[Option, ...] = (
    Option("log", "str", "the Darshan log to replay (.darshan, format 3.x)", positional="1", metavar="LOG",
           category="replay", core=False, job_key=False),
    Option("target", "str", "folder the replay writes its files under (new, empty, or an earlier replay's); "
           "the log's own paths are never opened", required=True, metavar="DIR", category="replay",
           core=False, job_key=False),
    BY_NAME["emit"],      # one meaning for every translator (the target gets the empty folders too)
    Option("ranks", "int", "replay ranks (one worker each, in one process); the log's rank r replays as "
           "r mod N (default: the log's rank count; beyond 256, the fewest ranks up to 256 that give each "
           "ceil(ranks/256) log ranks at most, e.g. 2048 -> 256, 1000 -> 250, 257 -> 129, said in one line)", minimum=1, maximum=256,
           category="replay", core=False, job_key=False),
    Option("scale", "float", "replay this fraction of each file's requests and bytes (sizes kept); the "
           "fidelity table compares with the log scaled alike", default=1.0, minimum=1e-9, maximum=1.0,
           category="replay", core=False, job_key=False),
    Option("no_dxt", "bool", "ignore DXT traces: make every request sequence from the counters",
           default=False, category="replay", core=False, job_key=False),
    Option("timed", "bool", "keep the recorded start time of every DXT-traced request (think time kept); "
           "default: as fast as possible", default=False, category="replay", core=False, job_key=False),
    Option("stdio_buffer", "size", "replay STDIO calls (fread/fwrite...) through a fully buffered stream of this "
           "size, as glibc's (the system calls the C library made: e.g. 4k, the st_blksize of most local file "
           "systems); default 0: one request per call, the application's calls", default=0, minimum=0,
           category="replay", core=False, job_key=False),
    Option("keep_files", "bool", "keep the replay's data files under the target (default: removed afterwards)",
           default=False, category="replay", core=False, job_key=False),
    Option("seed", "int", "seed of the choices the counters leave open (sizes' order, positions)",
           default=1, minimum=0, category="replay", core=False, job_key=False),
)


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
    check_destination(settings.get("json"), "json")
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
    return _replay(tr, args, settings)


def _replay(tr, args: argparse.Namespace, settings: dict[str, Any]) -> int:
    from ..measure.runner import run_job
    from ..output.json import write_json
    from ..output.replay_table import render_replay
    from ..suites.replay import finish_replay, prepare, remove_replay_files
    from .run import ProgressLine, stop_exit_code, store_result, wants_progress

    prepare(tr)
    job = tr.resolve({})
    progress = ProgressLine(sys.stderr) if wants_progress(bool(settings.get("quiet"))) else None
    try:
        doc = run_job(job, argv=["storlab", "replay", *sys.argv[2:]], progress=progress,
                      notify=lambda msg: None)
        finish_replay(tr, doc)
    finally:
        STOP.saving()
        if progress:
            progress.finish()
        remove_replay_files(tr, keep_data=args.keep_files)
    ok = store_result(doc, settings, "replay")
    if settings.get("json"):
        try:
            write_json(doc, settings["json"])
        except Exception as e:  # noqa: BLE001 - an OutputError: said in one line, the table still shown
            print(f"storlab replay: error: {e}", file=sys.stderr)
            ok = False
    if not settings.get("quiet"):
        out = sys.stderr if settings.get("json") == "-" else sys.stdout
        out.write(render_replay(doc) + "\n")
    stopped = stop_exit_code("replay", doc)
    if stopped is not None:
        return stopped
    return ExitCode.OK if ok else ExitCode.FAILURE
