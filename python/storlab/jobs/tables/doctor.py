"""The options of `storlab doctor` (docs/options-doctor.md)."""
from __future__ import annotations

from ..options import BY_NAME
from .shared import CommandTable, command_row

__all__ = ["COMMANDS"]

COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("doctor", "check the host's block devices, RAID, LVM and file systems for misalignment "
                 "and mistuning", (
        command_row("targets", "str", "block device, mount point or path to check (default: every device on "
                    "the host)", positional="*", default=(), metavar="TARGET"),
        BY_NAME["json"], BY_NAME["stack"],
        command_row("fail_on", "choice", "exit 1 when a finding of this severity or worse is found",
                    default="never", category="checks",
                    choices={"never": "findings never change the exit code",
                             "warning": "a warning or an error exits 1", "error": "an error exits 1"}),
        command_row("sysfs_root", "str", "sysfs mount (inspect a recorded tree instead of this host)",
                    default="/sys", metavar="DIR", category="recorded trees"),
        command_row("proc_root", "str", "procfs mount (inspect a recorded tree instead of this host)",
                    default="/proc", metavar="DIR", category="recorded trees"),
        command_row("dev_root", "str", "device nodes (inspect a recorded tree instead of this host)",
                    default="/dev", metavar="DIR", category="recorded trees"))),
)
