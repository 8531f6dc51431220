"""The options of `storlab kvcache`, MLPerf Storage v3.0's KV-cache benchmark (docs/kvcache.md;
docs/options-kvcache.md is generated from this table): the options to run and the folder under
test, the per-option overrides an OPEN run may make, the sequence (seed, trials, delay), the
scaled-down trial settings, and the run table's output and MPI options it shares."""
from __future__ import annotations

from ..kvcache_job import BUILTINS, CLOSED_DELAY_S, CLOSED_SEED, CLOSED_TRIALS, MODELS
from ..options import BY_NAME, Option, OptionError
from .shared import CommandTable, command_row

__all__ = ["COMMANDS", "KVCACHE_OPTIONS", "SHARED", "parse_option_numbers", "MAX_USERS"]

SHARED = ("json", "quiet", "store", "no_store", "tag", "note", "rank_timeout")
MAX_USERS = 100_000            # kv-cache.py's own bound (MAX_USERS)
MAX_TRIALS = 100


def parse_option_numbers(raw: str | list[str], label: str) -> tuple[int, ...]:
    """Option numbers of Table KVCache-1, comma-separated (or one flag each), each once."""
    items = [x.strip() for part in ([raw] if isinstance(raw, str) else raw) for x in str(part).split(",")]
    allowed = ", ".join(str(n) for n in BUILTINS)
    bad = [x for x in items if not x.isdigit() or int(x) not in BUILTINS]
    if bad:
        raise OptionError(f"{label}: {bad[0]!r} is not an option; allowed: {allowed} (comma-separated)")
    numbers = tuple(int(x) for x in items)
    if len(set(numbers)) != len(numbers):
        raise OptionError(f"{label}: option {next(n for n in numbers if numbers.count(n) > 1)} is named twice")
    return numbers


_OPTION_HELP = "; ".join(f"{n} {o.name} ({o.model}, {o.users} users, cpu {o.cpu_mem_bytes >> 30} GiB, "
                         f"{o.max_concurrent_allocs} allocations)" for n, o in BUILTINS.items())

KVCACHE_OPTIONS: tuple[Option, ...] = (
    command_row("cache_dir", "str", "the folder on the storage under test; the benchmark writes only into a "
                "fresh subfolder it makes there (storlab-kvcache-ID/rank_N) and removes", required=True,
                metavar="DIR", category="kvcache"),
    command_row("option", "list", f"the CLOSED options to run, comma-separated, in order: {_OPTION_HELP}",
                parse=parse_option_numbers, default=tuple(BUILTINS), metavar="N[,N...]", category="kvcache"),
    command_row("trials", "int", "scored repeats of each option (CLOSED: 3)", default=CLOSED_TRIALS, minimum=1,
                maximum=MAX_TRIALS, category="kvcache"),
    command_row("seed", "int", "seed of the users and requests; rank N uses seed + N (CLOSED: 42)",
                default=CLOSED_SEED, minimum=0, maximum=2**32 - 1, category="kvcache"),
    command_row("inter_option_delay", "duration", "idle time before each option and trial after the first "
                "(CLOSED: 90 s)", default=CLOSED_DELAY_S, minimum=0.0, maximum=3600.0, unit="s",
                category="kvcache"),
    command_row("model", "choice", "OPEN: the model of every option (its KV bytes per token)",
                choices={k: f"{m.name}: {m.kv_bytes_per_token} bytes of KV cache per token" for k, m in MODELS.items()},
                category="open"),
    command_row("users", "int", "OPEN: simulated users per rank", minimum=1, maximum=MAX_USERS, category="open"),
    command_row("duration", "duration", "OPEN: each trial's length", minimum=0.1, maximum=86400.0, unit="s",
                category="open"),
    command_row("gpu_mem", "size", "OPEN: the GPU tier's budget per rank (emulated in host memory)", minimum=0,
                unit="bytes", category="open"),
    command_row("cpu_mem", "size", "OPEN: the CPU tier's budget per rank", minimum=0, unit="bytes", category="open"),
    command_row("max_concurrent_allocs", "int", "OPEN: allocations (generate and write) in flight per rank; 0 no "
                "bound", minimum=0, maximum=MAX_USERS, category="open"),
    command_row("generation_mode", "choice", "OPEN: simulated token generation time",
                choices={"none": "no delay", "fast": "2 ms per token", "realistic": "30 ms per token"},
                category="open"),
    command_row("scale", "float", "a scaled-down trial: every request's token count times this fraction (at least "
                "1 token; recorded, not compliant)", default=1.0, minimum=1e-6, maximum=1.0, metavar="FRACTION",
                category="trial"),
    command_row("requests_per_user", "int", "each user stops after N requests (0: the duration decides); the "
                "bytes are then the seed's alone (not compliant)", default=0, minimum=0, maximum=1_000_000,
                category="trial"),
    command_row("storage_capacity", "size", "the storage tier's capacity per rank; 0: 95 % of the free space, "
                "as kv-cache.py", default=0, minimum=0, unit="bytes", category="kvcache"),
    command_row("precondition", "bool", "before the first option, write 2048-token objects until "
                "--precondition-size is written (kv-cache.py --precondition), then remove them",
                category="kvcache"),
    command_row("precondition_size", "size", "bytes each rank writes to precondition; 0: twice the storage "
                "capacity", default=0, minimum=0, unit="bytes", category="kvcache"),
)

COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("kvcache", "MLPerf Storage v3.0's KV-cache benchmark: LLM inference KV objects spilled to "
                 "storage as .npy files, its three CLOSED options, read bandwidth, device P95 latencies and "
                 "tokens per second (docs/kvcache.md)", (*KVCACHE_OPTIONS, *(BY_NAME[n] for n in SHARED))),
)
