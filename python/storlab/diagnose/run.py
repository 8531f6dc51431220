"""One `storlab diagnose`: discover the stack, plan the probes within the budget, measure them
bottom-up, compare each layer with the one below and build the `storlab.diagnose/1` document.

Probes run in order: each member alone, all members at once, the volume device, then the file
system (a probe file written with direct I/O, read direct, buffered out of cache and in cache).
A signal stops the probe under way (the engine keeps what it measured) and ends the diagnosis
with what was measured so far; the probe file is removed in every case.
"""
from __future__ import annotations

import math
import os
import shutil
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from ..devices.sysfs import read_mountinfo
from ..doctor.checks import run_checks
from ..doctor.inventory import Inventory, discover
from ..document import header, now_iso
from ..errors import EngineError, SpecError, StorlabError
from ..signals import STOP
from .expect import data_members
from .findings import build_rows, find
from .probes import (
    RAND_READ,
    SEQ_READ,
    SEQ_WRITE,
    Probe,
    ProbeResult,
    Workload,
    counter_delta,
    member_counters,
    member_share,
    run_probe,
    run_rank_probe,
)
from .stack import StackView, describe_stack, shared_below

__all__ = ["SCHEMA", "Settings", "diagnose", "plan_probes", "probe_time", "DEFAULT_BUDGET_S"]

SCHEMA = "storlab.diagnose/1"
DEFAULT_BUDGET_S = 180.0
PROBE_MIN_S = 2.0           # below this a throttled device has not settled (docs/diagnose.md)
PROBE_MAX_S = 10.0
PROBE_OVERHEAD_S = 0.5      # opening, invalidating and closing around each probe
PROBE_FILE_MIN = 32 << 20
PROBE_FILE_MAX = 1 << 30
CACHED_MAX = 256 << 20      # the in-cache probe reads this much at most (it must fit in memory)
MAX_NATURAL = 16 << 20


@dataclass
class Settings:
    budget_s: float = DEFAULT_BUDGET_S
    allow_destroy: tuple[str, ...] = ()
    argv: list[str] = field(default_factory=list)
    stack_file: str | None = None
    profile_file: str | None = None                   # the members' device profile (storlab plan profile)
    ranks: tuple[int, ...] = ()                       # also probe the file system at these MPI rank counts
    say: Callable[[str], None] | None = None          # progress lines (stderr in the CLI)


def natural_workload(view: StackView) -> Workload:
    """Sequential read at the stack's natural request: a full stripe when that is above 1 MiB."""
    width = view.striping.width_bytes if view.striping else 0
    if width > SEQ_READ.bs and width <= MAX_NATURAL:
        return Workload("seq-read", "read", width, SEQ_READ.qd, "bw_bytes")
    return SEQ_READ


def plan_probes(view: StackView, budget_s: float, probe_file: str | None, workloads: list[Workload],
                ranks: tuple[int, ...] = ()) -> list[Probe]:
    """Every probe, with a time that fits the budget (PROBE_MIN_S..PROBE_MAX_S each)."""
    members = [f"/dev/{m}" for m in view.members]
    share = data_members(view.level, len(members))
    probes: list[Probe] = []
    for w in workloads:
        mw = member_share(w, share)
        for m, path in zip(view.members, members):
            probes.append(Probe(f"member:{m}", m, mw, [path], 0.0, row_workload=w.name))
        if len(members) > 1:
            probes.append(Probe("members", f"{len(members)} members at once", mw, list(members), 0.0,
                                row_workload=w.name))
        if view.volume:
            probes.append(Probe("volume", view.volume_layer, w, [f"/dev/{view.volume}"], 0.0))
        if probe_file:
            probes.append(Probe("fs", view.mount_point or "", w, [probe_file], 0.0))
            for n in ranks:
                probes.append(Probe(f"fs-ranks:{n}", f"{view.mount_point} ({n} MPI ranks)", w, [probe_file], 0.0,
                                    ranks=n))
    if probe_file:
        # out of cache means each byte read once: the time ends it, or the end of the file does
        # (a time-based read would wrap around and read the pages its first pass cached)
        probes.append(Probe("fs-buffered", view.mount_point or "", workloads[0], [probe_file], 0.0, direct=False,
                            cache="out"))
        probes.append(Probe("fs-cached", view.mount_point or "", workloads[0], [probe_file], 0.0, direct=False,
                            cache="in"))
    count = len(probes) + (1 if probe_file else 0)       # + the write that lays the probe file out
    each = probe_time(count, budget_s, "probes")
    for p in probes:
        p.time_s = each
    return probes


def probe_time(count: int, budget_s: float, what: str) -> float:
    """Each of `count` measurements' equal share of the budget, PROBE_MIN_S to PROBE_MAX_S; a budget
    too short is refused with the budget it needs."""
    each = (budget_s - count * PROBE_OVERHEAD_S) / max(count, 1)
    if each < PROBE_MIN_S:
        raise SpecError(f"budget: {budget_s:g} s is too short for {count} {what} of at least {PROBE_MIN_S:g} s "
                        f"each; give --budget {math.ceil(count * (PROBE_MIN_S + PROBE_OVERHEAD_S))}s or more")
    return round(min(each, PROBE_MAX_S), 1)


def _devices_writable(view: StackView, allow_destroy: tuple[str, ...]) -> bool:
    """Writes on the device layers only when the target is a device and the user named every
    device they would write (each member and the volume) in --allow-destroy; the engine's gate
    still refuses a mounted or held one."""
    named = {os.path.realpath(d) for d in allow_destroy}
    devices = [*view.members, *([view.volume] if view.volume else [])]
    return view.target_kind == "block" and bool(devices) and all(
        os.path.realpath(f"/dev/{d}") in named for d in devices)


def _probe_file_path(view: StackView) -> str | None:
    if view.target_kind == "block":
        return None
    if view.target_kind == "file":
        return view.target         # read only: a file the user named is never written
    return os.path.join(view.target, f".storlab-diagnose-{uuid.uuid4().hex[:8]}.dat")


def _probe_file_size(view: StackView, together_rate: float | None, time_s: float) -> int:
    free = shutil.disk_usage(view.target).free
    want = int((together_rate or 0) * time_s) or PROBE_FILE_MIN
    size = max(PROBE_FILE_MIN, min(PROBE_FILE_MAX, want, free // 4))
    return size - size % (1 << 20)


def diagnose(target: str, settings: Settings) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run the whole diagnosis; returns the document (complete: false if a signal stopped it) and
    every probe's own run document, for the store."""
    say = settings.say or (lambda _s: None)
    profile = None
    if settings.profile_file:
        from ..model.profile import load_profile

        profile = load_profile(settings.profile_file)     # before any probe: a bad file costs no I/O
    try:
        inv = discover([target])
    except ValueError:          # a file system with no block device below it (tmpfs): the mounts suffice
        inv = Inventory(mounts=read_mountinfo())
    view = describe_stack(target, inv)
    view.shared_below = shared_below(view.members)
    doc = header("diagnose", schema=SCHEMA, argv=settings.argv)
    doc.update({"target": target, "stack": view.to_dict(), "budget_s": settings.budget_s,
                "stack_check": None, "layers": [], "findings": [], "probes": [], "doctor": []})
    if settings.stack_file:
        from ..doctor.stack_check import compare_with_stack
        from ..model.stack import load_stack

        stack = load_stack(settings.stack_file)
        if inv.roots:
            diffs = [d.to_dict() for d in compare_with_stack(inv, stack, inv.roots)]
        else:       # no block device below the target: nothing of the plan can be found live
            diffs = [{"item": "stack", "device": "-", "planned": stack.name or settings.stack_file,
                      "found": f"{view.fs_type or 'no'} file system without a block device below it"}]
        doc["stack_check"] = {"stack_file": settings.stack_file, "differences": diffs}
    scope = set(view.members) | {n for n in (view.volume, view.fs_device) if n}
    doctor = [f.to_dict() for f in run_checks(inv) if f.device in scope]
    doc["doctor"] = doctor
    workloads = [natural_workload(view), RAND_READ]
    if _devices_writable(view, settings.allow_destroy):
        workloads.append(SEQ_WRITE)
    probe_file = _probe_file_path(view)
    created = probe_file is not None and view.target_kind == "dir"
    probes = plan_probes(view, settings.budget_s, probe_file, workloads, settings.ranks)
    devpath = {f"/dev/{m}": m for m in view.members}
    results: dict[tuple[str, str], ProbeResult] = {}
    probe_docs: list[dict[str, Any]] = []
    try:
        for i, p in enumerate(probes):
            if p.layer == "fs" and created and not os.path.exists(probe_file):
                together = results.get(("members", workloads[0].name)) or results.get(
                    (f"member:{view.members[0]}", workloads[0].name) if view.members else ("", ""))
                size = _probe_file_size(view, together.value if together else None, p.time_s)
                lay = Probe("fs-write", view.mount_point or "", SEQ_WRITE, [probe_file], 0.0, size=size)
                say(f"diagnose: laying out the probe file ({size >> 20} MiB, direct writes)")
                r = _run(lay, settings, doc, results, probe_docs)
                if r is None:
                    break
            say(f"diagnose: probe {i + 1}/{len(probes)}: {p.subject}, {p.workload.label()}"
                f"{'' if p.direct else ', buffered' + (' in cache' if p.cache == 'in' else ' out of cache')}, "
                f"{p.time_s:g} s")
            if p.cache == "in":
                p.size = min(CACHED_MAX, os.path.getsize(probe_file)) if probe_file else None
            elif p.cache == "out":
                p.size = os.path.getsize(probe_file) if probe_file else None
            if _run(p, settings, doc, results, probe_docs) is None:
                break
    except KeyboardInterrupt:       # a signal between probes (within one, the engine keeps what it measured)
        doc.update(complete=False, stop_reason="interrupted", signal=STOP.signal_name)
    finally:
        if created and probe_file and os.path.exists(probe_file):
            with STOP.held():
                os.unlink(probe_file)
    rows, rates = build_rows(view, results, workloads, devpath, profile=profile)
    doc["layers"] = [r.to_dict() for r in rows]
    doc["findings"] = [f.to_dict() for f in find(view, rows, rates, workloads, doctor)]
    doc["workloads"] = [{"name": w.name, "label": w.label(), "rw": w.rw, "bs": w.bs, "qd": w.qd,
                         "figure": w.figure} for w in workloads]
    doc["finished_at"] = now_iso()
    return doc, probe_docs


def _run(p: Probe, settings: Settings, doc: dict[str, Any], results: dict, probe_docs: list
         ) -> ProbeResult | None:
    """Run a probe and record it; None when a signal or an error stopped it (the document says which)."""
    if STOP.requested:
        doc.update(complete=False, stop_reason="interrupted", signal=STOP.signal_name)
        return None
    p.allow_destroy = settings.allow_destroy
    members = doc["stack"]["members"]
    before = member_counters(members)
    try:
        r = run_rank_probe(p, settings.argv) if p.ranks else run_probe(p, settings.argv)
    except StorlabError as e:      # the target failed under the probe (an I/O error): a failure, exit 1
        # an engine that cannot start names itself; an I/O error names the probe it hit
        doc.update(complete=False, stop_reason="error", error=str(e) if isinstance(e, EngineError) else
                   f"{p.subject}: {e}")
        return None
    r.member_io = counter_delta(before, member_counters(members)) or None
    doc["probes"].append(r.to_dict())
    probe_docs.append(r.document)
    if r.document.get("stop_reason") == "interrupted":
        doc.update(complete=False, stop_reason="interrupted", signal=r.document.get("signal") or STOP.signal_name)
        return None
    if r.document.get("stop_reason") == "error":
        doc.update(complete=False, stop_reason="error", error=f"{p.subject}: {r.document.get('error')}")
        return None
    if p.layer != "fs-write":
        results[p.key] = r
    return r
