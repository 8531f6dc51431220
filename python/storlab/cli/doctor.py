"""`storlab doctor [DEVICE|MOUNTPOINT|PATH ...]`: inspect this host's storage stack for misalignment
and mistuning; `--stack stack.toml` also lists every difference from a planned stack.

Exit codes: 0 when done (findings do not change it unless --fail-on is given), 1 when --fail-on
finds a finding of that severity or worse, 2 for a bad option, target or stack file.
"""
from __future__ import annotations

import argparse
import json
import sys

from .main import ExitCode, UsageError

__all__ = ["register", "run"]

FAIL_ON = ("never", "warning", "error")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "doctor", help="check the host's block devices, RAID, LVM and file systems for misalignment and mistuning",
        description=__doc__.split("\n\n")[0])
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="block device, mount point or path to check (default: every device on the host)")
    p.add_argument("--json", action="store_true", help="print the result as JSON (schema storlab.doctor/1) only")
    p.add_argument("--stack", metavar="FILE", help="planned stack (TOML, as for storlab plan) to compare the targets with")
    p.add_argument("--fail-on", choices=FAIL_ON, default="never",
                   help="exit 1 when a finding of this severity or worse is found (default: never)")
    adv = p.add_argument_group("recorded trees (inspect a snapshot instead of this host)")
    adv.add_argument("--sysfs-root", default="/sys", metavar="DIR", help="sysfs mount (default: /sys)")
    adv.add_argument("--proc-root", default="/proc", metavar="DIR", help="procfs mount (default: /proc)")
    adv.add_argument("--dev-root", default="/dev", metavar="DIR", help="device nodes (default: /dev)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, tool_runner=None) -> int:
    from ..doctor.checks import run_checks
    from ..doctor.inventory import discover
    from ..doctor.report import build_result
    from ..doctor.tools import run_tool
    from ..output.doctor_text import render_text

    if args.fail_on not in FAIL_ON:
        raise UsageError(f"--fail-on: expected one of {', '.join(FAIL_ON)}, got {args.fail_on!r}")
    stack = None
    if args.stack:
        if not args.targets:
            raise UsageError("--stack needs a TARGET: the mount point or device the planned stack describes")
        from ..model.stack import load_stack
        stack = load_stack(args.stack)     # StackError is a ValueError: one line, exit 2
    inv = discover(args.targets, sysfs_root=args.sysfs_root, proc_root=args.proc_root, dev_root=args.dev_root,
                   run=tool_runner or run_tool)
    findings = run_checks(inv)
    differences = None
    if stack is not None:
        from ..doctor.stack_check import compare_with_stack
        differences = compare_with_stack(inv, stack, inv.roots)
    result = build_result(inv, findings, list(args.targets), args.stack, differences)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(result))
    worst = {"error": 2, "warning": 1, "info": 0}
    threshold = {"never": None, "warning": 1, "error": 2}[args.fail_on]
    if threshold is not None and any(worst[f.severity] >= threshold for f in findings):
        return ExitCode.FAILURE
    return ExitCode.OK
