"""The preconditioning phases of a job (`precondition_method`; the method is jobs/precondition.py): one
group per target the job's I/O phases name, in each phase, reaching the target as the job does.
measure/runner.py asks for them once the targets are named and runs them before the job."""
from __future__ import annotations

from typing import Any, Callable, Mapping

from .job import GroupDef, Job, PhaseDef, validate_phase
from .options import BY_NAME, OPTIONS, OptionError
from .precondition import DEFAULT_SS, PREFIX, RANDOM_BS, SEQUENTIAL_BS, STEADY_KEYS, parse, sprandom_plan

__all__ = ["phases"]

# Options of the job's group that say where and how a target is reached: preconditioning keeps
# them (with every option of the engine, uring.* ...) and sets the rest itself.
_CARRIED = ("size", "offset", "preallocate", "participants", "participant_base", "qd", "engine", "direct",
            "cpus", "cpus_policy", "open_sync", "stall_after", "stall_abort", "interval", "seed")


def _group(base: Mapping[str, Any], job_group: Mapping[str, Any], target: str, **shape: Any) -> dict[str, Any]:
    """One target's values in a preconditioning phase: the defaults, where and how the job reaches
    the target, then the phase's own shape (rw, bs, range ...)."""
    values = {**base, **{k: job_group[k] for k in _CARRIED}, "target": (target,), "random_map": True}
    values.update({k: v for k, v in job_group.items() if BY_NAME[k].engine})
    if job_group["files"] == "per_thread":   # each thread its own file: precondition every one
        values.update(files="per_thread", threads=job_group["threads"])
    values.update(shape)
    return values


def _targets(job: Job) -> dict[str, dict[str, Any]]:
    """Each target the job's I/O phases name, with the values of the first group naming it."""
    found: dict[str, dict[str, Any]] = {}
    for phase in job.phases:
        for g in phase.groups:
            for t in g.values["target"]:
                found.setdefault(t, g.values)
    return found


def phases(job: Job, range_bytes: Callable[[str, Mapping[str, Any]], int]) -> list[PhaseDef]:
    """The preconditioning phases of a job whose targets are named (the scratch file included):
    one group per target in each. `range_bytes(target, values)` gives the bytes of a target's I/O
    range (sprandom's regions need it); it is asked only in sprandom mode."""
    mode, op, regions = parse(job.run.get("precondition_method") or "off")
    if mode == "off":
        return []
    targets = _targets(job)
    if not targets:
        raise OptionError("precondition_method: the job has no I/O phase whose targets it could precondition")
    if mode == "sequential":
        steps = [(f"{PREFIX}: sequential fill {n}/2", {t: dict(rw="write", bs=SEQUENTIAL_BS) for t in targets})
                 for n in (1, 2)]
    else:
        steps = _sprandom_steps(targets, op, regions, range_bytes)
    limit = job.run.get("precondition_time")
    steps.append((f"{PREFIX}: steady state", {t: dict(rw="randwrite", bs=RANDOM_BS, time=limit) for t in targets}))
    steady = _steady_check(job.run, limit)
    base = {o.name: o.default for o in OPTIONS if o.core}
    out: list[PhaseDef] = []
    for name, shapes in steps:
        if not shapes:
            continue   # a region with nothing to invalidate (the newest ones)
        groups = [GroupDef(name="" if len(shapes) == 1 else f"t{i + 1}",
                           values=_group(base, targets[t], t, **shape)) for i, (t, shape) in enumerate(shapes.items())]
        # only the last phase judges steady state: a fill stopped early would leave blocks unwritten
        phase = PhaseDef(name=name, groups=groups, own=steady if name.endswith("steady state") else {"ss": None})
        validate_phase(phase, name)
        out.append(phase)
    return out


def _sprandom_steps(targets: Mapping[str, Mapping[str, Any]], op: float, regions: int,
                    range_bytes: Callable[[str, Mapping[str, Any]], int]) -> list[tuple[str, dict[str, dict]]]:
    """(phase name, {target: its group's shape}) of each region's writes, then its rewrites
    (jobs/precondition.py:sprandom_plan, over each target's range)."""
    plans = {t: sprandom_plan(range_bytes(t, g), op, regions) for t, g in targets.items()}
    steps: list[tuple[str, dict[str, dict]]] = []
    for k in range(regions):
        writes, rewrites = {}, {}
        for t, plan in plans.items():
            first, blocks, invalidated = plan[k]
            if blocks:
                writes[t] = dict(rw="randwrite", bs=RANDOM_BS, offset=targets[t]["offset"] + first * RANDOM_BS,
                                 size=blocks * RANDOM_BS)
            if invalidated:
                rewrites[t] = {**writes[t], "io_size": invalidated * RANDOM_BS}
        steps.append((f"{PREFIX}: sprandom region {k + 1}/{regions}", writes))
        steps.append((f"{PREFIX}: sprandom invalidate {k + 1}/{regions}", rewrites))
    return steps


def _steady_check(run: Mapping[str, Any], limit: float) -> dict[str, Any]:
    """The steady-state phase's check: the run's when it sets `ss`, else SNIA's; refused when the
    limit is too short for its window."""
    steady = {k: run[k] for k in STEADY_KEYS} if run.get("ss") else dict(DEFAULT_SS)
    needed = steady["ss_ramp"] + max(steady["ss_dur"], 2 * steady["ss_interval"])
    if limit < needed:
        raise OptionError(f"precondition_time: {limit:g} s is shorter than the steady-state check needs "
                          f"(ss_ramp {steady['ss_ramp']:g} s + ss_dur {steady['ss_dur']:g} s); allowed: at least "
                          f"{needed:g} s")
    return steady
