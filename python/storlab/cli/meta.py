"""`storlab meta`: the metadata benchmark — create, stat, read, rename and remove many files in
shared or per-thread directory trees and report ops/s and latency per phase (python/storlab/measure/meta.py).
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from ..jobs.job import load_jobfile
from ..jobs.meta_options import META_OPTIONS, MPI_RUN_OPTIONS, SHARED_RUN_OPTIONS, resolve_meta_options
from ..jobs.options import BY_NAME, OPTIONS, Option, parse_value
from ..measure.launch import detect as detect_mpi_launch
from ..measure.meta import run_meta
from ..output.emit import Emitter
from ..output.progress import progress_line
from .options_cli import add_option_arguments, add_table_arguments, reclaim_jobfile

EXAMPLES = """examples:
  storlab meta                                      # 10000 files, one thread, under ./
  storlab meta --target /mnt/lustre/scratch --threads 8 --files-per-thread 10000 --dir shared
  storlab meta --target /dev/shm --depth 2 --fanout 10 --file-size 4k --order random
  storlab meta --files-per-thread 1000000 --stonewall 10s      # each file phase stops after 10 s
  storlab meta --keep --phases create,stat          # leave the files for inspection
  storlab meta --target /dev/shm --mix read=40,write=30,stat=20,delete=5,list=5 --mix-time 30s
  mpiexec -n 4 storlab meta --target /scratch --dir shared   # one rank per process (docs/mpi.md)
"""


def _add_meta_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of the meta table (the output options shared with `storlab run` come from the run
    table, so they read the same in both commands)."""
    add_table_arguments(parser, META_OPTIONS, skip=SHARED_RUN_OPTIONS, command="meta")
    add_option_arguments(parser, skip=[o.name for o in OPTIONS
                                       if o.name not in SHARED_RUN_OPTIONS + MPI_RUN_OPTIONS])


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("meta", help="metadata benchmark: create/stat/read/rename/remove rates and latency",
                       description="Metadata benchmark: each thread creates files in a directory "
                                   "tree, then stats, reads, renames and removes them; each operation "
                                   "is its own phase with ops/s and latency percentiles.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("jobfile", nargs="?", help="TOML file with meta options as top-level keys")
    _add_meta_arguments(p)
    p.set_defaults(func=run)


def _given(args: argparse.Namespace, table: tuple[Option, ...]) -> dict[str, Any]:
    return {o.name: getattr(args, o.name) for o in table if getattr(args, o.name, None) is not None}


def run(args: argparse.Namespace) -> int:
    reclaim_jobfile(args, (*META_OPTIONS, *OPTIONS))
    jobfile = load_jobfile(args.jobfile) if args.jobfile else None
    values = resolve_meta_options(_given(args, META_OPTIONS), jobfile, args.jobfile or "job file")
    emit = Emitter("meta", values, view="meta")
    line = progress_line(bool(values.get("quiet")))
    progress = (lambda phase, ops, elapsed: line(phase, 0, ops, elapsed)) if line else None
    argv = ["storlab", "meta", *sys.argv[2:]]
    launch = detect_mpi_launch()
    with emit.running(line):
        if launch is None:
            doc = run_meta(values, argv=argv, progress=progress)
        else:  # one rank of an MPI job: rank 0 gets the merged document, the others an exit code
            from ..measure.mpi.orchestrator import run_meta_cli as run_cli

            rank_timeout = parse_value("rank_timeout", getattr(args, "rank_timeout", None))
            doc, code = run_cli(values, argv, launch, rank_timeout or BY_NAME["rank_timeout"].default, progress)
            if doc is None:
                return code
    return emit.finish(doc)
