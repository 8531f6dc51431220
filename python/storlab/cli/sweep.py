"""`storlab sweep`: run a matrix of jobs over lists of option values and report one table, the
knee and where latency climbs (docs/sweep.md). The work is in storlab/measure/sweep.py; this module maps
flags to it and prints."""
from __future__ import annotations

import argparse
import sys
import uuid
from typing import Any

from ..jobs.job import load_jobfile
from ..output.emit import Emitter
from ..output.progress import ProgressLine, wants_progress
from ..units import format_rate
from .main import UsageError
from .options_cli import add_option_arguments, add_table_arguments, given_options

EXAMPLES = """examples:
  storlab sweep --target /dev/shm/a.dat --size 1g --rw read --bs 4k,16k,64k,256k,1m,4m --threads 1,2,4,8
  storlab sweep --target /dev/nvme0n1 --rw randread --engine io_uring --direct --time 10s \\
                --qd 1,2,4,8,16,32,64,128 --stop-flat 5           # stop once IOPS stop rising
  storlab sweep --engine psync,io_uring --bs 4k,1m --series bs --csv sweep.csv
  storlab sweep job.toml --sweep direct=false,true --threads 1,4    # any option, on/off ones too

A comma-separated list sweeps an option; a single value fixes it. Axes run in command-line order,
the last one innermost (the series; change it with --series).
"""

# Where the order of the flags on the command line is kept (argparse forgets it).
ORDER_DEST = "_sweep_given_order"


def _recording(base: type) -> type:
    """An argparse action class that also notes (dest, value) in command-line order, so the
    axes of the matrix follow the order the user wrote them in."""

    class Recording(base):
        def __call__(self, parser, namespace, values, option_string=None):
            super().__call__(parser, namespace, values, option_string)
            order = list(getattr(namespace, ORDER_DEST, None) or [])
            order.append((self.dest, values))
            setattr(namespace, ORDER_DEST, order)

    Recording.__name__ = f"Recording{base.__name__}"
    return Recording


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of the sweep settings table (jobs/tables/sweep.py: SWEEP_OPTIONS)."""
    from ..jobs.tables.sweep import SWEEP_OPTIONS

    add_table_arguments(parser, SWEEP_OPTIONS, title="sweep options")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep", help="run a matrix of jobs (e.g. --bs 4k,64k,1m --threads 1,2,4) and find the knee",
        description="Run one job per point of a matrix of option values; print one table with the "
                    "swept options as columns, the knee (smallest setting reaching --knee % of the "
                    "best throughput) and where latency starts to climb.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, cls in (("store", argparse._StoreAction), (None, argparse._StoreAction),
                      ("store_const", argparse._StoreConstAction), ("append", argparse._AppendAction)):
        p.register("action", name, _recording(cls))
    p.add_argument("jobfile", nargs="?", help="TOML job file with the fixed options and phases")
    # fio's layout is per run: `storlab run`; live figures: `run` and `scale` (docs/live.md)
    add_option_arguments(p, skip=["fio_json", "emit", "live", "metrics_listen"])
    add_sweep_arguments(p)
    p.set_defaults(func=run, **{ORDER_DEST: None})


def _given_in_order(args: argparse.Namespace) -> list[tuple[str, Any]]:
    """(option, raw value) of every run option and --sweep entry, in command-line order."""
    given = given_options(args)
    seen: list[str] = []
    out: list[tuple[str, Any]] = []
    for dest, value in getattr(args, ORDER_DEST, None) or []:
        if dest == "sweep":
            out.append(("sweep", value))
        elif dest in given and dest not in seen:
            seen.append(dest)
            out.append((dest, given[dest]))
    out += [(k, v) for k, v in given.items() if k not in seen]   # not expected; keeps nothing lost
    return out


class Console:
    """Per-point lines on standard error (and a live progress line on a terminal)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.live = wants_progress(quiet)
        self.line: ProgressLine | None = None

    def before(self, i: int, n: int, params: dict) -> Any:
        from ..measure.sweep import point_label

        if not self.live:
            return None
        self.line = ProgressLine(sys.stderr)
        label = f"[{i + 1}/{n}] {point_label(params)}"
        return lambda phase, b, o, elapsed: self.line(f"{label} {phase}", b, o, elapsed)

    def after(self, i: int, n: int, params: dict, point: dict, run: dict) -> None:
        from ..measure.sweep import point_label

        if self.line is not None:
            self.line.finish()
            self.line = None
        if self.quiet:
            return
        bw, iops, mean = point.get("bw_bytes"), point.get("iops"), point.get("lat_mean_ns")
        figures = "no I/O measured"
        if bw is not None and iops is not None and mean is not None:
            figures = f"{format_rate(bw)}, {iops:,.0f} IOPS, mean latency {mean / 1e3:,.1f} us"
        status = "" if point.get("status") == "done" else f" ({point.get('status')})"
        print(f"point {i + 1}/{n} {point_label(params)}: {figures}{status}", file=sys.stderr)

    def skipped(self, params: dict, reason: str) -> None:
        from ..measure.sweep import point_label

        if not self.quiet:
            print(f"point {point_label(params)}: skipped ({reason.replace('_', ' ')})", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from ..measure import sweep as sw

    settings = sw.parse_settings({o.name: getattr(args, o.name, None) for o in sw.SWEEP_OPTIONS})
    axes, fixed = sw.build_axes(_given_in_order(args), series=args.series)
    if not axes:
        raise UsageError("nothing to sweep: give an option a comma-separated list, e.g. "
                         "--bs 4k,64k,1m, or --sweep OPTION=V1,V2")
    jobfile = load_jobfile(args.jobfile) if args.jobfile else None
    phases = translation = None
    if fixed.get("fio"):
        from ..jobs.fio import translator

        translation = translator.translate(fixed["fio"])
        phases = translation.job["phase"]
    matrix = sw.build_matrix(axes, fixed, settings, jobfile, jobfile_name=args.jobfile or "job file",
                             phases=phases)
    for job in matrix.jobs:      # each point's run document records the fio file it came from
        job.translation = translation
    run_settings = matrix.run_options
    if run_settings.get("json") == "-" and args.csv == "-":
        raise UsageError("csv: standard output is already taken by --json -; give --csv a file")
    emit = Emitter("sweep", {**run_settings, "csv": args.csv}, view="sweep")
    console = Console(bool(run_settings.get("quiet")))
    sweep_id = uuid.uuid4().hex
    # every point's run is stored as soon as it exists, tagged with the sweep, so an interrupted
    # or killed sweep loses no measured point. The user's tags go on the sweep document only:
    # it holds the runs, and `storlab report --tag T` would otherwise show every run twice.
    sweep_tag = f"sweep-{sweep_id[:12]}"

    def after(i, n, params, point, run_doc):
        emit.store(run_doc, tags=[sweep_tag])
        console.after(i, n, params, point, run_doc)

    hooks = sw.SweepHooks(before=console.before, after=after, skipped=console.skipped)
    try:
        doc = sw.run_sweep(matrix, argv=["storlab", "sweep", *sys.argv[2:]], hooks=hooks, sweep_id=sweep_id)
    finally:
        if console.line is not None:
            console.line.finish()
    return emit.finish(doc, note=f"stored sweep {doc['run_id'][:12]}; its runs are tagged {sweep_tag}")


__all__ = ["register", "run", "add_sweep_arguments"]
