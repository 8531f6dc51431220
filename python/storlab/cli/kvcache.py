"""`storlab kvcache --cache-dir DIR`: MLPerf Storage v3.0's KV-cache benchmark (suites/kvcache/;
docs/kvcache.md): its three CLOSED options, each run `--trials` times, on one process or on every
rank of an MPI launch (each rank one client with the full per-client load)."""
from __future__ import annotations

import argparse
import sys

from ..jobs.options import BY_NAME
from ..jobs.tables.kvcache import COMMANDS, KVCACHE_OPTIONS, SHARED
from ..output.emit import Emitter
from .options_cli import add_table_arguments, parse_table_args

EXAMPLES = """examples:
  storlab kvcache --cache-dir /mnt/nvme/kv --json kv.json             # the three CLOSED options, 3 trials each
  mpiexec -hosts c1,c2 -n 8 storlab kvcache --cache-dir /mnt/fs/kv    # 8 clients, each the full load
  storlab kvcache --cache-dir /mnt/nvme/kv --option 3 --trials 1 --duration 60s --inter-option-delay 0  # OPEN
  storlab kvcache --cache-dir /dev/shm --option 1,2,3 --users 2 --duration 2s --scale 0.01 --trials 1 \\
      --inter-option-delay 0                                          # a scaled-down trial
method and document: docs/kvcache.md
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kvcache", help="MLPerf Storage v3.0's KV-cache benchmark (LLM inference KV objects "
                       "spilled to storage)", description=__doc__.split("\n\n")[0], epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_table_arguments(p, KVCACHE_OPTIONS, command="kvcache")
    add_table_arguments(p, [BY_NAME[n] for n in SHARED], command="kvcache")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..jobs.kvcache_job import resolve_options
    from ..measure.mpi.ranks import open_ranks
    from ..suites.kvcache.run import KvSettings
    from ..suites.kvcache.run import run as run_kvcache

    parse_table_args(args, COMMANDS[0].options)      # its own rows and the run table's it shares
    options = resolve_options(args.option, vars(args))
    settings = KvSettings(cache_dir=args.cache_dir, seed=args.seed, trials=args.trials,
                          inter_option_delay_s=args.inter_option_delay, scale=args.scale,
                          requests_per_user=args.requests_per_user, storage_capacity=args.storage_capacity,
                          precondition=bool(args.precondition), precondition_size=args.precondition_size)
    emit = Emitter("kvcache", {name: getattr(args, name) for name in SHARED}, view="kvcache")
    ranks = open_ranks(args.rank_timeout, "kvcache")
    quiet = args.quiet or ranks.rank != 0

    def notify(line: str) -> None:
        if not quiet:
            print(f"storlab kvcache: {line}", file=sys.stderr, flush=True)

    with emit.running():
        doc = run_kvcache(options, settings, argv=["storlab", "kvcache", *sys.argv[2:]], ranks=ranks,
                          notify=notify, checkpoint=emit.checkpoint if ranks.rank == 0 else None)
    if doc is None:         # not rank 0: rank 0 reports the run (a rank that failed sets the code)
        from ..signals import STOP
        from .main import ExitCode

        return STOP.exit_code or (ExitCode.FAILURE if ranks.failure is not None else ExitCode.OK)
    return emit.finish(doc)
