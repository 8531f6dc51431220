"""The human rendering of a doctor document (doctor/report.py builds it): the device table, file
systems, partitions, findings with evidence and fix, and the differences from a planned stack."""
from __future__ import annotations

import os

from ..units import format_size

__all__ = ["render_text"]


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _opt(v, unit: str = "") -> str:
    return "-" if v is None else f"{v}{unit}"


def render_text(result: dict) -> str:
    s = result["summary"]
    lines = [f"storlab doctor: {s['devices']} devices, {s['filesystems']} file systems; "
             f"{s['error']} errors, {s['warning']} warnings, {s['info']} info", ""]
    devices = result["devices"]
    if devices:
        rows = [["NAME", "TYPE", "SIZE", "LOG/PHYS", "MIN-IO/OPT-IO", "RA", "MAX-SECT", "SCHED", "ROTA", "QD/NR",
                 "STRIPE BELOW"]]
        for d in devices:
            q = d["queue"]
            st = d["striping"]
            rows.append([
                d["name"], d["kind"], format_size(d["size_bytes"]) if d["size_bytes"] else "-",
                f"{_opt(q['logical_block_size'])}/{_opt(q['physical_block_size'])}",
                f"{_opt(q['minimum_io_size'])}/{_opt(q['optimal_io_size'])}",
                _opt(q["read_ahead_kb"], "K"), _opt(q["max_sectors_kb"], "K"), _opt(q["scheduler"]),
                "-" if q["rotational"] is None else str(int(q["rotational"])),
                f"{_opt(q['queue_depth'])}/{_opt(q['nr_requests'])}",
                "-" if st is None else f"{format_size(st['unit_bytes'])} x {st['data_members']}",
            ])
        lines += ["Devices"] + _table(rows) + [""]
    if result["filesystems"]:
        rows = [["DEVICE", "TYPE", "MOUNTED ON", "GEOMETRY"]]
        for f in result["filesystems"]:
            rows.append([f["device"], f["fs_type"], f["mount_point"] or "-", f["native"]])
        lines += ["File systems"] + _table(rows) + [""]
    if result["partitions"]:
        rows = [["DISK", "#", "START (bytes)", "SIZE", "DEVICE", "FROM"]]
        for p in result["partitions"]:
            rows.append([p["disk"], str(p["number"]), str(p["start_bytes"]), format_size(p["size_bytes"]),
                         p["device"] or "-", p["origin"]])
        lines += ["Partitions"] + _table(rows) + [""]
    findings = result["findings"]
    if findings:
        lines.append("Findings")
        for f in findings:
            lines.append(f"  {f['severity'].upper():7s} {f['device']}: {f['message']} [{f['code']}]")
            lines.append(f"          evidence: {f['evidence']}")
            if f["fix"]:
                lines.append(f"          fix: {f['fix']}")
        lines.append("")
    else:
        lines += ["No findings.", ""]
    if "stack" in result:
        diffs = result["stack"]["differences"]
        name = os.path.basename(result["stack"]["file"])
        if diffs:
            rows = [["ITEM", "DEVICE", "PLANNED", "FOUND"]]
            rows += [[d["item"], d["device"], d["planned"], d["found"]] for d in diffs]
            lines += [f"Differences from {name}"] + _table(rows) + [""]
        else:
            lines += [f"The live stack matches {name}.", ""]
    for note in result["notes"]:
        lines.append(f"note: {note}")
    return "\n".join(lines).rstrip() + "\n"
