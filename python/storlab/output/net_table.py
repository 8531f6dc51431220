"""The table `storlab net` prints: each client-server pair alone (throughput and round trip), every
client at once, and the shared links that shows. Rates in Mbit/s (10^6 bits), as links are rated."""
from __future__ import annotations

from typing import Any

__all__ = ["render_net"]


def _mbit(bytes_per_s: float | None) -> str:
    return "-" if bytes_per_s is None else f"{bytes_per_s * 8 / 1e6:,.1f}"


def render_net(doc: dict[str, Any]) -> str:
    streams = doc.get("streams", 1)
    lines = [f"fabric: {len(doc.get('clients', []))} client node(s), server node(s) {', '.join(doc.get('servers', []))}; "
             f"{streams} TCP stream(s) per pair, {doc.get('seconds', 0):g} s each"]
    rows = [("client", "server", "address", "alone Mbit/s", "rtt ms", "all at once Mbit/s")]
    together = {(a["client"], a["server"]): a["bw_bytes"] for a in doc.get("aggregate", [])}
    for p in doc.get("pairs", []):
        rows.append((p["client"], p["server"], p["address"], _mbit(p["bw_bytes"]), f"{p['rtt_s'] * 1e3:.3f}",
                     _mbit(together.get((p["client"], p["server"])))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if j < 3 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths))))
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    if doc.get("aggregate_bw_bytes") is not None:
        lines.append(f"all clients at once: {_mbit(doc['aggregate_bw_bytes'])} Mbit/s in aggregate")
    lines += [f"finding: {f}" for f in doc.get("findings", [])]
    return "\n".join(lines)
