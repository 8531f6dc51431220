"""`storlab run`: run an I/O job on files or block devices and report what was measured (the job
from jobs/runjob.py, the run in measure/runner.py, the emit step in output/emit.py)."""
from __future__ import annotations

import argparse
import sys

from ..measure.launch import detect as detect_mpi_launch
from ..output.emit import Emitter
from ..output.live import live_figures
from .main import ExitCode, UsageError
from .options_cli import add_option_arguments, given_options

EXAMPLES = """examples:
  storlab run                                   # the main job: the scratch folder's device at four
                                                # corners (1m seq and 4k random, write then read),
                                                # O_DIRECT, 3 s each; scratch file removed afterwards
  storlab run --time 10s                        # the main job, 10 s per phase
  storlab run --target /dev/shm/a.dat --size 1g --rw randread --bs 4k --time 10s
  storlab run --target /dev/nvme0n1 --rw randread --engine io_uring --qd 32 --direct --time 30s
  storlab run job.toml --threads 8              # job file, with a flag overriding it
  storlab run --fio job.fio                     # a fio job file, translated
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run an I/O job and report bandwidth, IOPS and latency",
                       description="Run an I/O job on files or block devices.", epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("jobfile", nargs="?", help="TOML job file (options as keys; [[phase]] tables)")
    add_option_arguments(p)
    p.set_defaults(func=run)


def emit_translation(args: argparse.Namespace, target: str) -> int:
    """--emit FILE: the translated job (with the flags given beside it) as a storlab TOML job file,
    written without running (`-`: standard output)."""
    cli = given_options(args)
    if not cli.get("fio"):
        raise UsageError("emit: writes a translated foreign job; give --fio JOBFILE (a TOML job "
                         "file is already storlab's)")
    from ..jobs.job import load_jobfile
    from ..jobs.runjob import fio_translation

    jobfile = load_jobfile(args.jobfile) if args.jobfile else None
    tr = fio_translation(cli, jobfile, args.jobfile)
    flags = {k: v for k, v in cli.items() if k not in ("fio", "emit")}
    tr = tr.with_options(flags) if flags else tr
    tr.resolve()      # what would not run is refused now, not when the emitted file runs
    tr.emit(target)
    if target != "-":
        print(f"storlab run: wrote the storlab job translated from {tr.label} to {target}", file=sys.stderr)
    return ExitCode.OK


def run(args: argparse.Namespace) -> int:
    if getattr(args, "emit", None) is not None:
        return emit_translation(args, args.emit)
    from ..jobs.runjob import job_from_options  # job files load when a job is built, not for --help

    launch = detect_mpi_launch()
    job = job_from_options(given_options(args), args.jobfile, main_job=launch is None)
    settings = job.run
    emit = Emitter("run", settings)    # every output destination checked before the run
    argv = ["storlab", "run", *sys.argv[2:]]
    # the live line and metrics endpoint: rank 0's alone under MPI (the other ranks report to it)
    live = live_figures(settings, argv, job) if launch is None or launch.rank in (0, None) else None
    in_place = live is not None and live.line is not None and not live.line.plain   # a line to clear first

    notify = lambda msg: print(f"\r\x1b[Kwarning: {msg}" if in_place else f"warning: {msg}", file=sys.stderr)  # noqa: E731
    with emit.running(live):
        if launch is None:
            from ..measure.runner import run_job  # the engine's side loads when a job runs, not for --help

            doc = run_job(job, argv=argv, progress=live, notify=notify, checkpoint=emit.checkpoint)
        else:  # one rank of an MPI job: rank 0 gets the merged document, the others an exit code
            from ..measure.mpi.orchestrator import run_cli

            if any(p.kind == "meta" for p in job.phases):
                raise UsageError("meta phases in job files run in one process; under MPI use "
                                 "`mpiexec ... storlab meta`")

            doc, code = run_cli(job, argv, launch, notify=notify, live=live)
            if doc is None:
                return code
    return emit.finish(doc)
