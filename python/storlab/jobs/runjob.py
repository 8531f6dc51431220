"""The job of `storlab run` and `storlab scale`: the options given as flags over a TOML job file,
over a fio job file (`--fio`, translated by jobs/fio/), or, for `storlab run` given nothing that
shapes the I/O, the default main job (jobs/mainjob.py)."""
from __future__ import annotations

from typing import Any

from ..errors import UserError
from .job import Job, load_jobfile, resolve_job

__all__ = ["job_from_options", "fio_translation"]


def job_from_options(given: dict[str, Any], jobfile_path: str | None, main_job: bool = False) -> Job:
    """The job of the options `given` (as the command line gave them) over the job file at
    `jobfile_path`. With `main_job`, no job file and no option shaping the I/O give the default
    main job instead of a single read phase."""
    from . import mainjob

    jobfile = load_jobfile(jobfile_path) if jobfile_path else None
    if main_job and mainjob.applies(given, jobfile):
        job = resolve_job(given, None, jobfile_name="main job", phases=mainjob.phases())
        job.main_job = True
        return job
    if given.get("fio"):
        tr = fio_translation(given, jobfile, jobfile_path)
        job = tr.resolve(given)
        tr.flags_given({k: v for k, v in given.items() if k not in ("fio", "target")})
        job.translation = tr
        return job
    return resolve_job(given, jobfile, jobfile_name=jobfile_path or "job file")


def fio_translation(given: dict[str, Any], jobfile: dict[str, Any] | None, jobfile_name: str | None):
    """`--fio JOB` translated (jobs/fio/translator.py), `--target` standing for fio's filename, a
    TOML job file's top-level options under it (its phases would be the fio job's: refused)."""
    from .fio import translator

    tr = translator.translate(given["fio"])
    if given.get("target"):
        translator.onto_targets(tr.job, list(given["target"]))
    if jobfile:
        if "phase" in jobfile:
            raise UserError(f"{jobfile_name}: has [[phase]] tables and --fio {given['fio']} gives the "
                            f"phases; give one of them")
        tr.job = {**jobfile, **tr.job}
    return tr
