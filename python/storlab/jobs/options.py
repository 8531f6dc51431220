"""THE option table: every option of `storlab run` described once, and the option machinery every
command's table shares (the `Option` row, value parsers by kind, bounds, reference pages).

The table drives the command-line parser, TOML job files, `--help`, the generated reference page
(docs/options.md) and the plain-data job spec handed to the Rust engine. The engine-bound options
(`core=True`) are the fields of the Rust job spec, and their rules are the engine's: each row here
says how the value is written (kind, flag, help, choices' help); its default, bounds and unit come
from `storlab._core.option_rules()` (crates/storlab-core/src/rules.rs), and each value is checked
by the engine (`_core.check_option`), so a bad value reads the same from a flag, a job file or an
fio job file. tests/test_options.py keeps the names and choices in step with the engine.

Values are validated here only (parsing touches no file or device); resolving against the system
(file sizes, alignment, ring set-up) happens when the engine builds its plan.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from .. import _core
from ..errors import UserError
from ..units import (
    MAX_BYTES,
    MAX_COUNT,
    MAX_DURATION_S,
    UnitError,
    format_size,
    parse_count,
    parse_duration,
    parse_rate,
    parse_size,
)

__all__ = ["Option", "OptionError", "ROWS", "ENGINE_RULES", "OPTIONS", "BY_NAME", "NUMERIC_KINDS",
           "PER_DIRECTION_KINDS", "MAX_LIST_VALUES", "list_row", "value_form", "parse_option", "parse_value",
           "defaults", "render_reference", "render_rows"]


class OptionError(UserError):
    """A bad option value; the message names the option and what is allowed."""


@dataclass(frozen=True)
class Option:
    name: str                      # canonical snake_case name; TOML key; --name-with-dashes on the CLI
    kind: str                      # size | duration | rate | int | float | percent | count | choice | bool |
                                   # str | text | paths | dir_rate | dir_iops (one value per direction:
                                   # read, write, trim); list (comma-separated values: of `list_of`'s
                                   # kind, or read by the row's own `parse`); or the value form of a
                                   # row with its own `parse`
    help: str                      # one line
    default: Any = None            # in canonical units (bytes, seconds) or None for "not set";
                                   # default, minimum, maximum and unit of an engine option: the engine's
    category: str = "workload"     # target | workload | timing | engine | output | safety
    choices: Mapping[str, str] = field(default_factory=dict)   # value -> help, for kind=choice
    minimum: float | None = None
    maximum: float | None = None
    unit: str = ""                 # unit of the canonical value: bytes, s, % ...
    engine: str | None = None      # backend this option belongs to (io_uring for uring.*)
    core: bool = True              # part of the job spec handed to the engine
    short: str | None = None       # single-letter CLI alias
    negative: str | None = None    # CLI flag that sets a bool to False (e.g. --buffered)
    metavar: str | None = None
    fio_name: str | None = None    # what fio calls it, for "did you mean" hints
    bare: str | None = None        # choice: the value of the flag given alone (`--verify` = crc32c)
    aliases: Mapping[str, str] = field(default_factory=dict)   # choice: other spellings of a value,
                                   # e.g. a former bool's true/false -> on/off (a job file's booleans too)
    rule: str | None = None        # storlab._core function that validates and canonicalises the
                                   # value, where the rule lives in the engine
    parse: Callable[[Any, str], Any] | None = None   # parser of a value form no kind covers:
                                   # (raw, label) -> value; raises a UserError naming the label
    positional: str | None = None  # a positional argument, not a flag: its argparse nargs (?, *, +, 1)
    required: bool = False         # the flag must be given
    deprecated: tuple[str, ...] = ()   # old flag names still accepted for one release, with a notice
    cli_name: str | None = None    # the flag's name where it differs from the job-file key
    job_key: bool = True           # `name` is a job-file key; False: a command-line-only option,
                                   # whose messages name the flag instead
    per_phase: bool = False        # a run-level option a [[phase]] may also set for itself (the
                                   # run's value is the default of the phases that do not)
    list_of: Option | None = None  # kind list: the row whose values this one takes several of (plan
                                   # perf's --qd is a list of what `run --qd` takes); made by list_row,
                                   # which derives name, help and value form from it; `parse` is then
                                   # a further check of each value, `choices` the base's values allowed

    @property
    def flag(self) -> str:
        if self.positional:
            return self.metavar or self.name.upper()
        return "--" + (self.cli_name or self.name).replace("_", "-").replace(".", "-")

    @property
    def label(self) -> str:
        """How error messages name the option: its job-file key, or its flag where it has none."""
        return self.name if self.job_key else self.flag

    @property
    def upper(self) -> float | None:
        """The largest value allowed: the table's maximum, else the bound of the option's kind
        (sizes and rates up to 1 EiB, durations up to 10 years: what the engine accepts)."""
        return self.maximum if self.maximum is not None else KIND_MAXIMUM.get(self.kind)


# Kinds whose values are numbers: each has bounds, and NaN and infinities are refused.
NUMERIC_KINDS = frozenset({"size", "duration", "rate", "int", "float", "percent", "count", "dir_rate", "dir_iops"})
# Kinds whose value is one per direction (read, write, trim), written as one value or R,W[,T].
PER_DIRECTION_KINDS = frozenset({"dir_rate", "dir_iops"})
# Bounds every option of a kind has unless the table sets a tighter one (the per-direction kinds
# belong to engine options, whose bounds are the engine's).
KIND_MAXIMUM: dict[str, float] = {"size": MAX_BYTES, "rate": MAX_BYTES, "duration": MAX_DURATION_S,
                                  "count": MAX_COUNT}


def _choice(**values: str) -> dict[str, str]:
    return dict(values)


# A choice that was an on/off switch keeps the switch's spellings (job files of earlier releases):
# true means on, false means off.
_BOOL_ALIASES = {"true": "on", "yes": "on", "1": "on", "false": "off", "no": "off", "0": "off"}

RW_CHOICES = _choice(
    read="sequential reads",
    write="sequential writes",
    randread="random reads aligned to bs: every block once per pass in a seeded random order "
             "(see random_map, random_distribution)",
    randwrite="random writes aligned to bs: every block once per pass in a seeded random order "
              "(see random_map, random_distribution)",
    rw="sequential mixed reads and writes (see rwmix_read); reads and writes each keep their own "
       "position, both starting at the range's start",
    randrw="random mixed reads and writes (see rwmix_read); with the random map a pass reads or "
           "writes each block once",
    trim="sequential trims: BLKDISCARD on a block device, a punched hole (FALLOC_FL_PUNCH_HOLE) "
         "in a file; destructive, so the write-safety rules apply",
    randtrim="random trims aligned to bs (as randwrite, with trims)",
    trimwrite="sequential: each block trimmed, then written (fio's trimwrite)",
)

# Every engine option's rule, from the engine: {name: {default, min, max, unit, allowed, choices}}.
ENGINE_RULES: dict[str, dict[str, Any]] = json.loads(_core.option_rules())

# The rows as written; OPTIONS is them with each engine option completed by the engine's rule.
ROWS: tuple[Option, ...] = (
    # --- targets ---------------------------------------------------------------------------
    Option("target", "paths", "file or block device to do I/O on (repeatable), a network block device "
           "export (nbd://HOST[:PORT]/EXPORT, through libnbd), a file on an NFS export "
           "(nfs://SERVER/EXPORT/FILE, through libnfs), the objects under an S3 prefix "
           "(s3://BUCKET/PREFIX; docs/object.md), or /dev/null, /dev/zero "
           "or /dev/full to measure without storage (size required); default: a scratch "
           "file in a temporary folder under the current directory, removed afterwards",
           category="target", metavar="PATH", fio_name="filename"),
    Option("size", "size", "length of the I/O range on each target; files are created this size; "
           "default: the whole device or existing file (the scratch file: 256 MiB, or 1 GiB for the main job)",
           category="target"),
    Option("preallocate", "bool", "allocate the new part of a file a writing job makes before the run "
           "(posix_fallocate, fio's default fallocate), so the run's writes find their blocks there; "
           "off: the file is only sized and the writes allocate (fio's fallocate=none)",
           negative="--no-preallocate", category="target", fio_name="fallocate"),
    Option("offset", "size", "start of the I/O range on each target; requests go at offset + k x bs "
           "(offset need not be a multiple of bs, as in fio)", category="target"),
    Option("thread_layout", "choice", "how the participants (threads; ranks x threads under MPI) "
           "share a target", category="target",
           choices=_choice(region="each participant owns an equal, bs-aligned slice of the range",
                           shared="every participant covers the whole range",
                           segmented="IOR segments: in each of `segments` segments participant p "
                                     "owns the p-th `block`, done in transfers of bs",
                           strided="round-robin transfers: participant p does transfers p, p+P, "
                                   "p+2P ... of bs (IOR segments with block = bs)")),
    Option("files", "choice", "one shared file or a file per thread", category="target",
           choices=_choice(shared="every thread works on the target itself",
                           per_thread="each thread its own file PATH.N, N its participant index "
                                      "(file per process under MPI)")),
    Option("segments", "int", "number of segments of the segmented layout (IOR -s)", category="target"),
    Option("block", "size", "bytes each participant owns per segment (IOR -b); default: the range "
           "split evenly; a multiple of bs (the transfer size, IOR -t)", category="target"),
    Option("participants", "int", "participants sharing a target's layout (0: the threads); "
           "set by MPI runs to ranks x threads", category="target"),
    Option("participant_base", "int", "participant index of this process's first thread; set by "
           "MPI runs to rank x threads", category="target"),
    Option("allow_destroy", "paths", "block device that storlab may write to even though it holds "
           "a partition table, file system, RAID/LVM/swap signature (repeatable; name the exact device); "
           "a mounted, swap, held or loop-backing device is never written",
           default=(), category="safety", core=False, metavar="DEVICE"),
    Option("keep_objects", "bool", "leave the objects an s3 run made in place at its end (they are "
           "removed otherwise, and always after a failure or a signal; meta's --keep keeps files "
           "also then)", default=False, category="safety", core=False),
    # --- workload -------------------------------------------------------------------------
    Option("rw", "choice", "access pattern", choices=RW_CHOICES, short=None, fio_name="readwrite"),
    Option("rwmix_read", "percent", "share of reads in rw/randrw, in percent", fio_name="rwmixread"),
    Option("percentage_random", "percent", "in a random pattern, the share of requests at a random offset; "
           "the others follow on from the direction's last request (fio's percentage_random); 100: all "
           "random, 0: sequential after the first", fio_name="percentage_random"),
    Option("random_map", "bool", "random patterns visit every block exactly once per pass, in an "
           "order that depends only on seed and pass (fio's random map); off: uniform draws with "
           "repeats (fio's norandommap)", negative="--no-random-map", fio_name="norandommap"),
    Option("random_distribution", "str", "which blocks random patterns favour: random (uniform, "
           "the default); zipf[:theta[:center]] (theta > 0, default 1.1); pareto[:h[:center]] "
           "(0 < h < 1, default 0.2; h = 0.2 sends 80 % of I/O to 20 % of blocks); "
           "normal[:sigma[:center]] (fio's bell: sd about 1/12 of the range plus a spread of "
           "sigma % of it, 0 <= sigma < 100); zoned:A/R[:A/R...] (A % of the I/O to the next R % "
           "of the range; each column sums to 100). center in [0, 1] places the hottest block. "
           "Skewed laws draw with repeats (the random map is off for them, as in fio)",
           metavar="DIST", fio_name="random_distribution",
           rule="random_distribution"),
    Option("bs", "size", "request (block) size (see bssplit, bsrange for sizes that vary)",
           fio_name="blocksize"),
    Option("bssplit", "str", "each request's size drawn from a split, as fio's bssplit: "
           "SIZE/PERCENT[:SIZE/PERCENT...], percentages of the requests (not the bytes) summing "
           "to 100, an empty one sharing the rest evenly (4k/50:64k/30:1m/20); per direction "
           "READ,WRITE[,TRIM] (trims take the writes' when not given; an empty part keeps bs). "
           "Random offsets are multiples of the smallest size (or blockalign); with the random "
           "map each block is still covered once per pass, a request being cut where it meets a "
           "covered block (fio's rule). Results count the requests per size",
           metavar="SPLIT", fio_name="bssplit", rule="bssplit"),
    Option("bsrange", "str", "each request's size drawn between MIN-MAX (fio's bsrange): the "
           "multiples of MIN up to MAX, equally likely; per direction as bssplit",
           metavar="MIN-MAX", fio_name="bsrange", rule="bsrange"),
    Option("blockalign", "size", "random offsets are multiples of this many bytes (0: the "
           "smallest request size); another value turns the random map off, as fio's blockalign",
           fio_name="blockalign"),
    Option("seq_hole", "size", "bytes skipped after each sequential request, a multiple of bs "
           "(fio's rw=read:SIZE); one pass then issues ceil(range / (bs + seq_hole)) requests"),
    Option("seq_rewind", "size", "a sequential pattern's cursor moves back this many bytes from each "
           "request's end (fio's rw=read:-SIZE): 2 x bs reads the range backwards, from its last block "
           "(wrapping to the end), bs the same block again; a whole number of bs", fio_name="rw"),
    Option("threads", "int", "worker threads per target", fio_name="numjobs"),
    Option("qd", "int", "requests in flight per thread (io_uring; psync is always 1)",
           fio_name="iodepth"),
    Option("seed", "int", "seed of the random offsets and read/write choice"),
    Option("io_size", "size", "bytes to transfer per thread (default: one pass over its range)"),
    Option("io_total", "size", "bytes to transfer in total, split evenly over all threads"),
    Option("fsync_every", "int", "fsync after every N writes per thread, before the next request "
           "as fio's fsync=N (none after the last write: see fsync_end; 0: never)", fio_name="fsync"),
    Option("fsync_end", "bool", "fsync written targets at the end of the phase, inside the timed "
           "window, so buffered writes are not reported at page-cache speed", negative="--no-fsync-end",
           fio_name="end_fsync"),
    Option("rbw", "choice", "read-behind-write: with rw=write, add a reader per target that "
           "follows the writer record by record; reports write, read and duplex bandwidth",
           choices=_choice(off="no reader",
                           lockstep="the writer waits until the reader has read each record (Xdd)",
                           lag="the writer never waits; the reader never passes it and stays at "
                               "most rbw_lag records behind, skipping ahead (counted) if slower")),
    Option("rbw_lag", "int", "records the reader may trail the writer in rbw=lag"),
    Option("verify", "choice", "stamp written blocks with a header and checksum; check every read "
           "block against them (a read-only run verifies data written earlier)",
           choices=_choice(off="no verification",
                           crc32c="CRC-32C over header and payload (hardware accelerated)",
                           xxh3="64-bit xxh3 over header and payload",
                           fill="no header: every write carries the same seeded data and every "
                                "read is compared with it byte by byte (IOR -R; catches damaged "
                                "data, not a block at the wrong offset; no cost on writes)"),
           fio_name="verify",
           bare="crc32c"),
    Option("verify_pass", "int", "pass number written into headers; when not 0 a read requires it "
           "(stale data from an earlier pass is reported)"),
    Option("verify_report", "int", "mismatches reported in full; the rest are counted"),
    Option("verify_readback", "bool", "with verify, a phase that writes reads back and checks every "
           "block it wrote once it is done (outside the measured window)", negative="--no-verify-readback",
           fio_name="do_verify"),
    Option("scramble", "bool", "make every 512-byte sector written unique: before each write its "
           "sectors get their offset, the writer's nonce and a write number (a few bytes each, "
           "fio's scramble_buffers, on by default there too), so deduplicating storage (ZFS dedup, "
           "VDO, all-flash arrays) stores all that was written; also the data a layout writes. "
           "Off: every write of a request slot carries the same bytes. Writes stamped by verify are "
           "unique already; verify=fill keeps its fill", negative="--no-scramble",
           fio_name="scramble_buffers"),
    Option("buffer_pattern", "str", "write these bytes (0x and hex digits, e.g. 0xdeadbeef; 0x00 for "
           "zeros) repeated from the start of every request and laid-out block, instead of random "
           "data (fio's buffer_pattern; zero_buffers is 0x00): compressible data for testing "
           "compressing or deduplicating storage. scramble still applies unless --no-scramble",
           fio_name="buffer_pattern"),
    Option("compress_percentage", "percent", "written data compresses by about this share: each "
           "compress_chunk bytes are random for their first (100 - N) % and zeros (or buffer_pattern's "
           "bytes) for the rest, as fio's buffer_compress_percentage; the scramble stamps stay in the "
           "random part. Verified blocks carry it in their payload (read them back with the same "
           "value). 0: incompressible", fio_name="buffer_compress_percentage"),
    Option("compress_chunk", "size", "the chunk compress_percentage shapes (fio's buffer_compress_chunk)",
           fio_name="buffer_compress_chunk"),
    Option("dedupe_percentage", "percent", "this share of the writes repeat an earlier write of the same "
           "thread byte for byte (fio's dedupe_percentage, dedupe_mode=repeat), the rest unique; a "
           "block-level deduplicator sees that share of repeated blocks. Needs scramble on and verify "
           "off. 0: every write unique", fio_name="dedupe_percentage"),
    # --- timing ---------------------------------------------------------------------------
    Option("time", "duration", "run for this long, wrapping around the range (time-based run)",
           category="timing", fio_name="runtime"),
    Option("ramp", "duration", "run this long before measuring; ramp I/O is excluded from results",
           category="timing", fio_name="ramp_time"),
    Option("stall_after", "duration", "report a request outstanding longer than this (the studies' "
           "dropped-I/O rule), with target, offset and age, while the run goes on", category="timing"),
    Option("stall_abort", "bool", "end the phase with an error at the first stalled request",
           category="timing"),
    Option("start_delay", "duration", "wait this long after the phase starts before issuing I/O "
           "(staggered starts; shows in the de-skew and straggler report)", category="timing",
           fio_name="startdelay"),
    Option("interval", "duration", "length of one time-series interval", category="timing"),
    Option("rate", "dir_rate", "bandwidth cap per thread: requests are spread evenly in time (fio's "
           "rate, rate_process=linear); one value for every direction or R,W[,T] (read, write, "
           "trim; an empty part: no cap); io_uring keeps its queue depth; 0: no cap",
           category="timing", metavar="RATE", fio_name="rate"),
    Option("rate_iops", "dir_iops", "request-rate cap per thread, as rate but in IOPS (fio's "
           "rate_iops); with both, the tighter one holds", category="timing", metavar="IOPS",
           fio_name="rate_iops"),
    Option("rate_process", "choice", "how the rate caps space the requests (fio's rate_process)",
           choices=_choice(linear="evenly: request n at n / rate (the default)",
                           poisson="exponential gaps of the same mean: the arrivals of a Poisson "
                                   "process, as many independent clients make them"),
           category="timing", fio_name="rate_process"),
    Option("rate_min", "dir_rate", "bandwidth floor per thread over its measured window: below it "
           "the phase fails with one line naming the direction (fio's rate_min, which fio checks "
           "every second instead); same forms as rate", category="timing", metavar="RATE",
           fio_name="rate_min"),
    Option("rate_iops_min", "dir_iops", "IOPS floor per thread over its measured window (fio's "
           "rate_iops_min); same forms as rate_iops", category="timing", metavar="IOPS",
           fio_name="rate_iops_min"),
    Option("thinktime", "duration", "pause after every thinktime_blocks requests, once those in "
           "flight have completed (fio's thinktime, which counts in microseconds: give a unit, "
           "e.g. 50us); 0: none", category="timing", fio_name="thinktime"),
    Option("thinktime_spin", "duration", "the part of each pause spent spinning on the CPU "
           "(the rest sleeps; fio's thinktime_spin)", category="timing", fio_name="thinktime_spin"),
    Option("thinktime_blocks", "int", "requests issued between pauses (fio's thinktime_blocks)",
           category="timing", fio_name="thinktime_blocks"),
    # --- engine ---------------------------------------------------------------------------
    Option("engine", "choice", "I/O backend", category="engine",
           choices=_choice(psync="pread/pwrite, one request at a time per thread",
                           io_uring="Linux io_uring: queue depth, batched submit and reap",
                           null="no kernel I/O: completes at once; measures storlab itself",
                           nbd="a network block device export through libnbd (targets nbd://HOST[:PORT]/EXPORT; "
                               "the default for them)",
                           nfs="a file on an NFS export through libnfs, NFSv4 unless the URL names ?version=3 "
                               "(targets nfs://SERVER/EXPORT/FILE; the default for them)",
                           s3="objects in an S3 bucket over HTTP/1.1, signed with AWS Signature V4 "
                              "(targets s3://BUCKET/PREFIX; the default for them; docs/object.md)"),
           fio_name="ioengine"),
    Option("direct", "bool", "O_DIRECT: bypass the page cache (buffers and offsets aligned)",
           category="engine", negative="--buffered"),
    Option("cpus", "str", "pin the worker threads to these CPUs: numbers and ranges separated by "
           "commas (0-3,6; fio's cpus_allowed); a CPU this process may not use is refused. Default: "
           "not pinned", category="engine", fio_name="cpus_allowed"),
    Option("cpus_policy", "choice", "how the threads share `cpus` (fio's cpus_allowed_policy)",
           choices=_choice(shared="every thread may run on every CPU of the list (fio's default)",
                           split="thread i runs on the list's CPU i alone (modulo its length)"),
           category="engine", fio_name="cpus_allowed_policy"),
    Option("open_sync", "choice", "open the targets for synchronous writes: each write returns once "
           "it is on stable storage (fio's sync)",
           choices=_choice(none="writes may land in a cache (the default)",
                           sync="O_SYNC: the data and the metadata to find it (fio's sync=1)",
                           dsync="O_DSYNC: the data and only the metadata to read it back (fio's sync=dsync)"),
           category="engine", fio_name="sync"),
    Option("null_delay", "duration", "synthetic completion delay of the null backend",
           category="engine", engine="null"),
    Option("uring.fixed_buffers", "choice", "register the I/O buffers with the ring (READ/WRITE_FIXED, "
           "fio's fixedbufs): the kernel then maps each buffer once, not on every request; what "
           "happened is recorded in environment.io_uring (setup_flags, requested)",
           choices=_choice(auto="register where the kernel allows, else the plain path, silently "
                                "(storlab's default; fio's is off)",
                           on="require registration: a refusal is a warning, and the run takes the "
                              "plain path",
                           off="never register: plain READ/WRITE, the kernel pins each request's "
                               "pages (fio's default, fixedbufs=0); to compare the two or match fio"),
           aliases=_BOOL_ALIASES, bare="on", category="engine", engine="io_uring", fio_name="fixedbufs"),
    Option("uring.fixed_files", "bool", "register the target files with the ring",
           category="engine", engine="io_uring"),
    Option("uring.sqpoll", "bool", "kernel thread polls the submission queue (SQPOLL)",
           category="engine", engine="io_uring"),
    Option("uring.batch", "int", "submit after this many queued requests (default: the queue depth)",
           category="engine", engine="io_uring"),
    Option("uring.wait_spin", "duration", "how long a thread waiting for a completion spins before "
           "it sleeps (e.g. 50us); a wait that outlasts it makes the next ones sleep at once until "
           "waits are short again, and nobody spins where the phase's threads on the host (times the "
           "MPI ranks placed there) outnumber the CPUs; "
           "0: always sleep, as fio's io_uring engine does; the outcome is in "
           "environment.io_uring.setup_flags (WAIT_SPIN)", category="engine", engine="io_uring"),
    Option("endpoint", "str", "the S3 service's URL, http://HOST[:PORT] or https://HOST[:PORT]; "
           "several, separated by commas, are dealt round-robin to the workers. Default: "
           "AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else https://s3.REGION.amazonaws.com",
           category="engine", engine="s3", metavar="URL"),
    Option("object_size", "size", "bytes of each object an s3 target's range is cut into (object k "
           "of the prefix holds bytes k x object_size on); a write or trim is one whole object "
           "(bs = object_size), a read of bs a GET of a whole object or a byte range of one. "
           "Default: bs", category="engine", engine="s3"),
    Option("part_size", "size", "objects larger than this are written by multipart upload in parts "
           "of this size (the AWS CLI's multipart_chunksize and threshold)", category="engine",
           engine="s3"),
    Option("insecure", "bool", "do not check the S3 endpoint's TLS certificate (a self-signed test "
           "server)", category="engine", engine="s3"),
    Option("virtual_host", "bool", "address the bucket as BUCKET.HOST (virtual-host style) rather "
           "than HOST/BUCKET (path style, the default)", category="engine", engine="s3"),
    # --- I/O logs (fio's iolog) -----------------------------------------------------------
    Option("write_iolog", "str", "write fio's iolog (version 3: times in microseconds) of the "
           "requests issued to PATH; with several threads each writes PATH.N (N the thread's "
           "number in the phase, on from rank x threads under MPI); replays in storlab and in fio "
           "(--read_iolog)", category="iolog", metavar="PATH", fio_name="write_iolog"),
    Option("read_iolog", "str", "replay an fio iolog (version 2 or 3) instead of the pattern: its "
           "directions, offsets, lengths and syncs, at its times (see replay_no_stall); every "
           "thread replays the whole log on its target; without --target the target is the one "
           "file the log names; rw is set from the log", category="iolog", metavar="PATH",
           fio_name="read_iolog"),
    Option("replay_no_stall", "bool", "replay the log as fast as possible, ignoring its times "
           "(fio's replay_no_stall)", category="iolog", fio_name="replay_no_stall"),
    # --- output ---------------------------------------------------------------------------
    Option("json", "str", "write the result document as JSON to PATH; alone or '-': to standard "
           "output", default=None, category="output", core=False, metavar="PATH", bare="-"),
    Option("fio_json", "str", "also write the result in fio's JSON layout (fio --output-format=json) "
           "to PATH, for fio-JSON readers (docs/fio.md)", default=None, category="output", core=False,
           metavar="PATH"),
    Option("quiet", "bool", "no progress line and no table", default=False, category="output",
           core=False, short="q"),
    Option("live", "choice", "live figures on standard error while a run goes on, at least once a "
           "second: the combined rate, ranks done and the slowest node (under MPI: on rank 0, from "
           "every rank's own counters; docs/live.md)", default="auto", category="output", core=False,
           choices=_choice(auto="on a terminal, unless --quiet or NO_COLOR is set",
                           on="always (plain lines, one a second, where standard error is no terminal "
                              "or NO_COLOR is set)",
                           off="never")),
    Option("metrics_listen", "str", "while the run goes on, serve its live figures as OpenMetrics at "
           "http://ADDR:PORT/metrics for a Prometheus server to scrape (under MPI: rank 0); PORT alone "
           "listens on loopback (127.0.0.1), any other address must be written out as an IP address; "
           "port 0: a free port, named on standard error (docs/live.md)", default=None,
           category="output", core=False, metavar="[ADDR:]PORT",
           parse=lambda raw, label: _parse_listen(raw, label)),
    Option("store", "str", "results database (default: $STORLAB_STORE or "
           "~/.local/share/storlab/results.db)", default=None, category="output", core=False,
           metavar="PATH"),
    Option("no_store", "bool", "do not save the run in the results store", default=False,
           category="output", core=False),
    Option("tag", "paths", "tag the stored run (repeatable)", default=(), category="output",
           core=False, metavar="TAG"),
    Option("note", "text", "free-text note kept with the stored run ('': none)", default=None,
           category="output", core=False, metavar="TEXT"),
    Option("checkpoint_every", "duration", "while a phase runs, store the result so far and rewrite "
           "the --json file this often (as after every phase), so a killed run leaves what it "
           "measured; 0: only after each phase", default=10.0, category="output", core=False,
           unit="s", minimum=0),
    # --- methodology (whole run) ----------------------------------------------------------
    Option("passes", "int", "run the whole job this many times; each pass reported, then mean, "
           "stddev, min/max and 95 % confidence interval", default=1, category="method", core=False,
           minimum=1, maximum=1000),
    Option("pass_delay", "duration", "pause between passes", default=0.0, category="method",
           core=False, unit="s", minimum=0),
    Option("pass_spread", "float", "warn when passes differ in bandwidth by more than this "
           "(max - min, in % of the mean)", default=10.0, category="method", core=False, unit="%",
           minimum=0, maximum=100000),
    Option("ss", "str", "steady state (fio's ss, SNIA PTS): stop an I/O phase once its IOPS, "
           "bandwidth or mean completion latency, sampled every ss_interval after ss_ramp, has been "
           "flat for ss_dur; iops:L / bw:L / lat:L: no sample further than L from the window's mean; "
           "iops_slope:L / bw_slope:L / lat_slope:L: the least-squares slope under L per ss_interval; "
           "L in the metric's units (IOPS, bytes/s, a latency such as 500us) or a percentage of the "
           "mean (iops_slope:0.3%); each phase's result says whether it was reached. Per phase: a "
           "[[phase]] may set its own ss, ss_dur, ss_ramp, ss_interval; the top of the job file "
           "(or a flag, which wins over every phase) gives the others'",
           default=None, category="method", core=False, metavar="METRIC:LIMIT", fio_name="steadystate",
           parse=lambda raw, label: _parse_steady(raw, label), per_phase=True),
    Option("exec_prerun", "str", "a shell command run before the phase (fio's exec_prerun): its output "
           "goes to PHASE.prerun.txt in the current folder, its exit status and time into the phase's "
           "result; a command that fails ends the run with an error before the phase. Per phase as ss",
           default=None, category="method", core=False, metavar="COMMAND", fio_name="exec_prerun",
           per_phase=True),
    Option("exec_postrun", "str", "a shell command run after the phase (fio's exec_postrun); as "
           "exec_prerun, its output in PHASE.postrun.txt", default=None, category="method", core=False,
           metavar="COMMAND", fio_name="exec_postrun", per_phase=True),
    Option("ss_dur", "duration", "the window steady state is judged over (fio's ss_dur); needed with "
           "ss; per phase as ss", default=0.0, category="method", core=False, unit="s", minimum=0,
           fio_name="steadystate_duration", per_phase=True),
    Option("ss_ramp", "duration", "time from the phase's start before steady-state samples are "
           "taken (fio's ss_ramp); per phase as ss", default=0.0, category="method", core=False,
           unit="s", minimum=0, fio_name="steadystate_ramp_time", per_phase=True),
    Option("ss_interval", "duration", "steady-state sampling period (fio's ss_interval): each "
           "sample is the mean rate (or completion latency) over one interval, the window holds "
           "ss_dur / ss_interval of them; per phase as ss", default=1.0, category="method",
           core=False, unit="s", minimum=0.01, fio_name="steadystate_check_interval", per_phase=True),
    Option("precondition_method", "str", "before the job, write its targets into steady state and report it "
           "apart from the job's phases (docs/precondition.md): off; sequential (SNIA PTS: the range "
           "written twice sequentially in 128 KiB requests); sprandom[:OP[:REGIONS]] (fio's sprandom: "
           "the range written once in REGIONS regions, default 100, each leaving the share of invalid "
           "blocks steady state has at over-provisioning OP, default 0.15). Then 4 KiB random writes "
           "until steady state (the run's ss, else SNIA's: iops:10% over 300 s in 60 s samples) or "
           "precondition_time; the verdict is printed. Writes: the write-safety gate applies",
           default="off", category="method", core=False, metavar="METHOD",
           parse=lambda raw, label: _parse_precondition(raw, label)),
    Option("precondition_time", "duration", "the longest preconditioning's steady-state phase runs "
           "before it is reported as not reached", default=1800.0, category="method", core=False,
           unit="s", minimum=1),
    Option("latency_target", "duration", "find the highest queue depth whose latency percentile "
           "stays at or below this (fio's latency_target): each I/O phase is run for latency_window "
           "at qd 1, 2, 4 ... up to its qd, then bisected between the last depth that held and the "
           "first that did not; the phase's result is the trial at the depth found (with "
           "latency_run: the phase as written, run at that depth), with the IOPS it gave and "
           "every depth tried", default=None, category="method", core=False, unit="s",
           minimum=1e-9, fio_name="latency_target"),
    Option("latency_window", "duration", "how long each depth is tried (fio's latency_window)",
           default=5.0, category="method", core=False, unit="s", minimum=0.01, fio_name="latency_window"),
    Option("latency_run", "bool", "after the latency_target search, run the phase as written at the "
           "depth found (fio's latency_run keeps adjusting the depth instead)", default=False,
           category="method", core=False, fio_name="latency_run"),
    Option("latency_percentile", "float", "the share of requests that must complete within "
           "latency_target, in percent (fio's latency_percentile)", default=100.0, category="method",
           core=False, unit="%", minimum=0.0001, maximum=100, fio_name="latency_percentile"),
    Option("cache", "choice", "page-cache and controller-cache control", default="off",
           category="method", core=False,
           choices=_choice(off="no sizing, no dropping",
                           **{"in": "size the working set to fit cache: cache_bytes if declared, "
                                    "else cache_in_pct of RAM"},
                           out="size the working set to cache_out_multiple x RAM + cache_bytes and "
                               "drop the page cache before every buffered read phase",
                           auto="keep the sizes; drop the page cache before a buffered read phase "
                                "that follows a phase writing the same targets")),
    Option("invalidate", "bool", "before each phase, fsync the targets and drop their cached pages "
           "(POSIX_FADV_DONTNEED for files, BLKFLSBUF for block devices) so reads come from the "
           "device, like fio's invalidate=1; tmpfs/ramfs files cannot be dropped; --cache in keeps "
           "the pages too", default=True, category="method", core=False, negative="--no-invalidate",
           fio_name="invalidate"),
    Option("cache_bytes", "size", "declared controller (array) cache size", default=0,
           category="method", core=False, unit="bytes", minimum=0),
    Option("cache_in_pct", "float", "cache=in without cache_bytes: working set as % of RAM",
           default=50.0, category="method", core=False, unit="%", minimum=0.1, maximum=100),
    Option("cache_out_multiple", "float", "cache=out: working set as a multiple of RAM (plus "
           "cache_bytes)", default=2.0, category="method", core=False, minimum=1, maximum=1000),
    Option("bw_ceiling", "rate", "the most bandwidth the target can plausibly give (e.g. 2GB/s); "
           "faster results are flagged as served from cache", default=None, category="method",
           core=False, unit="bytes/s", minimum=1),
    Option("stack", "str", "a planned stack (TOML, docs/model.md) to compare with: run and sweep "
           "store its predicted throughput and limiting component with the result; doctor lists "
           "every difference between it and the targets", default=None,
           category="method", core=False, metavar="FILE"),
    Option("reorder", "int", "under MPI: read phases read what rank (rank + N) mod size wrote, so "
           "no node reads its own data back from its client cache (IOR's -C/-Q)", default=0,
           category="mpi", core=False, minimum=0, maximum=2**31),
    Option("rank_timeout", "duration", "under MPI: how long the other ranks wait for a rank that "
           "failed or vanished before the whole run ends with an error naming it", default=30.0,
           category="mpi", core=False, unit="s", minimum=1),
    Option("fio", "str", "run a fio job file (supported options translated; others rejected)",
           default=None, category="target", core=False, metavar="JOBFILE"),
    Option("emit", "str", "a foreign job (--fio, a Darshan log, an io500 .ini, a DLIO workload): write "
           "it translated, as a storlab TOML job file with the flags given beside it (and any file it "
           "names, e.g. request logs in FILE.iologs/), to FILE ('-': standard output) and run nothing; "
           "`storlab run FILE` runs it (`storlab workload FILE` for a DLIO workload)", default=None,
           category="target", core=False, job_key=False,
           metavar="FILE"),
)



def _with_engine_rule(opt: Option) -> Option:
    """An engine option's row completed with the engine's default, bounds and unit."""
    rule = ENGINE_RULES.get(opt.name) if opt.core else None
    if rule is None:
        return opt
    default = rule["default"]
    default = tuple(default) if isinstance(default, list) else default    # the table's defaults are immutable
    return dataclasses.replace(opt, default=default, minimum=rule.get("min", opt.minimum),
                               maximum=rule.get("max", opt.maximum), unit=rule.get("unit", opt.unit))


OPTIONS: tuple[Option, ...] = tuple(_with_engine_rule(o) for o in ROWS)
BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}
BY_FIO_NAME: dict[str, Option] = {o.fio_name: o for o in OPTIONS if o.fio_name}


def suggest(name: str) -> str:
    """A hint for an unknown option name: its storlab name if it is fio's, else the closest name."""
    import difflib

    if name in BY_FIO_NAME:
        return f" (storlab calls it {BY_FIO_NAME[name].name!r})"
    close = difflib.get_close_matches(name, list(BY_NAME), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def allowed_values(opt: Option) -> str:
    """What an option accepts, in words: its choices or its bounds (for help and errors)."""
    return _allowed(opt)


def _allowed(opt: Option) -> str:
    if opt.list_of is not None:
        return f"1 to {MAX_LIST_VALUES} values, each " + (
            "one of " + ", ".join(opt.choices) if opt.choices else _allowed(_item_row(opt)))
    engine = _engine_rule(opt)
    if engine is not None and "allowed" in engine:
        return engine["allowed"]
    if opt.kind == "choice":
        return "one of " + ", ".join(opt.choices)
    bounds = []
    if opt.minimum is not None:
        bounds.append(f">= {_bound(opt, opt.minimum)}")
    if opt.upper is not None:
        bounds.append(f"<= {_bound(opt, opt.upper)}")
    return " and ".join(bounds)


def _bound(opt: Option, v: float) -> str:
    """A bound in the option's unit: sizes as 4 KiB / 1024 PiB, durations in seconds or years."""
    if opt.kind in ("size", "rate", "dir_rate"):
        return format_size(v).replace(" B", " bytes") + ("" if opt.kind == "size" else "/s")
    if opt.kind == "duration":
        return "10 years" if v == MAX_DURATION_S else f"{_number(v)} s"
    return _number(v)


def _number(v: float) -> str:
    """A bound as written in the table: whole numbers in full (2^63 - 1, not 9.22337e+18)."""
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _engine_rule(opt: Option) -> dict[str, Any] | None:
    """The engine's rule of an engine option (a row of this table); None for any other (run-level,
    or a row of another table such as meta's `threads`)."""
    return ENGINE_RULES.get(opt.name) if opt.core and BY_NAME.get(opt.name) is opt else None


def _engine_check(opt: Option, value: Any) -> None:
    """The engine's own check of one value (its bounds, its allowed values)."""
    try:
        _core.check_option(opt.name, value)
    except ValueError as e:
        raise OptionError(str(e)) from None


def _check_bounds(opt: Option, value: float, shown: Any) -> None:
    """An engine option's value is checked by the engine; any other's here: NaN and infinities are
    refused for every numeric option, then the option's own bounds."""
    if "min" in (_engine_rule(opt) or {}):
        _engine_check(opt, value)
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise OptionError(f"{opt.label}: {shown!r} is not a finite number; allowed: {_allowed(opt)}")
    upper = opt.upper
    if (opt.minimum is not None and value < opt.minimum) or (upper is not None and value > upper):
        raise OptionError(f"{opt.label}: {shown!r} is out of range; allowed: {_allowed(opt)}")


def _parse_listen(raw: Any, label: str) -> str:
    """`metrics_listen`: [ADDR:]PORT, loopback by default (jobs/listen.py)."""
    from .listen import parse_listen

    try:
        return parse_listen(raw, label)
    except ValueError as e:
        raise OptionError(str(e)) from None


def _parse_steady(raw: Any, label: str) -> str:
    """`ss`: metric:limit[%] (jobs/steadystate.py)."""
    from .steadystate import canonical

    try:
        return canonical(str(raw), label)
    except ValueError as e:
        raise OptionError(str(e)) from None


def _parse_precondition(raw: Any, label: str) -> str:
    """`precondition_method`: off | sequential | sprandom[:OP[:REGIONS]] (jobs/precondition.py)."""
    from .precondition import canonical

    try:
        return canonical(str(raw), label)
    except ValueError as e:
        raise OptionError(str(e)) from None


_PARSERS: dict[str, Callable[[Option, Any], Any]] = {}


def _parser(kind: str):
    def register(fn):
        _PARSERS[kind] = fn
        return fn
    return register


def _unit_parser(parse: Callable[[Any, str], Any]) -> Callable[[Option, Any], Any]:
    """An option parser from one of units.py's: its error becomes an OptionError, then bounds."""
    def parse_option(opt: Option, raw: Any) -> Any:
        try:
            v = parse(raw, opt.label)
        except UnitError as e:
            raise OptionError(str(e)) from None
        _check_bounds(opt, v, raw)
        return v
    return parse_option


_PARSERS.update(size=_unit_parser(parse_size), duration=_unit_parser(parse_duration),
                rate=_unit_parser(parse_rate))


def _per_direction_parser(parse: Callable[[Any, str], Any]) -> Callable[[Option, Any], Any]:
    """A value per direction as fio writes rate=: one value for read, write and trim, or R,W[,T]
    with an empty part meaning none (0). Canonical: a (read, write, trim) tuple of whole numbers."""
    def parse_option(opt: Option, raw: Any) -> tuple[int, int, int]:
        if isinstance(raw, str):
            parts: list[Any] = raw.split(",")
        elif isinstance(raw, (list, tuple)):
            parts = list(raw)
        else:
            parts = [raw]
        if not 1 <= len(parts) <= 3:
            raise OptionError(f"{opt.label}: {raw!r} has {len(parts)} values; use one for every "
                              "direction or R,W[,T] (read, write, trim)")
        if all(isinstance(p, str) and not p.strip() for p in parts):   # '' or ',': no value at all
            raise OptionError(f"{opt.label}: {raw!r} gives no value; use one for every direction or "
                              "R,W[,T] (an empty part: none for that direction)")
        values = []
        for part in parts:
            if isinstance(part, str) and not part.strip():
                values.append(0)
                continue
            try:
                v = parse(part, opt.label)
            except UnitError as e:
                raise OptionError(str(e)) from None
            _check_bounds(opt, v, part)
            values.append(int(v))
        values = values * 3 if len(values) == 1 else values + [0] * (3 - len(values))
        return (values[0], values[1], values[2])
    return parse_option


_PARSERS.update(dir_rate=_per_direction_parser(parse_rate), dir_iops=_per_direction_parser(parse_count))


def _ascii_digits(opt: Option, raw: Any) -> None:
    """One rule for every number parser: digits are ASCII. Python's int() and float() also read
    other scripts' digits ('٣' as 3), which the unit parsers (sizes, durations) never did."""
    if isinstance(raw, str) and not raw.isascii():
        raise OptionError(f"{opt.label}: {raw!r} is not a number written with the digits 0-9")


@_parser("float")
def _parse_float(opt: Option, raw: Any) -> float:
    if isinstance(raw, bool):
        raise OptionError(f"{opt.label}: expected a number, got {raw!r}")
    _ascii_digits(opt, raw)
    try:
        v = float(raw)
    except (TypeError, ValueError):
        raise OptionError(f"{opt.label}: expected a number, got {raw!r}") from None
    _check_bounds(opt, v, raw)
    return v


@_parser("int")
def _parse_int(opt: Option, raw: Any) -> int:
    if isinstance(raw, bool):
        raise OptionError(f"{opt.label}: expected a whole number, got {raw!r}")
    _ascii_digits(opt, raw)
    if isinstance(raw, float) and not math.isfinite(raw):
        _check_bounds(opt, raw, raw)                     # refused, with the engine's words if its option
    if isinstance(raw, str) and len(raw.strip()) > 40:   # longer than any allowed value; int() of
        raise OptionError(f"{opt.label}: {raw[:40]!r}... is out of range; allowed: {_allowed(opt)}")
    try:                                                 # 5000 digits raises its own ValueError
        v = int(raw, 0) if isinstance(raw, str) else int(raw)
        if isinstance(raw, float) and raw != v:
            raise ValueError
    except (TypeError, ValueError):
        raise OptionError(f"{opt.label}: expected a whole number, got {raw!r}") from None
    _check_bounds(opt, v, raw)
    return v


@_parser("percent")
def _parse_percent(opt: Option, raw: Any) -> int:
    text = raw.rstrip("% ") if isinstance(raw, str) else raw
    return _parse_int(opt, text)


@_parser("choice")
def _parse_choice(opt: Option, raw: Any) -> str:
    if opt.aliases and isinstance(raw, (bool, str)):
        key = str(raw).lower()
        raw = opt.aliases.get(key, raw)
    if isinstance(raw, str) and not raw.isprintable():
        # no choice holds a line break or a control character; the engine's words would print it raw
        raise OptionError(f"{opt.label}: {raw!r} is not allowed; use one of: {', '.join(opt.choices)}")
    if isinstance(raw, str) and "choices" in (_engine_rule(opt) or {}):
        _engine_check(opt, raw)
    if not isinstance(raw, str) or raw not in opt.choices:
        raise OptionError(f"{opt.label}: {raw!r} is not allowed; use one of: {', '.join(opt.choices)}")
    return raw


@_parser("bool")
def _parse_bool(opt: Option, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ("1", "true", "yes", "on"):
        return True
    if isinstance(raw, str) and raw.lower() in ("0", "false", "no", "off"):
        return False
    raise OptionError(f"{opt.label}: expected on or off (true/false, yes/no, 1/0), got {raw!r}")


@_parser("str")
def _parse_str(opt: Option, raw: Any) -> str:
    if not isinstance(raw, str) or not raw:
        raise OptionError(f"{opt.label}: expected a non-empty text, got {raw!r}")
    return raw


@_parser("text")
def _parse_text(opt: Option, raw: Any) -> str:
    if not isinstance(raw, str):
        raise OptionError(f"{opt.label}: expected a text, got {raw!r}")
    return raw


_PARSERS["count"] = _unit_parser(parse_count)


@_parser("paths")
def _parse_paths(opt: Option, raw: Any) -> tuple[str, ...]:
    if isinstance(raw, str):
        items = [raw]
    elif isinstance(raw, (list, tuple)):
        items = list(raw)
    else:
        raise OptionError(f"{opt.label}: expected a text or a list of texts, got {raw!r}")
    for item in items:
        if not isinstance(item, str) or not item:
            raise OptionError(f"{opt.label}: expected a path, got {item!r}")
    return tuple(items)


# The most values a list row takes (a curve's points are the product of its lists).
MAX_LIST_VALUES = 32


def list_row(base: Option, help: str = "", **kw: Any) -> Option:
    """A row taking a comma-separated list of what `base` takes, under the same name: one flag, one
    meaning, several values (the points of plan perf's curve). Its help is the base's with the list
    said, then `help` (what the command does with the list); `kw` may narrow it: `choices` (a subset
    of the base's), `minimum` and `maximum` (tighter bounds of each value), `parse` (a further check
    of each parsed value: (value, label) -> value)."""
    said = f"{base.help}; a comma-separated list of values, each as {base.flag} takes it"
    return Option(base.name, "list", f"{said}. {help}" if help else said, list_of=base,
                  category=kw.pop("category", base.category), unit=kw.pop("unit", base.unit),
                  metavar=kw.pop("metavar", "LIST"), core=False, job_key=False,
                  cli_name=kw.pop("cli_name", base.cli_name), fio_name=None, **kw)


def value_form(opt: Option) -> str:
    """The value form of a row as the docs name it: its kind, `list of size` for a list row."""
    return f"list of {opt.list_of.kind}" if opt.list_of is not None else opt.kind


def _item_row(opt: Option) -> Option:
    """The row each value of a list row is parsed by: its base, named by the list's flag, within the
    list row's own bounds where it sets tighter ones."""
    base = opt.list_of
    return dataclasses.replace(base, job_key=False, cli_name=opt.cli_name,
                               minimum=base.minimum if opt.minimum is None else opt.minimum,
                               maximum=base.maximum if opt.maximum is None else opt.maximum)


def _parse_list(opt: Option, raw: Any) -> tuple[Any, ...]:
    """A list row's value: 1 to MAX_LIST_VALUES values, each parsed as its base row parses one (and
    named by the list's flag in an error), then kept to the row's choices and its own check."""
    base = _item_row(opt)
    items = [x.strip() for x in (raw.split(",") if isinstance(raw, str) else map(str, raw))] \
        if isinstance(raw, (str, list, tuple)) else [raw]
    if "" in items:     # '1,,2' or a trailing comma: refused, never dropped without a word
        raise OptionError(f"{opt.label}: {raw!r} has an empty item; give values separated by single commas")
    if not 1 <= len(items) <= MAX_LIST_VALUES:
        raise OptionError(f"{opt.label}: give 1 to {MAX_LIST_VALUES} comma-separated values, got {len(items)}")
    values = []
    for item in items:
        if opt.choices and item not in opt.choices:
            raise OptionError(f"{opt.label}: {item!r} is not allowed; use one of: {', '.join(opt.choices)}")
        value = parse_option(base, item)
        value = opt.parse(value, opt.label) if opt.parse is not None else value
        if value in values:   # the same point twice ('read,read', '4k,4096') is refused, not kept
            raise OptionError(f"{opt.label}: {item!r} is given twice (as {value!r}); each value once")
        values.append(value)
    return tuple(values)


def parse_option(opt: Option, raw: Any) -> Any:
    """Validate a value for any option of any table by its kind and bounds (or the row's own
    parser), then by the engine's rule for it when it has one."""
    if opt.list_of is not None:
        return _parse_list(opt, raw)
    if opt.parse is not None:
        value = opt.parse(raw, opt.label)
        if opt.kind in NUMERIC_KINDS:
            _check_bounds(opt, value, raw)
        return value
    value = _PARSERS[opt.kind](opt, raw)
    if opt.rule:
        try:
            value = getattr(_core, opt.rule)(value)
        except ValueError as e:
            raise OptionError(str(e)) from None
    return value


def parse_value(name: str, raw: Any) -> Any:
    """Validate one option value (from the CLI or a job file) into canonical units."""
    opt = BY_NAME.get(name)
    if opt is None:
        raise OptionError(f"unknown option {name!r}{suggest(name)}; see `storlab run --help` for the list")
    if raw is None:
        return None
    return parse_option(opt, raw)


def defaults() -> dict[str, Any]:
    """Every option at its default value."""
    return {o.name: o.default for o in OPTIONS}


def render_reference() -> str:
    """The Markdown reference page for docs/options.md, generated from the table."""
    lines = ["# `storlab run` options", "",
             "Generated from `python/storlab/jobs/options.py`; do not edit by hand "
             "(`python -m storlab.jobs.options > docs/options.md`).", "",
             "Every numeric option has the bounds shown under it; NaN and infinities are refused. "
             "A mistake is one line on standard error naming the option and what is allowed. "
             "Exit codes of `storlab run`: 0 done; 1 the run failed, or its `--json` file could not "
             "be written after the run (the result is stored all the same); 2 a bad option, job file "
             "or output destination (a directory, a missing folder, a read-only place: checked before "
             "anything runs); 70 an internal error: a bug in storlab, shown with the last frames of its "
             "traceback (please report it); 130 interrupted. The options of the other commands: "
             "docs/options-<command>.md.", ""]
    categories: dict[str, list[Option]] = {}
    for o in OPTIONS:
        categories.setdefault(o.category, []).append(o)
    for cat, opts in categories.items():
        lines += [f"## {cat}", "", *render_rows(opts), ""]
    return "\n".join(lines)


def alias_groups(o: Option) -> list[tuple[str, list[str]]]:
    """A choice's other spellings by the value they stand for, in the table's order:
    [("on", ["true", "yes", "1"]), ("off", [...])] (for help and docs)."""
    groups: dict[str, list[str]] = {}
    for alias, value in o.aliases.items():
        groups.setdefault(value, []).append(alias)
    return list(groups.items())


def render_rows(opts: Iterable[Option], job_keys: bool = True) -> list[str]:
    """A Markdown table of options: flag, job-file key (with `job_keys`), value form, default and
    help with the allowed values; shared by every command's reference page."""
    lines = (["| option | job-file key | type | default | help |", "|---|---|---|---|---|"] if job_keys
             else ["| option | type | default | help |", "|---|---|---|---|"])
    for o in opts:
        flag = o.flag + (" [on\\|off]" if o.kind == "bool" and o.job_key else "") + (f" / {o.negative}" if o.negative else "")
        if o.short and not job_keys:
            flag += f"` / `-{o.short}"
        default = "—" if o.default is None or o.default == () else "0" if o.default == (0, 0, 0) else repr(o.default)
        text = o.help.replace("|", "\\|")
        if o.choices:
            text += "<br>" + "<br>".join(f"`{k}`: {v}" for k, v in o.choices.items())
        if o.aliases:
            text += "<br>also accepted: " + "; ".join(
                ", ".join(f"`{a}`" for a in names) + f" = `{value}`" for value, names in alias_groups(o))
        if o.bare:
            text += f"<br>`{o.flag}` alone: `{o.bare}`"
        if o.engine:
            text += f" (only with engine {o.engine})"
        if o.kind in NUMERIC_KINDS or o.list_of is not None:
            text += f"<br>allowed: {_allowed(o)}"
        if o.positional:
            text += " (positional" + {"?": ", optional", "*": ", any number", "+": ", one or more"}.get(o.positional, "") + ")"
        if o.required:
            text += " (required)"
        if o.deprecated:
            text += "<br>formerly " + ", ".join(f"`{d}`" for d in o.deprecated) + " (still accepted, with a notice)"
        unit = f" ({o.unit})" if o.unit else ""
        key = (f" `{o.name}` |" if o.job_key else " — |") if job_keys else ""
        lines.append(f"| `{flag}` |{key} {value_form(o)}{unit} | {default} | {text} |")
    return lines


if __name__ == "__main__":
    print(render_reference())
