"""The options of `storlab net`, the fabric probe (docs/net.md): the serving nodes, each stream's
time and the streams per pair, and the run table's output and MPI options it shares."""
from __future__ import annotations

from ..options import BY_NAME, Option, OptionError
from .shared import CommandTable, command_row

__all__ = ["COMMANDS", "NET_OPTIONS", "SHARED", "parse_hosts", "MAX_STREAMS"]

# The options shared with `storlab run` (same flags, same meaning).
SHARED = ("json", "quiet", "store", "no_store", "tag", "note", "rank_timeout")
MAX_STREAMS = 128
MAX_HOSTS = 4096


def parse_hosts(raw: str, label: str) -> tuple[str, ...]:
    """Comma-separated host names (as the nodes report them), each once."""
    items = [x.strip() for x in str(raw).split(",")]
    if not raw or any(not x for x in items):
        raise OptionError(f"{label}: expected comma-separated host names, got {raw!r} (an empty item)")
    bad = [x for x in items if not x.isascii() or not all(c.isalnum() or c in "-._" for c in x) or len(x) > 253]
    if bad:
        raise OptionError(f"{label}: {bad[0]!r} is not a host name (letters, digits, '-', '.', '_')")
    if len(set(items)) != len(items):
        twice = next(x for x in items if items.count(x) > 1)
        raise OptionError(f"{label}: {twice!r} is named twice")
    if len(items) > MAX_HOSTS:
        raise OptionError(f"{label}: {len(items)} hosts; allowed: at most {MAX_HOSTS}")
    return tuple(items)


NET_OPTIONS: tuple[Option, ...] = (
    command_row("servers", "list", "host names of the serving nodes, comma-separated (as `hostname` prints them); "
                "every other node with a rank is a client", parse=parse_hosts, required=True, metavar="HOSTS",
                category="net"),
    command_row("time", "duration", "how long each stream sends, per pair and for all clients at once",
                default=3.0, minimum=0.1, maximum=3600.0, unit="s", category="net"),
    command_row("streams", "int", "parallel TCP streams per client-server pair (iperf3 -P)", default=1,
                minimum=1, maximum=MAX_STREAMS, category="net"),
    command_row("no_aggregate", "bool", "measure the pairs only, not every client at once", default=False,
                category="net"),
)

COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("net", "the fabric between client and server nodes: TCP throughput and round trip per "
                 "pair and all at once (docs/net.md)", (*NET_OPTIONS, *(BY_NAME[n] for n in SHARED))),
)
