"""The options of `storlab report` (docs/options-report.md); runs are selected as in `results`."""
from __future__ import annotations

from dataclasses import replace

from ..options import BY_NAME
from .results import WITH_TAG
from .shared import OUTPUT, CommandTable, command_row

__all__ = ["COMMANDS"]

COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("report", "HTML report with charts of stored or exported runs", (
        command_row("runs", "str", "run id, unique prefix, last, last~N (N runs before the last) or JSON result "
                    "file; several are compared; none (and no --with-tag): the most recent stored run",
                    positional="*", default=(), metavar="RUN"),
        WITH_TAG,
        replace(OUTPUT, required=True),
        command_row("png", "str", "also write each chart as a PNG file into DIR", metavar="DIR",
                    category="output"),
        command_row("title", "str", "title of the report (default: the runs and what varies)", metavar="TEXT",
                    category="output"),
        BY_NAME["store"])),
)
