"""`storlab diagnose TARGET`: measure the stack below a mount point, file or block device layer by
layer against what the layer below predicts, and name where it loses (storlab/diagnose/).

Flags come from DIAGNOSE_OPTIONS (its own rows plus the shared output and safety rows of the run
table, so --json, --store, --tag and --allow-destroy mean here what they mean in `storlab run`).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..diagnose.run import DEFAULT_BUDGET_S, Settings, diagnose
from ..jobs.options import BY_NAME, Option, parse_option
from ..output.diagnose import build_html, render_table
from ..signals import STOP
from .main import ExitCode
from .options_cli import add_table_arguments
from .outputs import check_destination, write_output
from .run import stop_exit_code, store_result

__all__ = ["DIAGNOSE_OPTIONS", "register", "run"]

DIAGNOSE_OPTIONS: tuple[Option, ...] = (
    Option("stack", "str", "planned stack (TOML, as `storlab plan` reads it): compared with the live "
           "stack before measuring", default=None, category="target", core=False, metavar="STACK.toml"),
    Option("budget", "duration", "time for all probes together; each probe gets an equal share "
           "(2 to 10 s)", default=DEFAULT_BUDGET_S, category="timing", core=False, minimum=5,
           maximum=86400, unit="s"),
    Option("ranks", "int", "also measure the file system as N MPI ranks on this host (mpiexec)",
           default=None, category="workload", core=False, minimum=2, maximum=1024, metavar="N"),
    BY_NAME["allow_destroy"],
    BY_NAME["json"],
    Option("output", "str", "write the HTML report (waterfall chart and findings) to PATH",
           default=None, category="output", core=False, short="o", metavar="PATH"),
    BY_NAME["quiet"], BY_NAME["store"], BY_NAME["no_store"], BY_NAME["tag"], BY_NAME["note"],
)

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
    p.add_argument("target", help="mount point, file or block device")
    add_table_arguments(p, DIAGNOSE_OPTIONS)
    p.set_defaults(func=run)


def _values(args: argparse.Namespace) -> dict[str, Any]:
    out = {}
    for o in DIAGNOSE_OPTIONS:
        raw = getattr(args, o.name, None)
        out[o.name] = o.default if raw is None else parse_option(o, raw)
    return out


def run(args: argparse.Namespace) -> int:
    v = _values(args)
    check_destination(v.get("json"), "json")
    check_destination(v.get("output"), "output")
    quiet = bool(v.get("quiet"))
    say = None if quiet else (lambda line: print(line, file=sys.stderr))
    settings = Settings(budget_s=float(v["budget"]), allow_destroy=tuple(v.get("allow_destroy") or ()),
                        argv=["storlab", "diagnose", *sys.argv[2:]], stack_file=v.get("stack"), say=say,
                        ranks=v.get("ranks"))
    try:
        doc, probe_docs = diagnose(args.target, settings)
    finally:
        STOP.saving()
    tag = f"diagnose:{doc['run_id'][:8]}"
    store_settings = {**v, "tag": [*(v.get("tag") or ()), tag]}
    stored = all(store_result(d, store_settings, "diagnose") for d in probe_docs)
    if v.get("json"):
        write_output(json.dumps(doc, indent=None if v["json"] == "-" else 1) + "\n", v["json"], "json")
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
