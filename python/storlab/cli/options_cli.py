"""Command-line flags generated from the option table (python/storlab/jobs/options.py).

Flags are collected as raw text and validated by the table's parsers, so a bad value gets the
same one-line message whether it came from a flag or a job file.
"""
from __future__ import annotations

import argparse
import os
from typing import Any, Iterable

from ..jobs.options import NUMERIC_KINDS, OPTIONS, Option, allowed_values

# What a bool flag may be followed by (`--invalidate off`); alone it means on.
BOOL_WORDS = ("on", "off", "true", "false", "yes", "no", "1", "0")


def _help(o: Option) -> str:
    text = o.help
    if o.choices:
        text += " [" + ", ".join(o.choices) + "]"
    if o.default not in (None, (), False, (0, 0, 0)) and o.kind != "bool":
        text += f" (default: {o.default}{' ' + o.unit if o.unit and o.unit != '%' else ''})"
    if o.kind in NUMERIC_KINDS:
        text += f" (allowed: {allowed_values(o)})"
    if o.bare:
        text += f" (alone: {o.bare})"
    if o.engine:
        text += f" [engine {o.engine} only]"
    return text.replace("%", "%%")  # argparse formats help with %


def add_table_arguments(parser: argparse.ArgumentParser, table: Iterable[Option], skip: Iterable[str] = (),
                        title: str | None = None) -> None:
    """Add one flag per option of a table (run, meta, sweep), grouped by category or under `title`."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    skipped = set(skip)
    for o in table:
        if o.name in skipped:
            continue
        heading = title or f"{o.category} options"
        group = groups.setdefault(heading, parser.add_argument_group(heading))
        flags = [o.flag] + ([f"-{o.short}"] if o.short else [])
        if o.kind == "bool":
            group.add_argument(*flags, dest=o.name, nargs="?", const=True, default=None, metavar="on|off",
                               help=_help(o))
            if o.negative:
                group.add_argument(o.negative, dest=o.name, action="store_const", const=False,
                                   help=f"the opposite of {o.flag}")
        elif o.kind == "paths":
            group.add_argument(*flags, dest=o.name, action="append", default=None,
                               metavar=o.metavar or "VALUE", help=_help(o))
        else:
            metavar = o.metavar or ("{" + ",".join(o.choices) + "}" if o.choices else o.kind.upper())
            alone = {"nargs": "?", "const": o.bare} if o.bare else {}
            group.add_argument(*flags, dest=o.name, default=None, metavar=metavar, help=_help(o), **alone)


def add_option_arguments(parser: argparse.ArgumentParser, skip: Iterable[str] = ()) -> None:
    """Add one flag per option of the run table, grouped by category."""
    add_table_arguments(parser, OPTIONS, skip)


def _may_stand_alone(o: Option) -> bool:
    return o.kind == "bool" or o.bare is not None


def _takes(o: Option, value: str) -> bool:
    return value.lower() in BOOL_WORDS if o.kind == "bool" else value in o.choices


def reclaim_jobfile(args: argparse.Namespace, table: Iterable[Option] = OPTIONS) -> None:
    """`storlab run --verify job.toml`: a flag that may stand alone took the job file as its value
    (argparse cannot tell); give the file back to the positional and the flag its lone meaning. Only
    a value that is not one of the flag's own and names a file (or a .toml) is taken back, so a
    misspelt value still gets the option's one-line error."""
    if getattr(args, "jobfile", "") is not None:
        return
    for o in table:
        value = getattr(args, o.name, None)
        if not (_may_stand_alone(o) and isinstance(value, str)) or _takes(o, value):
            continue
        if os.path.exists(value) or value.endswith(".toml"):
            args.jobfile = value
            setattr(args, o.name, True if o.kind == "bool" else o.bare)
            return


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options set on the command line (unset ones are left to job file and defaults)."""
    reclaim_jobfile(args)
    return {o.name: getattr(args, o.name) for o in OPTIONS
            if getattr(args, o.name, None) is not None}
