"""`storlab net --servers HOSTS`: the fabric between client and server nodes, measured under mpiexec
with ranks on every node (measure/net.py; docs/net.md): TCP throughput and round trip per pair,
then every client at once, and the shared links that shows.
"""
from __future__ import annotations

import argparse
import sys

from ..jobs.options import BY_NAME, OPTIONS, parse_value
from ..jobs.tables.net import NET_OPTIONS, SHARED
from ..output.emit import Emitter
from ..signals import STOP
from .main import ExitCode, UsageError
from .options_cli import add_option_arguments, add_table_arguments, parse_table_args

EXAMPLES = """examples:
  mpiexec -hosts c1,c2,srv -n 3 storlab net --servers srv               # each pair, then all at once
  mpiexec -hosts c1,c2,s1,s2 -n 4 storlab net --servers s1,s2 --streams 4 --time 10s --json net.json
method and document: docs/net.md
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("net", help="the fabric between client and server nodes: TCP throughput and round trip",
                       description="Measure the network between client and server nodes (run under mpiexec "
                       "with ranks on every node).", epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_table_arguments(p, NET_OPTIONS, command="net", title="net options")
    add_option_arguments(p, skip=[o.name for o in OPTIONS if o.name not in SHARED])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .. import document
    from ..measure.launch import detect
    from ..measure.mpi.ranks import open_ranks
    from ..measure.net import NetSettings, new_body, probe_fabric
    from ..measure.ranks import RankFailure

    parse_table_args(args, NET_OPTIONS)
    for name in SHARED:      # the run table's options, validated as `storlab run` validates them
        raw = getattr(args, name, None)
        setattr(args, name, BY_NAME[name].default if raw is None else parse_value(name, raw))
    if detect() is None:
        raise UsageError(f"net measures between nodes: start it under mpiexec or srun with a rank on each client "
                         f"node and on {', '.join(args.servers)} (e.g. mpiexec -hosts c1,{args.servers[0]} -n 2 "
                         f"storlab net --servers {','.join(args.servers)})")
    emit = Emitter("net", {name: getattr(args, name) for name in SHARED}, view="net")
    ranks = open_ranks(args.rank_timeout, "net")
    quiet = args.quiet or ranks.rank != 0
    settings = NetSettings(servers=tuple(args.servers), seconds=args.time, streams=args.streams,
                           aggregate=not args.no_aggregate)
    doc = document.header("net", argv=["storlab", "net", *sys.argv[2:]])
    body = new_body(settings)
    notify = None if quiet else (lambda line: print(f"storlab {line}", file=sys.stderr, flush=True))
    try:
        with emit.running():
            probe_fabric(ranks, settings, body, notify)
    except KeyboardInterrupt:      # a signal: the pairs measured so far are kept
        doc.update(complete=False, stop_reason="interrupted")
    except RankFailure as e:       # another rank failed or vanished: named, the rest kept
        doc.update(complete=False, stop_reason="error", error=str(e))
    if ranks.rank != 0:
        return STOP.exit_code or (ExitCode.FAILURE if ranks.failure is not None else ExitCode.OK)
    doc["mpi"] = {"size": ranks.size, "nodes": body.pop("nodes")}
    doc.update(body, finished_at=document.now_iso())
    return emit.finish(doc)
