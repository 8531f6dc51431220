"""RAID group notation `R<level>/<span>[/<total>|/x]` (RAID type / span / number of drives).

`R60/12/24` is a RAID 60 of two spans of twelve drives (ten data, two parity each); `R6/12` is one
span; `R50/6/x` leaves the total to be chosen. For single-level RAID a total larger than the span
means several independent groups of that span (e.g. `R5/6/12` = two R5/6 groups).
Every error is a `NotationError` whose one-line message starts with the text and names what is wrong.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UserError

__all__ = ["NotationError", "RaidLevel", "RAID_LEVELS", "RaidNotation", "parse_raid", "MAX_DRIVES", "MAX_SPAN"]

# The most drives one stack may have: beyond any real array, and small enough that every model
# (geometry, the Markov chains, the recommender) answers within a second.
MAX_DRIVES = 100_000
# The widest group (span): wider than any RAID group a controller or md builds (controllers stop
# at a few dozen drives per span); more drives are several groups, e.g. R6/12/1200.
MAX_SPAN = 1024
# The widest n-way mirror: its reliability chain has one state per tolerated failure, solved
# exactly in rationals, which stays well under a second up to here.
MAX_MIRROR_COPIES = 64


class NotationError(UserError):
    """A RAID notation that cannot be parsed or does not describe a valid layout."""


@dataclass(frozen=True)
class RaidLevel:
    """What a RAID level means for one span (group)."""
    number: int
    parity_drives: int          # parity chunks per stripe (RAID 3/4/5/6); 0 otherwise
    mirrored: bool              # RAID 1 (n-way mirror) and RAID 10 (stripe of 2-way mirrors)
    nested: bool                # RAID 50/60: the controller stripes several spans
    min_span: int
    dedicated_parity: bool = False   # RAID 3/4: parity lives on one drive (a hot spot for writes)

    @property
    def span_level(self) -> int:
        """The level of one span: 5 for RAID 50, 6 for RAID 60, else the level itself."""
        return {50: 5, 60: 6}.get(self.number, self.number)


RAID_LEVELS: dict[int, RaidLevel] = {
    0: RaidLevel(0, 0, False, False, min_span=1),     # R0/1: one drive (a JBOD LUN)
    1: RaidLevel(1, 0, True, False, min_span=2),
    3: RaidLevel(3, 1, False, False, min_span=3, dedicated_parity=True),
    4: RaidLevel(4, 1, False, False, min_span=3, dedicated_parity=True),
    5: RaidLevel(5, 1, False, False, min_span=3),
    6: RaidLevel(6, 2, False, False, min_span=4),
    10: RaidLevel(10, 0, True, False, min_span=4),
    50: RaidLevel(50, 1, False, True, min_span=3),
    60: RaidLevel(60, 2, False, True, min_span=4),
}
_LEVEL_LIST = "0, 1, 3, 4, 5, 6, 10, 50 or 60"
_NOTATION_RE = re.compile(r"^\s*(?:r|raid)\s*-?\s*([0-9]+)\s*/\s*([0-9]+)\s*(?:/\s*([0-9]+|x)\s*)?$", re.IGNORECASE)


@dataclass(frozen=True)
class RaidNotation:
    """A parsed `R<level>/<span>[/<total>]`. `total_drives` is None for `/x` (to be chosen)."""
    level: RaidLevel
    span: int
    total_drives: int | None

    @property
    def text(self) -> str:
        total = "" if self.total_drives == self.span and not self.level.nested else (
            "/x" if self.total_drives is None else f"/{self.total_drives}")
        return f"R{self.level.number}/{self.span}{total}"

    @property
    def is_resolved(self) -> bool:
        return self.total_drives is not None

    @property
    def spans(self) -> int:
        """Number of span-sized groups (RAID 50/60 spans, or independent groups)."""
        return self._require_total() // self.span

    @property
    def data_drives_per_span(self) -> int:
        """Drives whose chunks carry distinct data in one stripe of a span."""
        if self.level.number == 1:
            return 1                      # n-way mirror: one drive's worth of data
        if self.level.number == 10:
            return self.span // 2         # stripe of 2-way mirrors
        return self.span - self.level.parity_drives

    @property
    def redundancy_drives_per_span(self) -> int:
        return self.span - self.data_drives_per_span

    @property
    def copies(self) -> int:
        """Copies of each data chunk: n for an n-way mirror, 2 for RAID 10, 1 otherwise."""
        return {1: self.span, 10: 2}.get(self.level.number, 1)

    @property
    def fault_tolerance_per_group(self) -> int:
        """Drive failures one reliability group survives (a RAID 10 group is one mirrored pair)."""
        if self.level.number == 1:
            return self.span - 1
        if self.level.number == 10:
            return 1
        return self.level.parity_drives

    def with_total(self, total_drives: int) -> "RaidNotation":
        """The same layout with the total chosen (validated like parsed text)."""
        return _validate(self.level, self.span, total_drives, f"R{self.level.number}/{self.span}/{total_drives}")

    def _require_total(self) -> int:
        if self.total_drives is None:
            raise NotationError(f"{self.text}: total number of drives is not chosen (x); give the number of drives")
        return self.total_drives


def parse_raid(text: str) -> RaidNotation:
    """Parse `R6/12`, `R60/12/24`, `R50/6/x`, `RAID5/6`; raise NotationError with a one-line reason."""
    source = str(text).strip()
    m = _NOTATION_RE.match(source)
    if not m:
        if re.match(r"^\s*(?:r|raid)\s*-?\s*[0-9]+\s*$", source, re.IGNORECASE):
            raise NotationError(f"{source}: missing span; write level/span[/total], e.g. R5/6 or R60/12/24")
        raise NotationError(f"{source}: not a RAID notation; write R<level>/<span>[/<total>|/x], e.g. R6/12 or R50/6/x")
    if any(g is not None and g.isdigit() and len(g) > 9 for g in m.groups()):
        raise NotationError(f"{source[:40]}: numbers too large; at most {MAX_DRIVES} drives per stack")
    level_number, span = int(m.group(1)), int(m.group(2))
    if level_number not in RAID_LEVELS:
        raise NotationError(f"{source}: unknown RAID level {level_number}; use {_LEVEL_LIST}")
    level = RAID_LEVELS[level_number]
    total_text = m.group(3)
    if total_text is None:
        if level.nested:
            raise NotationError(f"{source}: RAID {level_number} needs the total number of drives (or x), "
                                f"e.g. R{level_number}/{span}/{2 * span}")
        total = span
    elif total_text.lower() == "x":
        total = None
    else:
        total = int(total_text)
    return _validate(level, span, total, source)


def _validate(level: RaidLevel, span: int, total: int | None, source: str) -> RaidNotation:
    n = level.number
    if span > MAX_DRIVES or (total is not None and total > MAX_DRIVES):
        raise NotationError(f"{source}: more than {MAX_DRIVES} drives; allowed: at most {MAX_DRIVES} per stack")
    if span > MAX_SPAN:
        raise NotationError(f"{source}: a span of {span} drives; allowed: {level.min_span} to {MAX_SPAN} drives "
                            f"per span (for more, give a total: R{n}/<span>/<total>)")
    if span < level.min_span:
        raise NotationError(f"{source}: RAID {n} needs at least {level.min_span} drives per span")
    if n == 1 and span > MAX_MIRROR_COPIES:
        raise NotationError(f"{source}: a RAID 1 mirror of {span} copies; allowed: 2 to {MAX_MIRROR_COPIES} "
                            f"(for more drives use R10 or several groups, e.g. R1/2/{2 * (span // 2)})")
    if n == 10 and span % 2:
        raise NotationError(f"{source}: RAID 10 needs an even number of drives per span (mirrored pairs)")
    if total is not None:
        if total < span:
            raise NotationError(f"{source}: total {total} drives is less than the span of {span}")
        if total % span:
            raise NotationError(f"{source}: total {total} drives is not a multiple of the span of {span}")
        if level.nested and total // span < 2:
            raise NotationError(f"{source}: RAID {n} needs at least 2 spans; {total} drives make 1 span of {span}")
    return RaidNotation(level, span, total)
