"""`storlab run`: run an I/O job on files or block devices and report what was measured."""
from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import sys
import time
from typing import Any

from ..errors import StorlabError
from ..measure.launch import detect as detect_mpi_launch
from ..output.files import OutputError, check_destination
from ..output.json import write_json
from ..signals import STOP, exit_code_for
from ..units import format_rate
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


class ProgressLine:
    """A live progress line on a terminal (stderr): phase, elapsed time and the rate over the
    last update — bandwidth and IOPS for I/O, operations per second for metadata phases."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.last: tuple[str, float, int, int] | None = None

    def __call__(self, phase: str, done_bytes: int, done_ops: int, elapsed: float) -> None:
        now = time.monotonic()
        if self.last is None or self.last[0] != phase or done_ops < self.last[3]:
            self.last = (phase, now, 0, 0)
        dt = max(now - self.last[1], 1e-9)
        bw = (done_bytes - self.last[2]) / dt
        ops = (done_ops - self.last[3]) / dt
        self.last = (phase, now, done_bytes, done_ops)
        rates = (f"{format_rate(bw):>12}  {ops:12,.0f} IOPS" if done_bytes
                 else f"{done_ops:12,d} ops  {ops:12,.0f} ops/s")
        self.stream.write(f"\r\x1b[K{phase}: {elapsed:6.1f} s  {rates}")
        self.stream.flush()

    def finish(self) -> None:
        if self.last is not None:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def wants_progress(quiet: bool) -> bool:
    """A progress line only on a terminal, and not when asked to be quiet or plain."""
    return sys.stderr.isatty() and not quiet and not os.environ.get("NO_COLOR")


def job_from_args(args: argparse.Namespace, main_job: bool = False):
    """The job of `storlab run`-like commands: flags over a TOML job file (or a fio job file).
    With `main_job`, no job file and no option shaping the I/O give the default main job
    (mainjob.py) instead of a single read phase."""
    from ..jobs import mainjob  # job files and the main job load when a job is built, not for --help
    from ..jobs.job import load_jobfile, resolve_job

    cli = given_options(args)
    jobfile = load_jobfile(args.jobfile) if args.jobfile else None
    if main_job and mainjob.applies(cli, jobfile):
        job = resolve_job(cli, None, jobfile_name="main job", phases=mainjob.phases())
        job.main_job = True
        return job
    if cli.get("fio"):
        tr = fio_translation(cli, jobfile, args.jobfile)
        job = tr.resolve(cli)
        tr.flags_given({k: v for k, v in cli.items() if k not in ("fio", "target")})
        job.translation = tr
        return job
    return resolve_job(cli, jobfile, jobfile_name=args.jobfile or "job file")


def fio_translation(cli: dict[str, Any], jobfile: dict[str, Any] | None, jobfile_name: str | None):
    """`--fio JOB` translated (jobs/fio/translator.py), `--target` standing for fio's filename, a
    TOML job file's top-level options under it (its phases would be the fio job's: refused)."""
    from ..jobs.fio import translator

    tr = translator.translate(cli["fio"])
    if cli.get("target"):
        translator.onto_targets(tr.job, list(cli["target"]))
    if jobfile:
        if "phase" in jobfile:
            raise UsageError(f"{jobfile_name}: has [[phase]] tables and --fio {cli['fio']} gives the "
                             f"phases; give one of them")
        tr.job = {**jobfile, **tr.job}
    return tr


def emit_translation(args: argparse.Namespace, target: str) -> int:
    """--emit FILE: the translated job (with the flags given beside it) as a storlab TOML job file,
    written without running (`-`: standard output)."""
    cli = given_options(args)
    if not cli.get("fio"):
        raise UsageError("emit: writes a translated foreign job; give --fio JOBFILE (a TOML job "
                         "file is already storlab's)")
    from ..jobs.job import load_jobfile

    jobfile = load_jobfile(args.jobfile) if args.jobfile else None
    tr = fio_translation(cli, jobfile, args.jobfile)
    flags = {k: v for k, v in cli.items() if k not in ("fio", "emit")}
    tr = tr.with_options(flags) if flags else tr
    tr.resolve()      # what would not run is refused now, not when the emitted file runs
    tr.emit(target)
    if target != "-":
        print(f"storlab run: wrote the storlab job translated from {tr.label} to {target}", file=sys.stderr)
    return ExitCode.OK


def emit_result(doc: dict[str, Any], settings: dict[str, Any], command: str) -> bool:
    """What every measuring command does with its result: store it, write the JSON (stdout gets
    nothing else), print the table (on stderr when the JSON went to stdout), the MPI summary and
    the warnings. Returns False when the result could not be stored or the JSON could not be
    written (each said in one line; whichever could be kept, was)."""
    from ..output import render_table

    stored = store_result(doc, settings, command)
    json_target = settings.get("json")
    written = True
    if json_target:
        try:
            write_json(doc, json_target)
        except OutputError as e:
            print(f"storlab {command}: error: {e}", file=sys.stderr)
            written = False
    if not settings.get("quiet"):
        out = sys.stderr if json_target == "-" else sys.stdout
        out.write(render_table(doc) + "\n")
        if "mpi" in doc:
            from ..output.mpi_summary import render_summary

            out.write(render_summary(doc) + "\n")
    for w in doc["warnings"]:
        print(f"warning: {w['message']}", file=sys.stderr)
    return stored and written


def stop_exit_code(command: str, doc: dict[str, Any], kept: str = "partial results kept") -> int | None:
    """Report an interrupted or failed run in one line and give its exit code; None if it ended well."""
    if doc["stop_reason"] == "interrupted":
        name = doc.get("signal") or STOP.signal_name   # under MPI: the signal another rank got
        by = f", {name}" if name else ""
        print(f"storlab {command}: interrupted; {kept} (complete: false{by})", file=sys.stderr)
        return exit_code_for(signal.Signals[name]) if name else ExitCode.INTERRUPTED
    if doc["stop_reason"] == "error":
        print(f"storlab {command}: error: {doc['error']}", file=sys.stderr)
        return ExitCode.FAILURE
    return None


def _write_fio_json(doc: dict[str, Any], target: str | None) -> bool:
    """--fio-json PATH: the run in fio's JSON layout (output/fiojson.py), beside the storlab
    document; False (said in one line) when it could not be written."""
    if not target or doc.get("kind") != "run":
        return True
    from ..output.fiojson import fio_json

    try:
        write_json(fio_json(doc), target, "fio-json")
    except OutputError as e:
        print(f"storlab run: error: {e}", file=sys.stderr)
        return False
    return True


CHECKPOINT_STORE_WAIT_S = 1.0   # a checkpoint waits this long for a locked store; the final save longer


def store_result(doc: dict[str, Any], settings: dict[str, Any], command: str = "run",
                 checkpoint: bool = False) -> bool:
    """Save a result in the store unless --no-store. A store that cannot take it (broken, read-only,
    locked) costs the measurement nothing: one line says so and where the result went instead.
    A checkpoint that cannot be stored says nothing: the final save, which always follows (also
    after Ctrl-C), reports it once. Returns False when the result was not stored."""
    if settings.get("no_store") or importlib.util.find_spec("storlab.store") is None:
        return True
    from .. import store

    try:
        store.save(doc, path=settings.get("store"), tags=settings.get("tag") or (), note=settings.get("note") or None,
                   wait=min(CHECKPOINT_STORE_WAIT_S, store.wait_seconds()) if checkpoint else None)
    except Exception as e:  # the measurement is worth more than the store: report, keep going
        if not checkpoint:
            print(f"storlab {command}: error: result not stored: {e}; {_where_result_goes(settings)}",
                  file=sys.stderr)
        return False
    return True


def _where_result_goes(settings: dict[str, Any]) -> str:
    target = settings.get("json")
    if target == "-":
        return "the JSON document goes to standard output"
    if target:
        return f"the JSON document goes to {target}"
    return "nothing else keeps the document: give --json FILE (or fix the store) and run again"


def run(args: argparse.Namespace) -> int:
    if getattr(args, "emit", None) is not None:
        return emit_translation(args, args.emit)
    job = job_from_args(args, main_job=detect_mpi_launch() is None)
    settings = job.run
    check_destination(settings.get("json"), "json")
    check_destination(settings.get("fio_json"), "fio-json", allow_stdout=False)   # stdout: `storlab fio`
    progress = ProgressLine(sys.stderr) if wants_progress(bool(settings.get("quiet"))) else None

    notify = lambda msg: print(f"\r\x1b[Kwarning: {msg}" if progress else f"warning: {msg}", file=sys.stderr)  # noqa: E731
    launch = detect_mpi_launch()
    try:
        if launch is None:
            from ..measure.runner import run_job  # the engine's side loads when a job runs, not for --help

            doc = run_job(job, argv=["storlab", "run", *sys.argv[2:]], progress=progress, notify=notify,
                          checkpoint=lambda partial: _checkpoint(partial, settings))
        else:  # one rank of an MPI job: rank 0 gets the merged document, the others an exit code
            from ..measure.mpi.orchestrator import run_cli

            if any(p.kind == "meta" for p in job.phases):
                raise UsageError("meta phases in job files run in one process; under MPI use "
                                 "`mpiexec ... storlab meta`")

            doc, code = run_cli(job, ["storlab", "run", *sys.argv[2:]], launch, progress, notify)
            if doc is None:
                return code
    except StorlabError:
        raise
    finally:
        STOP.saving()  # from here a signal no longer aborts anything: the result is being saved
        if progress:
            progress.finish()

    ok = emit_result(doc, settings, "run")
    for note in (doc.get("translation") or {}).get("notes") or []:   # --fio: what storlab does differently
        print(f"storlab: {note}", file=sys.stderr)
    ok = _write_fio_json(doc, settings.get("fio_json")) and ok
    mismatches = _report_verification(doc)
    stopped = stop_exit_code("run", doc)
    if stopped is not None:
        return stopped
    if mismatches or not ok:
        return ExitCode.FAILURE
    return ExitCode.OK


def _checkpoint(partial: dict[str, Any], settings: dict[str, Any]) -> None:
    """After each phase: store the document so far and rewrite the JSON file (not stdout, which
    gets exactly one document), so a killed run still leaves what it measured."""
    store_result(partial, settings, checkpoint=True)
    target = settings.get("json")
    real = os.path.realpath(target) if target and target != "-" else None
    if real and (not os.path.exists(real) or os.path.isfile(real)):  # a device or FIFO gets one document
        try:
            write_json(partial, target)
        except OutputError as e:  # the run goes on; the final write reports it again if it persists
            print(f"storlab run: warning: checkpoint not written: {e}", file=sys.stderr)


def _report_verification(doc: dict[str, Any]) -> int:
    """Print verification failures (the first ones in full) and block-size mismatches; returns the
    number of blocks that did not verify (either kind)."""
    total = 0
    for phase in doc["phases"]:
        v = phase.get("verify")
        if not v:
            continue
        bs_mismatches = v.get("bs_mismatches") or 0
        if v["mismatches"]:
            print(f"storlab run: verification failed in {phase['name']}: {v['mismatches']} of "
                  f"{v['checked_blocks']} blocks ({v['kind']})", file=sys.stderr)
            for m in v["first"]:
                print(f"  {m['target']} offset {m['offset']}: {_mismatch_text(m)}", file=sys.stderr)
            if v["mismatches"] > len(v["first"]):
                print(f"  ... and {v['mismatches'] - len(v['first'])} more", file=sys.stderr)
        if bs_mismatches:
            m = v["first_bs_mismatch"]
            print(f"storlab run: {phase['name']}: {bs_mismatches} of {v['checked_blocks']} blocks could not be "
                  f"verified: {m['message']} (first at {m['target']} offset {m['offset']}); read with the "
                  f"block size the data was written with", file=sys.stderr)
        total += v["mismatches"] + bs_mismatches
    return total


def _mismatch_text(m: dict[str, Any]) -> str:
    """One mismatch in words (documents from before `message` existed are spelled out here)."""
    if m.get("message"):
        return m["message"]
    where = f" at byte {m['first_bad_byte']} of the block" if m.get("first_bad_byte") is not None else ""
    return f"{m['field']} expected {m['expected']}, found {m['found']}{where}"
