"""fio's command line read as fio reads it: `--opt=val`, `-opt=val`, `-opt val` and bare boolean
flags; job options before the first `--name` are global (they apply to job files too), each
`--name` starts a job; other words are job files, read after the command-line jobs. fio's own
options (--output, --output-format, --section, --parse-only, --showcmd ...) are returned apart.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping

from ..translation import Refusal
from .options import REDACTED, SECRET_OPTIONS, shown_value, status_of
from .parse import (
    BARE_OPTIONS,
    COMMAND_LINE,
    FORMAT,
    SET_OPTIONS,
    FioJobError,
    Section,
    Setting,
    canonical_name,
    expand_value,
    read_sections,
)

__all__ = ["FioCommand", "parse_command_line", "redacted_argv", "COMMAND_OPTIONS"]

# fio's own options: name -> (takes a value, what storlab does with it)
COMMAND_OPTIONS: dict[str, tuple[bool, str]] = {
    "output": (True, "write the report to this file"),
    "output-format": (True, "normal, json, json+ (as json) or terse (version 3)"),
    "section": (True, "run only this job section of the job files (repeatable)"),
    "parse-only": (False, "check the jobs, run nothing"),
    "emit": (True, "write the translated storlab job (TOML) to FILE ('-': standard output), run nothing"),
    "showcmd": (False, "print the jobs as one fio command line, run nothing"),
    "minimal": (False, "terse output (as --output-format=terse)"),
    "eta": (True, "progress display: storlab shows a progress line on a terminal"),
    "eta-newline": (True, "progress display: ignored"),
    "eta-interval": (True, "progress display: ignored"),
    "status-interval": (True, "progress display: ignored"),
    "readonly": (False, "refuse any job that writes"),
    "warnings-fatal": (False, "ignored: storlab's warnings never stop a run"),
    "max-jobs": (True, "ignored"),
    "debug": (True, "ignored"),
    "alloc-size": (True, "ignored"),
    "aux-path": (True, "ignored"),
}


@dataclass
class FioCommand:
    sections: list[Section]          # [global] from the command line, its jobs, then job files
    source: str                      # for messages
    files: list[str] = field(default_factory=list)   # the job files given, in order
    command_line_jobs: bool = False  # settings were given as arguments (not only job files)
    output: str | None = None
    output_format: str = "normal"
    only: set[str] = field(default_factory=set)
    parse_only: bool = False
    showcmd: bool = False
    readonly: bool = False
    emit: str | None = None          # --emit FILE: write the storlab job, run nothing


def _takes_next_word(key: str, following: str | None) -> bool:
    """Whether `--key following` gives `following` to key, as fio's getopt does: never for fio's
    set-only options (`--time_based job.fio` is a flag and a job file); always for options that
    need a value (`-iodepth 16`, `-direct 1`); for the other booleans and the log prefixes, which
    may stand alone, unless the next word is an option (fio itself would take it and fail)."""
    if key in SET_OPTIONS or following is None:
        return False
    return key not in BARE_OPTIONS or not following.startswith("-")


def parse_command_line(argv: list[str], environ: Mapping[str, str] | None = None) -> FioCommand:
    """Read fio's arguments. Raises FioJobError or Refusal (one line) for what fio would not accept."""
    env = os.environ if environ is None else environ
    cmd = FioCommand(sections=[], source=COMMAND_LINE)
    glob = Section("global", 0, COMMAND_LINE)
    jobs: list[Section] = []
    files: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg in ("-", "--") or not arg.startswith("-"):
            files.append(arg)
            continue
        text = arg.lstrip("-")
        key, sep, value = text.partition("=")
        if key in COMMAND_OPTIONS:
            takes, _ = COMMAND_OPTIONS[key]
            if takes and not sep:
                if i >= len(argv):
                    raise FioJobError(f"fio command line: --{key} needs a value")
                value, i = argv[i], i + 1
            _command_option(cmd, key, value)
            continue
        if key in ("version", "help", "cmdhelp", "enghelp", "client", "server", "daemonize",
                   "trigger", "trigger-file", "trigger-timeout", "trigger-remote", "idle-prof",
                   "inflate-log", "crctest", "remote-config", "bandwidth-log"):
            raise FioJobError(f"fio command line: --{key}: not a storlab fio option (it runs jobs; "
                              f"see docs/fio.md)")
        canon = canonical_name(key)
        if status_of(canon) is None:
            raise Refusal(FORMAT, COMMAND_LINE, None, key, value, "not a fio option")
        if not sep and _takes_next_word(canon, argv[i] if i < len(argv) else None):
            value, i = argv[i], i + 1
            sep = "="
        elif not sep and canon not in BARE_OPTIONS:
            raise FioJobError(f"fio command line: {arg} needs a value")
        val = value if sep else None
        if val is not None:
            try:
                val = expand_value(val, env)
            except ValueError as e:
                raise Refusal(FORMAT, COMMAND_LINE, None, key, value, str(e)) from None
        if canon == "name":
            jobs.append(Section(val or "", i, COMMAND_LINE))
        target = jobs[-1] if jobs else glob
        target.settings.append(Setting(canon, key, val, i, None, COMMAND_LINE, value if sep else None))
    cmd.sections = ([glob] if glob.settings else []) + jobs
    cmd.command_line_jobs = bool(cmd.sections)
    cmd.files = list(files)
    sources = []
    for f in files:
        secs, source = read_sections(f, env)
        cmd.sections += secs
        sources.append(os.path.basename(source))
    if sources:
        cmd.source = ", ".join(sources)
    if not cmd.sections or all(s.name.lower() == "global" for s in cmd.sections):
        raise FioJobError("fio command line: no job: give --name=JOB with options, or a job file")
    return cmd


def _command_option(cmd: FioCommand, key: str, value: str) -> None:
    if key == "output":
        cmd.output = value
    elif key == "output-format":
        formats = set(value.split(","))
        if formats - {"normal", "json", "json+", "terse"}:
            raise FioJobError(f"fio command line: --output-format={value}: use normal, json, json+ or terse")
        if len(formats & {"json", "json+"}) + len(formats & {"terse"}) + len(formats & {"normal"}) > 1:
            raise FioJobError(f"fio command line: --output-format={value}: storlab writes one format at a time")
        cmd.output_format = "json" if formats & {"json", "json+"} else formats.pop()
    elif key == "minimal":
        cmd.output_format = "terse"
    elif key == "section":
        cmd.only.add(value)
    elif key == "parse-only":
        cmd.parse_only = True
    elif key == "showcmd":
        cmd.showcmd = True
    elif key == "readonly":
        cmd.readonly = True
    elif key == "emit":
        cmd.emit = value


def show_command(sections: list[Section]) -> str:
    """The sections as one fio command line (fio's --showcmd), credentials as <redacted>: it is
    printed, and hashed as the source of a command-line job (so the hash does not hang on a key)."""
    words = ["fio"]
    for sec in sections:
        if sec.name.lower() != "global" and not any(s.key == "name" for s in sec.settings):
            words.append(f"--name={sec.name}")
        for st in sec.settings:
            words.append(f"--{st.raw_key}" + (f"={shown_value(st.key, st.value)}" if st.value is not None else ""))
    return " ".join(words)


def redacted_argv(argv: list[str]) -> list[str]:
    """fio's arguments with the value of every credential option (http_s3_key, ...) as <redacted>,
    for a command line that is recorded or printed (`--http_s3_key=S` and `-http_s3_key S` alike)."""
    out, hide_next = [], False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        key, sep, value = arg.lstrip("-").partition("=")
        secret = arg.startswith("-") and canonical_name(key) in SECRET_OPTIONS
        if secret and sep:
            out.append(arg[: len(arg) - len(value)] + REDACTED)
        else:
            out.append(arg)
            hide_next = secret
    return out
