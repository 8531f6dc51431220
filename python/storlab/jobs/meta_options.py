"""The option table of the metadata benchmark (`storlab meta`, and `type = "meta"` phases of job
files): its options, how a value is parsed, and how the command line, a job file and the defaults
combine. Parsing validates only; measure/meta.py runs the benchmark with the resolved values.
The target is a directory or an s3://BUCKET/PREFIX (then the phases are object requests: the
default phases leave rename out and add list, and rename is refused in one line).
"""
from __future__ import annotations

from typing import Any, Mapping

from .options import BY_NAME, Option, OptionError, parse_option

__all__ = [
    "META_OPTIONS", "META_BY_NAME", "FILE_PHASES", "PHASE_ORDER", "MIX_PHASE", "LIST_PHASE", "S3_PHASES",
    "S3_SHARED_OPTIONS", "NO_RENAME", "is_s3_target", "MIX_OPERATIONS", "MIX_OPTIONS",
    "SHARED_RUN_OPTIONS", "MPI_RUN_OPTIONS", "META_RUN_LEVEL", "parse_mix", "parse_meta_value",
    "resolve_meta_options", "render_reference",
]

# The engine's phases that work on files, in their only possible order; `mkdir` always runs first.
FILE_PHASES = ("create", "stat", "read", "rename", "remove", "rmdir")
# The operation-mix phase (measure/opmix.py, run in Python): after create, stat and read (it
# works on the files create made) and before rename (which changes their names).
MIX_PHASE = "mix"
# Paged ListObjectsV2 over each thread's names: a phase of s3:// targets only, after read.
LIST_PHASE = "list"
PHASE_ORDER = (*FILE_PHASES[:3], LIST_PHASE, MIX_PHASE, *FILE_PHASES[3:])
# The default phases of an s3:// target: no rename (S3 has none), the list added; mkdir and
# rmdir run and say in their result that they were skipped (no directories on S3).
S3_PHASES = ("create", "stat", "read", LIST_PHASE, "remove", "rmdir")
# Options of `storlab run` for s3 targets that mean the same here; shared, not copied.
S3_SHARED_OPTIONS = ("endpoint", "insecure", "virtual_host")
NO_RENAME = ("rename: S3 has no rename (only a copy and a delete, two operations of other kinds); "
             "leave rename out of --phases for an s3:// target")
# The operations a mix draws from, with what one of them is (docs/meta.md).
MIX_OPERATIONS = ("read", "write", "stat", "delete", "list")
# Options of the mix phase: read in Python, not part of the engine's spec.
MIX_OPTIONS = ("mix", "mix_ops", "mix_time")
# Options of `storlab run` that mean the same here (output and store); shared, not copied.
SHARED_RUN_OPTIONS = ("json", "quiet", "store", "no_store", "tag", "note")
# Options of `storlab run` that only an MPI launch of `storlab meta` reads (command line only).
MPI_RUN_OPTIONS = ("rank_timeout",)


def is_s3_target(target: Any) -> bool:
    """Whether a meta target names the objects under an S3 prefix rather than a directory."""
    return isinstance(target, str) and target.startswith("s3://")


def _choices(**values: str) -> dict[str, str]:
    return dict(values)


def parse_mix(raw: Any, label: str = "mix") -> dict[str, float]:
    """`read=40,write=30,...` (or a TOML table) -> {operation: percent}, every operation of
    MIX_OPERATIONS present (0 when not named); the percentages must add up to 100."""
    allowed = ",".join(MIX_OPERATIONS)
    form = f"use OP=PERCENT pairs of {allowed} adding up to 100, e.g. read=40,write=30,stat=20,delete=5,list=5"
    if isinstance(raw, Mapping):
        pairs = list(raw.items())
    elif isinstance(raw, str) and raw.strip():
        pairs = []
        for part in raw.split(","):
            op, eq, pct = part.partition("=")
            if not eq:
                raise OptionError(f"{label}: {part.strip()!r} is not OP=PERCENT; {form}")
            pairs.append((op.strip(), pct.strip()))
    else:
        raise OptionError(f"{label}: {raw!r} is no mix; {form}")
    mix = dict.fromkeys(MIX_OPERATIONS, 0.0)
    seen: set[str] = set()
    for op, pct in pairs:
        if op not in mix:
            raise OptionError(f"{label}: unknown operation {op!r}; {form}")
        if op in seen:
            raise OptionError(f"{label}: {op} given twice; {form}")
        seen.add(op)
        try:
            value = float(pct)
        except (TypeError, ValueError):
            value = float("nan")
        if not 0 <= value <= 100:   # also refuses nan
            raise OptionError(f"{label}: {op}={pct} is not a percentage from 0 to 100; {form}")
        mix[op] = value
    if abs(sum(mix.values()) - 100) > 1e-9:
        raise OptionError(f"{label}: the percentages add up to {sum(mix.values()):g}, not 100; {form}")
    return mix


META_OPTIONS: tuple[Option, ...] = (
    Option("target", "str", "directory to work in: a new folder storlab-meta-<id> is made in it "
           "and removed afterwards (default: the current directory); or s3://BUCKET/PREFIX: the "
           "names become keys under PREFIX/storlab-meta-<id>/, each operation one request "
           "(docs/object.md)", default=None, category="target", metavar="DIR|URL"),
    Option("threads", "int", "worker threads", default=1, minimum=1, maximum=4096, fio_name="numjobs"),
    Option("files", "int", "files each thread creates (mdtest -n)", default=10_000, minimum=1,
           maximum=2**32 - 1, unit="files", fio_name="nrfiles", cli_name="files_per_thread",
           deprecated=("--files",)),
    Option("file_size", "size", "bytes written to each file at create and read back by read "
           "(mdtest -w/-e)", default=0, minimum=0, unit="bytes", fio_name="filesize"),
    Option("dir", "choice", "where the threads' files live", default="unique",
           choices=_choices(unique="one directory tree per thread (mdtest -u)",
                            shared="one tree for all threads: they contend for the same "
                                   "directories (METABENCH's shared-directory case)")),
    Option("depth", "int", "levels of subdirectories below each tree root; files go into the "
           "deepest level, round-robin (mdtest -z)", default=0, minimum=0, maximum=64),
    Option("fanout", "int", "subdirectories per directory when depth > 0 (mdtest -b)",
           default=10, minimum=1, maximum=1_000_000),
    Option("order", "choice", "order in which stat and read visit the files", default="sequential",
           choices=_choices(sequential="creation order",
                            random="a random permutation per thread (mdtest -R)")),
    Option("fsync_files", "bool", "fsync each file after writing it, inside the create latency "
           "(mdtest -y)", default=False),
    Option("fsync_dirs", "bool", "fsync every directory a thread changed at the end of mkdir, "
           "create, rename, remove and rmdir, inside the phase's time", default=False),
    Option("stonewall", "duration", "time limit of each file phase; later phases work on exactly "
           "the files each thread finished (mdtest -W)", default=None, category="timing",
           unit="s", minimum=0.001),
    Option("stonewall_create_only", "bool", "the stonewall limits create only, as mdtest -W does; "
           "stat, read, rename and remove then work on every file created", default=False,
           category="timing"),
    Option("phases", "str", "file phases to run, comma-separated, in this order: "
           + ",".join(PHASE_ORDER) + " (the tree is always made first; mix only with --mix; list "
           "only on s3:// targets, rename never there; default: all but list and mix, or all but "
           "list,mix,remove,rmdir with --keep; with --mix: create,mix,remove,rmdir, or create,mix "
           "with --keep; on s3://: " + ",".join(S3_PHASES) + ", or "
           + ",".join(S3_PHASES[:4]) + " with --keep)", default=None, metavar="LIST"),
    Option("keep", "bool", "leave the files and directories in place, also after a failure or "
           "Ctrl-C (the working folder is printed)", default=False, category="safety"),
    Option("seed", "int", "seed of the random stat/read order and of the mix's draws", default=0x5EED, minimum=0,
           maximum=2**63 - 1),
    Option("verify_read", "bool", "read compares every byte with what create wrote; a difference "
           "fails the read (mdtest -X)", default=False),
    Option("name_prefix", "str", "prefix of every file and per-thread tree name; {rank} becomes "
           "the MPI rank (0 without MPI)", default=None, category="target", metavar="TEXT"),
    Option("list_page", "int", "keys asked for per ListObjectsV2 request in the list phase (s3:// "
           "targets; S3 returns at most 1000)", default=1000, minimum=1, maximum=1000, unit="keys"),
    Option("mix", "str", "run a mix phase after create (and stat, read): each thread draws its operations on its own "
           "files at these percentages (" + ",".join(MIX_OPERATIONS) + "; adding up to 100), a delete "
           "re-creates its file at once", default=None, metavar="OP=PCT,...", core=False,
           parse=lambda raw, label: parse_mix(raw, label)),
    Option("mix_ops", "int", "operations each thread makes in the mix phase (default: 10000 "
           "unless --mix-time is given)", default=None, minimum=1, maximum=2**63 - 1, unit="ops",
           core=False),
    Option("mix_time", "duration", "time limit of the mix phase (with --mix-ops: whichever comes "
           "first)", default=None, category="timing", unit="s", minimum=0.001, core=False),
    *(BY_NAME[name] for name in S3_SHARED_OPTIONS),
    *(BY_NAME[name] for name in SHARED_RUN_OPTIONS),
)

META_BY_NAME: dict[str, Option] = {o.name: o for o in META_OPTIONS}
# Options that are not part of the engine's spec (the output ones and the mix phase's).
META_RUN_LEVEL = frozenset(SHARED_RUN_OPTIONS + MIX_OPTIONS)


def parse_meta_value(name: str, raw: Any) -> Any:
    """Validate one meta option value (from the CLI or a job file) into canonical units."""
    opt = META_BY_NAME.get(name)
    if opt is None:
        import difflib

        close = difflib.get_close_matches(name, list(META_BY_NAME), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise OptionError(f"unknown option {name!r}{hint}; see `storlab meta --help` for the list")
    if raw is None:
        return None
    if name == "name_prefix" and raw == "":
        return None  # no prefix, as by default
    if name == "phases" and isinstance(raw, (list, tuple)):  # a TOML list
        if not all(isinstance(p, str) for p in raw):
            raise OptionError(f"phases: expected names of phases, got {list(raw)!r}")
        return ",".join(raw)
    return parse_option(opt, raw)


def _parse_phases(raw: Any, keep: bool, mix: bool, s3: bool = False) -> tuple[str, ...]:
    if raw is None:
        if mix:     # the mix is what is measured: create makes its files, remove and rmdir end it
            return ("create", MIX_PHASE) if keep else ("create", MIX_PHASE, "remove", "rmdir")
        if s3:
            return S3_PHASES[:4] if keep else S3_PHASES
        return FILE_PHASES[:4] if keep else FILE_PHASES
    items = [p.strip() for p in (raw.split(",") if isinstance(raw, str) else raw)]
    unknown = [p for p in items if p not in PHASE_ORDER]
    if unknown:
        raise OptionError(f"phases: {', '.join(map(repr, unknown))} unknown; use some of "
                          f"{','.join(PHASE_ORDER)}")
    if s3 and "rename" in items:
        raise OptionError(NO_RENAME)
    if "create" not in items:
        raise OptionError("phases: must include create (the files the other phases work on)")
    if len(set(items)) != len(items) or items != sorted(items, key=PHASE_ORDER.index):
        # the order of the phases this target has (a directory: no list; S3: no rename)
        order = [p for p in PHASE_ORDER if p not in (("rename",) if s3 else (LIST_PHASE,))]
        raise OptionError(f"phases: each at most once, in the order {','.join(order)}")
    if "rmdir" in items and "remove" not in items:
        raise OptionError("phases: rmdir needs remove before it (directories must be empty)")
    if not s3 and LIST_PHASE in items:
        raise OptionError("phases: list is a phase of s3:// targets (paged ListObjectsV2); leave "
                          "it out for a directory")
    if (MIX_PHASE in items) != mix:
        raise OptionError("phases: mix runs exactly when --mix is given: name it in --phases with "
                          "--mix, and not without")
    return tuple(items)


def resolve_meta_options(cli: Mapping[str, Any] | None = None,
                         jobfile: Mapping[str, Any] | None = None,
                         jobfile_name: str = "job file") -> dict[str, Any]:
    """Every meta option in canonical units: defaults < job file < command line (raw values are
    validated). `phases` becomes a tuple of file-phase names."""
    values = {o.name: o.default for o in META_OPTIONS}
    for where, section in ((jobfile_name, jobfile or {}), ("command line", cli or {})):
        for key, raw in section.items():
            try:
                parsed = parse_meta_value(key, raw)
            except OptionError as e:
                raise OptionError(f"{where}: {e}") from None
            if parsed is not None:
                values[key] = parsed
    mix = values["mix"] is not None
    if not mix and (values["mix_ops"] is not None or values["mix_time"] is not None):
        raise OptionError("mix_ops, mix_time: they limit the mix phase; give --mix too")
    s3 = is_s3_target(values["target"])
    if not s3:
        given = [name for name in S3_SHARED_OPTIONS if values[name] not in (None, False)]
        if given:
            raise OptionError(f"{', '.join(given)}: for an s3://BUCKET/PREFIX target; the target is a directory")
    values["phases"] = _parse_phases(values["phases"], bool(values["keep"]), mix, s3)
    return values


def render_reference() -> str:
    """The options section of docs/meta.md, generated from the table (a test keeps them equal)."""
    lines = ["| option | job-file key | type | default | help |", "|---|---|---|---|---|"]
    for o in META_OPTIONS:
        flag = o.flag + (f" / {o.negative}" if o.negative else "")
        default = "—" if o.default in (None, ()) else repr(o.default)
        text = o.help
        if o.choices:
            text += "<br>" + "<br>".join(f"`{k}`: {v}" for k, v in o.choices.items())
        unit = f" ({o.unit})" if o.unit else ""
        lines.append(f"| `{flag}` | `{o.name}` | {o.kind}{unit} | {default} | {text} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_reference())
