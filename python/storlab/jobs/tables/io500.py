"""The options of `storlab io500` (docs/options-io500.md): its own, and the run table's it shares
(the output ones and rank_timeout) named in `SHARED`. The .ini file holds the benchmark's settings."""
from __future__ import annotations

from ..meta_options import META_BY_NAME
from ..options import BY_NAME, Option
from .shared import CommandTable, command_row

__all__ = ["COMMANDS", "IO500_OPTIONS", "SHARED"]

IO500_OPTIONS: tuple[Option, ...] = (
    command_row("config", "str", "io500 .ini file, run as written (`--list` shows every section and key)",
                positional="?", metavar="CONFIG.ini", category="io500"),
    BY_NAME["emit"],           # one meaning for every translator
    command_row("list", "bool", "print every section and key io500 knows, with its default, and stop",
                category="io500"),
    command_row("timestamp", "str", "name of the timestamp folders (io500 --timestamp; default: the start "
                "time as YYYY.MM.DD-HH.MM.SS)", metavar="TEXT", category="io500"),
    META_BY_NAME["keep"],      # the same meaning as `storlab meta --keep`
    command_row("mode", "choice", "io500 --mode: standard, or extended (adds md-workbench, find-easy and find-hard, "
                "scored in [SCOREX])",
                choices={"standard": "io500's scored phases", "extended": "also the optional phases"},
                default="standard", category="io500"),
)
# The run table's options io500 takes as they are.
SHARED = ("json", "quiet", "store", "no_store", "tag", "note", "rank_timeout")

COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("io500", "the IO500 benchmark (docs/io500.md); the .ini file holds the benchmark's own settings",
                 (*IO500_OPTIONS, *(BY_NAME[n] for n in SHARED))),
)
