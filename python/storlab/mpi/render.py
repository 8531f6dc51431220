"""The human summary of an MPI run, printed under the result table: per phase the plain and
de-skewed aggregate, first and last rank done, the stragglers and slowest ranks, per node when
there are several. Reads only the result document."""
from __future__ import annotations

from typing import Any

from ..units import format_rate

__all__ = ["render_summary"]


def _rate(v: float | None) -> str:
    return "-" if v is None else format_rate(v)


def render_summary(doc: dict[str, Any]) -> str:
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
        line = (f"{p['name']}: {a.get('ranks')} ranks, {a.get('bytes', 0) / 2**20:.1f} MiB; "
                f"all bytes / first start to last finish {_rate(a.get('bw_bytes'))}")
        if a.get("deskew_window_s"):
            w = a["deskew_window_s"]
            line += f"; de-skewed {_rate(a.get('deskew_bw_bytes'))} over [{w[0]:.3f}, {w[1]:.3f}] s with every rank active"
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
                f"rank {s['rank']} {_rate(s['bw_bytes'])}"
                + (f" ({s['vs_median'] * 100:.0f}% of median)" if s.get("vs_median") is not None else "")
                for s in m["slowest_ranks"]))
        if len(m.get("nodes") or []) > 1:
            for n in m["nodes"]:
                lines.append(f"  node {n['node']}: ranks {n['ranks']}, {_rate(n['bw_bytes'])}")
        if m.get("missing_ranks"):
            lines.append(f"  no result from rank(s) {m['missing_ranks']}")
    for s in mpi.get("stonewall") or []:
        lines.append(f"stonewall: {s['phase']} reads per thread what {s['from_phase']} wrote: "
                     + ", ".join(f"rank {r} {sizes}" for r, sizes in enumerate(s["io_size_bytes"])) + " bytes")
    return "\n".join(lines)
