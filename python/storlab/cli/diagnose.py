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
from .options_cli import add_table_arguments, parse_table_args, takes_json_name

__all__ = ["COMMANDS", "DIAGNOSE_OPTIONS", "register", "run"]

EXAMPLES = """examples:
  storlab diagnose /mnt/scratch
  storlab diagnose /mnt/scratch --stack stack.toml --json diag.json -o diag.html
  storlab diagnose /dev/md0 --budget 60s
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
