"""`storlab scale`: the same job at 1, 2, 4 ... N ranks of one MPI launch, and how it scales.

Each rank count runs on a sub-communicator of the first n ranks (made once at start, while every
rank is known to be alive); the other ranks wait. Rank 0 writes one document of kind `scale`:
the merged run at each count under `runs`, and the scaling curve with parallel efficiency under
`scale` (definitions in storlab/measure/mpi/scaling.py and docs/mpi.md).
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from ..document import header
from ..jobs.tables.scale import SCALE_OPTIONS
from ..output.emit import Emitter
from ..output.live import live_figures
from .main import ExitCode, UsageError
from .options_cli import add_option_arguments, add_table_arguments, given_options, parse_table_args

EXAMPLES = """examples:
  mpiexec -n 8 storlab scale --target '/scratch/f{rank}' --size 1g --rw write --bs 1m
  mpiexec -n 8 storlab scale job.toml --ranks 1,2,4,8
  srun -n 64 storlab scale job.toml --json scale.json
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scale", help="run a job at 1, 2, 4 ... N MPI ranks and report the scaling curve",
                       description="Run the same job at growing rank counts of one MPI launch "
                                   "(mpiexec/srun) and report rate, speedup and parallel efficiency.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("jobfile", nargs="?", help="TOML job file (options as keys; [[phase]] tables)")
    add_table_arguments(p, SCALE_OPTIONS, command="scale", title="scale options")
    add_option_arguments(p, skip=["fio_json", "emit"])   # fio's layout is per run: `storlab run`
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..jobs.runjob import job_from_options  # job files load when a job is built, not for --help
    from ..measure.launch import detect

    parse_table_args(args, SCALE_OPTIONS)
    job = job_from_options(given_options(args), args.jobfile)
    emit = Emitter("scale", job.run, view="scale")
    wanted = args.ranks
    try:
        from ..measure.mpi.orchestrator import Session
    except ImportError:
        raise UsageError("needs mpi4py and an MPI: pip install 'storlab[mpi]', then "
                         "mpiexec -n N storlab scale ... (see docs/mpi.md)") from None
    from ..measure.mpi.comm import world_size
    from ..measure.mpi.scaling import rank_counts

    launch = detect()
    settings = job.run
    # Every rank checks the counts against the same size, so they all fail alike on a bad list.
    size = world_size()
    counts = rank_counts(size, wanted)
    argv = ["storlab", "scale", *sys.argv[2:]]
    # rank 0's live line and metrics endpoint (bound before MPI starts: a busy port is a usage error)
    live = live_figures(settings, argv, job) if launch is None or launch.rank in (0, None) else None
    session = Session.start(float(settings.get("rank_timeout") or 30.0), launch,
                            sub_sizes=tuple(n for n in counts if n != size), live=live is not None)
    if live is not None and session.rank != 0:   # the launcher did not say which rank this is
        live.finish()
        live = None
    runs: list[dict[str, Any]] = []
    try:
        _run_counts(session, job, counts, argv, runs, live)
    finally:
        if live is not None:
            live.finish()
    if session.rank != 0:
        return session.exit_code
    if not runs:
        print("storlab scale: error: no rank count finished a run", file=sys.stderr)
        return ExitCode.FAILURE
    return emit.finish(scale_document(runs, counts, argv))


def _run_counts(session: Any, job: Any, counts: list[int], argv: list[str], runs: list[dict[str, Any]],
                live: Any) -> None:
    """The job at each rank count in turn, the merged documents (rank 0) added to `runs`; stops at
    the first failure or incomplete run."""
    from ..measure.ranks import RankFailure

    for n in counts:
        comm = session.sub(n)
        try:
            doc = session.run(job, comm, argv, live=live) if comm is not None else None
            if session.rank == 0 and doc is not None:
                runs.append(doc)
            if session.liveness.failure is not None:
                break   # every rank hears of the failure and stops here; rank 0 keeps what ran
            # The ranks that sat this count out learn from rank 0 whether to go on.
            if not session.world.bcast(session.rank == 0 and doc is not None and doc["complete"]):
                break
        except RankFailure:
            session.exit_code = 1
            break


def scale_document(runs: list[dict[str, Any]], counts: list[int], argv: list[str]) -> dict[str, Any]:
    """The `scale` document: the runs at each count and the scaling curve."""
    from ..measure.mpi.scaling import scaling_curve

    first, last = runs[0], runs[-1]
    done = [r["mpi"]["size"] for r in runs]
    incomplete = next((r for r in runs if not r["complete"]), None)
    warnings: list[dict[str, Any]] = []
    for r in runs:
        for w in r["warnings"]:
            if all((w["code"], w["message"]) != (x["code"], x["message"]) for x in warnings):
                warnings.append(w)
    doc = {
        **header("scale", argv=argv, started_at=first["started_at"], finished_at=last["finished_at"]),
        "complete": incomplete is None and done == counts,
        "stop_reason": incomplete["stop_reason"] if incomplete else ("done" if done == counts else "error"),
        "error": incomplete["error"] if incomplete else (None if done == counts else "not every rank count ran"),
        "job": first["job"], "environment": first["environment"], "warnings": warnings,
        "phases": [],
        "runs": runs,
        "scale": {"ranks_planned": counts, "ranks_run": done, "curve": scaling_curve(runs)},
    }
    return doc

