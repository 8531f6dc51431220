"""The settings of `storlab sweep` itself (docs/options-sweep.md, docs/sweep.md), in the shape of
the run table's rows: what to sweep, the innermost axis, how results are judged (knee, latency
climb, early stop) and where the table goes. Every run option is also a flag of `storlab sweep`,
where a comma-separated list of values sweeps it (measure/sweep.py: build_axes)."""
from __future__ import annotations

from ..options import OPTIONS, Option
from .shared import CommandTable

__all__ = ["COMMANDS", "SWEEP_OPTIONS", "SWEEP_BY_NAME", "LATENCY_STATS", "LIST_KINDS", "sweepable", "SWEPT_BY_LIST"]

# Option kinds whose command-line value is split at commas into a list of values to sweep.
# Not split: bool (a flag without a value: sweep it with --sweep direct=false,true), paths
# (repeatable; a path may hold a comma: --sweep target=/a,/b) and str (run-level texts).
LIST_KINDS = frozenset({"size", "duration", "int", "float", "percent", "rate", "choice"})

# Options that say where results go or what is allowed, not what is measured: never swept.
NOT_SWEPT = frozenset({"allow_destroy", "fio"})
NOT_SWEPT_CATEGORIES = frozenset({"output"})


def sweepable(opt: Option) -> bool:
    return opt.name not in NOT_SWEPT and opt.category not in NOT_SWEPT_CATEGORIES


# The run options whose flag, given a comma-separated list, sweeps it: each value as `storlab run`
# takes it (the others are swept with --sweep OPTION=LIST).
SWEPT_BY_LIST: tuple[Option, ...] = tuple(o for o in OPTIONS if sweepable(o) and o.kind in LIST_KINDS)

LATENCY_STATS = {"mean": "mean completion latency", "p50": "median completion latency",
                 "p99": "99th percentile completion latency", "p999": "99.9th percentile completion latency"}

SWEEP_OPTIONS: tuple[Option, ...] = (
    Option("sweep", "paths", "sweep any run option, including on/off ones and targets: "
           "OPTION=V1,V2,... (repeatable), e.g. --sweep direct=false,true", default=(),
           category="sweep", core=False, metavar="OPTION=LIST"),
    Option("series", "str", "the innermost axis: the one each series runs along and early stop "
           "applies to (default: the swept option given last on the command line)",
           default=None, category="sweep", core=False, metavar="OPTION"),
    Option("metric", "choice", "throughput measure used for the knee, the climb and early stop",
           default="bw", category="sweep", core=False,
           choices={"bw": "bandwidth, bytes/s, reads plus writes",
                    "iops": "operations per second, reads plus writes"}),
    Option("knee", "percent", "the knee of a series is its smallest setting whose throughput "
           "reaches this share of the series' best", default=95, category="sweep", core=False,
           minimum=1, maximum=100, unit="%"),
    Option("climb", "percent", "latency climb: latency more than this many percent above the "
           "lowest latency at smaller settings (50: 1.5x) ...", default=50, category="sweep",
           core=False, minimum=1, maximum=100000, unit="%"),
    Option("climb_gain", "percent", "... while throughput rose by less than this many percent "
           "over the previous setting", default=5, category="sweep", core=False, minimum=0,
           maximum=1000, unit="%"),
    Option("climb_latency", "choice", "which latency the climb is judged on", default="mean",
           category="sweep", core=False, choices=LATENCY_STATS),
    Option("stop_flat", "percent", "early stop: end a series once throughput rose by less than "
           "this many percent over the series' best so far, --stop-count points in a row "
           "(0: run every point)", default=0, category="sweep", core=False, minimum=0,
           maximum=1000, unit="%"),
    Option("stop_count", "int", "early stop: how many flat points in a row end a series",
           default=2, category="sweep", core=False, minimum=1, maximum=1000),
    Option("phase", "str", "which phase of a multi-phase job is measured (default: the last "
           "phase that did I/O)", default=None, category="sweep", core=False, metavar="NAME"),
    Option("csv", "str", "write the sweep table as CSV to PATH ('-' for standard output)",
           default=None, category="sweep", core=False, metavar="PATH"),
)

SWEEP_BY_NAME: dict[str, Option] = {o.name: o for o in SWEEP_OPTIONS}

COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("sweep", "the sweep's own options (docs/sweep.md)", SWEEP_OPTIONS),
)
