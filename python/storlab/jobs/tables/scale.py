"""The options of `storlab scale` beyond the run table's (docs/options-scale.md): the rank counts.
`parse_rank_counts` also reads diagnose's --ranks."""
from __future__ import annotations

from ..options import Option, OptionError
from .shared import CommandTable, command_row

__all__ = ["COMMANDS", "SCALE_OPTIONS", "parse_rank_counts"]


def parse_rank_counts(raw: str, label: str) -> list[int]:
    """Comma-separated rank counts, each a whole number from 1 (checked against the launch's size
    once it is known)."""
    items = [x.strip() for x in str(raw).split(",") if x.strip()]
    if not items or not all(x.isdigit() and len(x) <= 9 for x in items):
        raise OptionError(f"{label}: expected comma-separated whole numbers (rank counts), got {raw!r}")
    counts = [int(x) for x in items]
    if min(counts) < 1:
        raise OptionError(f"{label}: 0 is out of range; allowed: rank counts from 1 to the launch's ranks")
    return counts


SCALE_OPTIONS: tuple[Option, ...] = (
    command_row("ranks", "list", "rank counts to run, comma-separated (default: 1, 2, 4 ... and all ranks)",
                parse=parse_rank_counts, metavar="LIST", category="scale"),
)

COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("scale", "the scaling run's own options (docs/mpi.md)", SCALE_OPTIONS),
)
