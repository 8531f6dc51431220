"""Command-line flags generated from option tables: the run table (python/storlab/jobs/options.py)
and every command's own table (jobs/meta_options.py, jobs/tables/). Only wiring: no row is defined here.

Flags are collected as raw text and validated by the table's parsers, so a bad value gets the
same one-line message whether it came from a flag or a job file, and names the option and what
is allowed. A flag renamed for one meaning per name keeps its old spelling for one release: it
still works and prints a one-line deprecation notice.

`--json [PATH]`: alone or '-' means standard output. Given as a separate word, the word after
`--json` is its PATH only if it passes the command's test (`json_takes`): commands with a job
file take any word but a `.toml`; commands whose `--json` used to be a plain switch (doctor,
plan, results) take only '-' or a name ending in `.json`, so `doctor --json /dev/sda` still
inspects /dev/sda. `--json=PATH` always names the path.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, Iterable, Sequence

from ..jobs.options import NUMERIC_KINDS, OPTIONS, PER_DIRECTION_KINDS, Option, alias_groups, allowed_values, parse_option

# What a bool flag may be followed by (`--invalidate off`); alone it means on.
BOOL_WORDS = ("on", "off", "true", "false", "yes", "no", "1", "0")


def takes_any_but_jobfile(word: str) -> bool:
    """`--json` of a command with a job file: any word is the path, except a TOML job file."""
    return not word.endswith(".toml")


def takes_json_name(word: str) -> bool:
    """`--json` of a command whose --json was a switch: only '-' or a .json name is the path."""
    return word == "-" or word.lower().endswith(".json")


def _help(o: Option) -> str:
    text = o.help
    if o.choices:
        text += " [" + ", ".join(o.choices) + "]"
    if o.default not in (None, (), False, (0, 0, 0)) and o.kind != "bool":
        shown = o.default
        if o.kind == "size" and isinstance(shown, int):
            from ..units import format_size

            shown = format_size(shown).replace(" ", "")
        text += f" (default: {shown}{' ' + o.unit if o.unit and o.unit not in ('%', 'bytes') else ''})"
    if o.kind in NUMERIC_KINDS or o.list_of is not None:
        text += f" (allowed: {allowed_values(o)})"
    if o.aliases:
        text += " (also: " + ", ".join("/".join(names) + f" = {value}" for value, names in alias_groups(o)) + ")"
    if o.bare:
        text += f" (alone: {o.bare})"
    if o.engine:
        text += f" [engine {o.engine} only]"
    return text.replace("%", "%%")  # argparse formats help with %


def _deprecating(base: type, command: str, flag: str, old: Sequence[str]) -> type:
    """An argparse action that also prints a one-line notice when given by an old name."""

    class Deprecating(base):
        def __call__(self, parser, namespace, values, option_string=None):
            if option_string in old:
                print(f"warning: {option_string} is deprecated for {command}; use {flag}", file=sys.stderr)
            super().__call__(parser, namespace, values, option_string)

    return Deprecating


def _repeatable(o: Option) -> bool:
    """The flag is given once per value of a list: paths, and options whose default is a list (not a
    per-direction value, which is one flag: R,W[,T])."""
    return o.kind == "paths" or (isinstance(o.default, tuple) and o.kind not in PER_DIRECTION_KINDS)


def _add_old_names(group: argparse._ArgumentGroup, o: Option, command: str) -> None:
    """The old spellings of a renamed flag: the same destination and value form, a one-line notice
    when used, hidden from --help; they never reset a value given by the new name."""
    extra: dict[str, Any] = {}
    if o.kind == "bool":
        base, extra = argparse._StoreConstAction, {"const": True}
    elif _repeatable(o):
        base = argparse._AppendAction
    else:
        base = argparse._StoreAction
        if o.bare:
            extra = {"nargs": "?", "const": o.bare}
    group.add_argument(*o.deprecated, dest=o.name, default=argparse.SUPPRESS, help=argparse.SUPPRESS,
                       action=_deprecating(base, command, o.flag, o.deprecated), **extra)


def add_table_arguments(parser: argparse.ArgumentParser, table: Iterable[Option], skip: Iterable[str] = (),
                        title: str | None = None, command: str = "", keep_given: bool = False,
                        json_takes: Callable[[str], bool] = takes_any_but_jobfile) -> None:
    """Add one argument per option of a table, grouped by category or under `title`.
    `keep_given`: the flag is also accepted on an enclosing parser (results --store), so this one
    must not reset a value given there. Options without job-file keys are plain switches (bool)."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    skipped = set(skip)
    for o in table:
        if o.name in skipped:
            continue
        if o.positional:
            nargs = None if o.positional == "1" else o.positional
            parser.add_argument(o.name, nargs=nargs, metavar=o.metavar or o.name.upper(), help=_help(o),
                                **({"default": None} if nargs in ("?", "*") else {}))
            continue
        heading = title or f"{o.category} options"
        group = groups.setdefault(heading, parser.add_argument_group(heading))
        flags = [o.flag] + ([f"-{o.short}"] if o.short else [])
        common: dict[str, Any] = {"dest": o.name, "help": _help(o)}
        common["default"] = argparse.SUPPRESS if keep_given else None
        if o.required:
            common["required"] = True
        if o.deprecated:
            _add_old_names(group, o, command)
        if o.kind == "bool" and not o.job_key:
            common.setdefault("action", "store_const")
            action = group.add_argument(*flags, const=True, **common)
        elif o.kind == "bool":
            action = group.add_argument(*flags, nargs="?", const=True, metavar="on|off", **common)
            if o.negative:
                group.add_argument(o.negative, dest=o.name, action="store_const", const=False,
                                   help=f"the opposite of {o.flag}").value_form = "bool"
        elif _repeatable(o):
            common.setdefault("action", "append")
            action = group.add_argument(*flags, metavar=o.metavar or "VALUE", **common)
        else:
            metavar = o.metavar or ("{" + ",".join(o.choices) + "}" if o.choices else o.kind.upper())
            alone = {"nargs": "?", "const": o.bare} if o.bare else {}
            action = group.add_argument(*flags, metavar=metavar, **alone, **common)
            if o.name == "json":
                action.json_takes = json_takes   # read by CommandParser.parse_known_args
        # What the flag means and takes, for the tests that one flag name has one meaning and one
        # value form: a list row's are its base's (it takes a list of what the base takes).
        base = o.list_of or o
        action.value_form = base.kind
        if o.list_of is not None:
            action.list_of = (base.name, _help(base))


def add_option_arguments(parser: argparse.ArgumentParser, skip: Iterable[str] = ()) -> None:
    """Add one flag per option of the run table, grouped by category."""
    add_table_arguments(parser, OPTIONS, skip)


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser (and, through add_subparsers, every subparser under it) that applies the
    `--json` word rule (module doc) before argparse sees the words."""

    def parse_known_args(self, args: Sequence[str] | None = None, namespace=None):
        words = list(sys.argv[1:] if args is None else args)
        for action in self._actions:
            takes = getattr(action, "json_takes", None)
            if takes is None:
                continue
            for i, word in enumerate(words[:-1]):
                if word == "--":
                    break
                following = words[i + 1]
                if word in action.option_strings and not following.startswith("-") and not takes(following):
                    words[i] = f"{word}={action.const}"
        return super().parse_known_args(words, namespace)


def _may_stand_alone(o: Option) -> bool:
    return o.kind == "bool" or o.bare is not None


def _takes(o: Option, value: str) -> bool:
    if o.kind == "bool":
        return value.lower() in BOOL_WORDS
    if o.kind == "choice":
        return value in o.choices or value.lower() in o.aliases
    return True   # a path (--json): whatever follows is the path (the word rule already ran)


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


def parse_table_args(args: argparse.Namespace, table: Iterable[Option]) -> argparse.Namespace:
    """Validate the raw values of a command-line-only table in place: each given value becomes its
    canonical value (bytes, seconds, hours ...) by the table's parser, each value not given the
    option's default. A bad value is one OptionError line naming the flag and what is allowed."""
    for o in table:
        raw = getattr(args, o.name, None)
        if raw is None or (o.positional in ("*", "+") and raw == []):
            value = list(o.default) if o.positional in ("*", "+") else o.default
        elif o.positional in ("*", "+"):
            value = [parse_option(o, item) for item in raw]
        else:
            value = parse_option(o, raw)
        setattr(args, o.name, value)
    return args
