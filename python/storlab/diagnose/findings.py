"""From probe results to the diagnose table (one row per layer and workload) and the findings.

Each row holds what was measured, what the layer below predicts (expect.py), the efficiency
(measured / predicted) and the component that limits the prediction. A finding names a loss
with its evidence and a fix. Below NOISE a difference is not reported: short probes on a loaded
or throttled device vary by a few per cent, and a finding must hold on a second run.
"""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from ..units import format_size
from .expect import Expectation, expect_members_together, expect_volume
from .probes import ProbeResult, Workload

__all__ = ["NOISE", "STRAGGLER", "CACHE_FACTOR", "Row", "Finding", "build_rows", "find"]

NOISE = 0.15            # |efficiency - 1| below this is noise, not a loss (the model's stated accuracy)
STRAGGLER = 0.75        # a member below this share of the other members' median is a straggler
CACHE_FACTOR = 2.0      # cached reads this many times faster than direct ones: figures of memory
MEMORY_FS = frozenset({"tmpfs", "ramfs"})


@dataclass
class Row:
    layer: str              # member | members | volume | fs | fs-ranks | fs-buffered | fs-cached
    subject: str
    workload: str           # Workload.name
    unit: str               # "bytes/s" | "IOPS"
    measured: float | None
    predicted: float | None
    limited_by: str | None
    rule: str | None
    run_id: str | None

    @property
    def efficiency(self) -> float | None:
        if self.measured is None or not self.predicted:
            return None
        return self.measured / self.predicted

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["efficiency"] = self.efficiency
        return d


@dataclass
class Finding:
    code: str               # layer-loss | above-prediction | straggler | shared-limit | fs-below-device |
                            # cache-effect | doctor
    severity: str           # warning (a loss above the noise) | info (an observation)
    layer: str
    message: str
    evidence: str
    fix: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "IOPS":
        return f"{value:,.0f} IOPS"
    return f"{value / 1e6:,.1f} MB/s"


def _row(layer: str, subject: str, w: Workload, r: ProbeResult | None, exp: Expectation | None,
         measured: float | None = None) -> Row:
    unit = "IOPS" if w.figure == "iops" else "bytes/s"
    value = measured if measured is not None else (r.value if r else None)
    return Row(layer, subject, w.name, unit, value, exp.value if exp else None,
               exp.limited_by if exp else None, exp.rule if exp else None,
               r.document.get("run_id") if r else None)


def _share_note(r: ProbeResult, w: Workload) -> str:
    """Members probed with their share of a striped request say so: "(256 KiB requests)"."""
    bs = r.probe.workload.bs
    return "" if bs == w.bs else f" ({bs >> 10} KiB requests, the member's share)"


def _by_member(r: ProbeResult, devpath: dict[str, str]) -> dict[str, float]:
    return {devpath.get(t, t): v for t, v in r.per_target.items()}


def build_rows(view, results: dict[tuple[str, str], ProbeResult], workloads: list[Workload],
               devpath: dict[str, str], workers: int = 1, profile: Any = None) -> tuple[list[Row], dict[str, Any]]:
    """Rows bottom-up for every workload; also the member rates per workload for the findings.

    `results` is keyed by (layer or "member:NAME", workload name); `devpath` maps a probed path to
    the member's kernel name; `profile`: the members' device profile (model.profile.DeviceProfile).
    """
    rows: list[Row] = []
    rates: dict[str, Any] = {}
    for w in workloads:
        alone = {m: results[(f"member:{m}", w.name)].value for m in view.members
                 if (f"member:{m}", w.name) in results and results[(f"member:{m}", w.name)].value is not None}
        together_r = results.get(("members", w.name))
        together = _by_member(together_r, devpath) if together_r else {}
        for m in view.members:
            r = results.get((f"member:{m}", w.name))
            if r is not None:
                rows.append(_row("member", m + _share_note(r, w), w, r, None))
        if together_r is not None and alone:
            rows.append(_row("members", f"{len(view.members)} members at once" + _share_note(together_r, w), w,
                             together_r,
                             expect_members_together(alone), measured=sum(together.values()) or together_r.value))
        base = together or alone
        below: Expectation | None = None
        top = results.get(("volume", w.name)) or results.get(("fs", w.name))
        read_by = members_read(top) if top is not None else None
        if base:
            chunk = view.striping.unit_bytes if view.striping and view.striping.unit_bytes else 64 << 10
            below = expect_volume(view.level, base, rw=w.rw, request_bytes=w.bs, qd=w.qd, figure=w.figure,
                                  workers=workers, chunk_bytes=chunk,
                                  mirror_read="per-thread" if view.fs_type == "btrfs" else "balanced",
                                  read_by=read_by, profile=profile)
        vol = results.get(("volume", w.name))
        if vol is not None:
            rows.append(_row("volume", view.volume_layer, w, vol, below))
            if vol.value:
                below = Expectation(vol.value, f"volume {view.volume}", vol.value, "the volume measured below")
        fs = results.get(("fs", w.name))
        if fs is not None:
            exp_fs = below if (below is not None and view.members) else None
            rows.append(_row("fs", f"{view.mount_point} ({view.fs_type}, direct)", w, fs, exp_fs))
            for (layer, wname), ranks in results.items():
                if layer.startswith("fs-ranks:") and wname == w.name:
                    rows.append(_row("fs-ranks", ranks.probe.subject, w, ranks, exp_fs))
            for layer, what in (("fs-buffered", "buffered, out of cache"), ("fs-cached", "buffered, in cache")):
                r = results.get((layer, w.name))
                if r is not None and fs.value:
                    ref = Expectation(fs.value, "the device (direct I/O)", fs.value, "direct I/O on the same file")
                    rows.append(_row(layer, f"{view.mount_point} ({what})", w, r,
                                     ref if layer == "fs-buffered" else None))
        rates[w.name] = {"alone": alone, "together": together, "volume": below}
    return rows, rates


READ_SHARE = 0.10      # a member that moved less than this share of the busiest member's bytes was not read


def members_read(r: ProbeResult) -> dict[str, int] | None:
    """The bytes each member read under a probe, from their kernel counters (None: not recorded);
    members below READ_SHARE of the busiest are left out (metadata, not the probe's reads)."""
    io = r.member_io or {}
    moved = {m: v.get("read_bytes", 0) for m, v in io.items()}
    top = max(moved.values(), default=0)
    if top <= 0:
        return None
    return {m: b for m, b in moved.items() if b >= READ_SHARE * top}


def _size(v: float) -> str:
    return format_size(int(v)) + "/s"


def _slow_among(member: str, rates: dict[str, float]) -> bool:
    """True when `member` is below STRAGGLER x the others' median in `rates` (or was not measured there)."""
    if member not in rates or len(rates) < 2:
        return True
    med = statistics.median(x for k, x in rates.items() if k != member)
    return med > 0 and rates[member] < STRAGGLER * med


def find(view, rows: list[Row], rates: dict[str, Any], workloads: list[Workload],
         doctor_findings: list[dict[str, Any]]) -> list[Finding]:
    """The findings, worst first: losses (warning) before observations (info)."""
    out: list[Finding] = []
    by_name = {w.name: w for w in workloads}
    # the layer that loses the most, over every row with a prediction
    lossy = [r for r in rows if r.efficiency is not None and r.efficiency < 1 - NOISE and r.layer != "fs-buffered"]
    if lossy:
        worst = min(lossy, key=lambda r: r.efficiency)
        out.append(Finding("layer-loss", "warning", worst.layer,
                           f"{worst.subject} delivers {fmt(worst.measured, worst.unit)} of a predicted "
                           f"{fmt(worst.predicted, worst.unit)} ({worst.efficiency:.0%}) for "
                           f"{by_name[worst.workload].label()}: the layer that loses the most",
                           f"predicted from the layer below: {worst.rule} (limited by {worst.limited_by})",
                           None))
    # a figure far above its prediction: the prediction is wrong, and the report says so. Only the
    # rows the stack model predicts (volume, file system); the members-at-once row is the sum of
    # the members alone, where a disturbed probe is the likelier cause, and the buffered and
    # in-cache rows measure the page cache on purpose (cache-effect findings)
    for r in rows:
        if r.efficiency is not None and r.efficiency > 1 + NOISE and r.layer in ("volume", "fs", "fs-ranks"):
            out.append(Finding("above-prediction", "warning", r.layer,
                               f"{r.subject} delivers {fmt(r.measured, r.unit)}, {r.efficiency:.0%} of the predicted "
                               f"{fmt(r.predicted, r.unit)} for {by_name[r.workload].label()}: the prediction is "
                               "wrong here, so no loss can be read from this row",
                               f"predicted from the layer below: {r.rule} (limited by {r.limited_by})",
                               "something below this layer serves it faster than the members measured alone: a "
                               "cache or read-ahead in the volume, or members measured under other conditions; "
                               "keep the JSON document and report it"))
    striped = view.level in ("raid0", "raid10", "raid5", "raid6") and len(view.members) > 1
    for w in workloads:
        alone = rates.get(w.name, {}).get("alone") or {}
        together = rates.get(w.name, {}).get("together") or {}
        unit = "IOPS" if w.figure == "iops" else "bytes/s"
        # the straggler: slow alone (so a shared limit cannot fake it) and slow again among the
        # members at once (so one disturbed probe cannot either)
        if len(alone) > 1:
            for m, v in sorted(alone.items(), key=lambda kv: kv[1]):
                others = [x for k, x in alone.items() if k != m]
                med = statistics.median(others)
                again = _slow_among(m, together)
                if med > 0 and v < STRAGGLER * med and again:
                    vol = rates[w.name].get("volume")
                    held = ""
                    if vol is not None and striped:
                        slowed = vol.held_back if vol.held_back is not None else vol.value
                        cost = 1 - slowed / vol.potential if vol.potential else 0.0
                        held = (f"; it holds the volume back: predicted at {fmt(slowed, unit)} against "
                                f"{fmt(vol.potential, unit)} with every member at the others' pace "
                                f"(it costs {cost:.0%})")
                        if view.level in ("raid1", "raid10") and w.direction == "read":
                            held += ("; a mirror is read from one copy per reader, chosen by the reading "
                                     "process on btrfs: reads that land on other copies do not wait for it")
                    out.append(Finding("straggler", "warning", "member",
                                       f"member {m} {'reads' if w.direction == 'read' else 'writes'} at "
                                       f"{fmt(v, unit)} against {fmt(med, unit)} for the others ({v / med:.0%})"
                                       f" for {w.label()}{held}",
                                       "each member measured alone: " + ", ".join(f"{k} {fmt(x, unit)}"
                                                                                   for k, x in alone.items()),
                                       f"check {m}: its health (SMART, error counters), its link and any "
                                       f"throttle on it; replace it or move it out of the stripe"))
                    break   # one straggler per workload: the slowest
        # a shared limit above the members: together less than the sum alone
        if len(alone) > 1 and together:
            s_alone, s_together = sum(alone.values()), sum(together.values())
            if s_together < (1 - NOISE) * s_alone:
                where = _shared_device(view, list(together))
                out.append(Finding("shared-limit", "warning", "members",
                                   f"a limit shared above the members caps them at {fmt(s_together, unit)} "
                                   f"together, against {fmt(s_alone, unit)} for the members alone "
                                   f"({s_together / s_alone:.0%}) for {w.label()}{where}",
                                   "members alone: " + ", ".join(f"{k} {fmt(x, unit)}" for k, x in alone.items())
                                   + "; at once: " + ", ".join(f"{k} {fmt(x, unit)}" for k, x in together.items()),
                                   "find the shared component (adapter, bus, expander, a throttle on the "
                                   "group) and spread the members over more of them"))
    # the file-system layer below its device, with the doctor's finding that explains it
    fs_rows = [r for r in rows if r.layer == "fs" and r.efficiency is not None and r.efficiency < 1 - NOISE
               and not _explained_below(r, rates)]
    explain = [d for d in doctor_findings if d.get("severity") in ("error", "warning")]
    for r in fs_rows:
        why = "; ".join(f"doctor: {d['message']}" for d in explain) or "no doctor finding explains it"
        out.append(Finding("fs-below-device", "warning", "fs",
                           f"the file system delivers {fmt(r.measured, r.unit)} of the {fmt(r.predicted, r.unit)} "
                           f"its device gives ({r.efficiency:.0%}) for {by_name[r.workload].label()}",
                           why, explain[0].get("fix") if explain else
                           "check the file system's stripe unit, read-ahead, scheduler and queue depth"))
    for d in explain:
        out.append(Finding("doctor", "warning", "fs" if "fs" in d.get("code", "") else "device",
                           f"doctor: {d['message']}", d.get("evidence", ""), d.get("fix")))
    # cache effects: observations, not losses (on a memory file system every figure is memory speed)
    if view.fs_type in MEMORY_FS:
        out.append(Finding("cache-effect", "info", "fs", f"{view.mount_point} is a memory file system "
                           f"({view.fs_type}): every figure here is memory speed, cached or not",
                           "the mount table", None))
    else:
        out += _cache_effects(rows, workloads)
    order = {"warning": 0, "info": 1}
    return sorted(out, key=lambda f: order[f.severity])


def _explained_below(r: Row, rates: dict[str, Any]) -> bool:
    """The file system's loss is the layer below's: a straggler among the copies read (a mirror
    whose reads were not recorded) predicts what was measured."""
    vol = (rates.get(r.workload) or {}).get("volume")
    held = getattr(vol, "held_back", None)
    return bool(held and r.measured and abs(r.measured / held - 1) <= NOISE)


def _shared_device(view, members: list[str]) -> str:
    """', all on loop7' when one device below holds every member (loop files on one file system,
    partitions of one disk, disks behind one SCSI host or expander); '' when none is found."""
    below = getattr(view, "shared_below", None) or {}
    found = {below.get(m) for m in members}
    if len(found) == 1 and None not in found:
        return f", all {next(iter(found))}"
    return ""


def _cache_effects(rows: list[Row], workloads: list[Workload]) -> list[Finding]:
    """In-cache or buffered reads far above direct ones: the figures of a cache, said as such."""
    out: list[Finding] = []
    for w in workloads:
        direct = next((r for r in rows if r.layer == "fs" and r.workload == w.name), None)
        cached = next((r for r in rows if r.layer == "fs-cached" and r.workload == w.name), None)
        buffered = next((r for r in rows if r.layer == "fs-buffered" and r.workload == w.name), None)
        if direct and cached and direct.measured and cached.measured and cached.measured > CACHE_FACTOR * direct.measured:
            out.append(Finding("cache-effect", "info", "fs-cached",
                               f"in-cache reads run at {fmt(cached.measured, cached.unit)}, "
                               f"{cached.measured / direct.measured:.0f}x the device's "
                               f"{fmt(direct.measured, direct.unit)}: figures taken in cache are memory speed",
                               "the same file read with direct I/O and, buffered, a second time", None))
        if direct and buffered and direct.measured and buffered.measured and \
                buffered.measured > CACHE_FACTOR * direct.measured:
            out.append(Finding("cache-effect", "info", "fs-buffered",
                               f"buffered reads after invalidation still run at {fmt(buffered.measured, buffered.unit)}, "
                               f"{buffered.measured / direct.measured:.1f}x direct I/O: read-ahead or a cache below "
                               "the page cache serves them", "direct vs buffered read of the same file", None))
    return out
