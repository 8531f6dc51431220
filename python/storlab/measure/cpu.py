"""CPU cost of a phase: the host's CPU use from /proc/stat and storlab's own from getrusage, and the
normalised cost the studies report (CPU % per 100 MB/s of throughput, MB = 10^6 bytes).
"""
from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from typing import Any

# /proc/stat "cpu" line fields, in order (jiffies)
_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


_proc_stat_fd: int | None = None   # kept open: a pread costs a quarter of an open, read and close


def _host_jiffies() -> dict[str, int] | None:
    global _proc_stat_fd
    try:
        if _proc_stat_fd is None:
            _proc_stat_fd = os.open("/proc/stat", os.O_RDONLY | os.O_CLOEXEC)
        head = os.pread(_proc_stat_fd, 512, 0)   # the kernel makes the file anew at offset 0
    except OSError:
        return None
    parts = head.split(b"\n", 1)[0].decode("ascii", "replace").split()
    if not parts or parts[0] != "cpu":
        return None
    values = [int(x) for x in parts[1:1 + len(_FIELDS)]]
    return dict(zip(_FIELDS, values + [0] * (len(_FIELDS) - len(values))))


@dataclass
class CpuSample:
    wall_s: float
    host: dict[str, int] | None
    self_user_s: float
    self_system_s: float

    @classmethod
    def now(cls) -> "CpuSample":
        r = resource.getrusage(resource.RUSAGE_SELF)  # all threads of this process
        return cls(time.monotonic(), _host_jiffies(), r.ru_utime, r.ru_stime)


def cpu_usage(before: CpuSample, after: CpuSample, bw_bytes: float) -> dict[str, Any]:
    """Host and own CPU between two samples; `bw_bytes` (bytes/s) for the normalised cost."""
    wall = max(after.wall_s - before.wall_s, 1e-9)
    out: dict[str, Any] = {"seconds": wall, "cpu_count": os.cpu_count()}
    if before.host and after.host:
        d = {k: after.host[k] - before.host[k] for k in _FIELDS}
        total = sum(d.values()) or 1
        pct = lambda *keys: 100.0 * sum(d[k] for k in keys) / total  # noqa: E731 - local shorthand
        out.update(host_user_pct=pct("user", "nice"), host_system_pct=pct("system", "irq", "softirq"),
                   host_iowait_pct=pct("iowait"), host_busy_pct=100.0 - pct("idle", "iowait"))
    own_user = after.self_user_s - before.self_user_s
    own_sys = after.self_system_s - before.self_system_s
    # own CPU as a share of the whole host, so it compares with the host figures
    cpus = os.cpu_count() or 1
    out.update(self_user_s=own_user, self_system_s=own_sys,
               self_pct=100.0 * (own_user + own_sys) / (wall * cpus))
    per_100mb = bw_bytes / 100e6
    if per_100mb > 0:
        if "host_busy_pct" in out:
            out["host_pct_per_100MBps"] = out["host_busy_pct"] / per_100mb
        out["self_pct_per_100MBps"] = out["self_pct"] / per_100mb
    return out
