"""`storlab kvcache`: MLPerf Storage v3.0's KV-cache benchmark made into one result document.

In order: the folder (a fresh `storlab-kvcache-ID` made in --cache-dir, with one `rank_N` per
rank, as mlperf_wrapper.py gives each client its own cache folder), the optional preconditioning,
then each option's trials, each after the inter-option delay but the first. Every rank runs the
option's full per-client load (its users) with the seed + its rank (mlperf_wrapper.py's seed);
after each trial the ranks' records meet at rank 0, which sums and reduces them as mlpstorage does
(Rules 6.3.4): read and write bandwidth and tokens per second summed over the ranks of a trial and
averaged over the trials, device P95 latencies the maximum over ranks and trials. Whatever
happens, every rank removes what it wrote and rank 0 the folder.

The ranks meet through the rank interface (measure/ranks.py, made by the CLI): a rank that failed
ends the run on every rank, named in the document, and what was measured is kept.
"""
from __future__ import annotations

import os
import shutil
import statistics
import threading
import time
from dataclasses import dataclass, fields, replace
from typing import Any, Callable

from ...devices.safety import check_write_allowed
from ...document import header, now_iso
from ...errors import UserError
from ...jobs.kvcache_job import BUILTINS, CLOSED_DELAY_S, CLOSED_SEED, CLOSED_TRIALS, MODELS, KvOption
from ...measure.ranks import LocalRanks, RankFailure, Ranks, any_rank
from ...signals import STOP
from .objects import Contents
from .tiers import KvCache
from .trial import TrialSettings, run_trial

__all__ = ["KvSettings", "run", "storage_capacity", "aggregate_trial", "aggregate_option",
           "PRECONDITION_TOKENS", "FREE_SPACE_FRACTION"]

PRECONDITION_TOKENS = 2048         # kv-cache.py's preconditioning objects
FREE_SPACE_FRACTION = 0.95         # the storage tier's capacity when none is given


@dataclass(frozen=True)
class KvSettings:
    cache_dir: str
    seed: int = CLOSED_SEED
    trials: int = CLOSED_TRIALS
    inter_option_delay_s: float = CLOSED_DELAY_S
    scale: float = 1.0
    requests_per_user: int = 0
    storage_capacity: int = 0      # 0: 95 % of the free space, measured before each trial
    precondition: bool = False
    precondition_size: int = 0     # 0: twice the storage capacity


def storage_capacity(folder: str, given: int) -> int:
    """The storage tier's capacity: `given`, or 95 % of the free space under `folder` (statvfs)."""
    if given:
        return given
    st = os.statvfs(folder)
    return int(st.f_bavail * st.f_frsize * FREE_SPACE_FRACTION)


def _open_reasons(options: list[KvOption], settings: KvSettings) -> list[str]:
    """Why a run is not a CLOSED one (empty: it is)."""
    reasons = []
    if [o.number for o in options] != list(BUILTINS):
        reasons.append("not all three options, in order")
    for o in options:
        changed = [f"{f.name} {getattr(o, f.name)!r} (not {getattr(BUILTINS[o.number], f.name)!r})"
                   for f in fields(KvOption) if getattr(o, f.name) != getattr(BUILTINS[o.number], f.name)]
        if changed:
            reasons.append(f"option {o.number}: " + ", ".join(changed))
    if settings.seed != CLOSED_SEED:
        reasons.append(f"seed {settings.seed}, not {CLOSED_SEED}")
    if settings.trials != CLOSED_TRIALS:
        reasons.append(f"{settings.trials} trials, not {CLOSED_TRIALS}")
    if settings.inter_option_delay_s != CLOSED_DELAY_S:
        reasons.append(f"inter-option delay {settings.inter_option_delay_s:g} s, not {CLOSED_DELAY_S:g} s")
    if settings.scale != 1.0:
        reasons.append(f"token counts scaled by {settings.scale:g}")
    if settings.requests_per_user:
        reasons.append(f"{settings.requests_per_user} requests per user")
    return reasons


@dataclass
class _Folders:
    """The run's fresh folder in --cache-dir and this rank's inside it, and which of them this
    rank made (only those it removes)."""
    top: str
    mine: str
    made_top: bool = False
    made_mine: bool = False

    def make(self, ranks: Ranks) -> None:
        """Rank 0 makes the run's folder (a rank on a node that does not see it makes it there
        too), each rank its own inside. A bad --cache-dir is one line on every rank."""
        problem = ranks.bcast(self._make_top(fresh=True) if ranks.rank == 0 else None)
        if problem:
            raise UserError(problem)
        if not os.path.isdir(self.top):
            problem = self._make_top(fresh=False)
        if problem is None:
            try:
                os.mkdir(self.mine)
                self.made_mine = True
            except OSError as e:
                problem = f"--cache-dir: cannot make {self.mine}: {e.strerror}"
        problems = [p for p in ranks.allgather(problem) if p]
        if problems:
            raise UserError(problems[0])

    def _make_top(self, fresh: bool) -> str | None:
        """Make the run's folder after the write-safety gate; what is wrong, in one line."""
        base = os.path.dirname(self.top)
        if not os.path.isdir(base):
            return (f"--cache-dir: {base} is not an existing folder on {os.uname().nodename}; name a folder "
                    "on the storage under test (the benchmark writes only into a fresh subfolder it makes there)")
        try:
            check_write_allowed(self.top)
            os.mkdir(self.top)
            self.made_top = True
        except UserError as e:
            return f"--cache-dir: {e}"
        except FileExistsError:
            return f"--cache-dir: {self.top} exists already" if fresh else None   # another rank of this node
        except OSError as e:
            return f"--cache-dir: cannot make {self.top}: {e.strerror}"
        return None

    def remove(self, ranks: Ranks) -> None:
        """Remove what this rank made, its own folder first (a meeting of every rank between)."""
        if self.made_mine:
            shutil.rmtree(self.mine, ignore_errors=True)
        try:
            ranks.settle(1)
        except RankFailure:
            pass
        if self.made_top:
            shutil.rmtree(self.top, ignore_errors=True)


def _precondition(option: KvOption, settings: KvSettings, folder: str, contents: Contents) -> dict[str, Any]:
    """kv-cache.py's preconditioning: objects of 2048 tokens (times --scale) written by as many
    threads as CPUs until `precondition_size` bytes (0: twice the storage capacity) are written;
    then removed."""
    capacity = storage_capacity(folder, settings.storage_capacity)
    target = settings.precondition_size or 2 * capacity
    tokens = max(1, round(PRECONDITION_TOKENS * settings.scale))
    stop = threading.Event()
    cache = KvCache(folder, MODELS[option.model], {"gpu": 0, "cpu": 0, "storage": capacity}, contents,
                    stop=stop.is_set)
    state = {"written": 0, "next": 0}
    lock = threading.Lock()
    size = tokens * MODELS[option.model].kv_bytes_per_token

    def writer() -> None:
        while not stop.is_set():
            with lock:
                if state["written"] >= target:
                    return
                n = state["next"]
                state["next"] += 1
            if cache.allocate(f"precond_{n}", tokens) is None:
                return
            with lock:
                state["written"] += size

    threads = [threading.Thread(target=writer, daemon=True) for _ in range(os.cpu_count() or 4)]
    t0 = time.monotonic()
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            time.sleep(0.05)
    finally:
        with STOP.held():
            stop.set()
            for t in threads:
                t.join()
            cache.remove_all()
    return {"bytes": state["written"], "seconds": time.monotonic() - t0, "object_tokens": tokens}


def _scaled(option: KvOption, scale: float) -> KvOption:
    """A scaled-down trial's option: the memory tiers' budgets scaled as the objects are, so that
    objects spill to storage as they do at full size."""
    if scale == 1.0:
        return option
    return replace(option, gpu_mem_bytes=int(option.gpu_mem_bytes * scale),
                   cpu_mem_bytes=int(option.cpu_mem_bytes * scale))


def _mean(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def _max(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return max(values) if values else None


def aggregate_trial(index: int, records: list[dict[str, Any]]) -> dict[str, Any]:
    """One trial over the ranks: rates summed, device P95s the worst rank's (Rules 6.3.4)."""
    total = {k: sum(r[k] for r in records) for k in ("read_bw_bytes", "write_bw_bytes", "tokens_per_s",
                                                       "storage_read_bytes", "storage_write_bytes", "requests")}
    return {"trial": index, **total, "read_p95_s": _max([r["read_p95_s"] for r in records]),
            "write_p95_s": _max([r["write_p95_s"] for r in records]),
            "complete": all(r["complete"] for r in records), "ranks": records}


def aggregate_option(option: KvOption, trials: list[dict[str, Any]]) -> dict[str, Any]:
    """One option over its trials: the mean of the trials' sums, the maximum of their P95s, and the
    ranks that kept every object in memory (their latencies are no storage latencies)."""
    return {**option.record(), "trials": trials,
            "read_bw_bytes": _mean([t["read_bw_bytes"] for t in trials]),
            "write_bw_bytes": _mean([t["write_bw_bytes"] for t in trials]),
            "tokens_per_s": _mean([t["tokens_per_s"] for t in trials]),
            "read_p95_s": _max([t["read_p95_s"] for t in trials]),
            "write_p95_s": _max([t["write_p95_s"] for t in trials]),
            "cpu_tier_ranks": sorted({r["rank"] for t in trials for r in t["ranks"]
                                      if r["storage_entries"] == 0 and r["storage_reads"] == 0})}


def run(options: list[KvOption], settings: KvSettings, *, argv: list[str], ranks: Ranks | None = None,
        notify: Callable[[str], None] = lambda m: None,
        checkpoint: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any] | None:
    """Run the options on `ranks` (one process without); the document on rank 0, None elsewhere.
    `checkpoint` gets the document so far after each trial (on rank 0, `stop_reason: running`)."""
    ranks = ranks or LocalRanks()
    doc = _new_document(options, settings, ranks, argv)
    top = os.path.join(os.path.abspath(settings.cache_dir), f"storlab-kvcache-{doc['run_id'][:12]}")
    folders = _Folders(top, os.path.join(top, f"rank_{ranks.rank}"))
    done: list[tuple[KvOption, list[dict[str, Any]]]] = [(o, []) for o in options]

    def after_trial() -> None:
        if checkpoint is not None:
            checkpoint({**_document(doc, done), "stop_reason": "running", "complete": False})

    try:
        folders.make(ranks)
        contents = Contents(settings.seed + ranks.rank)
        if settings.precondition:
            notify("preconditioning")
            pre = _precondition(options[0], settings, folders.mine, contents)
            ranks.barrier()
            doc["precondition"] = pre if ranks.size == 1 else {"ranks": ranks.gather(pre)}
        failed = _run_options(done, settings, ranks, folders.mine, contents, notify, after_trial)
        if failed:
            doc.update(complete=False, stop_reason="error", error=failed)
    except KeyboardInterrupt:        # a signal: the trials done (and the one cut short) are kept
        doc.update(complete=False, stop_reason="interrupted")
    except RankFailure as e:         # another rank failed or vanished: named, the rest kept
        doc.update(complete=False, stop_reason="error", error=str(e))
    finally:
        with STOP.held():
            folders.remove(ranks)
    return {**_document(doc, done), "finished_at": now_iso()} if ranks.rank == 0 else None


def _new_document(options: list[KvOption], settings: KvSettings, ranks: Ranks, argv: list[str]) -> dict[str, Any]:
    """The header and the run's settings, the same run_id on every rank."""
    doc = header("kvcache", argv=argv)
    doc["run_id"] = ranks.bcast(doc["run_id"])
    reasons = _open_reasons(options, settings)
    hosts = ranks.allgather(os.uname().nodename)
    doc.update({"cache_dir": os.path.abspath(settings.cache_dir), "seed": settings.seed, "trials": settings.trials,
                "inter_option_delay_s": settings.inter_option_delay_s, "ranks": ranks.size,
                "hosts": len(set(hosts)), "scale": settings.scale, "requests_per_user": settings.requests_per_user,
                "storage_capacity_bytes": settings.storage_capacity or None,
                "division": "open" if reasons else "closed", "compliant": not reasons,
                "noncompliant_reasons": reasons, "precondition": None, "options": [], "warnings": []})
    return doc


def _run_options(done: list[tuple[KvOption, list[dict[str, Any]]]], settings: KvSettings, ranks: Ranks, folder: str,
                 contents: Contents, notify: Callable[[str], None], after_trial: Callable[[], None]) -> str | None:
    """Every option's trials on every rank, each trial's aggregate appended to its option's list
    (rank 0). Returns the first rank's error that ended a trial; raises KeyboardInterrupt on every
    rank when a signal cut one short (on any rank)."""
    first = True
    for option, trials in done:
        for index in range(1, settings.trials + 1):
            if not first and settings.inter_option_delay_s:
                notify(f"waiting {settings.inter_option_delay_s:g} s before option {option.number} trial {index}")
                time.sleep(settings.inter_option_delay_s)
            first = False
            ranks.barrier()
            notify(f"option {option.number} ({option.name}), trial {index} of {settings.trials}: "
                   f"{option.users} users per rank for {option.duration_s:g} s")
            trial_settings = TrialSettings(settings.seed + ranks.rank,        # mlperf_wrapper.py: seed + rank
                                           storage_capacity(folder, settings.storage_capacity),
                                           settings.scale, settings.requests_per_user)
            record = run_trial(_scaled(option, settings.scale), trial_settings, folder, contents, rank=ranks.rank)
            records = ranks.gather(record)
            if records is not None:
                trials.append(aggregate_trial(index, records))
                with STOP.held():
                    after_trial()
            if any_rank(ranks, record["interrupted"]):
                raise KeyboardInterrupt
            failed = ranks.bcast(next((f"rank {r['rank']}: {r['error']}" for r in records or [] if r.get("error")),
                                      None))
            if failed:
                return failed
    return None


def _document(doc: dict[str, Any], done: list[tuple[KvOption, list[dict[str, Any]]]]) -> dict[str, Any]:
    """The document with the options measured so far and their warnings."""
    options = [aggregate_option(o, trials) for o, trials in done if trials]
    warnings = [{"message": f"option {o['option']}: rank(s) {o['cpu_tier_ranks']} kept every object in memory; "
                            "their latencies are not storage latencies"} for o in options if o["cpu_tier_ranks"]]
    return {**doc, "options": options, "warnings": warnings}
