"""The options of `storlab workload` (docs/options-workload.md): its own, and the run table's output
options it shares, named in `COMMON`. The workload file holds the workload's own settings
(jobs/workload.py); jobs/workload_job.py applies these flags to it."""
from __future__ import annotations

from ..options import BY_NAME, Option
from .shared import CommandTable, command_row

__all__ = ["COMMANDS", "WORKLOAD_OPTIONS", "COMMON", "DROP_CACHE", "MAX_ACCELERATORS", "MAX_EPOCHS", "MAX_RUNS"]

DROP_CACHE = {"auto": "when the dataset is below MLPerf's size rule", "always": "always", "never": "never"}
# Bounds of the counts: one process emulates each accelerator with a reader thread (MLPerf's
# largest published clients run a few hundred per host); epochs of a storage benchmark are few
MAX_ACCELERATORS = 4096
MAX_EPOCHS = 100_000
# runs of one workload in a row (MLPerf Storage v3.0 asks one warm-up and five measured: --runs 6)
MAX_RUNS = 100

WORKLOAD_OPTIONS: tuple[Option, ...] = (
    command_row("workload", "str", "a built-in workload name, a DLIO workload YAML or a storlab workload TOML",
                positional="?", metavar="NAME|FILE"),
    command_row("accelerators", "int", "emulated accelerators per process (under MPI: per rank)", minimum=1,
                maximum=MAX_ACCELERATORS, metavar="N"),
    command_row("set", "text", help="override a workload key: SECTION.KEY=VALUE (dataset.folder=/mnt/x) or DLIO's "
                "++workload.SECTION.KEY=VALUE (repeatable)", default=(), metavar="KEY=VALUE"),
    command_row("scale", "float", "scale the dataset's file count (its samples per file when one file is left) and "
                "the checkpoint size by this fraction for a trial (recorded; the result is not compliant)",
                minimum=1e-9, maximum=1.0, metavar="FRACTION"),
    command_row("epochs", "int", "epochs to run (train.epochs)", minimum=1, maximum=MAX_EPOCHS, metavar="N"),
    command_row("folder", "str", "dataset folder (dataset.folder)", metavar="DIR"),
    command_row("drop_cache", "choice", "drop the dataset's cached pages before each epoch", choices=DROP_CACHE),
    command_row("runs", "int", "run the training workload N times in a row, the first a warm-up (MLPerf Storage "
                "v3.0: --runs 6, one warm-up and five measured runs within 5 % of each other); the document is the "
                "last run's, with every run's figures and the check", minimum=1, maximum=MAX_RUNS, metavar="N"),
    command_row("search", "bool", "search the most accelerators that hold the AU threshold (MLPerf's headline "
                "figure)"),
    command_row("max_accelerators", "int", "the search's upper bound", minimum=1, maximum=MAX_ACCELERATORS,
                metavar="N"),
    BY_NAME["emit"],      # one meaning for every translator (the TOML runs with `storlab workload`)
    command_row("list", "bool", "list the built-in workloads, with the MLPerf Storage v3.0 division each belongs to "
                "(closed, open or exploration) and its accelerator"),
)
# The run table's output options the command takes as they are (and, under MPI, its rank timeout).
COMMON = ("json", "no_store", "tag", "store", "note", "quiet", "rank_timeout")

COMMANDS: tuple[CommandTable, ...] = (
    CommandTable("workload", "AI training and checkpoint I/O as MLPerf Storage / DLIO define it "
                 "(docs/workloads.md); the workload file holds the workload's own settings",
                 (*WORKLOAD_OPTIONS, *(BY_NAME[n] for n in COMMON))),
)
