"""The KV-cache benchmark (`storlab kvcache`, MLPerf Storage v3.0) as the model's load, and what a
stack delivers for it: read and write bandwidth, device P95 latencies of one object's read and
write, and tokens per second (`plan perf --workload kvcache_N`, `plan recommend --workload
kvcache_N --tokens-per-s N`; docs/model.md, "KV cache").

The users and their request draws are kv-cache.py's (kept here, below suites/, so the model and
the benchmark's emulation, suites/kvcache/users.py, share one copy). From an option the load is
worked out in expectation, user by user, from the draws' own distributions:
- a request's object is its context tokens (uniform in [ctx/4, ctx], less a system prompt one
  request in five) x the model's KV bytes per token (`ModelShape.kv_bytes_per_token`), written
  whole and fsync'd, in CHUNK_BYTES calls;
- it reads the conversation's earlier turns (the turn index of a request is stationary: P(k) ~
  0.8^(k-1), k <= 50), then, unless prefill only (context >= 10,000 tokens), its own object
  1 + ceil(generation / 32) times;
- the memory tiers (GPU, CPU) keep at most 80 % of their budgets; reads and writes reach storage
  in proportion to what they cannot hold: a uniform share of the users' live objects (each
  user's newest object for its decode reads, its whole conversation for earlier turns);
- a user waits its think time and the generation's sleep between requests.

The users are the customers of a closed queueing network (docs/model.md, "Concurrency"): one
station, the storage, whose demand per request is the request's storage bytes over the read and
write rates `predict` gives for CHUNK_BYTES sequential calls at the users' concurrency; a request's
unloaded time (its calls one at a time, `predict` at one thread) beyond that demand and the users'
sleeps are the delay. Mean-value analysis gives requests/s X and the storage time per request R:
read_bw = X x read bytes per request, tokens_per_s = mean generated tokens / R (kv-cache.py's
storage throughput: tokens over the summed storage latency of requests).

P95 (read_p95_s, write_p95_s: the device time of one object's read or write). An object of n
calls waits n times; each wait is taken exponential with the mean wait MVA gives (the M/M/1
waiting time: L. Kleinrock, "Queueing Systems, Volume 1: Theory", 1975), so the object's time is
n x (unloaded call time + mean wait) with variance n x wait^2 and, as a sum of many calls, about
normal (central limit theorem). The P95 is that of the mixture over the objects' sizes (each
user's uniform context range, weighted by how often its objects are read or written), found by
bisection; for objects of many calls the size spread, not the queue, sets it.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ..errors import UserError
from ..jobs.kvcache_job import BUILTINS, CLOSED_SEED, MODELS, KvOption
from .predict import Device, Prediction, Workload, predict
from .queueing import Station, solve_closed
from .stack import Stack

__all__ = ["User", "mixed_users", "draw_users", "TEMPLATES", "INTERACTIVE_P", "RESPONSIVE_THRESHOLD", "CONTINUE_P", "MAX_TURNS",
           "PREFILL_ONLY_TOKENS", "DECODE_BATCH_TOKENS", "SYSTEM_PROMPT_P", "SYSTEM_PROMPTS", "CHUNK_BYTES",
           "GENERATION_S_PER_TOKEN", "MEMORY_FILL", "MEMORY_MAX_OBJECT", "WORKLOAD_PREFIX", "is_kvcache_workload",
           "kvcache_option", "UserLoad", "KvLoad", "kvcache_load", "KvForecast", "predict_kvcache",
           "mean_turns_before"]

# --- kv-cache.py's users and draws (suites/kvcache/users.py imports these) -------------------------
# (context tokens, generation tokens, think time s), kv-cache.py's DEFAULT_USER_TEMPLATES
TEMPLATES = {
    "chatbot": ((512, 4096), (50, 200), (0.1, 0.5)),
    "coding": ((4096, 25000), (100, 500), (0.2, 1.0)),
    "document": ((4096, 16384), (200, 800), (0.3, 1.5)),
}
INTERACTIVE_P, RESPONSIVE_THRESHOLD = 0.15, 0.50      # QoS mix: 15 % interactive, 35 % responsive, 50 % batch
CONTINUE_P = 0.8                   # a conversation goes on with this probability
MAX_TURNS = 50                     # conversation.py's max_turns_per_conv
PREFILL_ONLY_TOKENS = 10_000       # from this context size on a request is prefill only (no decode reads)
DECODE_BATCH_TOKENS = 32           # decode reads the object once per 32 generated tokens (plus once)
SYSTEM_PROMPT_P = 0.2              # prefix_cache.py's system_prompt_hit_probability
# the three system prompts' token counts (words, as prefix_cache.py counts them)
SYSTEM_PROMPTS = (len("You are a helpful assistant.".split()),
                  len("You are an AI assistant helping with coding tasks.".split()),
                  len("You are a professional writing assistant.".split()))
CHUNK_BYTES = 8 << 20              # one write or read call of an object (suites/kvcache/objects.py)
GENERATION_S_PER_TOKEN = {"none": 0.0, "fast": 0.002, "realistic": 0.030}
MEMORY_FILL, MEMORY_MAX_OBJECT = 0.80, 0.95            # kv-cache.py's memory-tier settings (tiers.py)


@dataclass(frozen=True)
class User:
    user_id: str
    kind: str                      # chatbot | coding | document
    qos: str                       # interactive | responsive | batch
    context_tokens: int
    generation_tokens: int
    think_time_s: float


def mixed_users(count: int, seed: int) -> list[User]:
    """`count` users drawn as kv-cache.py draws them after `random.seed(seed)`."""
    return draw_users(count, random.Random(seed))


def draw_users(count: int, rng: random.Random) -> list[User]:
    """`count` users drawn from `rng` as kv-cache.py draws them (its generator goes on from there)."""
    users = []
    for i in range(count):
        kind = rng.choice(["chatbot", "coding", "document"])
        r = rng.random()
        qos = "interactive" if r < INTERACTIVE_P else "responsive" if r < RESPONSIVE_THRESHOLD else "batch"
        ctx, gen, think = TEMPLATES[kind]
        users.append(User(f"user_{i:04d}", kind, qos, rng.randint(*ctx), rng.randint(*gen), rng.uniform(*think)))
    return users


# --- the workload's name -----------------------------------------------------------------------------
WORKLOAD_PREFIX = "kvcache_"


def is_kvcache_workload(name: str) -> bool:
    return name.startswith(WORKLOAD_PREFIX)


def kvcache_option(name: str) -> KvOption:
    """The built-in option `kvcache_N` names (Table KVCache-1, `storlab kvcache --option N`)."""
    number = name[len(WORKLOAD_PREFIX):]
    allowed = ", ".join(f"{WORKLOAD_PREFIX}{n}" for n in BUILTINS)
    if not number.isdigit() or int(number) not in BUILTINS:
        raise UserError(f"--workload: {name!r} is not a KV-cache option; allowed: {allowed}")
    return BUILTINS[int(number)]


# --- the load ------------------------------------------------------------------------------------------
def mean_turns_before() -> float:
    """The expected earlier turns of a request's conversation: its turn index k is stationary with
    P(k) ~ CONTINUE_P^(k-1), k = 1..MAX_TURNS (a conversation ends with 1 - CONTINUE_P, or at MAX_TURNS)."""
    weights = [CONTINUE_P ** (k - 1) for k in range(1, MAX_TURNS + 1)]
    return sum((k - 1) * w for k, w in enumerate(weights, start=1)) / sum(weights)


@dataclass(frozen=True)
class UserLoad:
    """One user's expected request, in objects and bytes (unscaled tokens times the scale)."""
    user: User
    object_tokens_low: float       # the object's tokens: uniform in [low, high] (scaled)
    object_tokens_high: float
    object_bytes: float            # the mean object
    decode_p: float                # share of requests that decode (context < PREFILL_ONLY_TOKENS)
    reads_per_request: float       # objects read: earlier turns + decode's 1 + ceil(gen / 32)
    generation_tokens: float       # mean tokens generated per request
    sleep_s: float                 # think time + generation sleep per request


@dataclass(frozen=True)
class KvLoad:
    """The storage I/O one rank of a KV-cache option causes, in expectation per request."""
    name: str                      # kvcache_N
    option: KvOption
    kv_bytes_per_token: int
    users: tuple[UserLoad, ...]
    memory_bytes: float            # what the GPU and CPU tiers hold (80 % of their budgets)
    read_hit_memory: float         # share of object reads the memory tiers serve
    write_spill: float             # share of objects that reach storage (directly or demoted)
    write_direct: float            # share written straight to storage (counted in write_bw_bytes)
    read_objects_per_request: float       # storage reads per request
    write_objects_per_request: float
    read_bytes_per_request: float         # storage bytes read per request
    write_bytes_per_request: float        # storage bytes written per request (by requests and demotions)
    generation_tokens_per_request: float
    sleep_s: float                 # mean time a user spends off the storage per request
    concurrency: int               # users: each has one request in flight
    request_bytes: int = CHUNK_BYTES

    @property
    def mean_object_bytes(self) -> float:
        return sum(u.object_bytes for u in self.users) / len(self.users)


def _uniform_int_mean(low: int, high: int) -> float:
    return (low + high) / 2


def _user_load(user: User, kv_bytes: int, scale: float, generation_s: float, turns_before: float) -> UserLoad:
    low_ctx, high_ctx = max(1, user.context_tokens // 4), user.context_tokens
    span = high_ctx - low_ctx + 1
    decode_p = max(0, min(high_ctx, PREFILL_ONLY_TOKENS - 1) - low_ctx + 1) / span
    prompt = SYSTEM_PROMPT_P * sum(SYSTEM_PROMPTS) / len(SYSTEM_PROMPTS)
    tokens = max(1.0, (_uniform_int_mean(low_ctx, high_ctx) - prompt) * scale)
    low_gen, high_gen = max(1, user.generation_tokens // 4), user.generation_tokens
    gens = range(low_gen, high_gen + 1)
    decode_reads = 1 + sum(max(1, math.ceil(g / DECODE_BATCH_TOKENS)) for g in gens) / len(gens)
    gen_mean = _uniform_int_mean(low_gen, high_gen)
    return UserLoad(user, max(1.0, low_ctx * scale), max(1.0, high_ctx * scale), tokens * kv_bytes, decode_p,
                    turns_before + decode_p * decode_reads, gen_mean, user.think_time_s + gen_mean * generation_s)


def kvcache_load(option: KvOption, *, seed: int = CLOSED_SEED, scale: float = 1.0, name: str = "") -> KvLoad:
    """The storage I/O of one rank running `option` (its users drawn with `seed`; `scale` as
    `storlab kvcache --scale`)."""
    model = MODELS[option.model]
    kv = model.kv_bytes_per_token
    turns = mean_turns_before()
    users = tuple(_user_load(u, kv, scale, GENERATION_S_PER_TOKEN[option.generation_mode], turns)
                  for u in mixed_users(option.users, seed))
    n = len(users)
    mean_obj = sum(u.object_bytes for u in users) / n
    # a memory tier takes objects up to 80 % of its budget; one over 95 % of it skips it
    memory = sum(MEMORY_FILL * b for b in (option.gpu_mem_bytes, option.cpu_mem_bytes)
                 if b > 0 and mean_obj <= MEMORY_MAX_OBJECT * b)
    newest = n * mean_obj                            # every user's newest object (its decode reads)
    conversation = n * mean_obj * (1 + turns)        # every user's live conversation (earlier turns)
    decode_hit = min(1.0, memory / newest)
    earlier_hit = min(1.0, memory / conversation)
    reads = sum(u.reads_per_request for u in users) / n
    decode_reads = sum(u.reads_per_request - turns for u in users) / n
    hit = (decode_reads * decode_hit + turns * earlier_hit) / reads if reads else 0.0
    spill = 1.0 - earlier_hit                        # what the memory tiers cannot keep reaches storage
    direct = 1.0 if memory == 0 else 0.0             # with a memory tier a new object is placed there first
    read_bytes = sum(u.reads_per_request * u.object_bytes for u in users) / n * (1 - hit)
    write_bytes = mean_obj * spill
    return KvLoad(name or f"{WORKLOAD_PREFIX}{option.number}", option, kv, users, memory, hit, spill, direct,
                  reads * (1 - hit), spill, read_bytes, write_bytes,
                  sum(u.generation_tokens for u in users) / n, sum(u.sleep_s for u in users) / n, n)


# --- the forecast ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KvForecast:
    """What the model forecasts for a KV-cache load on a stack (per rank, as the benchmark's ranks)."""
    load: KvLoad
    requests_per_s: float
    storage_s_per_request: float   # R: a request's mean summed storage time
    read_bw_bytes: float
    write_bw_bytes: float          # the requests' direct writes (what the benchmark counts)
    read_p95_s: float | None       # None: no storage reads (or writes) forecast
    write_p95_s: float | None
    tokens_per_s: float
    storage_busy: float            # the storage's utilisation (0..1)
    limiting: str
    read: Prediction               # CHUNK_BYTES sequential calls at the users' concurrency
    write: Prediction
    assumptions: tuple[str, ...]


def _normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def _p95(users: tuple[UserLoad, ...], weights: list[float], kv_bytes: int, fixed_s: float, s_per_byte: float,
         wait_s: float, points: int = 16) -> float | None:
    """The 95th percentile of one object's time over the users' object sizes (each uniform in its
    range, `points` sizes): an object of b bytes is n = ceil(b / CHUNK_BYTES) calls, normal with
    mean n (fixed_s + wait_s) + b s_per_byte and standard deviation sqrt(n) wait_s."""
    parts = []
    for u, w in zip(users, weights):
        if w <= 0:
            continue
        for i in range(points):
            size = kv_bytes * (u.object_tokens_low + (u.object_tokens_high - u.object_tokens_low) * (i + 0.5) / points)
            calls = math.ceil(size / CHUNK_BYTES)
            parts.append((w / points, calls * (fixed_s + wait_s) + size * s_per_byte, math.sqrt(calls) * wait_s))
    if not parts:
        return None
    total = sum(p[0] for p in parts)

    def cdf(t: float) -> float:
        return sum(w * (_normal_cdf((t - m) / s) if s > 0 else float(t >= m)) for w, m, s in parts) / total

    low, high = 0.0, max(m + 6 * s for _, m, s in parts)
    for _ in range(50):            # to 1e-15 of the span: far below the model's own error
        mid = (low + high) / 2
        low, high = (mid, high) if cdf(mid) < 0.95 else (low, mid)
    return high


def _capacity_bw(p: Prediction) -> float:
    """Bytes/s the stack's resources let through for the prediction's calls (the least capacity
    but the concurrency's)."""
    return min(c.capacity_iops for c in p.components if c.kind != "concurrency") * p.workload.request_bytes


def _calls(load: KvLoad) -> float:
    """Calls per stored object: a partial last call is a whole call's fixed time."""
    return sum(max(1.0, u.object_bytes / CHUNK_BYTES) for u in load.users) / len(load.users)


def predict_kvcache(stack: Stack | None, load: KvLoad, devices: list[Device] | None = None, *,
                    mirror_read: str = "balanced", tails: bool = True) -> KvForecast:
    """The four figures of the benchmark (and the write bandwidth) for `load` on `stack` (None:
    one bare device, `devices[0]`). tails=False leaves the P95s out (None), for a search over layouts."""
    n = load.concurrency
    kw = dict(mirror_read=mirror_read)
    chunk = load.request_bytes
    read = predict(stack, Workload("read", chunk, 1, n), devices, **kw)
    write = predict(stack, Workload("write", chunk, 1, n), devices, **kw)
    read_one = predict(stack, Workload("read", chunk, 1, 1), devices, **kw)
    write_one = predict(stack, Workload("write", chunk, 1, 1), devices, **kw)
    # the rates the stack sustains (its resources, not the users' concurrency); per call a fixed time:
    # one call alone less its transfer at that rate
    read_bw, write_bw = _capacity_bw(read), _capacity_bw(write)
    fixed_read = max(0.0, read_one.latency_mean_s - chunk / read_bw)
    fixed_write = max(0.0, write_one.latency_mean_s - chunk / write_bw)
    read_calls = load.read_objects_per_request * _calls(load)
    write_calls = load.write_objects_per_request * _calls(load)
    # the storage's demand per request at the rates it sustains; the calls' fixed times are a delay
    demand = load.read_bytes_per_request / read_bw + load.write_bytes_per_request / write_bw
    unloaded = demand + read_calls * fixed_read + write_calls * fixed_write
    delay = load.sleep_s + (unloaded - demand)
    assumptions = [
        f"{n} users, one request in flight each: the customers of one storage station "
        f"({demand * 1e3:.4g} ms of storage per request), {load.sleep_s * 1e3:.4g} ms of think and generation",
        f"objects read and written whole in {chunk >> 20} MiB calls, one at a time per user",
        f"memory tiers hold {load.memory_bytes / 1e9:.4g} GB: {load.read_hit_memory:.1%} of object reads "
        f"served there, {load.write_spill:.1%} of objects reach storage",
    ]
    if load.option.max_concurrent_allocs:
        assumptions.append(f"at most {load.option.max_concurrent_allocs} allocations in flight: not modelled "
                           "(one storage station serves one request at a time either way)")
    if demand <= 0:
        return KvForecast(load, n / load.sleep_s if load.sleep_s else math.inf, 0.0, 0.0, 0.0, None, None, math.inf,
                          0.0, "memory tiers (no storage I/O)", read, write, tuple(assumptions))
    sol = solve_closed([Station("storage", demand)], delay, n)
    x = sol.throughput
    storage_s = max(unloaded, n / x - load.sleep_s)
    calls = read_calls + write_calls
    wait_per_call = (storage_s - unloaded) / calls if calls else 0.0
    busy = min(1.0, x * demand)
    if busy >= 0.95:
        pred = read if load.read_bytes_per_request / read_bw >= load.write_bytes_per_request / write_bw else write
        limiting = pred.limiting if pred.limiting != "queue depth" else \
            min((c for c in pred.components if c.kind != "concurrency"), key=lambda c: c.headroom_fraction).name
    else:
        limiting = f"users (think and generation time; the storage is {busy:.0%} busy)"
    read_w = [u.reads_per_request for u in load.users]
    write_w = [1.0 for _ in load.users]
    kv = load.kv_bytes_per_token
    read_p95 = _p95(load.users, read_w, kv, fixed_read, 1 / read_bw, wait_per_call) \
        if read_calls and tails else None
    write_p95 = _p95(load.users, write_w, kv, fixed_write, 1 / write_bw, wait_per_call) \
        if write_calls and tails else None
    tokens = load.generation_tokens_per_request / storage_s if storage_s > 0 else math.inf
    return KvForecast(load, x, storage_s, x * load.read_bytes_per_request,
                      x * load.write_bytes_per_request * load.write_direct, read_p95, write_p95, tokens, busy,
                      limiting, read, write, tuple(assumptions))
