"""Command-line flags generated from the option table (python/storlab/options.py).

Flags are collected as raw text and validated by the table's parsers, so a bad value gets the
same one-line message whether it came from a flag or a job file.
"""
from __future__ import annotations

import argparse
from typing import Any, Iterable

from ..options import OPTIONS, Option


def _help(o: Option) -> str:
    text = o.help
    if o.choices:
        text += " [" + ", ".join(o.choices) + "]"
    if o.default not in (None, (), False) and o.kind != "bool":
        text += f" (default: {o.default}{' ' + o.unit if o.unit and o.unit != '%' else ''})"
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
            group.add_argument(*flags, dest=o.name, action="store_const", const=True, default=None, help=_help(o))
            if o.negative:
                group.add_argument(o.negative, dest=o.name, action="store_const", const=False,
                                   help=f"the opposite of {o.flag}")
        elif o.kind == "paths":
            group.add_argument(*flags, dest=o.name, action="append", default=None,
                               metavar=o.metavar or "VALUE", help=_help(o))
        else:
            metavar = o.metavar or ("{" + ",".join(o.choices) + "}" if o.choices else o.kind.upper())
            group.add_argument(*flags, dest=o.name, default=None, metavar=metavar, help=_help(o))


def add_option_arguments(parser: argparse.ArgumentParser, skip: Iterable[str] = ()) -> None:
    """Add one flag per option of the run table, grouped by category."""
    add_table_arguments(parser, OPTIONS, skip)


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options set on the command line (unset ones are left to job file and defaults)."""
    return {o.name: getattr(args, o.name) for o in OPTIONS
            if getattr(args, o.name, None) is not None}
