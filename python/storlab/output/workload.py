"""The plain-text summary of a `storlab workload` result: AU against the threshold, samples/s,
DLIO's MB/s, per-epoch figures, batch-wait percentiles, evaluation apart, checkpoints and compliance,
then MLPerf Storage v3.0's rule checks, one line each, and the statement that no storlab run is an
MLPerf submission."""
from __future__ import annotations

from typing import Any

from .base import align

__all__ = ["render_workload"]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f}%"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{1000 * x:.2f}"


def render_workload(doc: dict[str, Any]) -> str:
    name = doc.get("workload", {}).get("name", "?")
    lines = [f"workload {name}: {doc.get('accelerators')} accelerator(s) on {doc.get('ranks')} rank(s), "
             f"{doc.get('hosts')} host(s)"]
    if "au" in doc:
        verdict = "PASS" if doc.get("passed") else "FAIL"
        lines.append(f"AU {_pct(doc['au'])} (threshold {_pct(doc['au_threshold'])}: {verdict}); "
                     f"{doc['samples_per_s']:.2f} samples/s; {doc['mib_per_s']:.2f} MiB/s (DLIO's 'MB/s': "
                     f"samples/s x record_length / 2^20)")
        rows = [[str(e["epoch"]), str(e["steps"]), f"{e['seconds']:.2f}", _pct(e["au"]), f"{e['samples_per_s']:.2f}",
                 _ms((e.get("wait_s") or {}).get("p50")), _ms((e.get("wait_s") or {}).get("p99")),
                 _ms((e.get("wait_s") or {}).get("max"))] for e in doc.get("epochs", [])]
        if rows:
            lines += align(["epoch", "steps", "seconds", "AU", "samples/s", "wait p50 ms", "wait p99 ms", "wait max ms"],
                           rows, [True] * 8)
        ev = doc.get("evaluation")
        if ev:
            lines.append(f"evaluation (apart from training, as DLIO reports it): AU {_pct(ev['au'])} "
                         f"({'PASS' if ev.get('passed') else 'FAIL'}); {ev['samples_per_s']:.2f} samples/s; "
                         f"{ev['mib_per_s']:.2f} MiB/s; {len(ev.get('evaluations', []))} evaluation(s) of "
                         f"{ev.get('steps_per_evaluation')} steps")
            rows = [[str(e["epoch"]), str(e["steps"]), f"{e['seconds']:.2f}", _pct(e["au"]), f"{e['samples_per_s']:.2f}",
                     f"{e.get('mib_per_s', 0.0):.2f}", _ms((e.get("wait_s") or {}).get("p50")),
                     _ms((e.get("wait_s") or {}).get("p99")), _ms((e.get("wait_s") or {}).get("max"))]
                    for e in ev.get("evaluations", [])]
            if rows:
                lines += align(["eval after epoch", "steps", "seconds", "AU", "samples/s", "MiB/s", "wait p50 ms",
                                "wait p99 ms", "wait max ms"], rows, [True] * 9)
        cpu = doc.get("cpu") or {}
        if cpu.get("cores_per_accelerator") is not None:
            lines.append(f"client CPU: {cpu['cores']:.3f} cores, {cpu['cores_per_accelerator']:.4f} per accelerator")
    ck = doc.get("checkpoint")
    if ck:
        tf = ck.get("transformer")
        if tf:
            lines.append(f"checkpoint: {ck['writers']} writer(s), {ck['bytes_per_checkpoint']} B per checkpoint"
                         + (f" (subset: ranks 0-{ck['writers'] - 1} of {ck['ranks_total']}, {ck['fraction_written']:.3f} "
                            "of the bytes)" if ck.get("subset") else ""))
            lines.append(f"  transformer of {tf['parameters']} parameters over {tf['world']} ranks (TP {tf['tensor']} x "
                         f"PP {tf['pipeline']} x DP {tf['data']}, ZeRO {tf['zero_stage']}): model {tf['model_bytes']} B, "
                         f"optimizer {tf['optimizer_bytes']} B (DLIO: {tf['model_gib']:.2f} + {tf['optimizer_gib']:.2f} = "
                         f"{tf['total_gib']:.2f} GB of 2^30 B)" + (f", written x {tf['scale']:g}" if tf["scale"] != 1 else ""))
        else:
            lines.append(f"checkpoint: {ck['writers']} writer(s) x {ck['bytes_per_writer']} B"
                         + (f" (subset: {ck['fraction_written']:.3f} of {ck['ranks_total']} ranks)" if ck.get("subset") else ""))
    for c in doc.get("checkpoints", []):
        lines.append(f"  {c['kind']} #{c['index']}: {c['bytes']} B in {c['seconds']:.3f} s = {c['gb_per_s']:.3f} GB/s; "
                     f"slowest rank {c['slowest_rank']} ({c['slowest_rank_seconds']:.3f} s)")
    data = doc.get("dataset")
    if data:
        rule = data["size_rule"]
        evals = f" (+{data['eval_files']} eval)" if data.get("eval_files") else ""
        lines.append(f"dataset {data['folder']}: {data['files']}{evals} {data['format']} files, {data['bytes']} B, "
                     f"{'generated' if data['generated'] else 'reused'}; MLPerf size rule: >= {rule['min_files']} files")
    gen = doc.get("generation")
    if gen:
        lines.append(f"generated {gen['files']} files, {gen['bytes']} B in {gen['seconds']:.3f} s"
                     + (f" = {gen['mib_per_s']:.1f} MiB/s" if gen.get("mib_per_s") is not None else "")
                     if gen["generated"] else "generation: the dataset was complete and reused; nothing written")
    if doc.get("search"):
        s = doc["search"]
        lines.append(f"accelerator search: {s['max_accelerators']} accelerators hold the threshold; trials: "
                     + ", ".join(f"{t['accelerators']}={_pct(t['au'])}" for t in s["trials"]))
    runs = doc.get("runs")
    if runs:
        lines.append("runs: " + ", ".join(f"#{r['run']}{' (warm-up)' if r['warmup'] else ''} "
                                          f"{(r.get('samples_per_s') or 0.0):.2f} samples/s" for r in runs))
    lines += _rule_lines(doc.get("mlperf"))
    if not doc.get("compliant", True):
        lines.append("not a compliant MLPerf run: " + "; ".join(doc.get("noncompliant_reasons") or []))
    if doc.get("complete") is False:
        lines.append(f"incomplete ({doc.get('stop_reason')}): figures cover the {len(doc.get('epochs', []))} epoch(s) done")
    return "\n".join(lines)


def _rule_lines(mlperf: dict[str, Any] | None) -> list[str]:
    """MLPerf Storage's rules as checked: one line per rule (result, rule, source, figures)."""
    if not mlperf:
        return []
    lines = [f"MLPerf Storage v{mlperf['rules_edition']} rule checks ({mlperf['division']} division workload, "
             f"accelerator {mlperf['accelerator']}):"]
    for c in mlperf["checks"]:
        lines.append(f"  {c['result'].upper():4}  {c['rule']} [{c['source']}]: {c['detail']}")
    lines.append(f"  {mlperf['statement']}")
    return lines
