"""The simulated users of the KV-cache benchmark and the requests each one sends, as kv-cache.py
draws them (its kv_cache/workload.py UserSimulator, benchmark.py's user worker and request loop,
conversation.py and prefix_cache.py).

Users: with seed S, `mixed_users` makes the same draws in the same order as kv-cache.py's
`random.seed(S)` followed by `UserSimulator.generate_mixed_users`, so the users (type, QoS level,
context length, generation length, think time) are kv-cache.py's own.

Requests: kv-cache.py draws every request from one `random` shared by all threads, so which user
gets which draw depends on thread timing. Here each user draws from its own generator, seeded from
the seed and the user, so a user's requests (and with --requests-per-user every byte of a trial)
are the seed's alone. The draws per request are kv-cache.py's: think time x U(0.8, 1.2); a
conversation goes on with probability 0.8 (at most 50 turns); context in [ctx/4, ctx] and
generation in [gen/4, gen] tokens; a request of 10000 context tokens or more is prefill only; one
request in five opens with one of three system prompts, whose tokens are taken off the context.

kv-cache.py repeats its own bytes for a seed in one case only: one user with prefix caching off
(`--num-users 1 --disable-prefix-caching`), where its one `random` goes on from the users' draws
to that user's requests and nothing else draws from it. (With prefix caching on, its workers'
draws fall between the user's by thread timing: two runs with seed 42, one user, 3 requests wrote
3,177,054,208 and 3,177,840,640 bytes.) `kv_cache_py_requests` is that case's request stream, so
the tiers can be checked against kv-cache.py byte for byte (benchmarks/vs_kvcache.py).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

# kv-cache.py's user templates, draws and constants live in model/kvcache.py (the model works the
# benchmark's load out from the same users); re-exported here for the emulation
from ...model.kvcache import (  # noqa: F401
    CONTINUE_P,
    DECODE_BATCH_TOKENS,
    INTERACTIVE_P,
    MAX_TURNS,
    PREFILL_ONLY_TOKENS,
    RESPONSIVE_THRESHOLD,
    SYSTEM_PROMPT_P,
    SYSTEM_PROMPTS,
    TEMPLATES,
    User,
    draw_users,
    mixed_users,
)

__all__ = ["User", "Request", "mixed_users", "RequestStream", "kv_cache_py_requests", "DECODE_BATCH_TOKENS",
           "PREFILL_ONLY_TOKENS", "MAX_TURNS", "SYSTEM_PROMPTS"]


@dataclass(frozen=True)
class Request:
    key: str                       # the KV object's name: <conversation>_turn_<n>
    previous: tuple[str, ...]      # the conversation's earlier turns, read before the prefill
    context_tokens: int            # the prefill's tokens (after the system prompt's are taken off)
    generation_tokens: int
    decode: bool                   # False: prefill only
    think_s: float                 # the pause before it

    @property
    def decode_reads(self) -> int:
        """Reads of the object after the first one, when it is found: one per 32 generated tokens."""
        return max(1, math.ceil(self.generation_tokens / DECODE_BATCH_TOKENS))


@dataclass
class RequestStream:
    """One user's requests, in order, from the user's own generator (or from `rng` when given)."""
    user: User
    seed: int
    scale: float = 1.0             # a scaled-down trial: token counts times this
    rng: random.Random | None = None
    system_prompts: bool = True    # False: kv-cache.py's --disable-prefix-caching (no draw for them)
    conversations: int = field(default=0, init=False)
    conversation: str | None = field(default=None, init=False)
    turns: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if self.rng is None:
            self.rng = random.Random(f"storlab-kvcache/{self.seed}/{self.user.user_id}")

    def _tokens(self, n: int) -> int:
        return n if self.scale == 1.0 else max(1, round(n * self.scale))

    def next(self) -> Request:
        rng, user = self.rng, self.user
        think = user.think_time_s * rng.uniform(0.8, 1.2)
        if self.conversation is not None and (rng.random() >= CONTINUE_P or len(self.turns) >= MAX_TURNS):
            self.conversation = None
        if self.conversation is None:
            self.conversations += 1
            self.conversation = f"conv_{user.user_id}_{self.conversations}"
            self.turns = []
        context = rng.randint(max(1, user.context_tokens // 4), user.context_tokens)
        generation = rng.randint(max(1, user.generation_tokens // 4), user.generation_tokens)
        previous = tuple(self.turns)
        key = f"{self.conversation}_turn_{len(self.turns) + 1}"
        self.turns.append(key)
        decode = context < PREFILL_ONLY_TOKENS
        if self.system_prompts and rng.random() < SYSTEM_PROMPT_P:
            context = max(0, context - rng.choice(SYSTEM_PROMPTS))
        return Request(key, previous, self._tokens(context) if context else 0, generation, decode, think)


def kv_cache_py_requests(seed: int) -> RequestStream:
    """The requests of kv-cache.py's one user with `--seed SEED --num-users 1
    --disable-prefix-caching` (multi-turn on, no RAG), in its order: its `random` after
    `random.seed(SEED)` and the user's draws goes on with, per request, the think time, whether
    the conversation goes on (from the second request), the context and the generation tokens."""
    rng = random.Random(seed)
    (user,) = draw_users(1, rng)
    return RequestStream(user, seed, rng=rng, system_prompts=False)
