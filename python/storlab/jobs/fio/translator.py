"""The fio translator: a fio job file (or fio's command line) as storlab's own job.

parse.py reads the sections, map.py gives them fio's semantics as storlab phases, and this module
shapes the result as every translator's (jobs/translation.py): `Translation.job` in the TOML
job-file shape (`phase` tables with `group` tables, options inline), each fio setting recorded as a
`Mapped` with its line and how it entered the job (translated, or accepted with options.py's
reason), and the notes `storlab fio` prints. What only `storlab fio` carries out (its per-job report,
unlink, the log files) stays in `FioTranslation.plan`, outside the generic job and its record.

`translate()` is the job of `storlab run --fio FILE` (and `--emit`): a fio option only `storlab fio`
carries out is refused there rather than dropped. `translate_command()` is `storlab fio`'s.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..translation import Mapped, Translation, sha256_of
from .cmdline import FioCommand, show_command
from .map import FioPlan, translate_sections
from .options import shown_value, status_of
from .parse import COMMAND_LINE, FORMAT, FioJobError, Section, parse_bool, read_source

__all__ = ["FORMAT", "FioTranslation", "translate", "translate_command", "onto_targets", "job_of"]


@dataclass
class FioTranslation(Translation):
    """A fio translation; `plan` is what `storlab fio`'s report, unlink and logs need (not recorded)."""
    plan: FioPlan | None = field(default=None, repr=False, compare=False)

    def resolve(self, cli_values=None):
        """The validated job, as every translation's; an http job's credentials and region (fio's
        http_s3_* settings) are put into this process's environment here, where the s3 engine
        reads them when the run's plan is built: they are in no job, record or message."""
        job = super().resolve(cli_values)
        if self.plan is not None and self.plan.environment:
            os.environ.update(self.plan.environment)
        return job


def translate(path_or_text: str | os.PathLike, environ: Mapping[str, str] | None = None,
              only: set[str] | None = None) -> FioTranslation:
    """A fio job file (or its text) as storlab's job. Raises `Refusal` (one line naming file, line,
    key and value) for anything storlab would not do the same way, including what only `storlab fio`
    does (unlink, write_*_log, whose result would otherwise be lost)."""
    sections, source, data = read_source(path_or_text, environ)
    tr = from_sections(sections, source, sha256_of(data), only)
    _refuse_fio_only(tr, sections)
    return tr


def translate_command(cmd: FioCommand) -> FioTranslation:
    """`storlab fio`'s arguments (command-line jobs and job files) as storlab's job. A single job
    file alone is recorded as that file (with its sha256); otherwise the source is the command line,
    hashed as the one fio command line it amounts to (fio's --showcmd)."""
    if len(cmd.files) == 1 and not cmd.command_line_jobs:
        source, sha = cmd.files[0], sha256_of(cmd.files[0])
    else:
        source, sha = "command line", sha256_of(show_command(cmd.sections).encode())
    return from_sections(cmd.sections, source, sha, cmd.only or None)


def from_sections(sections: list[Section], source: str, sha256: str,
                  only: set[str] | None = None) -> FioTranslation:
    plan = translate_sections(sections, source, only)
    kept = [sec for sec in sections if not only or sec.name in only or sec.name.lower() == "global"]
    return FioTranslation(format=FORMAT, source=source, sha256=sha256, job=job_of(plan),
                          mapped=mapped_of(kept, source) + chosen_of(plan), notes=list(plan.notes), plan=plan)


def job_of(plan: FioPlan) -> dict[str, Any]:
    """The plan as a storlab TOML job: run options at the top, `phase` tables (with a phase's own
    steady-state check) of `group` tables."""
    job: dict[str, Any] = dict(plan.run)
    phases = []
    for p in plan.phases:
        if p.get("type") == "meta":
            phases.append(dict(p))
            continue
        phases.append({"name": p["name"], **(p.get("own") or {}), "group": [
            {"name": g["name"], **{k: list(v) if isinstance(v, tuple) else v for k, v in g["options"].items()}}
            for g in p["groups"]]})
    job["phase"] = phases
    return job


def mapped_of(sections: list[Section], source: str) -> list[Mapped]:
    """Each fio setting as written (one per line, a [global] one once) and what storlab made of it:
    the option table's row (options.py). Refused settings never get here: they raise. The note
    names the section, and the file when an `include` brought the setting from another one."""
    out = []
    for sec in sections:
        for st in sec.settings:
            row = status_of(st.key)
            if row is None:
                continue
            alias = f"fio's {st.raw_key} is {st.key}" if st.raw_key.lower() != st.key else ""
            where = f"[{sec.name}]" + (f" in {os.path.basename(st.file)}" if st.file not in (source, COMMAND_LINE) else "")
            value = shown_value(st.key, st.value)     # a credential is recorded as <redacted>
            if row.status == "mapped":
                out.append(Mapped(st.raw_key, value, row.text, "translated", st.where,
                                  "; ".join(x for x in (where, alias) if x)))
            else:
                out.append(Mapped(st.raw_key, value, "", "accepted", st.where,
                                  "; ".join(x for x in (where, alias, row.text) if x)))
    return out


def chosen_of(plan: FioPlan) -> list[Mapped]:
    """What storlab chose where a job leaves a setting to fio's default and storlab's differs (the
    printed notes, docs/fio.md): an io_uring job without fixedbufs registers its buffers where the
    kernel allows, as storlab's `uring.fixed_buffers = auto`; fio would not."""
    out = []
    for job in plan.jobs:
        groups = [g for g in plan.phases[job.phase].get("groups") or [] if g["name"] in job.groups]
        if any(g["options"].get("engine") == "io_uring" and "uring.fixed_buffers" not in g["options"]
               for g in groups):
            out.append(Mapped("fixedbufs", None, "uring.fixed_buffers = auto", "chosen", None,
                              f"[{job.name}]: not set; storlab registers the I/O buffers where the kernel "
                              f"allows, fio does not (fixedbufs=0 for fio's behaviour)"))
    return out


def _refuse_fio_only(tr: FioTranslation, sections: list[Section]) -> None:
    """unlink and the log files are carried out by `storlab fio` after the run; a storlab job has
    no place for them, so `storlab run --fio` refuses them instead of dropping them."""
    fio_only = {"unlink", "write_bw_log", "write_iops_log", "write_lat_log"}
    wanted = {j.name for j in tr.plan.jobs if j.unlink} | {j.name for j in tr.plan.jobs if j.logs}
    if not wanted:
        return
    found = [st for sec in sections for st in sec.settings
             if st.key in fio_only and (st.key != "unlink" or parse_bool(st.value))]
    if not found:
        return
    more = [st.raw_key for st in found[1:] if st.raw_key != found[0].raw_key]
    raise found[0].refusal("only `storlab fio` does this after the run: run it with `storlab fio`",
                           list(dict.fromkeys(more)))


def onto_targets(job: dict[str, Any], targets: list[str]) -> dict[str, Any]:
    """The job with `--target` standing for fio's filename=: fio's numjobs clones each have a file
    of their own (job.N.0) unless a filename is given, and then all of them share it. So a job of N
    clones over T given targets runs N / T workers on each; a count that does not divide is refused
    in one line."""
    for phase in job.get("phase") or []:
        for group in phase.get("group") or []:
            files = group.get("target")
            clones = len(files) if isinstance(files, (list, tuple)) else 1
            if clones <= 1 or clones == len(targets):
                continue
            if clones % len(targets):
                raise FioJobError(f"--target: job {group.get('name')!r} runs {clones} clones (numjobs); "
                                  f"give 1 target for them to share, or {clones}, one each")
            group["threads"] = int(group.get("threads") or 1) * clones // len(targets)
            group["thread_layout"] = "shared"      # each clone covers the whole range, as in fio
    return job
