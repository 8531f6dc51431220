"""What every command's table shares: `CommandTable` (the rows of one command or subcommand),
`command_row` (a command-line-only row) and the rows shared beyond `storlab run` (the run table's own
rows json, store, note, stack ... are shared as they are)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..options import Option

__all__ = ["CommandTable", "command_row", "OUTPUT"]


@dataclass(frozen=True)
class CommandTable:
    """The options of one command (or subcommand), for its parser and its reference page."""
    command: str                  # as typed: "run", "plan geometry"
    summary: str                  # one line
    options: tuple[Option, ...]
    job_keys: bool = False        # the options are also job-file keys


def command_row(name: str, kind: str, help: str, **kw: Any) -> Option:
    """A row of the command line only (no job-file key), so messages name its flag."""
    return Option(name, kind, help, core=False, job_key=False, **kw)


OUTPUT = command_row("output", "str", "write the command's artifact to FILE: the build script (plan script; "
                     "'-': standard output), the exported runs (results export; default: standard output) "
                     "or the HTML report (report)", category="output", short="o", metavar="FILE")
