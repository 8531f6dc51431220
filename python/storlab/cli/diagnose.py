"""`storlab diagnose TARGET`: measure the stack below a mount point, file or block device layer by
layer against what the layer below predicts, and name where it loses (storlab/diagnose/).

Flags come from the option table jobs/tables/diagnose.py (its own rows plus the shared rows of the run table, so
--json, --store, --tag and --allow-destroy mean here what they mean in `storlab run`; reference:
docs/options-diagnose.md).
"""
from __future__ import annotations

import argparse
import sys

from ..diagnose.run import Settings, diagnose
from ..jobs.tables.diagnose import COMMANDS, DIAGNOSE_OPTIONS
from ..output.emit import Emitter
from ..signals import STOP
from .main import ExitCode, UsageError
from .options_cli import add_table_arguments, parse_table_args, takes_json_name

__all__ = ["COMMANDS", "DIAGNOSE_OPTIONS", "register", "run"]

EXAMPLES = """examples:
  storlab diagnose /mnt/scratch
  storlab diagnose /mnt/scratch --stack stack.toml --json diag.json -o diag.html
  storlab diagnose /dev/md0 --budget 60s
  mpiexec -hosts c1,c2,srv -n 3 storlab diagnose nbd://srv:10809/ --servers srv --backing /dev/sdb \\
      --memory-target nbd://srv:10810/ --budget 60s        # across the fabric
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diagnose", help="measure a storage stack layer by layer against the model and "
                                        "name where it loses",
                       description="Discover the stack below TARGET (a mount point, file or block device), "
                                   "measure each member alone, all members at once, the volume and the file "
                                   "system, compare each layer with what the layer below predicts and name "
                                   "the losses. Devices are only read; writes go to a probe file in the "
                                   "file system.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_table_arguments(p, DIAGNOSE_OPTIONS, command="diagnose", json_takes=takes_json_name)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    parse_table_args(args, DIAGNOSE_OPTIONS)
    v = {o.name: getattr(args, o.name) for o in DIAGNOSE_OPTIONS}
    if "://" in str(v["target"]):
        return run_fabric(v)
    given = [o for o in ("servers", "backing", "memory_target") if v.get(o)]
    if given:
        raise UsageError(f"{given[0].replace('_', '-')}: only with a network target (nbd://, nfs://); "
                         f"{v['target']} is local")
    emit = Emitter("diagnose", v, view="diagnose")      # --json and -o (the HTML report) checked now
    quiet = bool(v.get("quiet"))
    say = None if quiet else (lambda line: print(line, file=sys.stderr))
    settings = Settings(budget_s=float(v["budget"]), allow_destroy=tuple(v.get("allow_destroy") or ()),
                        argv=["storlab", "diagnose", *sys.argv[2:]], stack_file=v.get("stack"),
                        profile_file=v.get("profile"), say=say,
                        ranks=tuple(c for c in v.get("ranks") or () if c > 1))
    with emit.running():
        doc, probe_docs = diagnose(v["target"], settings)
    # the store keeps each probe's run, tagged with the diagnosis; the diagnosis is in --json
    tag = f"diagnose:{doc['run_id'][:8]}"
    note = f"probes stored as {len(probe_docs)} run(s) tagged {tag}" if probe_docs else None
    return emit.finish(doc, store=probe_docs, tags=[tag], note=note)


def run_fabric(v: dict) -> int:
    """A network target across the fabric (diagnose/fabric.py): under mpiexec, rank 0 emits."""
    from ..diagnose.fabric import FabricSettings, diagnose_fabric
    from ..measure.launch import detect
    from ..measure.mpi.ranks import open_ranks

    local = [o for o in ("stack", "profile", "ranks", "allow_destroy") if v.get(o)]
    if local:
        raise UsageError(f"{local[0].replace('_', '-')}: not with a network target (the server's storage is "
                         "named with --backing; the clients are the nodes with a rank)")
    if not v.get("servers"):
        raise UsageError("servers: a network target needs --servers HOSTS, the serving nodes (every other node "
                         "with a rank is a client)")
    servers = ",".join(v["servers"])
    if detect() is None:
        raise UsageError(f"diagnose of a network target measures between nodes: start it under mpiexec with a rank "
                         f"on each client node and on {servers} (e.g. mpiexec -hosts c1,c2,{v['servers'][0]} -n 3 "
                         f"storlab diagnose {v['target']} --servers {servers})")
    emit = Emitter("diagnose", v, view="diagnose")
    ranks = open_ranks(v["rank_timeout"], "diagnose")
    quiet = bool(v.get("quiet")) or ranks.rank != 0
    settings = FabricSettings(v["target"], tuple(v["servers"]), float(v["budget"]), backing=v.get("backing"),
                              memory_target=v.get("memory_target"), argv=["storlab", "diagnose", *sys.argv[2:]],
                              say=None if quiet else (lambda line: print(line, file=sys.stderr, flush=True)))
    with emit.running():
        doc, probe_docs = diagnose_fabric(ranks, settings)
    if ranks.rank != 0:
        return STOP.exit_code or (ExitCode.OK if doc.get("complete", True) else ExitCode.FAILURE)
    tag = f"diagnose:{doc['run_id'][:8]}"
    note = f"probes stored as {len(probe_docs)} run(s) tagged {tag}" if probe_docs else None
    return emit.finish(doc, store=probe_docs, tags=[tag], note=note)
