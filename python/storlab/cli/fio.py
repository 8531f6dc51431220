"""`storlab fio [fio arguments …]`: fio's own command line and job files, run by storlab.

Scripts switch by replacing `fio` with `storlab fio`: the arguments are read as fio reads them
(jobs/fio/cmdline.py), translated with fio's semantics (jobs/fio/translator.py), run like `storlab run`,
stored, and reported in fio's per-job layout (`--output-format=normal`), terse or as JSON
(output/fioview.py). Where storlab maps an engine or does something differently, one line says so
before the report.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Any

from ..jobs.fio.cmdline import COMMAND_OPTIONS, parse_command_line, redacted_argv, show_command
from ..jobs.fio.map import FioJob
from ..jobs.fio.translator import translate_command
from ..output.emit import Emitter
from ..output.progress import progress_line
from ..output.views import fio_view
from .main import ExitCode

EPILOG = """fio's own options taken here:
""" + "\n".join(f"  --{k:<16} {v}" for k, (_, v) in COMMAND_OPTIONS.items()) + """

examples:
  storlab fio job.fio
  storlab fio --name=randread --filename=/dev/shm/a --size=64m --rw=randread --bs=4k
  storlab fio -filename=/dev/shm/a -size 64m -rw randwrite -iodepth 1 -thread -name w
  storlab fio --output-format=json --output=out.json job.fio
  storlab fio --emit job.toml job.fio            # the storlab job it runs, written; then: storlab run job.toml
every fio option and engine and what storlab does with it: docs/fio.md
"""


def register(sub: argparse._SubParsersAction) -> None:
    # fio's options start with '-' and are not storlab's: this parser leaves them all to fio's reader
    p = sub.add_parser("fio", help="run fio job files and fio command lines (drop-in for fio)",
                       description="Run fio jobs as fio defines them: fio's command line and job files.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                       prefix_chars="+", add_help=False)
    p.add_argument("fio_args", nargs="*", metavar="FIO-ARGUMENT")
    p.set_defaults(func=run, fio_parser=p)


def run(args: argparse.Namespace) -> int:
    argv = list(args.fio_args)
    if not argv or argv[0] in ("-h", "--help"):
        args.fio_parser.print_help()
        return ExitCode.OK if argv else ExitCode.USAGE
    cmd = parse_command_line(argv)
    if cmd.showcmd:
        print(show_command(cmd.sections))
        return ExitCode.OK
    translation = translate_command(cmd)
    tr = translation.plan
    if cmd.readonly and any(_writes(p) for p in tr.phases):
        print("storlab fio: error: --readonly: a job writes", file=sys.stderr)
        return ExitCode.USAGE
    if cmd.emit is not None:
        _emit(translation, cmd.emit)
        return ExitCode.OK
    if cmd.parse_only:
        for line in tr.notes:
            print(line)
        return ExitCode.OK
    # fio's report in its --output-format (output/fioview.py), to --output or standard output; the
    # result is stored as every run's, but a store that cannot take it leaves fio's exit code alone
    emit = Emitter("fio", {}, view=fio_view(tr, cmd.output_format), table_to=cmd.output, must_store=False)
    from ..measure.runner import run_job

    job = translation.resolve()
    job.translation = translation
    progress = progress_line(False)
    sparse = _sparse_targets_for_null(job)
    try:
        with emit.running(progress):
            # the recorded command line never holds a credential given on it (--http_s3_key=...)
            doc = run_job(job, argv=["storlab", "fio", *redacted_argv(argv)], progress=progress,
                          notify=lambda msg: print(f"warning: {msg}", file=sys.stderr))
    finally:
        for path in sparse:
            os.unlink(path)
    for job_info in tr.jobs:
        _unlink(job_info)
    return emit.finish(doc)     # the store, fio's log files, the report, the warnings


def _emit(translation, target: str) -> None:
    """--emit FILE: the storlab job, without running. What only `storlab fio` does after a run
    (unlink, the log files) has no place in it: a note in its header says so."""
    plan = translation.plan
    only_fio = [f"[{j.name}] unlink" for j in plan.jobs if j.unlink]
    only_fio += [f"[{j.name}] write_{kind}_log" for j in plan.jobs for kind in j.logs]
    if only_fio:
        translation.notes.append(f"{', '.join(only_fio)}: carried out by `storlab fio` only, not by this job")
    translation.resolve()      # what would not run is refused now, not when the emitted file runs
    translation.emit(target)
    if target != "-":
        print(f"storlab fio: wrote the storlab job translated from {translation.label} to {target}",
              file=sys.stderr)


def _sparse_targets_for_null(job) -> list[str]:
    """fio's null engine touches no file. storlab's plan still opens a target of the job's size, so
    each null group gets a sparse file of that size (created by truncation: no data written, no
    blocks allocated), removed after the run. Returns their paths."""
    from ..measure.scratch import SCRATCH_SIZE_BYTES

    made = []
    for phase in job.phases:
        for g in phase.groups:
            v = g.values
            if v["engine"] != "null" or v["target"]:
                continue
            fd, path = tempfile.mkstemp(prefix="storlab-fio-null-")
            try:
                os.ftruncate(fd, v["offset"] + (v["size"] or SCRATCH_SIZE_BYTES))
            finally:
                os.close(fd)
            made.append(path)
            v["target"] = (path,)
    return made


def _writes(phase: dict[str, Any]) -> bool:
    if phase.get("type") == "meta":
        return True
    return any(g["options"]["rw"] not in ("read", "randread") for g in phase["groups"])


def _unlink(job: FioJob) -> None:
    """fio's unlink=1: remove the job's regular files once it has run."""
    for path in job.unlink:
        try:
            if os.path.isfile(path) and not os.path.islink(path):
                os.unlink(path)
        except OSError as e:
            print(f"storlab fio: warning: unlink {path}: {e.strerror}", file=sys.stderr)

