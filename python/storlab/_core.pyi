"""Type stub of `storlab._core`, the PyO3 bindings over the Rust engine (crates/storlab-py/src).

The bindings move JSON in and out: a phase spec (python/storlab/jobs/job.py `core_spec`) goes in as
text, results come back as text (docs/result-format.md). Every long call releases the GIL and
returns to Python at least every 50 ms so signal handlers run. tests/test_core_stub.py keeps this
file and the compiled module naming the same things.
"""
from typing import Final

__version__: Final[str]
"""The package version: Cargo.toml's, which maturin also gives the package (storlab.__version__)."""

HIST_SCHEME: Final[str]
"""Name of the latency histogram's bucket layout, "loglinear6": exact below 128 ns, then 64
linear sub-buckets per power of two; recorded in results beside the raw buckets."""

HIST_BUCKETS: Final[int]
"""Number of buckets of the latency histogram."""

MAX_DURATION_S: Final[float]
"""The longest duration any engine option may have, in seconds (10 years); the option tables use it."""

MAX_BYTES: Final[int]
"""The largest byte count (offset + size, io_size, io_total, block) the engine accepts: 2**60."""

class CoreError(Exception):
    """An engine error. `args` is `(kind, message)`: kind is one of `error_kinds()` ("spec",
    "target", "alignment", "io", "engine", "interrupted"); storlab.errors.from_core maps it to
    storlab's exception hierarchy."""

    args: tuple[str, str]
    """(kind, message)."""


class PhaseRun:
    """One I/O phase. Construction builds the plan (targets opened, sized and laid out) with the
    GIL released, running Python's signal handlers every 50 ms between layout chunks; `arm` sets
    its workers up on background threads, waiting at the start line; `start` releases them."""

    def __init__(self, spec_json: str) -> None:
        """Build the plan of the phase spec `spec_json`. A signal whose handler raises (Ctrl-C,
        SIGTERM) cancels the layout, waits until the files it created are removed, and raises that
        exception here. Raises CoreError on a bad spec or an unusable target."""

    @property
    def workers(self) -> int:
        """Number of workers (threads) the plan runs."""

    def targets_json(self) -> str:
        """What the plan found out about each target (type, size, created ...), as a JSON list."""

    def arm(self) -> None:
        """Create and set up the phase's coordinator and workers on background threads, waiting at
        the start line for `start` (nothing if armed already)."""

    def start(self) -> None:
        """Start the phase (arming it first if `arm` was not called): its clock starts now;
        RuntimeError if it was started before."""

    def wait(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` seconds with the GIL released; True once the phase has ended.
        An exception raised by a signal handler while waiting propagates; the phase keeps running
        until `interrupt`."""

    def interrupt(self) -> None:
        """Ask the workers to stop; the result then says complete=false, stop_reason interrupted."""

    def progress(self) -> tuple[int, int, float, int, int]:
        """(bytes done, operations done, seconds since the start, workers finished, sum of the
        done operations' completion latencies in ns), the ramp included."""

    def snapshot_json(self) -> str:
        """The phase so far as JSON, for a checkpoint while it runs: elapsed_s, ramp_s and each
        worker's bytes, operations and direction (null for a mixed read/write group)."""

    def bytes_in_window(self, t0_s: float, t1_s: float) -> float | None:
        """Bytes all workers moved between `t0_s` and `t1_s` seconds after the phase start,
        interpolated from their progress logs (MPI de-skew); None before the phase has ended."""

    def stalls_json(self, since: int) -> str:
        """Stalled requests found so far, from the `since`-th on, as a JSON list of
        {worker, target, offset, age_s, at_s}."""

    def result_json(self) -> str | None:
        """The phase result as JSON once `wait` returned True; None before."""


class MetaRun:
    """A metadata benchmark run (create, stat, read, rename, remove files in a tree). The target
    directory is opened on construction; each `start` runs the next phase on a background
    thread. Nothing is removed unless `cleanup` is called."""

    def __init__(self, spec_json: str) -> None:
        """Open the run described by the meta spec `spec_json` (GIL released); raises CoreError
        on a bad spec or an unusable target directory."""

    @property
    def workers(self) -> int:
        """Number of workers (threads) per phase."""

    @property
    def phases(self) -> list[str]:
        """Names of the phases this run does, in order."""

    @property
    def server(self) -> str | None:
        """An s3:// target's endpoint URL(s), comma-separated, as the workers reach them (never a
        credential); None for a directory."""

    def is_new(self) -> bool:
        """Whether none of the run's names existed when it was opened: an s3:// prefix held no
        object (the LIST made when the run was opened); always True for a directory.
        RuntimeError while a phase runs."""

    @property
    def running(self) -> bool:
        """Whether a phase runs on the background thread (until `wait` has seen it end)."""

    @property
    def next_phase(self) -> str | None:
        """Name of the phase `start` will run; None when all have run or the run was stopped.
        RuntimeError while a phase runs."""

    def start(self) -> None:
        """Start the next phase on a background thread; RuntimeError if one is running or none
        is left."""

    def wait(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` seconds with the GIL released; True once the phase has ended.
        Raises CoreError when the phase failed."""

    def interrupt(self) -> None:
        """Ask the workers of the running phase to stop; its result says interrupted."""

    def progress(self) -> tuple[str, int, int, float, int] | None:
        """(phase, bytes, operations, seconds since the phase start, workers finished) of the
        current or last phase; None before the first `start`."""

    def result_json(self) -> str | None:
        """The last finished phase's result as JSON once `wait` returned True; None before."""

    def states_json(self) -> str:
        """What exists of each worker's files and tree, as a JSON list of
        {dirs, created, renamed, removed}; RuntimeError while a phase runs."""

    def adopt(self, states_json: str, next_phase: str) -> None:
        """Take over the files another process's run of the same spec made (`states_json` as
        that run's `states_json` gives it) and run `next_phase` next (mdtest -N: one rank stats,
        reads or removes another rank's files). CoreError when the states do not fit the spec
        or the phase is not one of this run's after create."""

    def stop(self) -> None:
        """Run no further phases; RuntimeError while a phase runs."""

    def cleanup(self) -> str:
        """Remove every file and directory of this run that still exists (GIL released) and run
        no further phases; returns {"files_removed", "dirs_removed"} as JSON. Raises CoreError
        naming the first entry that could not be removed."""


def spec_field_names() -> list[str]:
    """Names of the fields of one group of a phase spec (the engine's job options), for the
    test that keeps the option table and the engine in step."""


def validate_spec(spec_json: str) -> None:
    """Validate a phase spec without touching the system; raises CoreError (kind "spec")."""


def remote_target(target: str) -> tuple[str, str | None] | None:
    """The kind of network target `target` names ("nbd" for nbd://, nbds://, nbd+unix://; "nfs";
    "s3" for s3://) and, when its client library cannot be loaded here, the one-line reason; None
    for a local path."""


def remove_remote_file(url: str) -> None:
    """Remove a network file a run made (nfs://...), or the objects of storlab's key pattern under
    an s3:// prefix (reached as the plan that made them did); nothing when it is already gone.
    Raises CoreError (kind "target") when the server refuses."""


def error_kinds() -> list[str]:
    """The name of every error kind CoreError can carry (crates/storlab-core error.rs
    `ErrorKind::as_str`), for the test that storlab.errors.from_core maps each one."""


def option_rules() -> str:
    """Every engine option (a field of a phase spec's group) with its rule, as JSON
    {name: {"default", "min", "max", "unit", "allowed", "choices"}}: min, max (inclusive) and unit
    ("bytes", "s", "%" or "") for numeric options, choices for choice options, `allowed` in words
    for both. The option table (storlab/jobs/options.py) takes its defaults and bounds from here."""


def check_option(name: str, value: int | float | str) -> None:
    """Check one value of the engine option `name`: a number against its bounds, a text against
    its allowed values. ValueError, one line naming the option and what it allows, when it does
    not hold (or when the option has no such rule)."""


def opened_paths(spec_json: str) -> str:
    """Every path the plan of this phase spec opens, as JSON [{"path", "writes"}] (per-thread
    PATH.N names included): what the write-safety gate must check. Raises CoreError on a bad
    spec."""


def random_distribution(text: str) -> str:
    """The canonical text of a `random_distribution` value; ValueError (one line naming the
    option and its forms) when it is not one."""

def bssplit(text: str) -> str:
    """The canonical text of a `bssplit` value (fio's SIZE/PERCENT:... per direction, R,W[,T]);
    ValueError (one line) when it is not one."""

def bsrange(text: str) -> str:
    """The canonical text of a `bsrange` value (MIN-MAX per direction); ValueError (one line) when
    it is not one."""


def hist_record(values_ns: list[int], quantiles: list[float]) -> str:
    """Record `values_ns` in the engine's latency histogram; as JSON its non-empty buckets
    `[[index, count], ...]`, its summary {min, mean, stddev, p50, p90, p99, p999, max} and the value
    at each quantile of `quantiles` (0..1), for the test that storlab.measure.stats agrees."""


def iolog_summary(path: str) -> str:
    """What an fio iolog (version 2 or 3) holds, as JSON {"version", "files", "directions":
    {"read", "write", "trim"}, "requests", "bytes"}; raises CoreError (kind "spec", one line
    naming the file and line) when it cannot be read."""


def hist_index(v: int) -> int:
    """Index of the latency-histogram bucket that holds the value `v` (nanoseconds)."""


def hist_bounds(i: int) -> tuple[int, int]:
    """The half-open value range [lower, upper) of histogram bucket `i`."""


def meta_spec_field_names() -> list[str]:
    """Names of the fields of a meta spec, for the test that keeps the meta option table and the
    engine in step."""


def meta_option_rules() -> str:
    """Every field of a meta spec with its rule, as JSON in the form of `option_rules`: the
    default, and min, max and unit of numeric options, choices of choice options."""


def validate_meta_spec(spec_json: str) -> None:
    """Validate a meta spec without touching the system; raises CoreError (kind "spec")."""


def scan_dirs(dirs: list[str], name_contains: str | None = None, size: int | None = None,
              newer_than: float | None = None) -> tuple[list[str], int, int, int]:
    """find's scan of `dirs`, not below them (crates/storlab-core/src/meta/scan.rs): (the
    sub-directories, files looked at, files found, errors). A file is found when its name contains
    `name_contains`, its size is `size` and its modification time is later than `newer_than`
    (each None: any); only files whose name matches are stat'ed. Releases the GIL."""


class ObjectStore:
    """The objects under one s3://BUCKET[/PREFIX] (crates/storlab-py/src/objects.rs), reached with
    the engine's S3 client: keys are relative to the prefix, every request releases the GIL.
    Raises CoreError: kind "target" when the store cannot be set up (URL, endpoint, credentials),
    "spec" for a bad part_size, "io" when a request fails (one line; never the secret)."""

    def __init__(self, url: str, endpoint: str | None = None, insecure: bool = False, virtual_host: bool = False,
                 connections: int = 8, part_size: int = 8388608) -> None:
        """Open `url` at `endpoint` (else AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or AWS's regional
        endpoint; the first of several), with the credentials the AWS CLI would use; nothing is sent."""

    @property
    def url(self) -> str:
        """The URL the store was opened with (no trailing slash)."""

    @property
    def endpoint(self) -> str:
        """The endpoint the requests go to (no credentials in it)."""

    @property
    def bucket(self) -> str:
        """The bucket."""

    @property
    def prefix(self) -> str:
        """The prefix, without a trailing slash ("" for the bucket's top)."""

    @property
    def part_size(self) -> int:
        """Bytes per part of a multipart upload (a PUT above it is one)."""

    @property
    def slowdowns(self) -> int:
        """Requests answered 503 (SlowDown) and retried so far."""

    def put(self, key: str, data: bytes) -> None:
        """PUT `data` as `key` (a multipart upload above part_size)."""

    def get(self, key: str, offset: int = 0, length: int | None = None, whole: bool = False) -> bytes:
        """`length` bytes of `key` from `offset` (a ranged GET; with `whole`, `length` is the object's
        size and the GET has no Range header); without `length`, to the object's end (its size found
        by a LIST first)."""

    def size_of(self, key: str) -> int | None:
        """The size of `key`, None when there is no such object (a LIST of the key as prefix)."""

    def list(self, prefix: str = "") -> list[tuple[str, int]]:
        """[(key, size)] of every object whose key starts with `prefix`, in key order, keys
        relative to the store's prefix."""

    def delete(self, key: str) -> None:
        """DELETE `key` (no error when there is no such object)."""

    def delete_many(self, keys: list[str]) -> None:
        """DELETE `keys`, a thousand a request."""
