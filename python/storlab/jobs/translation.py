"""Foreign workload formats as storlab jobs: the one shape every translator has.

storlab reads four foreign formats: fio job files and command lines, DLIO workload YAML, io500
.ini files and Darshan logs. Each is a translator (jobs/<format>/: parse, map) that returns a
`Translation`: storlab's own job, exactly as a TOML job file holds it (run options at the top,
`[[phase]]` tables, `[[phase.group]]` tables), plus the record of what was mapped how. The runner,
MPI, the store and the report see only that job; nothing downstream knows the format.

Every translator has the same three faces:
- emit: `Translation.to_toml()` is the job as a storlab TOML job file (`--emit FILE`), readable
  and editable; `storlab run FILE` runs the same job (tests/jobs/test_translators.py checks it);
- refusal: a key storlab cannot honour is a `Refusal`, one line in one wording for every format,
  `FORMAT FILE:LINE: KEY = VALUE: REASON`, never ignored;
- record: `Translation.record()` is the `translation` section of the result document: the
  format, the source file and its sha256, and each source key with what it became and how.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import OutputError, UserError

if TYPE_CHECKING:   # jobs/job.py needs the engine; a translator that only emits never loads it
    from .job import Job

__all__ = ["Mapped", "Translation", "Refusal", "MAX_REFUSAL", "HOW", "TRANSLATORS", "translator",
           "sha256_of", "to_toml"]

MAX_REFUSAL = 200       # a refusal is one line of at most this many characters

# How a source key entered the job:
HOW = {
    "translated": "became the storlab option(s) named",
    "accepted": "changes nothing storlab measures (the reason is in the note)",
    "chosen": "not determined by the source: storlab's stated choice, documented",
    "derived": "computed from several source values (the note says how)",
}

# format -> module with `FORMAT` and `translate(path, ...) -> Translation`; imported when used
TRANSLATORS: dict[str, str] = {
    "fio": "storlab.jobs.fio.translator",
    "darshan": "storlab.jobs.darshan.translator",
    "io500": "storlab.jobs.io500.translator",
    "dlio": "storlab.jobs.dlio.translator",   # a workload job: run by `storlab workload FILE.toml`
}


def translator(fmt: str):
    """The translator module of a format (imported on first use)."""
    try:
        return importlib.import_module(TRANSLATORS[fmt])
    except KeyError:
        raise UserError(f"format: {fmt!r} is not allowed; use one of: {', '.join(TRANSLATORS)}") from None


class Refusal(UserError):
    """A source key storlab cannot honour: one line naming the file, line, key and value.

    `FORMAT FILE:LINE: KEY = VALUE: REASON` (the line is left out when the format has none, e.g.
    a Darshan counter); `more` names further refused keys after the first, so one line still
    lists each of them once."""

    def __init__(self, fmt: str, source: str, line: int | None, key: str, value: Any, reason: str,
                 more: list[str] | tuple[str, ...] = ()) -> None:
        self.format, self.source, self.line, self.key, self.value, self.reason = fmt, source, line, key, value, reason
        self.more = list(more)
        where = os.path.basename(source) if source not in ("", "<text>") else "<text>"
        if line:
            where += f":{line}"
        shown = _short(value)
        head = f"{fmt} {where}: {key} = {shown}: " if shown != "" else f"{fmt} {where}: {key}: "
        super().__init__(_fit(head, " ".join(str(reason).split()), self.more))


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(str(text).split())
    return text if len(text) <= 60 else text[:59] + "…"


MIN_REASON = 30   # a reason shortened to make room for the other keys keeps at least this much


def _fit(head: str, reason: str, more: list[str]) -> str:
    """One line of at most MAX_REFUSAL characters: `head` (format, where, key, value) whole, then
    the reason, then each further key once. When that is too long the reason is shortened first
    (to no less than MIN_REASON characters), so the keys stay named; only then are keys left out,
    counted as `(+N more)`."""
    also = f"; also: {', '.join(more)}" if more else ""
    if len(head) + len(reason) + len(also) <= MAX_REFUSAL:
        return head + reason + also
    room = MAX_REFUSAL - len(head) - len(also)
    if room >= min(MIN_REASON, len(reason)):
        return head + _cut(reason, room) + also
    reason = _cut(reason, MIN_REASON)
    for keep in range(len(more) - 1, 0, -1):
        cand = f"; also: {', '.join(more[:keep])} (+{len(more) - keep} more)"
        if len(head) + len(reason) + len(cand) <= MAX_REFUSAL:
            return head + reason + cand
    text = head + reason + (f" (+{len(more)} more)" if more else "")
    return text if len(text) <= MAX_REFUSAL else _cut(text, MAX_REFUSAL)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


@dataclass
class Mapped:
    """One source key and what it became."""
    key: str                 # as the format names it: fio option, YAML path, ini section.key, counter
    value: Any               # its value as written in the source
    storlab: str             # what it became, e.g. "bs = 65536"; "" when it changes nothing
    how: str = "translated"  # a key of HOW
    line: int | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.how not in HOW:
            raise ValueError(f"Mapped.how: {self.how!r} is not one of {', '.join(HOW)}")


@dataclass
class Translation:
    """A foreign source as storlab's own job (the TOML job-file shape) and the record of how."""
    format: str                          # "fio", "dlio", "io500", "darshan"
    source: str                          # the file translated ("<text>" for a command line)
    sha256: str                          # of the source bytes
    job: dict[str, Any]                  # run options at the top, "phase": [ {.., "group": [..]} ]
    mapped: list[Mapped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # one line each: differences and choices
    details: dict[str, Any] = field(default_factory=dict)  # format-specific, recorded as is

    def resolve(self, cli_values: Mapping[str, Any] | None = None) -> "Job":
        """storlab's validated job: the same resolution a TOML job file gets (flags over it).
        A value storlab's rules refuse there (a combination, e.g. rate_min above rate) is a
        `Refusal` at the source key it came from, when the record says which one did."""
        from .job import resolve_job
        from .options import OptionError

        try:
            return resolve_job(cli_values or {}, self.job, jobfile_name=self.label)
        except OptionError as e:
            refusal = self.refusal_for(str(e), given=cli_values or {})
            if refusal is None:
                raise
            raise refusal from None

    def flags_given(self, cli_values: Mapping[str, Any]) -> None:
        """Flags given beside the source win over the translation: a choice storlab made for an
        option a flag sets (a "chosen" record, a note naming "(OPTION = ...)") is no longer what
        runs, so the note goes and the record says the flag's value."""
        for option, value in cli_values.items():
            before = len(self.notes)
            self.notes = [n for n in self.notes if f"({option} = " not in n]
            for m in self.mapped:
                if m.how == "chosen" and m.storlab.startswith(f"{option} = "):
                    m.storlab = f"{option} = {value} (given as a flag)"
            if len(self.notes) != before:
                self.notes.append(f"{option} = {value} given as a flag: storlab's choice for it does not apply")

    def refusal_for(self, message: str, given: Mapping[str, Any] | None = None) -> "Refusal | None":
        """The source key behind a storlab option's one-line error (`WHERE: OPTION: REASON`): the
        last Mapped entry that became that option. None when a flag given beside the source set
        it, or no entry did."""
        from .options import BY_NAME

        parts = message.split(": ")
        for i, part in enumerate(parts[:-1]):
            if part in BY_NAME and part not in (given or {}):
                option, reason = part, ": ".join(parts[i + 1:])
                break
        else:
            return None
        became = [m for m in self.mapped if m.how != "accepted"
                  and (m.key == option or re.match(rf"{re.escape(option)}\b(?![.-])", m.storlab))]
        if not became:
            return None
        m = became[-1]
        return Refusal(self.format, self.source, m.line, m.key, m.value if m.value is not None else "",
                       reason if m.key == option else f"{option}: {reason}")

    @property
    def label(self) -> str:
        return f"{self.format} {os.path.basename(self.source)}"

    def with_options(self, values: Mapping[str, Any]) -> "Translation":
        """The translation with options given beside it (command-line flags) written into its job
        as they resolve: run-level options at the top (taken out of the phases that set their own,
        for the per-phase ones), the others into every I/O group (flags override the job file
        everywhere; a meta phase takes only its own keys). For `--emit`
        with flags, so the emitted file runs what the command would have run."""
        from dataclasses import replace

        from .options import BY_NAME

        job = {k: v for k, v in self.job.items() if k != "phase"}
        phases = [dict(p) for p in self.job.get("phase") or []]
        for key, value in values.items():
            opt = BY_NAME.get(key)
            if opt is None or not opt.job_key or value is None:
                continue
            if not opt.core:
                job[key] = value
                if opt.per_phase:   # a flag wins over a phase's own value too
                    phases = [{k: v for k, v in p.items() if k != key} for p in phases]
                continue
            for p in phases:
                if p.get("type", "io") == "io":
                    p["group"] = [{**g, key: value} for g in p.get("group") or [{}]]
        job["phase"] = phases
        return replace(self, job=job)

    def to_toml(self) -> str:
        """The job as a storlab TOML job file, with a header saying where it came from."""
        head = [f"# storlab job translated from {self.format} {os.path.basename(self.source)}",
                f"# source sha256 {self.sha256}",
                "# run it with: storlab run THIS_FILE (flags override it); the mapping is in the",
                "# result document's `translation` section"]
        head += [f"# note: {n}" for n in self.notes]
        return "\n".join(head) + "\n\n" + to_toml(self.job)

    def emit(self, path: str) -> None:
        """--emit FILE: write the TOML job (atomically; `-` is stdout; a device node or FIFO such
        as /dev/null in place: renaming a file over it would destroy it)."""
        text = self.to_toml()
        if path == "-":
            import sys

            sys.stdout.write(text)
            return
        if os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path):
            try:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
            except OSError as e:
                raise OutputError(f"--emit {path}: cannot be written: {e.strerror or e}") from None
            return
        tmp = f"{path}.tmp-{os.getpid()}"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except OSError as e:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise OutputError(f"--emit {path}: cannot be written: {e.strerror or e}") from None

    def record(self) -> dict[str, Any]:
        """The result document's `translation` section."""
        return {"format": self.format, "source": self.source, "sha256": self.sha256,
                "mapped": [asdict(m) for m in self.mapped], "notes": list(self.notes),
                **({"details": self.details} if self.details else {})}


def sha256_of(path_or_bytes: str | os.PathLike | bytes) -> str:
    """sha256 of a file (or of bytes already read)."""
    if isinstance(path_or_bytes, bytes):
        return hashlib.sha256(path_or_bytes).hexdigest()
    h = hashlib.sha256()
    with open(path_or_bytes, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# -- TOML writing ---------------------------------------------------------------------------------
def to_toml(table: Mapping[str, Any]) -> str:
    """A job dict as TOML: scalars and arrays first, then sub-tables and arrays of tables
    (`[[phase]]`, `[[phase.group]]`). None values are left out (TOML has no null)."""
    lines: list[str] = []
    _write_table(table, [], lines)
    return "\n".join(lines).strip() + "\n"


def _write_table(table: Mapping[str, Any], path: list[str], lines: list[str]) -> None:
    nested: list[tuple[str, Any]] = []
    for key, value in table.items():
        if value is None:
            continue
        if isinstance(value, Mapping) or (isinstance(value, (list, tuple)) and value
                                          and all(isinstance(v, Mapping) for v in value)):
            nested.append((key, value))
            continue
        lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in nested:
        sub = path + [key]
        name = ".".join(_key(k) for k in sub)
        if isinstance(value, Mapping):
            lines += ["", f"[{name}]"]
            _write_table(value, sub, lines)
        else:
            for item in value:
                lines += ["", f"[[{name}]]"]
                _write_table(item, sub, lines)


def _key(key: str) -> str:
    return key if key and all(c.isalnum() or c in "_-" for c in key) else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value if v is not None) + "]"
    raise TypeError(f"to_toml: cannot write {type(value).__name__} {value!r}")
