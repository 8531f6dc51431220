"""The table `storlab kvcache` prints: one row per option with MLPerf Storage's four headline
figures (Rules 6.3.4): storage read bandwidth (summed over ranks, mean of the trials), device read
and write P95 latency (the worst rank's), storage throughput in tokens per second (summed, mean),
then each trial's. Bandwidth in MB/s (10^6 bytes), latencies in ms."""
from __future__ import annotations

from typing import Any

__all__ = ["render_kvcache"]


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e6:,.1f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:,.2f}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _row(label: str, model: str, users: str, figures: dict[str, Any]) -> tuple[str, ...]:
    return (label, model, users, _mb(figures["read_bw_bytes"]), _ms(figures["read_p95_s"]),
            _ms(figures["write_p95_s"]), _num(figures["tokens_per_s"]), _mb(figures["write_bw_bytes"]))


def render_kvcache(doc: dict[str, Any]) -> str:
    ranks = doc.get("ranks", 1)
    lines = [f"kvcache: {ranks} rank(s) on {doc.get('hosts', 1)} host(s), seed {doc.get('seed')}, "
             f"{doc.get('trials')} trial(s) per option, {doc.get('division', 'open')} "
             f"({'compliant' if doc.get('compliant') else 'not compliant: ' + '; '.join(doc.get('noncompliant_reasons', []))})"]
    rows = [("option", "model", "users", "read MB/s", "read p95 ms", "write p95 ms", "tokens/s", "write MB/s")]
    for o in doc.get("options", []):
        rows.append(_row(f"{o['option']} {o['name']}", o["model"], f"{o['users']} x {ranks}", o))
        for t in o["trials"]:
            rows.append(_row(f"  trial {t['trial']}" + ("" if t["complete"] else " (cut short)"), "", "", t))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if j < 3 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths))))
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
