"""The environment a result was measured in: host, kernel, CPU, memory, Python, how the process
was launched (srun or mpiexec, the Slurm job), and the targets.

Kept with every result so runs can be judged comparable (same kernel, same memory size relative
to the file size ...). Reading it never fails: unknown fields are None.
"""
from __future__ import annotations

import os
import sys
from typing import Any

from ..devices.netfs import network_filesystem
from ..devices.safety import describe_path, is_remote_target, remote_server
from .launch import launch_environment


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def cpu_model() -> str | None:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith(("model name", "Processor", "cpu model")):
            return line.split(":", 1)[1].strip()
    import platform  # only where /proc/cpuinfo names no model

    return platform.processor() or None


def memory_bytes() -> int | None:
    text = _read("/proc/meminfo") or ""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def os_name() -> str | None:
    text = _read("/etc/os-release") or ""
    for line in text.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return None


def host_environment() -> dict[str, Any]:
    """Everything about the machine that does not depend on the job."""
    return {
        "host": os.uname().nodename,        # what socket.gethostname() returns, without socket
        "kernel": os.uname().release,       # platform.release(), without platform
        "os": os_name(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        "python": sys.version.split()[0],   # platform.python_version()
        "platform": sys.platform,
        **launch_environment(),
    }


def describe_target(engine_info: dict[str, Any]) -> dict[str, Any]:
    """Merge what the engine found about a target with what sysfs and mountinfo say about it (a
    network target: what the engine found, and the server it is on)."""
    if is_remote_target(engine_info["path"]):
        # an s3 target's server is its endpoint (the URL names a bucket, not a host)
        return {**engine_info, "server": engine_info.get("endpoint") or remote_server(engine_info["path"])}
    described = describe_path(engine_info["path"])
    merged = {k: v for k, v in described.items() if v is not None}
    network = network_filesystem(described.get("fs_type"))
    if network:
        merged["network_fs"] = network
    merged.update(engine_info)  # the engine's size and type are what the run used
    for key in ("fs_type", "mount_point", "device", "logical_block_size", "physical_block_size",
                "rotational", "model", "scheduler"):
        merged.setdefault(key, described.get(key))
    return merged
