"""`storlab plan` results as text: geometry, reliability, performance and its curve, a workload's
forecast (accelerators fed, evaluation, checkpoint; a KV-cache option's figures), a recommendation, a device profile. Each
function takes the model's result objects and returns lines; output/plan_document.py gives the
same results as a document."""
from __future__ import annotations

import math
from typing import Any, Sequence

from ..model.advice import PlanWarning
from ..model.kvcache import KvForecast
from ..model.quantities import HOURS_PER_YEAR
from ..model.training import AcceleratorPoint, CheckpointForecast, EvaluationForecast, TrainingLoad
from ..model.training_load import WorkloadForecast
from ..units import format_si_bytes, format_size

__all__ = ["warning_lines", "geometry_lines", "reliability_lines", "perf_lines", "curve_lines", "cluster_lines", "workload_lines",
           "kvcache_lines", "recommend_lines", "profile_point_line", "profile_lines", "mb", "pct", "ms"]


def warning_lines(warnings: Sequence[PlanWarning]) -> list[str]:
    return ["warnings:", *(f"  {w.code}: {w.message}" for w in warnings)] if warnings else []


def mb(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e6:,.0f} MB/s"


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def ms(seconds: float) -> str:
    if seconds >= 1.0:
        return f"{seconds:.3g} s"
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} us"


def _years(hours: float) -> str:
    years = hours / HOURS_PER_YEAR
    return f"{years:,.4g} years" if years < 1e6 else f"{years:.3e} years"


def _mib(bytes_per_s: float) -> str:
    return "unbounded" if not math.isfinite(bytes_per_s) else f"{bytes_per_s / 2**20:,.1f} MiB/s"


def _duration(seconds: float) -> str:
    """A phase's length: ms or s as ms() gives them, whole seconds from 100 s on."""
    if not math.isfinite(seconds):
        return "unbounded"
    return f"{seconds:,.0f} s" if seconds >= 100 else ms(seconds)


# --- geometry, reliability, perf -----------------------------------------------------------------

def geometry_lines(stack: Any, report: Any, warnings: Sequence[PlanWarning]) -> list[str]:
    raid = stack.raid
    out = [f"{stack.name}: {raid.layout.text} x {raid.count}, chunk {format_size(raid.chunk_bytes)}",
           f"  {report.groups} group(s) of {raid.layout.span} drives ({report.data_drives_per_group} data + "
           f"{raid.layout.span - report.data_drives_per_group} redundancy), {report.drives} drives, "
           f"{report.devices} RAID device(s), aggregate {stack.volume.aggregate}",
           f"  stripe width: group {format_size(report.group_stripe_width_bytes)}, device "
           f"{format_size(report.device_full_stripe_bytes)}, volume full stripe {format_size(report.full_stripe_bytes)}",
           f"  file system stripe: su {format_size(report.fs_stripe_unit_bytes)}, sw {report.fs_stripe_width_units}",
           "  recommended request sizes (full-stripe multiples): "
           + ", ".join(format_size(r) for r in report.recommended_request_bytes),
           f"  capacity: raw {format_si_bytes(report.capacity.raw_bytes)}, usable "
           f"{format_si_bytes(report.capacity.usable_bytes)}, efficiency {pct(report.capacity.efficiency)}"]
    a = report.alignment
    if a is not None:
        out += [f"alignment of {format_size(a.request_bytes)} writes, pattern {a.pattern} "
                f"({a.offsets_evaluated} offsets{', sampled' if a.sampled else ''}):",
                f"  stripe writes: full {pct(a.full_stripe_fraction)}, partial {pct(a.partial_stripe_fraction)}"
                f" (read-modify-write {pct(a.rmw_fraction)}, reconstruct-write {pct(a.rcw_fraction)})",
                f"  requests entirely full-stripe: {pct(a.requests_all_full_fraction)}",
                f"  per write: {a.stripe_writes_per_request:.2f} stripes, {a.disk_reads_per_write:.2f} drive reads + "
                f"{a.disk_writes_per_write:.2f} drive writes; write penalty {a.write_penalty:.2f} "
                f"(drive ops per data chunk), {a.write_amplification:.2f} drive bytes per host byte",
                f"  per read: {a.disk_reads_per_read:.2f} drive reads"]
    if report.flags:
        out.append("flags:")
        out += [f"  {flag.code}: {flag.message}" for flag in report.flags]
    flagged = {(flag.code, flag.message) for flag in report.flags}
    return out + warning_lines([w for w in warnings if (w.code, w.message) not in flagged])


def reliability_lines(stack: Any, report: Any, warnings: Sequence[PlanWarning],
                      assumed_rebuild_bytes: float | None = None) -> list[str]:
    """assumed_rebuild_bytes: the default rebuild rate the MTTR comes from, when none was given."""
    g = report.group
    assumed = "" if assumed_rebuild_bytes is None else f" (default rebuild rate {assumed_rebuild_bytes / 1e6:g} MB/s)"
    out = [f"{stack.name}: {report.layout} x {stack.raid.count}; MTBF {report.mtbf_h:,.0f} h, "
           f"MTTR {report.mttr_h:.2f} h{assumed}, BER {report.ber_per_bit:g}",
           f"  reliability group: {g.drives} drives tolerating {g.fault_tolerance} failure(s); "
           f"{report.groups_in_series} group(s) in series",
           f"  critical rebuild reads {g.critical_rebuild_bits / 8 / 1e12:,.2f} TB; P(unrecoverable read error) "
           f"{pct(g.critical_ure_probability)}",
           f"  MTTDL per group: {_years(g.mttdl_h)} (exact chain), {_years(g.mttdl_approx_h)} (closed-form approx), "
           f"{_years(g.mttdl_no_ure_h)} ignoring URE",
           f"  MTTDL of the volume: {_years(report.mttdl_h)} ({_years(report.mttdl_no_ure_h)} ignoring URE)",
           f"  P(data loss) in 1 year: {report.annual_loss_probability:.4g}; in {report.period_h / HOURS_PER_YEAR:g} "
           f"year(s): {report.period_loss_probability:.4g}",
           f"  data at risk per loss: {format_si_bytes(report.bytes_at_risk_per_loss)}; expected loss "
           f"{format_si_bytes(report.expected_bytes_lost_per_year)} per year",
           "  limits: exponential, independent failures; field data show 2 to 1,500x more double failures "
           "(Elerath & Pecht 2009)"]
    return out + warning_lines(warnings)


def _rate_cells(p: Any) -> str:
    """IOPS, MB/s and mean latency of one predicted point, as the curve tables print them."""
    return f"{p.iops:>12,.0f} {p.bw_bytes / 1e6:>10,.1f} {ms(p.latency_mean_s):>9}"


def curve_lines(points: Sequence[Any]) -> list[str]:
    out = [f"curve ({len(points)} points; mean and p99 latency; limited by: the component with the least headroom):",
           f"  {'rw':<9} {'request':>9} {'threads':>7} {'qd':>5} {'IOPS':>12} {'MB/s':>10} {'mean':>9} "
           f"{'p99':>9}  limited by"]
    for p in points:
        w = p.workload
        out.append(f"  {w.rw:<9} {format_size(w.request_bytes):>9} {w.threads:>7} {w.qd:>5} {_rate_cells(p)} "
                   f"{ms(p.latency_tail_s):>9}  {p.limiting}")
    # what the points assume (a cache's hits, the controller a RAID implies), each once
    out += [f"  assumption: {a}" for a in dict.fromkeys(a for p in points for a in p.assumptions)]
    return out


def cluster_lines(name: str, points: Sequence[Any]) -> list[str]:
    """plan perf on a cluster file: each point, its limiting component, and the single stream."""
    out = [f"{name}: clients over their links to the servers (threads are per client; limited by: the "
           "component with the least headroom)",
           f"  {'rw':<6} {'request':>9} {'clients':>7} {'threads':>7} {'qd':>4} {'IOPS':>12} {'MB/s':>10} "
           f"{'mean':>9}  limited by"]
    out += [f"  {p.load.rw:<6} {format_size(p.load.request_bytes):>9} {p.clients:>7} {p.load.threads:>7} "
            f"{p.load.qd:>4} {_rate_cells(p)}  {p.limiting}" for p in points]
    seen = set()
    for p in points:
        key = (p.load.rw, p.load.request_bytes)
        if key not in seen:
            seen.add(key)
            out.append(f"  single stream, {p.load.rw} {format_size(p.load.request_bytes)}: "
                       f"{p.single_stream_bw_bytes / 1e6:,.1f} MB/s (one thread over one link; {p.single_stream_limiting})")
    if points:
        out.append("  components at the last point (capacity in requests/s, headroom):")
        out += [f"    {c.name:<28} {c.capacity_iops:>12,.0f}  {max(0.0, c.headroom_fraction):6.1%}  {c.why}"
                for c in points[-1].components]
    return out


def perf_lines(stack: Any, report: Any, points: Sequence[Any], warnings: Sequence[PlanWarning]) -> list[str]:
    out = [f"{stack.name}: {report.layout} x {stack.raid.count}; sequential requests {format_size(report.seq_request_bytes)}, "
           f"random {format_size(report.random_request_bytes)}; sharing {report.mode}"]
    for metric in report.metrics.values():
        fmt = mb if metric.unit == "bytes/s" else (lambda v: f"{v:,.0f} IOPS")
        out.append(f"  {metric.metric:<13} {fmt(metric.value):>16}   drives alone {fmt(metric.drives_value)}; "
                   f"limited by {metric.limiting}")
        for note in (metric.drives_note, metric.note):
            if note:
                out.append(f"      {note}")
        for c in metric.components:
            if c.capacity is None:
                continue
            head = f"{fmt(c.headroom)} headroom ({pct(c.headroom_fraction)})" if not c.binding else "at its limit"
            out.append(f"      {c.name:<18} x{c.instances:<4} load {fmt(c.load)} of {fmt(c.capacity)}: {head}")
    if points:
        out += curve_lines(points)
    return out + warning_lines(warnings)


# --- a training or checkpoint workload (perf --workload) -----------------------------------------

def _point_line(point: AcceleratorPoint, load: TrainingLoad) -> str:
    return (f"  at {point.accelerators}: AU {point.au:.3f} ({'pass' if point.passed else 'fail'}), "
            f"{point.samples_per_s:,.1f} samples/s; demand {_mib(point.demand_bytes_per_s)}, delivered "
            f"{_mib(point.delivered_bytes_per_s)} at {point.concurrency} outstanding reads; storage limited by "
            f"{point.limiting}")


def _evaluation_lines(fc: EvaluationForecast) -> list[str]:
    p, ld = fc.point, fc.load
    if p.steps < 1:
        return [f"  at {p.accelerators}: nothing evaluated; {fc.note}"]
    out = [f"  at {p.accelerators}: eval AU {p.au:.3f} ({'pass' if p.passed else 'fail'}), {p.samples_per_s:,.1f} "
           f"samples/s, {p.samples_per_s * ld.record_bytes / 2**20:,.2f} MiB/s; demand {_mib(p.demand_bytes_per_s)}, "
           f"delivered {_mib(p.delivered_bytes_per_s)} at {p.concurrency} outstanding reads; storage limited by "
           f"{p.limiting}",
           f"    {_duration(p.epoch_s)} per evaluation ({p.steps} steps); {fc.evaluations} evaluation(s) per run: "
           f"{_duration(fc.seconds_per_run)}"]
    if fc.note:
        out.append(f"    note: {fc.note}")
    return out


def _checkpoint_lines(fc: CheckpointForecast) -> list[str]:
    ld = fc.load
    out = [f"  checkpoint: {format_si_bytes(ld.bytes_total)} by {ld.writers} writer(s) "
           f"({format_si_bytes(ld.bytes_per_writer)} each, {ld.files_per_writer} file(s))"]
    for ph in (fc.write, fc.read):
        out.append(f"    {ph.kind:<5} {ph.seconds:,.2f} s, {ph.gb_per_s:,.3f} GB/s; limited by {ph.limiting}")
    return out


def workload_lines(f: WorkloadForecast, title: str, warnings: Sequence[PlanWarning]) -> list[str]:
    """The accelerators fed (and at --accelerators), a checkpoint's seconds, the evaluation apart."""
    spec, out = f.spec, []
    if f.training is not None and f.fed is not None:
        load, fc = f.training, f.fed
        rw = fc.trials[0].prediction.workload.rw if fc.trials else load.pattern
        out += [f"{spec.name} on {title}: AI training, AU threshold {pct(spec.au_threshold)}",
                f"  per accelerator and step: {load.batch} x {format_size(load.record_bytes)} samples "
                f"({load.calls_per_sample} read call(s) of {format_size(load.request_bytes)} each, {rw}), "
                f"{max(1, load.read_threads)} read thread(s){'' if load.read_threads else ' (the accelerator reads)'}, "
                f"compute {load.computation_s:g} s",
                f"  accelerators fed: {fc.fed}" + (f" (bounded by {fc.bound})" if fc.bound else "")]
        for point in (fc.at_fed, fc.beyond):
            if point is not None:
                out.append(_point_line(point, load))
        at = f.at_accelerators
        if at is not None:
            out.append(f"  --accelerators {f.accelerators}: AU {at.au:.3f} "
                       f"{'>=' if at.passed else '<'} {spec.au_threshold:g}: {'PASS' if at.passed else 'FAIL'}")
            if f.accelerators not in (fc.fed, fc.fed + 1):
                out.append(_point_line(at, load))
        out += [f"  assumption: {a}" for a in fc.assumptions]
    evaluation: list[str] = []
    if f.evaluation is not None and f.fed is not None:
        ev = f.evaluation
        evaluation = [f"{spec.name} on {title}: evaluation (DLIO's eval, apart from training), after epoch "
                      f"{spec.evaluation.after_epoch} then every {spec.evaluation.epochs_between}",
                      f"  per accelerator and step: {ev.batch} x {format_size(ev.record_bytes)} samples, "
                      f"compute {ev.computation_s:g} s; {ev.samples} eval samples, no barrier between steps"]
        shown: list[EvaluationForecast] = []
        for fc_ev in f.evaluation_at.values():
            if not any(fc_ev is s for s in shown):      # one forecast where fed and --accelerators agree
                shown.append(fc_ev)
                evaluation += _evaluation_lines(fc_ev)
        if not f.fed.fed:
            evaluation.append("  (no accelerator holds the training threshold: at_fed shows the evaluation at 1)")
    if f.checkpoint is not None:
        if not spec.train_enabled:
            out.append(f"{spec.name} on {title}: checkpoint over {f.checkpoint_ranks} rank(s)")
        out += _checkpoint_lines(f.checkpoint)
    return out + evaluation + warning_lines(warnings)


# --- recommend, profile --------------------------------------------------------------------------

def kvcache_lines(f: KvForecast, title: str, warnings: Sequence[PlanWarning]) -> list[str]:
    """A KV-cache option's four figures per rank, the load behind them and what limits them."""
    load, option = f.load, f.load.option

    def seconds(x: float | None) -> str:
        return "-" if x is None else f"{x:.4g} s"

    out = [f"{load.name} ({option.name}) on {title}: KV cache, {option.model} ({load.kv_bytes_per_token:,} bytes per "
           f"token), {load.concurrency} users per rank",
           f"  per request: {load.read_objects_per_request:.3g} object reads and {load.write_objects_per_request:.3g} "
           f"writes on storage of {format_size(int(load.mean_object_bytes))} on average "
           f"({format_size(int(load.read_bytes_per_request))} read, {format_size(int(load.write_bytes_per_request))} "
           f"written), {load.generation_tokens_per_request:.0f} tokens generated",
           f"  read_bw_bytes {mb(f.read_bw_bytes)}  tokens_per_s {f.tokens_per_s:.4g}  read_p95_s "
           f"{seconds(f.read_p95_s)}  write_p95_s {seconds(f.write_p95_s)}",
           f"  {f.requests_per_s:.4g} requests/s, {f.storage_s_per_request:.4g} s of storage per request, storage "
           f"{pct(f.storage_busy)} busy; limited by {f.limiting}"]
    out += [f"  assumption: {a}" for a in f.assumptions]
    return out + warning_lines(warnings)


def recommend_lines(result: Any, needs: Any, drive: Any, drives: int, bays: int, controllers: int,
                    objectives: Sequence[tuple[str, str, Any]]) -> list[str]:
    """The Pareto set of layouts, each with its scores on `objectives` (key, label, format)."""
    out = [f"{result.candidates_considered} candidate layouts for {drives} x {format_si_bytes(drive.capacity_bytes)} "
           f"drives, {bays}-bay enclosures, {controllers} controller(s); {result.feasible} meet every need; "
           f"{len(result.pareto)} not beaten on every need:"]
    if needs.training is not None:
        out.insert(0, f"layouts feeding {needs.accelerators} {needs.training.name} accelerators at AU >= "
                      f"{pct(needs.training.au_threshold)} (the workload's threshold):")
    if needs.kvcache is not None:
        out.insert(0, f"layouts reaching {needs.tokens_per_s:g} tokens/s on {needs.kvcache.name} "
                      f"({needs.kvcache.option.name}, {needs.kvcache.concurrency} users):")
    if result.note:
        out.append(f"  note: {result.note}")
    for c in result.pareto:
        scores = ", ".join(f"{label} {fmt(c.scores[key])}" for key, label, fmt in objectives)
        out.append(f"- {c.description}" + (f" ({c.spares} spare drives)" if c.spares else ""))
        out.append(f"    {scores}")
        out.append(f"    why: {'; '.join(c.reasons)}")
        if c.training is not None:
            t = c.training
            fed = f"{t.accelerators}" if t.accelerators < t.bound else f"{t.bound} or more"
            out.append(f"    accelerators: feeds {fed}; AU {t.au_at_need:.3f} at {needs.accelerators}; "
                       f"storage limited by {t.limiting}")
        if c.kvcache is not None:
            out.append(f"    kv cache: {c.kvcache.tokens_per_s:.4g} tokens/s, read {mb(c.kvcache.read_bw_bytes)}; "
                       f"limited by {c.kvcache.limiting}")
        if c.misses:
            out.append(f"    misses: {'; '.join(c.misses)}")
        if c.equivalent:
            out.append(f"    same scores: {'; '.join(c.equivalent)}")
        out += [f"    warning: {w.code}: {w.message}" for w in c.warnings]
    return out


def profile_point_line(point: Any) -> str:
    """One measured point of plan profile, as it is measured (on standard error)."""
    return (f"  {point.rw:<9} {format_size(point.request_bytes):>9} QD{point.qd:<4} {point.iops:>12,.0f} IOPS "
            f"{point.iops * point.request_bytes / 1e6:>10,.1f} MB/s  mean {ms(point.lat_mean_s)}")


def profile_lines(target: str, points: int, time_s: float, profile: Any, output: str | None) -> list[str]:
    out = [f"{target}: profile from {points} points ({time_s:g} s each, direct I/O)",
           f"  read {mb(profile.read_bw_bytes)}, {profile.read_iops:,.0f} IOPS; write {mb(profile.write_bw_bytes)}, "
           f"{profile.write_iops:,.0f} IOPS",
           f"  per request: {ms(profile.latency_s)} random, {ms(profile.sequential_latency_s)} sequential; "
           f"parallelism {profile.parallelism}; {'queues' if profile.queues else 'rate limiter (no queue)'}"
           + ("" if profile.request_bw_bytes is None else f"; one request alone {mb(profile.request_bw_bytes)}"),
           f"  fit error: mean {profile.mean_abs_error:.1%}, worst {profile.max_abs_error:.1%} over the points"]
    out += [f"  note: {n}" for n in profile.notes]
    if output:
        out.append(f"  wrote {output} (use: storlab plan perf STACK --profile {output})")
    return out
