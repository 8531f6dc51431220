"""The options of `storlab replay` (docs/options-replay.md): its own, and the run table's options
it shares (output, and rank_timeout under mpiexec), named in `SHARED`."""
from __future__ import annotations

from ..options import BY_NAME, Option
from .shared import CommandTable, command_row

__all__ = ["COMMANDS", "REPLAY_OPTIONS", "SHARED"]

# The options shared with `storlab run` (same flags, same meaning): output, and MPI's rank timeout.
SHARED = ("json", "quiet", "store", "no_store", "tag", "note", "rank_timeout")

REPLAY_OPTIONS: tuple[Option, ...] = (
    command_row("log", "str", "the Darshan log to replay (.darshan, format 3.x)", positional="1", metavar="LOG",
                category="replay"),
    command_row("target", "str", "folder the replay writes its files under (new, empty, or an earlier replay's); "
                "the log's own paths are never opened", required=True, metavar="DIR", category="replay"),
    BY_NAME["emit"],      # one meaning for every translator (the target gets the empty folders too)
    command_row("ranks", "int", "replay ranks (one worker each, in one process; under mpiexec the MPI ranks are "
                "the replay ranks, one each, and --ranks is refused); the log's rank r replays as "
                "r mod N (default: the log's rank count; beyond 256, the fewest ranks up to 256 that give each "
                "ceil(ranks/256) log ranks at most, e.g. 2048 -> 256, 1000 -> 250, 257 -> 129, said in one line)",
                minimum=1, maximum=256, category="replay"),
    command_row("scale", "float", "replay this fraction of each file's requests and bytes (sizes kept); the "
                "fidelity table compares with the log scaled alike", default=1.0, minimum=1e-9, maximum=1.0,
                category="replay"),
    command_row("no_dxt", "bool", "ignore DXT traces: make every request sequence from the counters",
                default=False, category="replay"),
    command_row("timed", "bool", "keep the recorded start time of every DXT-traced request (think time kept); "
                "default: as fast as possible", default=False, category="replay"),
    command_row("stdio_buffer", "size", "replay STDIO calls (fread/fwrite...) through a fully buffered stream of "
                "this size, as glibc's (the system calls the C library made: e.g. 4k, the st_blksize of most local "
                "file systems); default 0: one request per call, the application's calls", default=0, minimum=0,
                category="replay"),
    command_row("keep_files", "bool", "keep the replay's data files under the target (default: removed afterwards)",
                default=False, category="replay"),
    command_row("seed", "int", "seed of the choices the counters leave open (sizes' order, positions)",
                default=1, minimum=0, maximum=2**63 - 1, category="replay"),
)

COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("replay", "a Darshan log replayed under a target folder (docs/replay.md)",
                 (*REPLAY_OPTIONS, *(BY_NAME[n] for n in SHARED))),
)
