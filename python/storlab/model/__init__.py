"""Storage stack model: notation, stack description, geometry/alignment, reliability, throughput.

Pure Python (no engine, no numpy). Typical use:

    from storlab.model import load_stack, geometry_report, reliability_of, performance_of
    stack = load_stack("examples/stacks/sas-jbod-4x12-two-raid-adapters.toml")
    print(reliability_of(stack).mttdl_years, performance_of(stack).value("seq_write"))

The ceilings are `performance_of`; the rate one workload should reach (queue depth, threads,
request size, caches, mirrors; latency mean and p99) is `predict`:

    from storlab.model import Workload, predict
    p = predict(stack, Workload("randread", 4096, qd=16, threads=2))
    print(p.iops, p.limiting, p.latency_mean_s, p.latency_tail_s)
"""
from .advice import PlanWarning, stack_warnings
from .geometry import (
    analyse_alignment,
    application_stripe_width_bytes,
    capacity_of,
    geometry_of,
    geometry_report,
    layouts_for_request,
    stripe_width_bytes,
)
from .notation import NotationError, RaidNotation, parse_raid
from .performance import mixed_iops, performance_of, with_cap_chain
from .predict import ControllerCache, Device, Prediction, Workload, predict
from .profile import DeviceProfile, fit_profile, load_profile
from .queueing import Station, solve_closed
from .reliability import group_mttdl_h, loss_probability, reliability_of, series_mttdl_h, ure_probability
from .stack import (
    Component,
    DriveType,
    Filesystem,
    RaidSpec,
    Stack,
    StackError,
    Volume,
    load_stack,
    stack_from_dict,
    stack_from_notation,
)

__all__ = [
    "NotationError", "RaidNotation", "parse_raid", "Component", "DriveType", "Filesystem", "RaidSpec", "Stack",
    "StackError", "Volume", "load_stack", "stack_from_dict", "stack_from_notation", "analyse_alignment",
    "application_stripe_width_bytes", "capacity_of", "geometry_of", "geometry_report", "layouts_for_request",
    "stripe_width_bytes", "group_mttdl_h", "loss_probability", "reliability_of", "series_mttdl_h",
    "ure_probability", "mixed_iops", "performance_of", "with_cap_chain", "PlanWarning", "stack_warnings",
    "ControllerCache", "Device", "Prediction", "Workload", "predict", "DeviceProfile", "fit_profile",
    "load_profile", "Station", "solve_closed",
]
