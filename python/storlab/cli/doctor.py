"""`storlab doctor [DEVICE|MOUNTPOINT|PATH ...]`: inspect this host's storage stack for misalignment
and mistuning; `--stack stack.toml` also lists every difference from a planned stack.

Flags come from the option table jobs/tables/doctor.py (reference: docs/options-doctor.md).

Exit codes: 0 when done (findings do not change it unless --fail-on is given), 1 when --fail-on
finds a finding of that severity or worse, 2 for a bad option, target or stack file.
"""
from __future__ import annotations

import argparse
import sys

from ..jobs.tables.doctor import COMMANDS
from ..output.files import check_destination
from ..output.json import write_json
from .main import ExitCode, UsageError
from .options_cli import add_table_arguments, parse_table_args, takes_json_name

__all__ = ["register", "run", "COMMANDS"]


def register(subparsers) -> None:
    (table,) = COMMANDS
    p = subparsers.add_parser("doctor", help=table.summary, description=__doc__.split("\n\n")[0])
    add_table_arguments(p, table.options, command="doctor", json_takes=takes_json_name)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, tool_runner=None) -> int:
    from ..doctor.checks import run_checks
    from ..doctor.inventory import discover
    from ..doctor.report import build_result
    from ..doctor.tools import run_tool
    from ..output.doctor_text import render_text

    parse_table_args(args, COMMANDS[0].options)
    check_destination(args.json, "json")
    stack = None
    if args.stack:
        if not args.targets:
            raise UsageError("--stack needs a TARGET: the mount point or device the planned stack describes")
        from ..model.stack import load_stack
        stack = load_stack(args.stack)     # a StackError (UserError): one line, exit 2
    inv = discover(args.targets, sysfs_root=args.sysfs_root, proc_root=args.proc_root, dev_root=args.dev_root,
                   run=tool_runner or run_tool)
    findings = run_checks(inv)
    differences = None
    if stack is not None:
        from ..doctor.stack_check import compare_with_stack
        differences = compare_with_stack(inv, stack, inv.roots)
    result = build_result(inv, findings, list(args.targets), args.stack, differences)
    if args.json:
        write_json(result, args.json, indent=2)
    else:
        sys.stdout.write(render_text(result))
    worst = {"error": 2, "warning": 1, "info": 0}
    threshold = {"never": None, "warning": 1, "error": 2}[args.fail_on]
    if threshold is not None and any(worst[f.severity] >= threshold for f in findings):
        return ExitCode.FAILURE
    return ExitCode.OK
