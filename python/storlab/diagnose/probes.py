"""The measurements of `storlab diagnose`: short, honest probes run through the ordinary engine.

Every probe is one storlab run (a job resolved from option values, run by measure.runner) with
direct I/O, so the page cache cannot stand in for the device, except the two buffered probes of
the file-system layer, which measure the cache on purpose (out-of-cache: invalidated before the
read; in-cache: read twice, the second read timed). A probe of several targets runs one worker
per target at once, and each worker's own bytes over its own time give each member's share.
Devices are only read; writes go to the probe file in the file system or to a device named in
--allow-destroy (the engine's write-safety gate checks what it opens in every case).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import EngineError
from ..jobs.job import resolve_job
from ..measure.runner import run_job

__all__ = ["Workload", "Probe", "ProbeResult", "SEQ_READ", "RAND_READ", "SEQ_WRITE", "run_probe", "member_share",
           "find_mpiexec", "run_rank_probe", "member_counters", "counter_delta"]


@dataclass(frozen=True)
class Workload:
    """One access pattern every layer is measured with."""
    name: str            # "seq-read", "rand-read", "seq-write"
    rw: str              # storlab rw value
    bs: int              # request size in bytes
    qd: int              # outstanding requests per worker (io_uring)
    figure: str          # the figure compared between layers: "bw_bytes" or "iops"

    @property
    def direction(self) -> str:
        return "write" if "write" in self.rw else "read"

    def label(self) -> str:
        size = f"{self.bs >> 20} MiB" if self.bs >= 1 << 20 else f"{self.bs >> 10} KiB"
        kind = "random" if self.rw.startswith("rand") else "sequential"
        return f"{size} {kind} {self.direction} QD{self.qd}"


SEQ_READ = Workload("seq-read", "read", 1 << 20, 4, "bw_bytes")
RAND_READ = Workload("rand-read", "randread", 4096, 16, "iops")
SEQ_WRITE = Workload("seq-write", "write", 1 << 20, 4, "bw_bytes")


def member_share(w: Workload, data_members: int) -> Workload:
    """What one member sees of a volume workload: a sequential request striped over `data_members`
    arrives as one request of its share on each of them (the member's consecutive stripe units are
    contiguous on it), at the same depth; a random small request lands whole on one member."""
    if w.rw.startswith("rand") or data_members <= 1:
        return w
    share = max(4096, w.bs // data_members)
    return Workload(w.name, w.rw, share - share % 4096, w.qd, w.figure)


@dataclass
class Probe:
    """One run: a layer, the targets it reads or writes and how."""
    layer: str                 # "member", "members", "volume", "fs", "fs-buffered", "fs-cached"
    subject: str               # what the row names: "loop3", "4 members at once", "/mnt/x (btrfs)"
    workload: Workload
    targets: list[str]
    time_s: float
    size: int | None = None            # bytes of each target used (None: the whole device/file)
    direct: bool = True
    cache: str | None = None           # buffered probes: "out" (invalidated first) or "in"
    extra: dict[str, Any] = field(default_factory=dict)
    row_workload: str | None = None    # the volume workload this probe stands for (member probes
                                       # run the member's share of it); None: its own workload
    ranks: int | None = None           # run as this many MPI ranks (run_rank_probe)
    network: bool = False              # a network target (nbd://, nfs://): its URL names the engine,
                                       # and direct I/O is a local file's option
    allow_destroy: tuple[str, ...] = ()   # devices the user named: the engine's gate may let writes through

    @property
    def key(self) -> tuple[str, str]:
        return self.layer, self.row_workload or self.workload.name

    def values(self) -> dict[str, Any]:
        """The option values of the probe's storlab run."""
        v: dict[str, Any] = {"target": list(self.targets), "rw": self.workload.rw, "bs": self.workload.bs,
                             "qd": self.workload.qd, "threads": 1}
        if not self.network:
            v.update(engine="io_uring", direct=self.direct)
        if self.cache != "in" and self.time_s > 0:   # 0: size-based (one pass over `size`);
            v["time"] = self.time_s                    # the cached probe's timed phase sets its own
        if self.size is not None:
            v["size"] = self.size
        if self.allow_destroy:
            v["allow_destroy"] = list(self.allow_destroy)
        if self.cache == "in":
            v["invalidate"] = False
        if self.cache == "out" and self.size:
            v["io_size"] = self.size        # one pass: no byte twice, so none from memory
        v.update(self.extra)
        return v


@dataclass
class ProbeResult:
    probe: Probe
    document: dict[str, Any]
    value: float | None                  # the workload's figure for the whole probe
    per_target: dict[str, float]         # the same figure for each target's worker
    complete: bool
    # bytes each member device moved while the probe ran (its kernel counters, /sys/class/block/
    # NAME/stat): which copies of a mirror served the reads; None when not recorded
    member_io: dict[str, dict[str, int]] | None = None

    @property
    def seconds(self) -> float:
        """The measured time: the phase's own (a size-based probe, such as the probe file's
        layout write, has no time set and runs until its bytes are done)."""
        phases = self.document.get("phases") or []
        measured = (phases[-1].get("seconds") if phases else None) or 0.0
        return float(measured) or self.probe.time_s

    def to_dict(self) -> dict[str, Any]:
        p = self.probe
        return {"layer": p.layer, "subject": p.subject, "workload": p.key[1], "rw": p.workload.rw,
                "bs": p.workload.bs, "qd": p.workload.qd, "targets": p.targets,
                "time_s": self.seconds, "direct": p.direct, "cache": p.cache, "run_id": self.document.get("run_id"),
                "value": self.value, "per_target": self.per_target, "complete": self.complete,
                "member_io": self.member_io}


SECTOR = 512        # /sys/class/block/NAME/stat counts 512-byte sectors whatever the device's


def member_counters(members: list[str]) -> dict[str, tuple[int, int]]:
    """(bytes read, bytes written) so far by each member, from its kernel statistics; a member
    whose counters cannot be read is left out."""
    out: dict[str, tuple[int, int]] = {}
    for m in members:
        try:
            with open(f"/sys/class/block/{m}/stat") as fh:
                fields = fh.read().split()
            out[m] = (int(fields[2]) * SECTOR, int(fields[6]) * SECTOR)
        except (OSError, IndexError, ValueError):
            continue
    return out


def counter_delta(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> dict[str, dict[str, int]]:
    return {m: {"read_bytes": after[m][0] - before[m][0], "write_bytes": after[m][1] - before[m][1]}
            for m in after if m in before}


def _figure(phase: dict[str, Any], workload: Workload) -> float | None:
    stats = phase.get(workload.direction) or {}
    v = stats.get(workload.figure)
    return float(v) if v is not None else None


def _per_target(phase: dict[str, Any], workload: Workload) -> dict[str, float]:
    """Each target's rate over its own worker's time (bytes/s, or ops/s for an IOPS figure)."""
    out: dict[str, float] = {}
    key = f"{workload.direction}_{'bytes' if workload.figure == 'bw_bytes' else 'ops'}"
    for w in phase.get("workers") or []:
        span = (w.get("end_s") or 0.0) - (w.get("start_s") or 0.0)
        if span > 0 and w.get("target"):
            out[w["target"]] = out.get(w["target"], 0.0) + float(w.get(key) or 0) / span
    return out


def run_probe(probe: Probe, argv: list[str], checkpoint: Callable[[dict[str, Any]], None] | None = None
              ) -> ProbeResult:
    """Run one probe; the last phase of its document is the measured one."""
    jobfile = None
    if probe.cache == "in":
        # one pass fills the cache, then the timed read of the same range: the second phase counts
        jobfile = {"phase": [{"name": "warm"}, {"name": "cached", "time": probe.time_s}]}
    job = resolve_job(probe.values(), jobfile, jobfile_name="diagnose probe")
    doc = run_job(job, argv=argv, checkpoint=checkpoint)
    phases = doc.get("phases") or []
    phase = phases[-1] if phases else {}
    return ProbeResult(probe, doc, _figure(phase, probe.workload), _per_target(phase, probe.workload),
                       bool(doc.get("complete")))


def find_mpiexec() -> str | None:
    """The mpiexec beside this Python (the mpich wheel's), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else shutil.which("mpiexec")


def _flags(values: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for k, v in values.items():
        flag = "--" + k.replace("_", "-")
        for item in (v if isinstance(v, list) else [v]):
            out += [flag, "on" if item is True else "off" if item is False else str(item)]
    return out


def run_rank_probe(probe: Probe, argv: list[str]) -> ProbeResult:
    """The probe as `probe.ranks` MPI ranks of `storlab run` (mpiexec, one host), merged by rank 0.
    Each rank runs the probe's job on the same target; the figure is their sum."""
    ranks = probe.ranks
    mpiexec = find_mpiexec()
    if mpiexec is None:
        raise EngineError("ranks: no mpiexec found (pip install 'storlab[mpi]' or put a site MPI on PATH)")
    with tempfile.TemporaryDirectory(prefix="storlab-diagnose-") as tmp:
        out = os.path.join(tmp, "ranks.json")
        cmd = [mpiexec, "-n", str(ranks), sys.executable, "-m", "storlab.cli.main", "run",
               *_flags(probe.values()), "--json", out, "--no-store", "--quiet"]
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _, err = child.communicate()
        except BaseException:           # a signal: stop the ranks, then let it through
            child.terminate()
            child.wait()
            raise
        if not os.path.exists(out):
            last = (err or "").strip().splitlines()[-1:] or ["no output"]
            raise EngineError(f"ranks: {ranks} MPI ranks of the probe failed (exit {child.returncode}): {last[0]}")
        with open(out) as fh:
            doc = json.load(fh)
    doc["argv"] = [*argv, f"(probe as {ranks} MPI ranks)"]
    phases = doc.get("phases") or []
    phase = phases[-1] if phases else {}
    return ProbeResult(probe, doc, _figure(phase, probe.workload), {}, bool(doc.get("complete")))
