#!/usr/bin/env python3
"""Predicted vs measured on the seeds' tables (docs/model.md, "Validation on the seeds' tables").

Every prediction is `storlab.model.predict` on the inputs the studies state; where a study does not
state an input the model needs, the assumption is named in the table, and where one is taken from
the study's own figures (a per-request latency), it is taken from one figure and used for all the
others of that series. Nothing is fitted per figure. Deterministic: no measurement runs here.

    python3 benchmarks/model_seeds.py [--write-doc docs/model.md]
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "python")]
from storlab.model.predict import ControllerCache, Device, Workload, predict  # noqa: E402
from storlab.model.stack import Component, DriveType, stack_from_notation  # noqa: E402

MB = 10**6
KiB = 1024
MiB = 1 << 20
FC2_MB = 200.0          # one 2 Gb/s FC port carries about 200 MB/s of data (seed 001; 212.5 MB/s raw, seed 000)
FAST = 1e12             # a rate that binds nothing
DRIVE = DriveType("drive", 10**12, 1e6)


@dataclass(frozen=True)
class Row:
    study: str
    figure: str
    predicted_mb: float
    measured_mb: float
    limiting: str

    @property
    def error(self) -> float:
        return self.predicted_mb / self.measured_mb - 1.0


def _line(bw_bytes_per_s: float, latency_s: float, name: str) -> Device:
    """A device that streams at bw with a fixed per-request latency (a LUN seen from the host)."""
    return Device(bw_bytes_per_s, bw_bytes_per_s, FAST, FAST, latency_s, name)


def _latency_from(size: int, measured_mb: float, outstanding: int, bw_bytes_per_s: float) -> float:
    """Per-request latency implied by one measured figure: outstanding x size / rate - transfer."""
    return outstanding * size / (measured_mb * MB) - size / bw_bytes_per_s


# ------------------------------------------------------------------------------------------------
# Seed 000 (Engenio): Altix 350 + 5884, one RAID 5 8+1 LUN, 64K segment, 1 thread, direct sequential
ENGENIO = {  # request KiB: (writes MB/s, reads MB/s)
    16: (43.91, 46.97), 32: (69.19, 67.41), 64: (93.68, 92.83),
    128: (118.08, 119.60), 256: (136.73, 160.50), 512: (150.52, 174.01),
}


def engenio_rows() -> list[Row]:
    """One thread of direct sequential I/O keeps one request outstanding: rate = R / (L + R / B).
    B and L per direction come from the 16K and 512K figures; the four between are predicted."""
    rows = []
    for index, direction in ((1, "read"), (0, "write")):
        t16 = 16 * KiB / (ENGENIO[16][index] * MB)
        t512 = 512 * KiB / (ENGENIO[512][index] * MB)
        per_byte = (t512 - t16) / ((512 - 16) * KiB)
        latency = t16 - 16 * KiB * per_byte
        device = _line(1 / per_byte, latency, "LUN")
        for kib in (32, 64, 128, 256):
            p = predict(None, Workload(direction, kib * KiB, qd=1), [device])
            rows.append(Row("Engenio 8+1, 1 thread", f"{direction} {kib}K", p.bw_bytes / MB, ENGENIO[kib][index],
                            p.limiting))
    return rows


# ------------------------------------------------------------------------------------------------
# Seed 003 (GUPFS): 3PAR S400, one controller node, hosts on their own 2 Gb port, 4 processes each
S400_IC = {  # (direction, KiB): (1 host, 2 hosts, 4 hosts) MB/s, in-cache (128 MB region), D.3.3
    ("read", 1): (6.65, 12.93, 19.17), ("read", 4): (24.49, 49.88, 73.52), ("read", 16): (84.94, 169.03, 274.92),
    ("read", 64): (189.14, 372.01, 398.33), ("read", 1024): (197.67, 388.95, 404.92),
    ("write", 1): (3.28, 6.41, 9.69), ("write", 4): (13.82, 25.70, 38.11), ("write", 16): (52.86, 95.70, 146.87),
    ("write", 64): (147.47, 256.32, 326.41), ("write", 1024): (194.87, 340.34, 344.12),
}


def _ported_stack(hosts: int, backend_bytes_per_s: float | None = None):
    """hosts RAID groups, each behind its own 2 Gb FC port (bw 212.5 MB/s); members share the
    backend rate evenly (unlimited when None)."""
    port = Component("fc-port", kind="link", count=hosts, read_bw_bytes=FC2_MB * MB, write_bw_bytes=FC2_MB * MB,
                     groups=1)
    path = Component("fabric", children=(port,))
    stack = stack_from_notation("R0/4", 256 * KiB, drive=DRIVE, count=hosts, aggregate="none", path=path)
    per_member = FAST if backend_bytes_per_s is None else backend_bytes_per_s / (4 * hosts)
    return stack, per_member


def s400_rows() -> list[Row]:
    """In-cache: the members are not touched, each host is capped by its port, 4 outstanding per
    host (4 processes). The per-request latency per direction comes from the 1 KB one-host figure."""
    rows = []
    for direction in ("read", "write"):
        one_kb = S400_IC[(direction, 1)][0]
        latency = _latency_from(KiB, one_kb, 4, FC2_MB * MB)
        for kib in (4, 16, 64, 1024):
            for i, hosts in enumerate((1, 2, 4)):
                stack, per_member = _ported_stack(hosts)
                device = Device(per_member, per_member, FAST, FAST, latency, "backend", shared_time=False, queues=False)
                cache = ControllerCache(4 * 10**9, FAST, FAST, latency_s=latency)
                w = Workload(direction, kib * KiB, qd=4, threads=hosts, working_set_bytes=128 * 10**6)
                p = predict(stack, w, [device], cache=cache)
                rows.append(Row("3PAR S400 node, in-cache", f"{direction} {kib}K, {hosts} host(s)", p.bw_bytes / MB,
                                S400_IC[(direction, kib)][i], p.limiting))
    return rows


# Yotta Yotta GSX 2400 (C.2), 1 MB requests, single shared LUN; one 2 Gb port per host
YOTTA = {  # (hosts, cache, direction): MB/s
    (1, "in", "read"): 190, (1, "in", "write"): 188, (1, "out", "read"): 176, (1, "out", "write"): 188,
    (2, "in", "read"): 372, (2, "in", "write"): 375, (2, "out", "read"): 300, (2, "out", "write"): 277,
    (8, "in", "read"): 1513, (8, "in", "write"): 1425, (8, "out", "read"): 711, (8, "out", "write"): 714,
}
YOTTA_BACKEND_MB = 800     # the report: out-of-cache "limited by their bandwidth to their backend disks, ~800 MB/s"


def yotta_rows() -> list[Row]:
    rows = []
    for (hosts, where, direction), measured in YOTTA.items():
        stack, per_member = _ported_stack(hosts, YOTTA_BACKEND_MB * MB)
        # the back end's stated aggregate (~800 MB/s) is a ceiling, not a service time: no queue
        device = Device(per_member, per_member, FAST, FAST, 1e-4, "backend share", shared_time=False, queues=False)
        per_host = 512 * 10**6 if where == "in" else (8 if hosts == 1 else 4) * 10**9
        cache = ControllerCache(hosts * 512 * 10**6, FAST, FAST)
        # MPTIO on the shared LUN: 8 threads per host (--num-thread 8), one request each
        w = Workload(direction, MiB, qd=1, threads=8 * hosts, working_set_bytes=per_host * hosts)
        p = predict(stack, w, [device], cache=cache)
        rows.append(Row("Yotta Yotta GSX 2400", f"{where}-cache {direction}, {hosts} host(s)", p.bw_bytes / MB, measured,
                        p.limiting))
    return rows


# ------------------------------------------------------------------------------------------------
# Seed 001 (p690): RIO2 drawer profile (forced cache hits: the path, not the disks)
P690_PROFILE = {"PHB1, 3 adapters": 585, "PHB3, 2 adapters": 390, "link0 (PHB1)": 585, "link1 (PHB2 + PHB3)": 814,
                "planar": 1332, "RIO2 drawer": 2650, "p690, 7 drawers": 18512}
ADAPTER_MB = 195          # one 2 Gbps FC adapter measured alone (the study)
RULES = {"phb": 450, "link": 750, "planar": 1200, "drawer": 2400, "system": 18000}   # the study's rules of thumb


def _adapters(name: str, count: int) -> Component:
    return Component(name, kind="adapter", count=count, read_bw_bytes=ADAPTER_MB * MB, groups=1)


def _cap(name: str, mb: float, *children: Component, count: int = 1) -> Component:
    return Component(name, count=count, read_bw_bytes=mb * MB, children=children)


def _planar(count: int = 1) -> Component:
    return _cap("planar", RULES["planar"],
                _cap("link0", RULES["link"], _cap("phb1", RULES["phb"], _adapters("a1", 3))),
                _cap("link1", RULES["link"], _cap("phb2", RULES["phb"], _adapters("a2", 3)),
                     _cap("phb3", RULES["phb"], _adapters("a3", 2))), count=count)


def p690_rows() -> list[Row]:
    trees = {
        "PHB1, 3 adapters": (_cap("phb1", RULES["phb"], _adapters("a1", 3)), 3),
        "PHB3, 2 adapters": (_cap("phb3", RULES["phb"], _adapters("a3", 2)), 2),
        "link0 (PHB1)": (_cap("link0", RULES["link"], _cap("phb1", RULES["phb"], _adapters("a1", 3))), 3),
        "link1 (PHB2 + PHB3)": (_cap("link1", RULES["link"], _cap("phb2", RULES["phb"], _adapters("a2", 3)),
                                     _cap("phb3", RULES["phb"], _adapters("a3", 2))), 5),
        "planar": (_planar(), 8),
        "RIO2 drawer": (_cap("drawer", RULES["drawer"], _planar(count=2)), 16),
        "p690, 7 drawers": (_cap("p690", RULES["system"], _cap("drawer", RULES["drawer"], _planar(count=2), count=7)), 112),
    }
    rows = []
    device = Device(FAST, FAST, FAST, FAST, 1e-3, "array (cache hit)")
    for label, (tree, groups) in trees.items():
        stack = stack_from_notation("R5/9", 128 * KiB, drive=DRIVE, count=groups,
                                    aggregate="stripe" if groups > 1 else None, path=tree)
        p = predict(stack, Workload("read", MiB, qd=64, threads=groups), [device])
        rows.append(Row("p690 RIO2 profile", label, p.bw_bytes / MB, P690_PROFILE[label], p.limiting))
    return rows


def all_rows() -> list[Row]:
    return engenio_rows() + s400_rows() + yotta_rows() + p690_rows()


def render(rows: list[Row]) -> str:
    from tests.testbed.report import markdown_table
    within = sum(abs(r.error) <= 0.15 for r in rows)
    table = markdown_table(["study", "figure", "predicted MB/s", "measured MB/s", "error", "limiting (model)"],
                           [[r.study, r.figure, f"{r.predicted_mb:,.1f}", f"{r.measured_mb:,.1f}", f"{r.error:+.0%}",
                             r.limiting] for r in rows])
    return (f"Generated by `benchmarks/model_seeds.py`: {within} of {len(rows)} figures within 15 %.\n\n" + table)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write-doc", help="replace the generated table in this page")
    args = p.parse_args()
    text = render(all_rows())
    if args.write_doc:
        from tests.testbed.report import replace_generated
        replace_generated(args.write_doc, "seeds-validation", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
