"""The options of `storlab meta` as its command takes them (docs/options-meta.md): the metadata
benchmark's rows (jobs/meta_options.py, where job files' `type = "meta"` phases read them too) and
the run table's output and MPI rows it shares."""
from __future__ import annotations

from ..meta_options import META_OPTIONS, MPI_RUN_OPTIONS, SHARED_RUN_OPTIONS
from ..options import BY_NAME
from .shared import CommandTable

__all__ = ["COMMANDS"]

COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("meta", "the metadata benchmark (docs/meta.md); the options are also job-file keys",
                 (*(o for o in META_OPTIONS if o.name not in SHARED_RUN_OPTIONS),
                  *(BY_NAME[n] for n in SHARED_RUN_OPTIONS + MPI_RUN_OPTIONS)), job_keys=True),
)
