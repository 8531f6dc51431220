"""Steady state, as fio's `ss`, `ss_dur`, `ss_ramp` and `ss_interval` define it (after SNIA's Solid
State Storage Performance Test Specification): while a phase runs, its IOPS, bandwidth or mean
completion latency is sampled every `ss_interval` after `ss_ramp`; once the last `ss_dur` of samples
(ss_dur / ss_interval of them) are flat the phase stops, reporting that steady state was reached,
and otherwise it runs to its own end and reports that it was not. Each phase judges its own
criterion (a phase's own values, else the run's: jobs/job.py).

Flat, with fio's criteria (steadystate.c):
- `iops:L` / `bw:L` / `lat:L` (level): the largest distance of a sample from the window's mean is
  below L;
- `iops_slope:L` / `bw_slope:L` / `lat_slope:L`: the least-squares slope of the samples, per
  sample (per ss_interval, as fio computes it), is below L in absolute value.
L with `%` is a percentage of the window's mean, otherwise in the metric's units (IOPS, bytes/s,
nanoseconds).

A sample is the mean over its interval, as in fio: operations / interval, bytes / interval, and for
lat the completion latencies' sum over the operations completed in the interval (0 when none did,
as fio). They come from the phase's cumulative progress counters (operations, bytes, completion
latency sum; all directions, ramp included), read at every progress tick and interpolated to the
interval boundaries: the first interval starts at ss_ramp.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import UserError
from ..jobs.steadystate import check, parse


@dataclass
class SteadyState:
    spec: str
    duration_s: float
    ramp_s: float = 0.0
    interval_s: float = 1.0
    metric: str = field(init=False)
    limit: float = field(init=False)
    pct: bool = field(init=False)
    samples: list[float] = field(default_factory=list)   # of the metric judged, every interval
    iops: list[float] = field(default_factory=list)      # every metric, every interval (fio keeps
    bw_bytes: list[float] = field(default_factory=list)  # all three series whatever it judges)
    clat_mean_ns: list[float] = field(default_factory=list)
    attained: bool = False
    attained_at_s: float | None = None
    criterion: float | None = None
    max_deviation: float | None = None   # of the last window checked, in the metric's units
    slope: float | None = None           # per sample (ss_interval), of the last window checked
    _last: tuple[float, float, float, float] | None = None   # (elapsed, ops, bytes, clat sum) at the last tick
    _next_s: float = 0.0                                      # next sample boundary
    _at_boundary: tuple[float, float, float] | None = None    # (ops, bytes, clat sum) at the last boundary

    def __post_init__(self) -> None:
        self.metric, self.limit, self.pct = parse(self.spec)
        self._next_s = self.ramp_s

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> "SteadyState | None":
        """The steady-state check a phase's options ask for (Job.settings_of); None without `ss`."""
        if not settings.get("ss"):
            return None
        problem = check(settings)
        if problem:
            raise UserError(problem)
        return cls(settings["ss"], float(settings.get("ss_dur") or 0.0), float(settings.get("ss_ramp") or 0.0),
                   float(settings.get("ss_interval") or 1.0))

    @property
    def window(self) -> int:
        """Samples judged: ss_dur / ss_interval, whole ones (fio's integer division), at least 2."""
        return max(2, int(self.duration_s / self.interval_s + 1e-9))

    def feed(self, elapsed_s: float, ops: float, bytes_: float, clat_ns: float = 0.0) -> bool:
        """One progress reading (seconds since the phase start; cumulative operations, bytes and
        sum of completion latencies in ns); True once steady state is reached."""
        if self.attained:
            return True
        if self._last is not None and elapsed_s > self._last[0]:
            t0, o0, b0, l0 = self._last
            while self._next_s <= elapsed_s:
                f = (self._next_s - t0) / (elapsed_s - t0) if self._next_s > t0 else 0.0
                here = (o0 + f * (ops - o0), b0 + f * (bytes_ - b0), l0 + f * (clat_ns - l0))
                if self._at_boundary is not None and self._sample(here):
                    self.attained, self.attained_at_s = True, self._next_s
                    return True
                self._at_boundary = here
                self._next_s += self.interval_s
        self._last = (elapsed_s, ops, bytes_, clat_ns)
        return False

    def _sample(self, here: tuple[float, float, float]) -> bool:
        """The interval ending at `here`: its means appended; True when the window is flat."""
        d_ops, d_bytes, d_clat = (a - b for a, b in zip(here, self._at_boundary))
        self.iops.append(d_ops / self.interval_s)
        self.bw_bytes.append(d_bytes / self.interval_s)
        self.clat_mean_ns.append(d_clat / d_ops if d_ops > 0 else 0.0)
        base = self.metric.partition("_")[0]
        self.samples.append({"iops": self.iops, "bw": self.bw_bytes, "lat": self.clat_mean_ns}[base][-1])
        keep = self.window
        for series in (self.samples, self.iops, self.bw_bytes, self.clat_mean_ns):
            del series[:-keep]
        return self._check()

    def _check(self) -> bool:
        n = self.window
        if len(self.samples) < n:
            return False
        ys = self.samples[-n:]
        mean = sum(ys) / n
        xs = range(n)
        sx, sy = sum(xs), sum(ys)
        sxy = sum(x * y for x, y in zip(xs, ys))
        sxx = sum(x * x for x in xs)
        self.slope = (sxy - sx * sy / n) / (sxx - sx * sx / n)
        self.max_deviation = max(abs(y - mean) for y in ys)
        value = self.slope if self.metric.endswith("_slope") else self.max_deviation
        if self.pct and not mean:   # nothing completed in the window: not steady (fio's 0/0)
            self.criterion = None
            return False
        self.criterion = 100.0 * value / mean if self.pct else value
        return abs(self.criterion) < self.limit

    def record(self) -> dict[str, Any]:
        """What the result document says of it (`steadystate` of the phase): its own criterion,
        and the last window's samples (of the metric judged, and of each metric)."""
        return {"ss": self.spec, "metric": self.metric, "limit": self.limit, "limit_is_pct": self.pct,
                "duration_s": self.duration_s, "ramp_s": self.ramp_s, "interval_s": self.interval_s,
                "attained": self.attained, "attained_at_s": self.attained_at_s, "criterion": self.criterion,
                "max_deviation": self.max_deviation, "slope": self.slope,
                "samples": list(self.samples), "iops": list(self.iops), "bw_bytes": list(self.bw_bytes),
                "clat_mean_ns": list(self.clat_mean_ns)}
