"""The human summary of an MPI run, printed under the result table: per phase the plain and
de-skewed aggregate, first and last rank done, the stragglers and slowest ranks, per node when
there are several. Reads only the result document: bytes for `storlab run`, operations for
`storlab meta` (kind "meta")."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..units import format_rate
from .base import align

__all__ = ["render_summary", "render_scale"]


def _rate(v: float | None) -> str:
    return "-" if v is None else format_rate(v)


@dataclass(frozen=True)
class _Measure:
    """What a summary counts: the keys of the amount, its rate and de-skewed rate, and how to show them."""
    amount: str
    rate: str
    deskew_rate: str
    show_amount: Callable[[float], str]
    show_rate: Callable[[float | None], str]


_BYTES = _Measure("bytes", "bw_bytes", "deskew_bw_bytes", lambda v: f"{v / 2**20:.1f} MiB", _rate)
_OPS = _Measure("ops", "ops_per_s", "deskew_ops_per_s", lambda v: f"{v:,.0f} ops",
                lambda v: "-" if v is None else f"{v:,.0f} ops/s")


def render_summary(doc: dict[str, Any]) -> str:
    unit = _OPS if doc.get("kind") == "meta" else _BYTES
    mpi = doc.get("mpi") or {}
    nodes = mpi.get("nodes") or []
    clock = mpi.get("clock") or []
    worst = max((abs(c["offset_s"]) for c in clock), default=0.0)
    bound = max((c["error_bound_s"] for c in clock), default=0.0)
    lines = [f"mpi: {mpi.get('size')} ranks on {len(nodes)} node(s); largest clock offset "
             f"{worst * 1e3:.3f} ms (estimate within ±{bound * 1e3:.3f} ms)"]
    for p in doc.get("phases") or []:
        a, m = p.get("aggregate") or {}, p.get("mpi") or {}
        if not m:
            continue
        line = (f"{p['name']}: {a.get('ranks')} ranks, {unit.show_amount(a.get(unit.amount, 0))}; "
                f"all {unit.amount} / first start to last finish {unit.show_rate(a.get(unit.rate))}")
        if a.get("deskew_window_s"):
            w = a["deskew_window_s"]
            line += f"; de-skewed {unit.show_rate(a.get(unit.deskew_rate))} over [{w[0]:.3f}, {w[1]:.3f}] s with every rank active"
        else:
            line += "; no window with every rank active (no de-skewed rate)"
        lines.append(line)
        if m.get("first_done") and m.get("last_done"):
            fd, ld = m["first_done"], m["last_done"]
            lines.append(f"  first rank done {fd['s']:.3f} s (rank {fd['rank']}), last {ld['s']:.3f} s "
                         f"(rank {ld['rank']}, node {ld['node']}); start skew {m.get('start_skew_s', 0) * 1e3:.2f} ms")
        if m.get("stragglers"):
            lines.append("  stragglers (finished last): " + ", ".join(
                f"rank {s['rank']} ({s['node']}) +{s['behind_s']:.3f} s" for s in m["stragglers"]))
        if m.get("slowest_ranks"):
            lines.append("  slowest ranks (own rate): " + ", ".join(
                f"rank {s['rank']} {unit.show_rate(s[unit.rate])}"
                + (f" ({s['vs_median'] * 100:.0f}% of median)" if s.get("vs_median") is not None else "")
                for s in m["slowest_ranks"]))
        if len(m.get("nodes") or []) > 1:
            for n in m["nodes"]:
                lines.append(f"  node {n['node']}: ranks {n['ranks']}, {unit.show_rate(n[unit.rate])}")
        links = m.get("links") or []
        if len(links) > 1 and len({x["node"] for x in links}) > 1:
            slow = min(links, key=lambda x: x["bw_bytes"])
            lines.append(f"  {len(links)} links (node to target); slowest {slow['node']} to {slow['target']}: "
                         f"{unit.show_amount(slow['bytes'])}, {unit.show_rate(slow['bw_bytes'])}")
        if m.get("missing_ranks"):
            lines.append(f"  no result from rank(s) {m['missing_ranks']}")
    for s in mpi.get("stonewall") or []:
        if unit is _OPS:
            lines.append(f"stonewall: {s['phase']} stopped at {s['stonewall_s']:g} s; items finished per "
                         "thread, which later phases work on: "
                         + ", ".join(f"rank {x['rank']} {x['items_per_worker']}" for x in s["ranks"]))
            continue
        lines.append(f"stonewall: {s['phase']} reads per thread what {s['from_phase']} wrote: "
                     + ", ".join(f"rank {r} {sizes}" for r, sizes in enumerate(s["io_size_bytes"])) + " bytes")
    return "\n".join(lines)


def render_scale(doc: dict[str, Any]) -> str:
    """The scaling table of a `scale` document: rate, speedup and efficiency per rank count."""
    headers = ["phase", "ranks", "nodes", "bw MiB/s", "speedup", "efficiency %",
               "de-skewed MiB/s", "de-skewed eff. %"]
    cells = []

    def num(v: float | None, scale: float = 1.0, fmt: str = "{:.2f}") -> str:
        return "-" if v is None else fmt.format(v / scale)
    for c in doc["scale"]["curve"]:
        for pt in c["points"]:
            cells.append([c["phase"], str(pt["ranks"]), str(pt["nodes"]), num(pt["bw_bytes"], 2**20, "{:.1f}"),
                          num(pt["speedup"]), num(pt["efficiency"], 0.01, "{:.0f}"),
                          num(pt["deskew_bw_bytes"], 2**20, "{:.1f}"), num(pt["deskew_efficiency"], 0.01, "{:.0f}")])
    lines = align(headers, cells, [False] + [True] * 7)
    base = {c["base_ranks"] for c in doc["scale"]["curve"]}
    lines.append(f"speedup = rate / rate at {', '.join(map(str, sorted(base)))} rank(s); efficiency = "
                 "speedup / ideal speedup (every rank runs the whole job)")
    if not doc["complete"]:
        lines.append(f"incomplete ({doc['stop_reason']}: {doc['error']})")
    return "\n".join(lines)
