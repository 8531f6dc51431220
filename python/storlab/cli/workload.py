"""`storlab workload NAME|FILE`: AI training and checkpoint I/O as MLPerf Storage / DLIO measure
them. NAME is a built-in (unet3d_h100, resnet50_a100, cosmoflow_h100, llama3_8b, ...; `--list`),
FILE a DLIO workload YAML (run as written, or refused in one line) or a storlab workload TOML
(what `--emit` writes)."""
from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import sys
from importlib import resources
from typing import Any

from ..errors import UserError
from ..jobs.options import BY_NAME, Option
from ..signals import STOP
from .options_cli import add_table_arguments

EXAMPLES = """examples:
  storlab workload --list
  storlab workload unet3d_h100 --set dataset.folder=/mnt/fs/unet3d --accelerators 4
  storlab workload resnet50_h100 --scale 0.01 --epochs 1 --json result.json
  storlab workload cosmoflow_h100 --search --scale 0.001
  storlab workload dlio_benchmark/configs/workload/unet3d_h100.yaml --set ++workload.dataset.format=npz
  storlab workload my.yaml --emit my.toml        # translate only; `storlab workload my.toml` runs it
  mpiexec -n 8 storlab workload llama3_8b --scale 0.01
  storlab workload storage/configs/dlio/workload/llama3_70b.yaml --set checkpoint.ranks_total=64 --emit -
  storlab workload storage/configs/dlio/workload/unet3d_datagen.yaml --folder /mnt/fs/unet3d   # generate only
"""

WORKLOAD_OPTIONS: tuple[Option, ...] = (
    Option("workload", "str", "a built-in workload name, a DLIO workload YAML or a storlab workload TOML",
           positional="?", metavar="NAME|FILE", job_key=False),
    Option("accelerators", "int", "emulated accelerators per process (under MPI: per rank)", minimum=1,
           metavar="N", job_key=False),
    Option("set", "text", help="override a workload key: SECTION.KEY=VALUE (dataset.folder=/mnt/x) or DLIO's "
           "++workload.SECTION.KEY=VALUE (repeatable)", default=(), metavar="KEY=VALUE", job_key=False),
    Option("scale", "float", "scale the dataset's file count (its samples per file when one file is left) and "
           "the checkpoint size by this fraction for a trial (recorded; the result is not compliant)",
           minimum=1e-9, maximum=1.0, metavar="FRACTION",
           job_key=False),
    Option("epochs", "int", "epochs to run (train.epochs)", minimum=1, metavar="N", job_key=False),
    Option("folder", "str", "dataset folder (dataset.folder)", metavar="DIR", job_key=False),
    Option("drop_cache", "choice", "drop the dataset's cached pages before each epoch",
           choices={"auto": "when the dataset is below MLPerf's size rule", "always": "always",
                    "never": "never"}, job_key=False),
    Option("search", "bool", "search the most accelerators that hold the AU threshold (MLPerf's headline figure)",
           job_key=False),
    Option("max_accelerators", "int", "the search's upper bound", minimum=1, metavar="N", job_key=False),
    BY_NAME["emit"],      # one meaning for every translator (the TOML runs with `storlab workload`)
    Option("list", "bool", "list the built-in workloads", job_key=False),
)
COMMON = ("json", "no_store", "tag", "store", "note", "quiet")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("workload", help="AI training / checkpoint I/O as MLPerf Storage and DLIO measure it",
                       description=__doc__.split("\n\n")[0], epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_table_arguments(p, WORKLOAD_OPTIONS, title="workload options", command="workload")
    add_table_arguments(p, [BY_NAME[n] for n in COMMON], command="workload")
    p.set_defaults(func=run)


def builtins() -> list[str]:
    folder = resources.files("storlab.jobs.dlio") / "workloads"
    return sorted(f.name[:-5] for f in folder.iterdir() if f.name.endswith(".toml"))


def _builtin_table(name: str) -> dict[str, Any]:
    from ..jobs.tomlfile import tomllib

    return tomllib.loads((resources.files("storlab.jobs.dlio") / "workloads" / f"{name}.toml").read_text())


def _set_values(sets: list[str]) -> tuple[list[str], dict[str, str]]:
    """--set items: DLIO overrides (++workload...) and storlab SECTION.KEY=VALUE pairs."""
    dlio, own = [], {}
    for item in sets or []:
        if item.startswith("++"):
            dlio.append(item)
            continue
        key, sep, value = item.partition("=")
        if not sep or "." not in key:
            raise UserError(f"--set: {item!r} is not allowed; use SECTION.KEY=VALUE (e.g. dataset.folder=/mnt/x)")
        own[key.strip()] = value.strip()
    return dlio, own


def _toml_value(text: str) -> Any:
    from ..jobs.tomlfile import tomllib

    try:
        return tomllib.loads(f"v = {text}")["v"]
    except Exception:
        return text


def _number(flag: str, value: Any, kind: type, minimum: float | None = None) -> Any:
    """A numeric flag's value, or one line naming the flag."""
    try:
        v = kind(value)
    except (TypeError, ValueError):
        raise UserError(f"--{flag}: {value!r} is not allowed; use a {'whole ' if kind is int else ''}number") from None
    if minimum is not None and v < minimum:
        raise UserError(f"--{flag}: {value!r} is not allowed; use a number >= {minimum}")
    return v


def load_spec(args: argparse.Namespace):
    """(spec, translation or None, source) from the positional and the overrides."""
    from ..jobs.workload import spec_from_table

    target = args.workload
    dlio_sets, own = _set_values(args.set)
    translation = None
    if target in builtins():
        table, source = _builtin_table(target), f"built-in {target}"
        if dlio_sets:
            raise UserError("--set: ++workload overrides apply to DLIO YAML files; use SECTION.KEY=VALUE")
    elif target.endswith((".yaml", ".yml")):
        from ..jobs.dlio.translator import translate

        if not os.path.exists(target):
            raise UserError(f"workload: {target}: not found")
        translation = translate(target, dlio_sets)
        table, source = translation.job, target
    elif target.endswith(".toml"):
        from ..jobs.tomlfile import read_toml

        table, source = read_toml(target, "workload file"), target
    else:
        raise UserError(f"workload: {target!r} is not a built-in workload or a .yaml/.toml file; "
                        f"built-ins: {', '.join(builtins())}")
    table = copy.deepcopy({k: dict(v) for k, v in table.items()})
    for key, value in own.items():
        *path, name = key.split(".")
        where = table
        for part in path:           # checkpoint.transformer.zero_stage=1: a sub-table's key
            where = where.setdefault(part, {})
            if not isinstance(where, dict):
                raise UserError(f"--set: {key} is not allowed; {part} is not a table")
        where[name] = _toml_value(value)
    if args.accelerators is not None:
        table.setdefault("workload", {})["accelerators"] = _number("accelerators", args.accelerators, int, 1)
    if args.epochs is not None:
        table.setdefault("train", {})["epochs"] = _number("epochs", args.epochs, int, 1)
    if args.folder is not None:
        table.setdefault("dataset", {})["folder"] = args.folder
    spec = spec_from_table(table, source=os.path.basename(source))
    if translation is not None and spec.checkpoint.is_transformer and \
            spec.checkpoint.ranks_total != translation.job["checkpoint"].get("ranks_total"):
        from ..jobs.dlio.translator import world_given

        world_given(translation, spec.checkpoint.ranks_total)
    if args.scale is not None:
        spec = scale(spec, _number("scale", args.scale, float))
    return spec, translation, source


def scale(spec, fraction: float):
    """Scale the dataset's file count (the samples per file when one file is left) and the
    checkpoint size down for a trial (recorded)."""
    from ..jobs.workload import WorkloadError, validate

    if not 0 < fraction <= 1:
        raise WorkloadError(f"--scale: {fraction!r} is not allowed; use a fraction in (0, 1]")
    scaled = dict(spec.scaled)
    d = dataclasses.replace(spec.dataset, files=max(1, round(spec.dataset.files * fraction)),
                            eval_files=max(1, round(spec.dataset.eval_files * fraction)) if spec.dataset.eval_files else 0)
    if spec.dataset.files * fraction < 1:       # one file already: fewer samples in it (DLRM's one huge file)
        d.samples_per_file = max(1, round(spec.dataset.samples_per_file * spec.dataset.files * fraction))
        if d.samples_per_file != spec.dataset.samples_per_file and spec.mode != "checkpoint":
            scaled["dataset.samples_per_file"] = {"from": spec.dataset.samples_per_file, "to": d.samples_per_file,
                                                  "fraction": fraction}
    c = dataclasses.replace(spec.checkpoint, model_size=round(spec.checkpoint.model_size * fraction),
                            optimizer_size=round(spec.checkpoint.optimizer_size * fraction))
    if spec.checkpoint.is_transformer:        # its sizes come from its shape: every file x the fraction
        c = dataclasses.replace(spec.checkpoint, scale=spec.checkpoint.scale * fraction)
    if d.files != spec.dataset.files and spec.mode != "checkpoint":
        scaled["dataset.files"] = {"from": spec.dataset.files, "to": d.files, "fraction": fraction}
    if spec.checkpoint.enabled:
        if c.is_transformer:
            scaled["checkpoint.scale"] = {"from": spec.checkpoint.scale, "to": c.scale, "fraction": fraction}
        else:
            scaled["checkpoint.size"] = {"from": spec.checkpoint.model_size + spec.checkpoint.optimizer_size,
                                         "to": c.model_size + c.optimizer_size, "fraction": fraction}
    return validate(dataclasses.replace(spec, dataset=d, checkpoint=c, scaled=scaled))


def run(args: argparse.Namespace) -> int:
    from .run import check_destination, emit_result, stop_exit_code

    if args.list:
        for name in builtins():
            print(name)
        return 0
    if not args.workload:
        raise UserError("workload: name a built-in workload (--list) or a DLIO .yaml / storlab .toml file")
    if args.drop_cache is not None and args.drop_cache not in ("auto", "always", "never"):
        raise UserError(f"--drop-cache: {args.drop_cache!r} is not allowed; use one of: auto, always, never")
    spec, translation, source = load_spec(args)
    if args.emit:
        from ..jobs.dlio.translator import WorkloadTranslation
        from ..jobs.translation import sha256_of

        t = translation or WorkloadTranslation("storlab", source, sha256_of(source) if os.path.isfile(source) else "",
                                               spec.to_table())
        t.job = spec.to_table()
        t.emit(args.emit)
        return 0
    settings = {k: getattr(args, k, None) for k in COMMON}
    check_destination(settings.get("json"), "json")
    from ..suites.training.workload import Mpi, run_workload, search_accelerators

    mpi = Mpi()
    argv = ["storlab", "workload", *sys.argv[2:]]

    def notify(msg: str) -> None:
        if mpi.rank == 0:
            print(f"storlab workload: {msg}", file=sys.stderr)

    record = translation.record() if translation else None
    if args.search:
        def one(s):
            d = run_workload(s, argv=argv, notify=notify, translation=record, source=source, mpi=mpi,
                             drop_cache=args.drop_cache)
            d = mpi.bcast(d)
            if mpi.rank == 0 and not settings.get("quiet"):
                print(f"  {d['accelerators']} accelerators: AU {d['au']:.3f}, {d['samples_per_s']:.1f} samples/s "
                      f"({'pass' if d['passed'] else 'fail'})", file=sys.stderr)
            return d
        try:
            trials, best = search_accelerators(
                spec, one, _number("max-accelerators", args.max_accelerators, int, 1) if args.max_accelerators else 1024)
        finally:
            STOP.saving()
        doc = run_workload(dataclasses.replace(spec, accelerators=max(1, best)), argv=argv, notify=notify,
                           translation=record, source=source, mpi=mpi, drop_cache=args.drop_cache)
        if doc is None:
            return 0
        doc["search"] = {"trials": trials, "max_accelerators": best * mpi.size,
                         "max_accelerators_per_process": best}
    else:
        try:
            doc = run_workload(spec, argv=argv, notify=notify, translation=record, source=source, mpi=mpi,
                               drop_cache=args.drop_cache)
        finally:
            STOP.saving()
        if doc is None:
            return 0
    ok = emit_result(doc, settings, "workload")
    stopped = stop_exit_code("workload", doc, {"training": "epochs done so far kept", "checkpoint":
                                               "checkpoints done so far kept", "generate": "files generated so far kept"}
                             [spec.mode])
    if stopped is not None:
        return stopped
    return 0 if ok else 1
