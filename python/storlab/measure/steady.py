"""Steady state, as fio's `ss`, `ss_dur` and `ss_ramp` define it (after SNIA's Solid State Storage
Performance Test Specification): while a phase runs, IOPS or bandwidth is sampled every second
after `ss_ramp`; once the last `ss_dur` seconds of samples are flat the phase stops, reporting that
steady state was reached, and otherwise it runs to its own end and reports that it was not.

Flat, with fio's criteria (steadystate.c):
- `iops:L` / `bw:L` (level): the largest distance of a sample from the window's mean is below L;
- `iops_slope:L` / `bw_slope:L`: the least-squares slope of the samples (per second) is below L
  in absolute value.
L with `%` is a percentage of the window's mean, otherwise in the metric's units (IOPS, bytes/s).

The samples are the phase's cumulative operations and bytes (what the progress line shows, all
directions) read at every progress tick and interpolated to whole seconds after `ss_ramp`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError
from ..jobs.steadystate import parse


@dataclass
class SteadyState:
    spec: str
    duration_s: float
    ramp_s: float = 0.0
    interval_s: float = 1.0
    metric: str = field(init=False)
    limit: float = field(init=False)
    pct: bool = field(init=False)
    samples: list[float] = field(default_factory=list)
    attained: bool = False
    attained_at_s: float | None = None
    criterion: float | None = None
    max_deviation: float | None = None   # of the last window checked, in the metric's units
    slope: float | None = None           # per second, of the last window checked
    _last: tuple[float, float, float] | None = None   # (elapsed, ops, bytes) at the last tick
    _next_s: float = 0.0                               # next sample boundary
    _at_boundary: tuple[float, float] | None = None    # (ops, bytes) at the last boundary

    def __post_init__(self) -> None:
        self.metric, self.limit, self.pct = parse(self.spec)
        self._next_s = self.ramp_s

    @classmethod
    def of(cls, settings: dict[str, Any]) -> "SteadyState | None":
        """The steady-state check a job's run-level options ask for; None without `ss`."""
        if not settings.get("ss"):
            return None
        if not settings.get("ss_dur"):
            raise UserError("ss_dur: steady state (ss) is judged over a window; give its length "
                            "(ss_dur, e.g. 60s; fio's default 0 turns the check off)")
        return cls(settings["ss"], float(settings.get("ss_dur") or 0.0), float(settings.get("ss_ramp") or 0.0))

    @property
    def window(self) -> int:
        return max(2, round(self.duration_s / self.interval_s))

    def feed(self, elapsed_s: float, ops: float, bytes_: float) -> bool:
        """One progress reading (seconds since the phase start, cumulative operations and bytes);
        True once steady state is reached."""
        if self.attained:
            return True
        if self._last is not None and elapsed_s > self._last[0]:
            t0, o0, b0 = self._last
            while self._next_s <= elapsed_s:
                f = (self._next_s - t0) / (elapsed_s - t0) if self._next_s > t0 else 0.0
                here = (o0 + f * (ops - o0), b0 + f * (bytes_ - b0))
                if self._at_boundary is not None:
                    d_ops, d_bytes = here[0] - self._at_boundary[0], here[1] - self._at_boundary[1]
                    rate = (d_ops if self.metric.startswith("iops") else d_bytes) / self.interval_s
                    self.samples.append(rate)
                    if self._check():
                        self.attained, self.attained_at_s = True, self._next_s
                        return True
                self._at_boundary = here
                self._next_s += self.interval_s
        self._last = (elapsed_s, ops, bytes_)
        return False

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
        self.slope = (sxy - sx * sy / n) / (sxx - sx * sx / n) / self.interval_s
        self.max_deviation = max(abs(y - mean) for y in ys)
        value = self.slope if self.metric.endswith("_slope") else self.max_deviation
        self.criterion = 100.0 * value / mean if self.pct and mean else value
        return abs(self.criterion) < self.limit

    def record(self) -> dict[str, Any]:
        """What the result document says of it (`steadystate` of the phase)."""
        return {"ss": self.spec, "metric": self.metric, "limit": self.limit, "limit_is_pct": self.pct,
                "duration_s": self.duration_s, "ramp_s": self.ramp_s, "interval_s": self.interval_s,
                "attained": self.attained, "attained_at_s": self.attained_at_s, "criterion": self.criterion,
                "max_deviation": self.max_deviation, "slope": self.slope,
                "samples": self.samples[-self.window:]}
