"""`storlab diagnose TARGET`: measure the stack below a mount point, file or block device layer by
layer against what the layer below predicts, and name where it loses (storlab/diagnose/).

Flags come from the option table below (its own rows plus the shared rows of the run table, so
--json, --store, --tag and --allow-destroy mean here what they mean in `storlab run`; reference:
docs/options-diagnose.md).
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from ..diagnose.run import DEFAULT_BUDGET_S, Settings, diagnose
from ..jobs.options import BY_NAME, Option
from ..output.diagnose import build_html, render_table
from ..output.files import check_destination, write_output
from ..output.json import write_json
from ..signals import STOP
from .main import ExitCode
from .options_cli import OUTPUT, CommandTable, add_table_arguments, parse_table_args, takes_json_name
from .run import stop_exit_code, store_result
from .scale import parse_rank_counts

__all__ = ["COMMANDS", "DIAGNOSE_OPTIONS", "register", "run"]

def _row(name: str, kind: str, help: str, **kw: Any) -> Option:
    return Option(name, kind, help, core=False, job_key=False, **kw)


COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("diagnose", "measure a storage stack layer by layer against the model and name where it "
                 "loses (docs/diagnose.md)", (
        _row("target", "str", "mount point (or any folder in a file system), file or block device",
             positional="1", metavar="TARGET"),
        BY_NAME["stack"],
        _row("budget", "duration", "time for all probes together; each probe gets an equal share (2 to 10 s)",
             default=DEFAULT_BUDGET_S, category="timing", minimum=5, maximum=86400, unit="s"),
        _row("ranks", "list", "rank counts at which to measure the file system again, as MPI ranks on "
             "this host (mpiexec), comma-separated (default: none)", parse=parse_rank_counts, metavar="LIST",
             category="scale"),
        BY_NAME["allow_destroy"], BY_NAME["json"], OUTPUT,
        BY_NAME["quiet"], BY_NAME["store"], BY_NAME["no_store"], BY_NAME["tag"], BY_NAME["note"])),
)
DIAGNOSE_OPTIONS = COMMANDS[0].options

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
    check_destination(v.get("json"), "json")
    check_destination(v.get("output"), "output")
    quiet = bool(v.get("quiet"))
    say = None if quiet else (lambda line: print(line, file=sys.stderr))
    settings = Settings(budget_s=float(v["budget"]), allow_destroy=tuple(v.get("allow_destroy") or ()),
                        argv=["storlab", "diagnose", *sys.argv[2:]], stack_file=v.get("stack"), say=say,
                        ranks=tuple(c for c in v.get("ranks") or () if c > 1))
    try:
        doc, probe_docs = diagnose(v["target"], settings)
    finally:
        STOP.saving()
    tag = f"diagnose:{doc['run_id'][:8]}"
    store_settings = {**v, "tag": [*(v.get("tag") or ()), tag]}
    stored = all(store_result(d, store_settings, "diagnose") for d in probe_docs)
    if v.get("json"):
        write_json(doc, v["json"])
    if v.get("output"):
        write_output(build_html(doc), v["output"], "output")
    if not quiet and v.get("json") != "-":
        print(render_table(doc))
        if probe_docs and not v.get("no_store"):
            print(f"probes stored as {len(probe_docs)} run(s) tagged {tag}")
    stopped = stop_exit_code("diagnose", doc, kept="the layers measured so far are kept")
    if stopped is not None:
        return stopped
    return ExitCode.OK if stored else ExitCode.FAILURE
