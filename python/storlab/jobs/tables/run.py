"""The options of `storlab run` as one command's table (docs/options.md): the rows are jobs/options.py's
`OPTIONS`, which job files are read with, so they live beside the machinery every table shares."""
from __future__ import annotations

from ..options import OPTIONS
from .shared import CommandTable

__all__ = ["COMMANDS"]

COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("run", "the I/O benchmark: one job of phases and groups (docs/options.md); the options are "
                 "also job-file keys", OPTIONS, job_keys=True),
)
