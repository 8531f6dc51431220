"""`storlab workload NAME|FILE`: AI training and checkpoint I/O as MLPerf Storage / DLIO measure
them. NAME is a built-in (unet3d_b200, retinanet_b200, flux_b200, dlrm_b200, unet3d_h100,
resnet50_a100, cosmoflow_h100, llama3_8b, ...; `--list` names each one's MLPerf Storage v3.0
division), FILE a DLIO workload YAML (run as written, or refused in one line) or a storlab workload
TOML (what `--emit` writes). Every run prints MLPerf Storage v3.0's rule checks; no run is an MLPerf
submission."""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from ..errors import UserError
from ..jobs.options import BY_NAME
from ..jobs.tables.workload import COMMON, WORKLOAD_OPTIONS
from ..jobs.workload_job import builtin_rows, load_workload, max_accelerators, runs_count
from ..output.emit import Emitter
from ..signals import STOP
from .options_cli import add_table_arguments

EXAMPLES = """examples:
  storlab workload --list
  storlab workload retinanet_b200 --scale 0.001 --runs 6 --json /results/retinanet.json   # v3.0's 1 + 5 runs
  storlab workload unet3d_h100 --set dataset.folder=/mnt/fs/unet3d --accelerators 4
  storlab workload resnet50_h100 --scale 0.01 --epochs 1 --json result.json
  storlab workload cosmoflow_h100 --search --scale 0.001
  storlab workload dlio_benchmark/configs/workload/unet3d_h100.yaml --set ++workload.dataset.format=npz
  storlab workload my.yaml --emit my.toml        # translate only; `storlab workload my.toml` runs it
  mpiexec -n 8 storlab workload llama3_8b --scale 0.01
  storlab workload storage/configs/dlio/workload/llama3_70b.yaml --set checkpoint.ranks_total=64 --emit -
  storlab workload storage/configs/dlio/workload/unet3d_datagen.yaml --folder /mnt/fs/unet3d   # generate only
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("workload", help="AI training / checkpoint I/O as MLPerf Storage and DLIO measure it",
                       description=__doc__.split("\n\n")[0], epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_table_arguments(p, WORKLOAD_OPTIONS, title="workload options", command="workload")
    add_table_arguments(p, [BY_NAME[n] for n in COMMON], command="workload")
    p.set_defaults(func=run)


def load_spec(args: argparse.Namespace):
    """(spec, translation or None, source) from the positional and the overrides (the workload job:
    jobs/workload_job.py)."""
    return load_workload(args.workload, args.set, accelerators=args.accelerators, epochs=args.epochs,
                         folder=args.folder, fraction=args.scale)


# What an interrupted workload keeps, by its mode, in words.
KEPT = {"training": "epochs done so far kept", "checkpoint": "checkpoints done so far kept",
        "generate": "files generated so far kept"}


def run(args: argparse.Namespace) -> int:
    if args.list:
        rows = builtin_rows()
        width = max(len(r["name"]) for r in rows)
        for r in rows:
            print(f"{r['name']:<{width}}  {r['division']:<12}  {r['accelerator'] or '-'}")
        return 0
    if not args.workload:
        raise UserError("workload: name a built-in workload (--list) or a DLIO .yaml / storlab .toml file")
    if args.drop_cache is not None and args.drop_cache not in ("auto", "always", "never"):
        raise UserError(f"--drop-cache: {args.drop_cache!r} is not allowed; use one of: auto, always, never")
    spec, translation, source = load_spec(args)
    runs = runs_count(args.runs) if args.runs is not None else 1
    if runs > 1 and (args.search or spec.mode != "training"):
        raise UserError(f"--runs: {runs} is allowed for a training workload without --search only; use 1 "
                        f"({spec.name} is a {spec.mode} workload" + (", with --search)" if args.search else ")"))
    if args.emit:
        from ..jobs.dlio.translator import WorkloadTranslation
        from ..jobs.translation import sha256_of

        t = translation or WorkloadTranslation("storlab", source, sha256_of(source) if os.path.isfile(source) else "",
                                               spec.to_table())
        t.job = spec.to_table()
        t.emit(args.emit)
        return 0
    settings = {k: getattr(args, k, None) for k in COMMON}
    emit = Emitter("workload", settings, view="workload")
    from ..jobs.options import parse_value
    from ..measure.mpi.ranks import open_ranks
    from ..suites.training.workload import run_workload, search_accelerators

    raw_timeout = settings.get("rank_timeout")
    ranks = open_ranks(BY_NAME["rank_timeout"].default if raw_timeout is None else parse_value("rank_timeout", raw_timeout),
                       "workload")
    argv = ["storlab", "workload", *sys.argv[2:]]

    def notify(msg: str) -> None:
        if ranks.rank == 0:
            print(f"storlab workload: {msg}", file=sys.stderr)

    record = translation.record() if translation else None
    log_folder = _log_folder(args)
    if args.search:
        def one(s):
            d = run_workload(s, argv=argv, notify=notify, translation=record, source=source, ranks=ranks,
                             drop_cache=args.drop_cache, log_folder=log_folder)
            ranks.check()       # a rank failed in this trial: the search ends, naming it (one line, exit 1)
            d = ranks.bcast(d)
            if ranks.rank == 0 and not settings.get("quiet"):
                print(f"  {d['accelerators']} accelerators: AU {d['au']:.3f}, {d['samples_per_s']:.1f} samples/s "
                      f"({'pass' if d['passed'] else 'fail'})", file=sys.stderr)
            return d
        try:
            trials, best = search_accelerators(
                spec, one, max_accelerators(args.max_accelerators) if args.max_accelerators else 1024)
        finally:
            STOP.saving()
        doc = run_workload(dataclasses.replace(spec, accelerators=max(1, best)), argv=argv, notify=notify,
                           translation=record, source=source, ranks=ranks, drop_cache=args.drop_cache,
                           log_folder=log_folder)
        if doc is None:     # not rank 0: rank 0 reports the run (a rank that failed sets the code)
            return 1 if ranks.failure is not None else 0
        doc["search"] = {"trials": trials, "max_accelerators": best * ranks.size,
                         "max_accelerators_per_process": best}
    else:
        from ..suites.training.rules import judge_runs, run_summary

        done: list[dict] = []
        try:
            for i in range(runs):
                if runs > 1:
                    notify(f"run {i + 1} of {runs}" + (" (warm-up)" if i == 0 else ""))
                doc = run_workload(spec, argv=argv, notify=notify, translation=record, source=source, ranks=ranks,
                                   drop_cache=args.drop_cache, log_folder=log_folder)
                if doc is not None:
                    done.append(run_summary(doc, i + 1, warmup=runs > 1 and i == 0))
                stopped = doc is not None and doc.get("complete") is False
                if runs > 1 and ranks.size > 1:      # every rank leaves the loop together
                    stopped = ranks.bcast(stopped)
                if stopped or ranks.failure is not None:
                    break
        finally:
            STOP.saving()
        if doc is None:     # not rank 0: rank 0 reports the run (a rank that failed sets the code)
            return 1 if ranks.failure is not None else 0
        if runs > 1:
            judge_runs(doc, done)
    return emit.finish(doc, kept=KEPT[spec.mode])


def _log_folder(args: argparse.Namespace) -> str:
    """Where this run's results and logs go (the rule checks want them on another file system
    than the data): the --json file's folder, else the result store's."""
    if args.json and args.json != "-":
        return os.path.dirname(os.path.abspath(args.json))
    if not args.no_store:
        from ..store.db import default_path

        return os.path.dirname(os.path.abspath(args.store or default_path()))
    return os.getcwd()
