"""A device profile: the model's figures for one device, fitted from a short measured sweep of
request size x queue depth (`storlab plan profile`), in place of datasheet figures.

What is fitted (least squares where there are several points, docs/model.md "Device profiles"):
- per direction and pattern, the time of one request at QD1 against its size, a straight line
  `t(b) = fixed + b / rate`: the intercept is the per-request cost (latency_s for random requests,
  sequential_latency_s for sequential ones), the slope the per-byte cost;
- the device's ceilings: its IOPS (the most small requests per second measured at any depth) and
  bandwidth (the most bytes per second at the largest size, or the line's rate if higher);
- its parallelism: requests it serves at once, from Little's law at the IOPS ceiling,
  round(IOPS x service time of one small request), at least 1;
- one request's own transfer rate, the slope of the QD1 line, where it is below the bandwidth
  ceiling (a device that moves more bytes with several requests in flight than with one);
- whether it queues (a drive, a controller) or is a rate limiter (a token bucket such as the
  blkio throttle): a lone request of a rate limiter usually passes at once and now and then waits
  for the next budget, so its median latency at QD1 is far below its mean (below a tenth); a
  queueing device's median is near its mean.
The fit's error is the model's prediction at each measured point against the measurement, with
the fitted device (`ProfileFit.errors`): a profile is used only with its error in view.

Pure Python: the measurement is the CLI's (it runs the ordinary engine); this module fits and
stores.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from ..document import header, plan_schema
from ..errors import UserError
from .predict import Device, Workload, predict

__all__ = ["ProfilePoint", "DeviceProfile", "fit_profile", "load_profile", "save_profile", "profile_document",
           "ProfileError",
           "PROFILE_SCHEMA", "RATE_LIMITER_MEDIAN_SHARE"]

PROFILE_SCHEMA = plan_schema("profile")
RATE_LIMITER_MEDIAN_SHARE = 0.1     # median / mean latency at QD1 below this: a rate limiter (the blkio
                                    # throttle: 49 of 50 requests pass at once, one waits a slice)


class ProfileError(UserError):
    """A profile that cannot be read or fitted; one line naming the file or the missing points."""


@dataclass(frozen=True)
class ProfilePoint:
    rw: str                 # read | write | randread | randwrite
    request_bytes: int
    qd: int
    iops: float
    lat_mean_s: float
    lat_p50_s: float


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    read_bw_bytes: float
    write_bw_bytes: float
    read_iops: float
    write_iops: float
    latency_s: float                    # fixed time of a random request (intercept of the QD1 line)
    sequential_latency_s: float         # fixed time of a sequential request
    parallelism: int
    queues: bool
    points: tuple[ProfilePoint, ...] = ()
    errors: tuple[float, ...] = ()      # predicted / measured - 1 at each point, with this profile
    notes: tuple[str, ...] = field(default_factory=tuple)
    request_bw_bytes: float | None = None   # one request's own rate, nothing else in flight (the QD1
                                            # line's slope), where below the bandwidth; None: that

    def device(self, name: str | None = None) -> Device:
        """The model's device. Its IOPS ceilings were measured with the smallest random requests, so
        they include that transfer (Device.iops_request_bytes)."""
        random_sizes = [p.request_bytes for p in self.points if p.rw.startswith("rand")]
        return Device(self.read_bw_bytes, self.write_bw_bytes, self.read_iops, self.write_iops, self.latency_s,
                      name or self.name, shared_time=self.queues, counts_every_request=not self.queues,
                      queues=self.queues, parallelism=self.parallelism,
                      sequential_latency_s=self.sequential_latency_s,
                      iops_request_bytes=min(random_sizes, default=0), request_bw_bytes=self.request_bw_bytes)

    @property
    def mean_abs_error(self) -> float:
        return sum(abs(e) for e in self.errors) / len(self.errors) if self.errors else 0.0

    @property
    def max_abs_error(self) -> float:
        return max((abs(e) for e in self.errors), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["mean_abs_error"] = self.mean_abs_error
        d["max_abs_error"] = self.max_abs_error
        return d


def _line(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares line y = a + b x; None without two distinct x."""
    xs = {x for x, _ in points}
    if len(xs) < 2:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    b = sxy / sxx
    return my - b * mx, b


def _qd1_line(points: list[ProfilePoint], rws: tuple[str, ...]) -> tuple[float, float] | None:
    """(fixed seconds, seconds per byte) of one request at QD1: mean time = 1 / IOPS at depth 1."""
    qd1 = [(p.request_bytes, 1.0 / p.iops) for p in points if p.rw in rws and p.qd == 1 and p.iops > 0]
    fit = _line(qd1)
    if fit is None and qd1:
        return qd1[0][1], 0.0
    return fit


def fit_profile(points: list[ProfilePoint], name: str = "profile") -> DeviceProfile:
    """Fit the model's device figures to measured points (see the module docstring)."""
    good = [p for p in points if p.iops > 0 and math.isfinite(p.iops)]
    if not good:
        raise ProfileError("profile: no measured point to fit")
    notes: list[str] = []
    random_pts = [p for p in good if p.rw.startswith("rand")] or good
    seq_pts = [p for p in good if not p.rw.startswith("rand")] or good
    rnd_line = _qd1_line(random_pts, ("randread", "randwrite")) or _qd1_line(good, tuple({p.rw for p in good}))
    seq_line = _qd1_line(seq_pts, ("read", "write")) or rnd_line
    latency = max(1e-7, rnd_line[0]) if rnd_line else 1e-4
    seq_latency = max(0.0, seq_line[0]) if seq_line else latency

    def ceiling_iops(direction: str) -> float:
        """The most random requests per second at the smallest size (sequential small requests
        are served from a drive's or controller's read-ahead, not a measure of its IOPS)."""
        pts = ([p for p in random_pts if p.rw.endswith(direction)] or random_pts
               or [p for p in good if p.rw.endswith(direction)] or good)
        small = min(p.request_bytes for p in pts)
        return max(p.iops for p in pts if p.request_bytes == small)

    def ceiling_bw(direction: str) -> float:
        pts = [p for p in good if p.rw.endswith(direction)] or good
        return max(p.iops * p.request_bytes for p in pts)

    read_iops, write_iops = ceiling_iops("read"), ceiling_iops("write")
    read_bw, write_bw = ceiling_bw("read"), ceiling_bw("write")
    if not any(p.rw.endswith("write") for p in good):
        notes.append("no write points: write figures are the read ones")
    small = min(random_pts, key=lambda p: (p.request_bytes, p.qd))
    service = 1.0 / small.iops if small.qd == 1 else latency
    parallelism = max(1, round(read_iops * service))
    qd1 = [p for p in random_pts if p.qd == 1 and p.lat_mean_s > 0]
    queues = True
    if qd1:
        share = sum(p.lat_p50_s / p.lat_mean_s for p in qd1) / len(qd1)
        if share < RATE_LIMITER_MEDIAN_SHARE:
            queues = False
            notes.append(f"median latency at QD1 is {share:.0%} of the mean: a rate limiter (token bucket), "
                         "not a queue")
    # one request alone transfers at the QD1 line's rate; a device that reaches more with several
    # in flight (a memory-backed device copying each on its own CPU) keeps that rate per request
    line = rnd_line or seq_line
    request_bw = None
    if line is not None and line[1] > 0 and 1.0 / line[1] < min(read_bw, write_bw):
        request_bw = 1.0 / line[1]
    profile = DeviceProfile(name, read_bw, write_bw, read_iops, write_iops, latency, seq_latency, parallelism,
                            queues, tuple(good), (), tuple(notes), request_bw_bytes=request_bw)
    device = profile.device()
    errors = []
    for p in good:
        predicted = predict(None, Workload(p.rw, p.request_bytes, qd=p.qd), [device]).iops
        errors.append(predicted / p.iops - 1.0)
    return DeviceProfile(**{**asdict(profile), "points": tuple(good), "errors": tuple(errors),
                            "notes": tuple(notes)})


def profile_document(profile: DeviceProfile) -> dict[str, Any]:
    """The profile as a `storlab.plan.profile/1` document (the file `plan profile` writes)."""
    return {**header("plan", schema=plan_schema("profile")), **profile.to_dict(), "warnings": []}


def save_profile(profile: DeviceProfile, path: str) -> None:
    with open(path, "w") as fh:
        json.dump(profile_document(profile), fh, indent=2)
        fh.write("\n")


MAX_PROFILE_BYTES = 16 << 20   # a profile of thousands of points is a few hundred KiB


def load_profile(path: str) -> DeviceProfile:
    """Read a profile written by `storlab plan profile`; errors name the file and the field."""
    if not os.path.exists(path):
        raise ProfileError(f"{path}: no such profile file")
    if not os.path.isfile(path):
        raise ProfileError(f"{path}: not a regular file; a profile is the JSON file `storlab plan profile -o` writes")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_PROFILE_BYTES + 1)
    except OSError as e:
        raise ProfileError(f"{path}: cannot be read: {e.strerror or e}") from None
    if len(raw) > MAX_PROFILE_BYTES:
        raise ProfileError(f"{path}: larger than {MAX_PROFILE_BYTES} bytes; not a profile from storlab plan profile")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ProfileError(f"{path}: not a profile: not UTF-8 text (byte {e.start})") from None
    except ValueError as e:
        where = f" at line {e.lineno}, column {e.colno}" if isinstance(e, json.JSONDecodeError) else ""
        raise ProfileError(f"{path}: not a profile: not JSON{where}") from None
    if not isinstance(data, dict) or data.get("schema") != PROFILE_SCHEMA:
        raise ProfileError(f"{path}: not a profile (schema {PROFILE_SCHEMA!r} expected, from storlab plan profile)")
    try:
        points = tuple(ProfilePoint(**p) for p in data.get("points", ()))
        fields = {k: data[k] for k in ("name", "read_bw_bytes", "write_bw_bytes", "read_iops", "write_iops",
                                       "latency_s", "sequential_latency_s", "parallelism", "queues")}
        profile = DeviceProfile(**fields, points=points, errors=tuple(data.get("errors", ())),
                                notes=tuple(data.get("notes", ())), request_bw_bytes=data.get("request_bw_bytes"))
        profile.device()        # the model's own checks of every figure
    except (KeyError, TypeError) as e:
        raise ProfileError(f"{path}: profile field missing or wrong: {e}") from None
    except UserError as e:
        raise ProfileError(f"{path}: {e}") from None
    return profile
