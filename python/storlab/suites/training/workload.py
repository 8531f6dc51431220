"""`storlab workload`: one training (or checkpoint) run of a workload, made into a result document,
and the search for the most accelerators that hold the AU threshold.

Order of a training run: the dataset (reused or generated, suites/training/dataset.py), MLPerf's
dataset-size rule (checked, recorded; a dataset below it is a trial: the page cache of its files
is dropped before each epoch and the result says `compliant: false`), the epochs
(suites/training/training.py), then the figures. A checkpoint workload (`[workload] train = false`)
writes `count_write` checkpoints, drops their cached pages and reads `count_read` back; a
generate-only workload (`generate = true`, train and checkpoint off) writes the dataset and
reports it (files, bytes, seconds, bandwidth).
Under mpiexec or srun every rank runs its accelerators and rank 0 writes the document; the ranks
meet through the rank interface (measure/ranks.py, made by the CLI), whose collectives end with a
RankFailure naming a rank that died instead of waiting for it: the others then keep the epochs
(or checkpoints) done and rank 0 writes them, complete: false.
"""
from __future__ import annotations

import os
import resource
import socket
import time
from typing import Any, Callable

from ...document import header, now_iso
from ...jobs.checkpoint_layout import checkpoint_sizes
from ...jobs.workload import WorkloadSpec, dataset_size_rule
from ...measure.ranks import LocalRanks, RankFailure, Ranks, any_rank
from ...signals import STOP
from . import checkpoint as ckpt
from . import dataset as ds
from . import rules
from .training import Trainer, TrainingStopped, merge

__all__ = ["run_workload", "search_accelerators", "client_memory_bytes"]


def client_memory_bytes(ranks: Ranks) -> tuple[int, int]:
    """(total memory of the client hosts, number of hosts): MemTotal of each distinct host."""
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    hosts = dict(ranks.allgather((socket.gethostname(), mem)))
    return sum(hosts.values()), len(hosts)


def _stop_vote(ranks: Ranks) -> Callable[[bool], bool]:
    """The training step barrier's vote across the ranks: whether any rank stops. A rank that
    died or failed is a vote to stop (every living rank leaves at this barrier, as on a signal);
    its RankFailure stays known to `ranks.failure` and names it in the document."""
    def vote(flag: bool) -> bool:
        try:
            return any_rank(ranks, flag)
        except RankFailure:
            return True
    return vote


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_workload(spec: WorkloadSpec, *, argv: list[str], notify: Callable[[str], None] | None = None,
                 translation: dict[str, Any] | None = None, source: str = "", ranks: Ranks | None = None,
                 drop_cache: str | None = None, log_folder: str = "") -> dict[str, Any] | None:
    """Run the workload on `ranks` (one process without); the document on rank 0 (None on the
    other ranks), with MLPerf Storage v3.0's rule checks (the results and logs kept in
    `log_folder`, by default the working folder) and the provenance record."""
    ranks = ranks or LocalRanks()
    doc = _run(spec, argv=argv, notify=notify or (lambda m: None), translation=translation, source=source,
               ranks=ranks, drop_cache=drop_cache)
    if doc is not None:
        memory = doc["environment"]["client_memory_bytes"]
        rules.judge(spec, doc, log_folder=log_folder, source=source, translation=translation,
                    client_memory_bytes=memory, hosts=doc["hosts"])
    return doc


def _run(spec: WorkloadSpec, *, argv: list[str], notify: Callable[[str], None], translation: dict[str, Any] | None,
         source: str, ranks: Ranks, drop_cache: str | None) -> dict[str, Any] | None:
    """The run itself (run_workload's document before the rule checks)."""
    doc = header("workload", argv=argv)
    doc["workload"] = {"name": spec.name, "source": source, "job": spec.to_table()}
    if spec.scaled:
        doc["workload"]["scaled"] = spec.scaled
    if translation:
        doc["translation"] = translation
    total = spec.accelerators * ranks.size
    memory, hosts = client_memory_bytes(ranks)
    doc.update({"accelerators": total, "accelerators_per_process": spec.accelerators, "ranks": ranks.size,
                "hosts": hosts, "au_threshold": spec.au_threshold, "warnings": [],
                "environment": {"host": socket.gethostname(), "cpus": os.cpu_count(), "client_memory_bytes": memory}})
    if spec.checkpoint.enabled:       # a transformer's world is checked before any byte is written
        spec.checkpoint.world(ckpt.writer_count(spec.checkpoint, total))
    if spec.mode == "checkpoint":
        if spec.generate:             # DLIO generates the dataset first when generate_data is on
            t_gen = time.monotonic()
            dataset = ds.prepare(spec.dataset, comm=ranks if ranks.size > 1 else None, notify=notify,
                                 storage=spec.storage)
            _generation(doc, dataset, dataset_size_rule(spec, total, memory), time.monotonic() - t_gen)
        return _checkpoint_run(spec, doc, ranks, notify)
    stop_flag = None
    t_gen = time.monotonic()
    dataset = ds.prepare(spec.dataset, comm=ranks if ranks.size > 1 else None, notify=notify, stop=stop_flag,
                         storage=spec.storage)
    rule = dataset_size_rule(spec, total, memory)
    if spec.mode == "generate":
        return _generate_run(spec, doc, dataset, rule, time.monotonic() - t_gen) if ranks.rank == 0 else None
    mode = drop_cache or spec.train.drop_cache
    drop = mode == "always" or (mode == "auto" and not rule["compliant"])
    drop = drop and dataset.place is None      # objects: no page cache of this host holds them
    doc["dataset"] = {**dataset.record(), "seconds_to_prepare": round(time.monotonic() - t_gen, 3),
                      "size_rule": rule, "cache_dropped_each_epoch": drop}
    doc["compliant"] = bool(rule["compliant"]) and not spec.scaled
    reasons = []
    if not rule["compliant"]:
        reasons.append(f"dataset of {spec.dataset.files} files is below MLPerf's minimum of {rule['min_files']}")
    if spec.scaled:
        reasons.append("sizes scaled down: " + ", ".join(f"{k} {v['from']} -> {v['to']}" for k, v in spec.scaled.items()))
    doc["noncompliant_reasons"] = reasons
    ck_folder = ""
    if spec.checkpoint.enabled:
        ck_folder = ckpt.check_folder(spec.checkpoint.folder, spec.storage) if ranks.rank == 0 else \
            ckpt.open_folder(spec.checkpoint.folder, spec.storage)
        ranks.barrier()
    doc["storage"] = {"dataset": doc["dataset"]["storage"]}
    if spec.checkpoint.enabled:
        doc["storage"]["checkpoint"] = _storage_of(ck_folder)
    trainer = Trainer(spec, dataset, local=spec.accelerators, rank=ranks.rank, ranks=ranks.size,
                      mpi_any=_stop_vote(ranks) if ranks.size > 1 else None, drop_cache=drop,
                      checkpoint_folder=ck_folder, notify=notify)
    cpu0, t0 = _cpu_s(), time.monotonic()
    stopped = None
    try:
        trainer.run()
    except (TrainingStopped, KeyboardInterrupt) as e:
        stopped = e
    except RankFailure as e:            # a rank died or failed: the epochs done are kept
        stopped = e
    except BaseException as e:
        if ranks.size > 1:      # this rank's own error: the others stop at their next collective
            ranks.fail(f"training: {e}")
        raise
    wall = time.monotonic() - t0
    cpu = _cpu_s() - cpu0
    # the last exchange survives a dead rank: rank 0 gets what every living rank measured
    got = ranks.gather_surviving({"fig": trainer.local_figures(), "cpu_s": cpu, "wall_s": wall})
    failure = ranks.failure
    if ranks.rank != 0:
        if isinstance(stopped, KeyboardInterrupt) and failure is None:
            raise stopped
        return None
    missing = sorted(set(range(ranks.size)) - set(got))
    if missing and failure is None:     # alive but silent past the rank timeout: its figures are not in
        failure = RankFailure(missing[0], f"rank {missing[0]} did not report its figures within the rank timeout")
    parts = [got[r] for r in sorted(got)]
    figures = merge([p["fig"] for p in parts], spec, max(p["wall_s"] for p in parts))
    cpu_total = sum(p["cpu_s"] for p in parts)
    record = spec.dataset.record_length
    doc.update({
        "au": figures["au"], "au_std": figures["au_std"], "samples_per_s": figures["samples_per_s"],
        "mib_per_s": figures["samples_per_s"] * record / 2**20,
        "mib_per_s_definition": "DLIO's 'MB/s': samples/s x record_length / 2^20 (MiB/s of the nominal record length)",
        "bytes_per_s_read": figures["bytes_read"] / wall if wall > 0 else None,
        "passed": bool(figures["epochs"]) and figures["au"] >= spec.au_threshold,
        "steps_per_epoch": trainer.steps, "epochs": figures["epochs"], "epochs_done": figures["epochs_done"],
        "per_accelerator": figures["per_accelerator"], "wait_s": figures["wait_s"],
        "timeseries": figures["timeseries"], "seconds": wall,
        "cpu": {"seconds": cpu_total, "cores": cpu_total / wall if wall > 0 else None,
                "cores_per_accelerator": cpu_total / wall / total if wall > 0 else None,
                "accelerators_per_core": total * wall / cpu_total if cpu_total > 0 else None},
    })
    if figures["checkpoints"]:
        doc["checkpoints"] = figures["checkpoints"]
    if figures["evaluation"] is not None:
        doc["evaluation"] = {**figures["evaluation"], "steps_per_evaluation": trainer.eval_steps,
                             "definition": "DLIO's eval figures: evaluation steps only, reported apart from training's "
                                           "(training AU and samples/s leave evaluation out)"}
        if not trainer.eval_steps:
            doc["warnings"].append({"code": "no_eval_steps", "message":
                                    f"evaluation is on but {spec.dataset.eval_files} eval files hold fewer samples than "
                                    f"one batch of {spec.evaluation.batch_size} per accelerator: nothing evaluated"})
    doc["warnings"] += _first_step_warnings(spec, figures["epochs"], trainer.steps)
    if stopped is not None or failure is not None or figures["epochs_done"] < spec.train.epochs:
        doc["complete"] = False
        if failure is not None:
            doc["stop_reason"], doc["error"] = "error", failure.args[0]
        elif trainer.error is not None:
            doc["stop_reason"], doc["error"] = "error", str(trainer.error)
        else:
            doc["stop_reason"] = "interrupted"
    doc["finished_at"] = now_iso()
    return doc


def _storage_of(folder: Any) -> dict[str, Any]:
    """Where checkpoints went, as the result records it (an object place's URL, endpoint, bucket
    and prefix; never a credential)."""
    return folder.record() if hasattr(folder, "record") else {"type": "local", "folder": folder}


def _generate_run(spec: WorkloadSpec, doc: dict[str, Any], dataset: ds.Dataset, rule: dict[str, Any],
                  seconds: float) -> dict[str, Any]:
    """A generate-only workload (DLIO's generate_data without train or checkpoint, `mlpstorage
    training datagen`): the dataset written (or found complete and reused), and how fast."""
    _generation(doc, dataset, rule, seconds)
    doc["compliant"] = bool(rule["compliant"]) and not spec.scaled
    doc["noncompliant_reasons"] = ([f"dataset of {spec.dataset.files} files is below MLPerf's minimum of "
                                    f"{rule['min_files']}"] if not rule["compliant"] else []) + \
        (["sizes scaled down"] if spec.scaled else [])
    doc["finished_at"] = now_iso()
    return doc


def _generation(doc: dict[str, Any], dataset: ds.Dataset, rule: dict[str, Any], seconds: float) -> None:
    """The dataset record and what this run generated of it (files, bytes, seconds, bandwidth)."""
    written = dataset.generated
    doc["dataset"] = {**dataset.record(), "seconds_to_prepare": round(seconds, 3), "size_rule": rule,
                      "cache_dropped_each_epoch": False}
    doc["storage"] = {"dataset": doc["dataset"]["storage"]}
    doc["generation"] = {
        "generated": written, "files": (dataset.spec.files + dataset.spec.eval_files) if written else 0,
        "bytes": dataset.bytes if written else 0, "seconds": round(dataset.seconds, 6) if written else 0.0,
        "bytes_per_s": dataset.bytes / dataset.seconds if written and dataset.seconds > 0 else None,
        "mib_per_s": dataset.bytes / dataset.seconds / 2**20 if written and dataset.seconds > 0 else None,
        "definition": "files and bytes this run wrote (0 when a complete dataset of the same parameters was "
                      "reused); seconds from the first file started to the manifest written"}


def _first_step_warnings(spec: WorkloadSpec, epochs: list[dict[str, Any]], steps: int) -> list[dict[str, str]]:
    """DLIO leaves the first step out of AU; when the readers can fetch most of an epoch during
    that step (few steps, deep prefetch), AU says little about the storage: say so."""
    r = spec.reader
    in_flight = max(1, r.read_threads) * max(1, -(-r.prefetch // max(1, r.read_threads)))
    worst = max((e["wait_s"]["max"] / e["seconds"] for e in epochs if e.get("wait_s") and e["seconds"] > 0), default=0.0)
    if steps <= 4 * in_flight or worst > 0.25:
        return [{"code": "au_first_step", "message":
                 f"AU leaves the first step out (as DLIO does), and with {steps} steps per epoch and up to {in_flight} "
                 f"batches read ahead, the longest wait was {100 * worst:.0f} % of an epoch: AU may hide the storage; "
                 f"use more steps per epoch (MLPerf's size rule asks for 500 x batch x accelerators samples)"}]
    return []


def _checkpoint_run(spec: WorkloadSpec, doc: dict[str, Any], ranks: Ranks, notify) -> dict[str, Any] | None:
    """Write count_write checkpoints, drop their cache, read count_read back (every writer in
    its own thread; under MPI every rank's writers)."""
    import threading

    ck = spec.checkpoint
    total = spec.accelerators * ranks.size
    writers = ckpt.writer_count(ck, total)
    mine = [g for g in range(ranks.rank * spec.accelerators, (ranks.rank + 1) * spec.accelerators) if g < writers]
    sizes = {g: ckpt.file_bytes(ck, g, writers) for g in mine}
    files = {g: len(s) for g, s in sizes.items()}
    per = ckpt.shard_bytes(ck, writers) if not ck.is_transformer else None
    folder = ckpt.check_folder(ck.folder, spec.storage) if ranks.rank == 0 else ckpt.open_folder(ck.folder, spec.storage)
    ranks.barrier()
    results: list[dict[str, Any]] = []
    tag = ranks.bcast(f"{spec.name}-{doc['run_id'][:8]}")   # one name per checkpoint, rank 0's run id

    def phase(fn, args) -> dict[str, Any] | None:
        """One write or read of every writer's shard. A signal is held (recorded, not raised):
        the shards being written finish (their files are removed after), then every rank learns
        of it at the phase's end (an allreduce of the stop flag) and all stop there, so no rank
        waits in a collective for one that left."""
        shards: list[dict[str, Any]] = []
        errors: list[BaseException] = []
        done = {g: threading.Event() for g in mine}

        def one(g: int) -> None:
            try:
                shards.append(fn(folder, *args(g)))
            except BaseException as e:
                errors.append(e)
            finally:
                done[g].set()
        ranks.barrier()
        t0 = time.monotonic()
        threads = [threading.Thread(target=one, args=(g,), daemon=True) for g in mine]
        for t in threads:
            t.start()
        for event in done.values():
            event.wait()
        stop = any_rank(ranks, STOP.requested or bool(errors))   # also the phase's end barrier
        wall = time.monotonic() - t0                        # first start to the last end
        if stop:
            if errors:
                raise errors[0]
            raise KeyboardInterrupt()
        every = ranks.gather(shards)
        return None if every is None else ({"shards": [s for part in every for s in part], "wall": wall})

    stopped = None
    with STOP.held():                  # a signal is acted on at a phase's end (see phase)
        try:
            for i in range(ck.count_write):
                out = phase(ckpt.write_shard, lambda g, i=i: (f"{tag}-{i}", g, sizes[g], ck.fsync))
                if out:
                    results.append(ckpt.summarize("write", i, out["shards"], out["wall"]))
            if ck.count_read and ck.count_write:
                for i in range(ck.count_write):
                    ckpt.drop(folder, f"{tag}-{i}", mine, files)
                for i in range(ck.count_read):
                    j = i % ck.count_write
                    out = phase(ckpt.read_shard, lambda g, j=j: (f"{tag}-{j}", g, files[g]))
                    if out:
                        results.append(ckpt.summarize("read", i, out["shards"], out["wall"]))
        except KeyboardInterrupt as e:
            stopped = e
        except RankFailure as e:       # a rank died or failed: the checkpoints done are kept
            stopped = e
        finally:
            # after a rank failed, rank 0 also removes what that rank left (each rank removes its own)
            lost = ranks.rank == 0 and ranks.failure is not None
            owners = list(range(writers)) if lost else mine
            counts = {g: len(ckpt.file_bytes(ck, g, writers)) for g in owners}
            for i in range(ck.count_write):
                ckpt.remove(folder, f"{tag}-{i}", owners, counts)
    failure = ranks.failure
    if ranks.rank != 0:
        return None
    writes = [r for r in results if r["kind"] == "write"]
    reads = [r for r in results if r["kind"] == "read"]
    per_checkpoint = sum(sum(ckpt.file_bytes(ck, g, writers)) for g in range(writers))   # every rank's files
    doc["checkpoint"] = {
        "writers": writers, "bytes_per_writer": per if per is not None else per_checkpoint // max(1, writers),
        "bytes_per_checkpoint": per * writers if per is not None else per_checkpoint,
        "ranks_total": ck.ranks_total or writers,
        "subset": bool(ck.ranks_total and writers < ck.ranks_total),
        "fraction_written": (writers / ck.ranks_total) if ck.ranks_total else 1.0,
        "write_gb_per_s": _mean([r["gb_per_s"] for r in writes]), "read_gb_per_s": _mean([r["gb_per_s"] for r in reads]),
        "write_seconds": _mean([r["seconds"] for r in writes]), "read_seconds": _mean([r["seconds"] for r in reads]),
        "storage": _storage_of(folder),
    }
    doc.setdefault("storage", {})["checkpoint"] = doc["checkpoint"]["storage"]
    if ck.is_transformer:
        layout = checkpoint_sizes(ck.transformer, ck.world(writers))
        doc["checkpoint"]["transformer"] = {**layout, "scale": ck.scale}
        doc["checkpoint"]["fraction_written"] = per_checkpoint / max(1.0, layout["total_bytes"] * ck.scale)
    doc["checkpoints"] = results
    doc["compliant"] = not spec.scaled and not doc["checkpoint"]["subset"]
    doc["noncompliant_reasons"] = (["sizes scaled down"] if spec.scaled else []) + \
        (["subset mode: fewer writers than the checkpoint's ranks"] if doc["checkpoint"]["subset"] else [])
    if failure is not None:
        doc["complete"], doc["stop_reason"], doc["error"] = False, "error", failure.args[0]
    elif stopped is not None:
        doc["complete"], doc["stop_reason"] = False, "interrupted"
    doc["finished_at"] = now_iso()
    return doc


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def search_accelerators(spec: WorkloadSpec, run: Callable[[WorkloadSpec], dict[str, Any]],
                        max_accelerators: int = 1024) -> tuple[list[dict[str, Any]], int]:
    """The most accelerators (per process) that hold the AU threshold: double until a trial
    fails, then bisect. Returns the trials (accelerators, au, samples/s, passed) and the best."""
    import dataclasses

    trials: list[dict[str, Any]] = []

    def trial(n: int) -> bool:
        s = dataclasses.replace(spec, accelerators=n)
        doc = run(s)
        ok = bool(doc.get("passed")) and doc.get("complete", True)
        trials.append({"accelerators": doc["accelerators"], "au": doc.get("au"),
                       "samples_per_s": doc.get("samples_per_s"), "passed": ok})
        if doc.get("complete") is False:
            raise KeyboardInterrupt
        return ok

    lo, hi = 0, None
    n = 1
    while n <= max_accelerators and spec.steps_per_epoch(n) >= 1:
        if trial(n):
            lo, n = n, n * 2
        else:
            hi = n
            break
    if hi is None:
        return trials, lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if trial(mid):
            lo = mid
        else:
            hi = mid
    return trials, lo
