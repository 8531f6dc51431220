"""The workload job finished: what `storlab workload NAME|FILE` (and `plan perf --workload`) runs,
from a built-in (jobs/dlio/workloads/*.toml), a DLIO workload YAML (jobs/dlio/translator.py) or a
storlab workload TOML, with the `--set` overrides and flags applied and `--scale` for a trial.
One-line errors name the flag or key; nothing here touches the dataset or the system."""
from __future__ import annotations

import copy
import dataclasses
import os
from importlib import resources
from typing import Any, Sequence

from ..errors import UserError
from .workload import WorkloadError, WorkloadSpec, spec_from_table, validate

__all__ = ["builtins", "builtin_rows", "builtin_table", "load_workload", "max_accelerators", "runs_count", "scale"]


def builtins() -> list[str]:
    """The names of the built-in workloads (`storlab workload --list`)."""
    folder = resources.files("storlab.jobs.dlio") / "workloads"
    return sorted(f.name[:-5] for f in folder.iterdir() if f.name.endswith(".toml"))


def builtin_table(name: str) -> dict[str, Any]:
    """A built-in workload's TOML tables, as written."""
    from .tomlfile import tomllib

    return tomllib.loads((resources.files("storlab.jobs.dlio") / "workloads" / f"{name}.toml").read_text())


def builtin_rows() -> list[dict[str, str]]:
    """Each built-in with its MLPerf Storage v3.0 division and accelerator (`--list`)."""
    from .mlperf_v3 import division

    rows = []
    for name in builtins():
        accelerator = builtin_table(name).get("workload", {}).get("accelerator", "")
        rows.append({"name": name, "division": division(name, accelerator), "accelerator": accelerator})
    return rows


def _set_values(sets: Sequence[str]) -> tuple[list[str], dict[str, str]]:
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
    from .tomlfile import tomllib

    try:
        return tomllib.loads(f"v = {text}")["v"]
    except Exception:
        return text


def _flag(name: str, value: Any) -> Any:
    """A flag's value parsed by its row of the workload table (one set of parsers and bounds for
    every flag: ASCII digits, the row's range); the error names the flag, the value and the rule."""
    from .options import OptionError, parse_option
    from .tables.workload import WORKLOAD_OPTIONS

    row = next(o for o in WORKLOAD_OPTIONS if o.name == name)
    try:
        return parse_option(row, value)
    except OptionError as e:
        why = str(e).split(": ", 1)[-1]
        raise UserError(f"{row.flag}: {value!r} is not allowed; {why}") from None


def _scale_fraction(value: Any) -> float:
    """--scale as a number (digits 0-9); `scale` itself says which fractions a trial may take."""
    text = str(value).strip()
    try:
        if not text.isascii():
            raise ValueError
        return float(text)
    except ValueError:
        raise UserError(f"--scale: {value!r} is not allowed; use a number from 0 (exclusive) to 1") from None


def runs_count(value: Any) -> int:
    """--runs of `storlab workload`, a whole number from 1."""
    return _flag("runs", value)


def max_accelerators(value: Any) -> int:
    """--max-accelerators of `storlab workload --search`, a whole number from 1."""
    return _flag("max_accelerators", value)


def load_workload(target: str, sets: Sequence[str] = (), accelerators: Any = None, epochs: Any = None,
                  folder: str | None = None, fraction: Any = None):
    """(spec, translation or None, source) of a workload named by `target` with the overrides:
    `sets` (--set), `accelerators`, `epochs`, `folder` and the trial's `fraction` (--scale)."""
    dlio_sets, own = _set_values(sets)
    translation = None
    if target in builtins():
        table, source = builtin_table(target), f"built-in {target}"
        if dlio_sets:
            raise UserError("--set: ++workload overrides apply to DLIO YAML files; use SECTION.KEY=VALUE")
    elif target.endswith((".yaml", ".yml")):
        from .dlio.translator import translate

        if not os.path.exists(target):
            raise UserError(f"workload: {target}: not found")
        translation = translate(target, dlio_sets)
        table, source = translation.job, target
    elif target.endswith(".toml"):
        from .tomlfile import read_toml

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
    if accelerators is not None:
        table.setdefault("workload", {})["accelerators"] = _flag("accelerators", accelerators)
    if epochs is not None:
        table.setdefault("train", {})["epochs"] = _flag("epochs", epochs)
    if folder is not None:
        table.setdefault("dataset", {})["folder"] = folder
    spec = spec_from_table(table, source=os.path.basename(source))
    if translation is not None and spec.checkpoint.is_transformer and \
            spec.checkpoint.ranks_total != translation.job["checkpoint"].get("ranks_total"):
        from .dlio.translator import world_given

        world_given(translation, spec.checkpoint.ranks_total)
    if fraction is not None:
        spec = scale(spec, _scale_fraction(fraction))
    return spec, translation, source


def scale(spec: WorkloadSpec, fraction: float) -> WorkloadSpec:
    """Scale the dataset's file count (the samples per file when one file is left) and the
    checkpoint size down for a trial (recorded)."""
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
