"""The options of `storlab diagnose` (docs/options-diagnose.md)."""
from __future__ import annotations

from dataclasses import replace

from ..options import BY_NAME
from .net import NET_OPTIONS
from .plan import DEVICE_PROFILE
from .scale import parse_rank_counts
from .shared import OUTPUT, CommandTable, command_row

__all__ = ["COMMANDS", "DIAGNOSE_OPTIONS", "DEFAULT_BUDGET_S"]

# The probes' time when --budget is not given: diagnose/run.py's Settings default
# (tests/test_cli_options.py keeps the two equal).
DEFAULT_BUDGET_S = 180.0

# `storlab net`'s row, the same flag and meaning; needed only with a network target (diagnose/fabric.py)
SERVERS = replace(next(o for o in NET_OPTIONS if o.name == "servers"), required=False)

COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("diagnose", "measure a storage stack layer by layer against the model and name where it "
                 "loses (docs/diagnose.md)", (
        command_row("target", "str", "mount point (or any folder in a file system), file or block device; or a "
                    "network target (nbd://, nfs://) read by client nodes under mpiexec, with --servers",
                    positional="1", metavar="TARGET"),
        BY_NAME["stack"], DEVICE_PROFILE,
        command_row("budget", "duration", "time for all probes together; each probe gets an equal share (2 to "
                    "10 s)", default=DEFAULT_BUDGET_S, category="timing", minimum=5, maximum=86400, unit="s"),
        command_row("ranks", "list", "rank counts at which to measure the file system again, as MPI ranks on "
                    "this host (mpiexec), comma-separated (default: none)", parse=parse_rank_counts,
                    metavar="LIST", category="scale"),
        SERVERS,
        command_row("backing", "str", "with a network target: the export's backing store on the server node(s) "
                    "(a block device or file there), read there to measure the server's storage",
                    metavar="PATH", category="net"),
        command_row("memory_target", "str", "with a network target: an export of the same server(s) served from "
                    "memory (nbdkit memory, an NFS export on tmpfs), to measure the protocol with no disk in the "
                    "path", metavar="URL", category="net"),
        BY_NAME["rank_timeout"],
        BY_NAME["allow_destroy"], BY_NAME["json"], OUTPUT,
        BY_NAME["quiet"], BY_NAME["store"], BY_NAME["no_store"], BY_NAME["tag"], BY_NAME["note"])),
)
DIAGNOSE_OPTIONS = COMMANDS[0].options
