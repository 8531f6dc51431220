"""The options of `storlab results` and its actions (docs/options-results.md); `WITH_TAG` and
`RUN_NAMES` are shared with `storlab report`."""
from __future__ import annotations

from ..options import BY_NAME, Option
from .shared import OUTPUT, CommandTable, command_row

__all__ = ["COMMANDS", "FILTERS", "WITH_TAG", "RUN_NAMES"]

STORE, JSON, NOTE = BY_NAME["store"], BY_NAME["json"], BY_NAME["note"]
# How a run is named wherever one is taken (the store resolves the selectors: store.parse_last).
RUN_NAMES = "run id, unique prefix of one, last (the most recent run), last~N (N runs before it), or JSON result file"
RUN = command_row("run", "str", RUN_NAMES, positional="1", metavar="RUN")
STORED_RUN = command_row("run", "str", "run id, unique prefix of one, last (the most recent run) or last~N (N runs "
                         "before it)", positional="1", metavar="RUN")
# Selecting stored runs: shared by `results list`, `results export` and (--with-tag) `report`.
WITH_TAG = command_row("with_tag", "str", "only runs with this tag", deprecated=("--tag",), metavar="TAG",
                       category="selection")
FILTERS: tuple[Option, ...] = (
    WITH_TAG,
    command_row("target_glob", "str", "only runs on a target path matching this (exactly, or as a glob with "
                "*, ?, [...])", deprecated=("--target",), metavar="GLOB", category="selection"),
    command_row("since", "str", "only runs started at or after this time (2026-11-21, 2026-11-21T15:00, or an "
                "age such as 2h, 7d)", metavar="TIME", category="selection"),
    command_row("until", "str", "only runs started before this time (same forms as --since)", metavar="TIME",
                category="selection"),
    command_row("kind", "str", "only documents of this kind (run, sweep, meta, scale, plan)", metavar="KIND",
                category="selection"),
    command_row("host", "str", "only runs on this host", metavar="HOST", category="selection"),
)

COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("results", "list, show, compare, export, delete, tag and import stored runs (--store is also "
                 "accepted before the action)", (STORE,)),
    CommandTable("results list", "list stored runs, oldest first", (
        STORE, *FILTERS,
        command_row("limit", "int", "only the newest N runs", minimum=1, maximum=2**31, metavar="N",
                    category="selection"),
        JSON)),
    CommandTable("results show", "show one run: job, environment, results table", (STORE, RUN, JSON)),
    CommandTable("results compare", "runs side by side with ratios to the first; flags differences that "
                 "make them incomparable", (
        STORE, command_row("runs", "str", "two or more runs (ids, prefixes, last, last~N, JSON files); the first "
                           "is the baseline", positional="+", metavar="RUN"),
        JSON)),
    CommandTable("results export", "export runs as JSON, CSV, Markdown or OpenMetrics", (
        STORE, command_row("runs", "str", "runs to export (ids, prefixes, last, last~N, JSON files; or select "
                           "them with the filters)", positional="*", default=(), metavar="RUN"),
        *FILTERS,
        command_row("format", "choice", "output format", default="json", short="f", category="output",
                    choices={"json": "the stored documents (one object, or a list)",
                             "csv": "one row per phase (and pass)", "md": "Markdown tables",
                             "openmetrics": "OpenMetrics text for Prometheus (promtool tsdb "
                                            "create-blocks-from openmetrics): bandwidth, IOPS, bytes and "
                                            "latency quantiles per phase and direction, stamped with the "
                                            "phase's end (docs/store.md)"}),
        OUTPUT)),
    CommandTable("results delete", "delete runs from the store", (
        STORE, command_row("runs", "str", "runs to delete (ids, prefixes, last, last~N)", positional="+",
                           metavar="RUN"))),
    CommandTable("results tag", "add (or remove) tags and set the note of a run", (
        STORE, STORED_RUN,
        command_row("tags", "str", "tags to add (or remove)", positional="*", default=(), metavar="TAG"),
        command_row("remove", "bool", "remove the given tags instead of adding them", default=False,
                    category="tags"),
        NOTE)),
    CommandTable("results import", "store fio JSON (--output-format=json or json+), IOR JSON (-O "
                 "summaryFormat=JSON) and mdtest text results as runs beside storlab's own, for `results "
                 "compare` and `report`; the format is told from the content, and importing a file again "
                 "replaces its run (docs/store.md, Import)", (
        STORE, command_row("files", "str", "result files to import", positional="+", metavar="FILE"),
        BY_NAME["tag"], NOTE)),
)
