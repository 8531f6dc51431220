"""Real storage servers for the tests, started and stopped by them: nbdkit (a user-space NBD
server, Debian `nbdkit`) exporting memory or a file, on a Unix socket or a loopback port.

nbdkit's log filter records every request the server received (`Read`, `Write`, `Trim`, `Flush`
with offset and count), so a test can check what crossed the wire against what storlab reports,
as the server saw it.
"""
from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

# nbdkit's log filter: a request "connection=C Write id=N offset=0x0 count=0x1000 ..." and its
# reply "connection=C ...Write id=N return=0"
_REQUEST = re.compile(r"connection=(\d+) (Read|Write|Trim|Flush|Zero) id=(\d+)(.*)\.\.\.$")
_REPLY = re.compile(r"connection=(\d+) \.\.\.(Read|Write|Trim|Flush|Zero) id=(\d+) return=(-?\d+)")
_COUNT = re.compile(r"count=(0x[0-9a-fA-F]+|\d+)")


def nbd_unavailable() -> str | None:
    """Why NBD tests cannot run here, or None: nbdkit and libnbd (the engine's client)."""
    if shutil.which("nbdkit") is None:
        return "nbdkit is not installed (scripts/test.sh installs Debian's nbdkit when run as root)"
    from storlab import _core

    kind = _core.remote_target("nbd://127.0.0.1/")
    if kind and kind[1]:
        return kind[1]
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Requests:
    """What the server received, per command: counts and bytes."""
    ops: dict[str, int]
    bytes: dict[str, int]


class NbdServer:
    """`with NbdServer(tmp_path, size="64M") as srv:` an nbdkit export, `srv.url` its URL.

    plugin "memory" (a sparse RAM disk of `size`) or "file" (`file=` the path given as `backing`);
    `read_only` exports it read-only; `tcp` serves on a loopback port instead of a Unix socket.
    """

    def __init__(self, workdir: Path, size: str = "64M", *, plugin: str = "memory", backing: Path | None = None,
                 read_only: bool = False, tcp: bool = False, log: bool = True) -> None:
        self.workdir = Path(workdir)
        self.logfile = self.workdir / "nbdkit-requests.log"
        self.socket = self.workdir / "nbd.sock"
        self.port = free_port() if tcp else None
        args = ["nbdkit", "--foreground", "--exit-with-parent"]
        args += ["--port", str(self.port), "--ipaddr", "127.0.0.1"] if tcp else ["--unix", str(self.socket)]
        if read_only:
            args.append("--readonly")
        if log:
            args += ["--filter=log"]
        args += [plugin] + ([f"file={backing}"] if plugin == "file" else [size])
        if log:
            args.append(f"logfile={self.logfile}")
        self.args = args
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        if self.port:
            return f"nbd://127.0.0.1:{self.port}/"
        return f"nbd+unix:///?socket={self.socket}"

    def __enter__(self) -> NbdServer:
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nbdkit exited at start: {self.proc.stderr.read().strip()}")
            if self._listening():
                return self
            time.sleep(0.02)
        self.__exit__(None, None, None)
        raise RuntimeError("nbdkit did not start listening within 10 s")

    def _listening(self) -> bool:
        if self.port is None:
            return self.socket.exists()
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def requests(self) -> Requests:
        """Every command the server completed without error so far, by kind (Read, Write, Trim,
        Flush): how many, and their bytes."""
        ops: dict[str, int] = {}
        nbytes: dict[str, int] = {}
        started: dict[tuple[str, str], int] = {}
        text = self.logfile.read_text() if self.logfile.exists() else ""
        for line in text.splitlines():
            if m := _REQUEST.search(line):
                count = _COUNT.search(m.group(4))
                started[(m.group(1), m.group(3))] = int(count.group(1), 0) if count else 0
            elif (m := _REPLY.search(line)) and m.group(4) == "0":
                kind = m.group(2)
                ops[kind] = ops.get(kind, 0) + 1
                nbytes[kind] = nbytes.get(kind, 0) + started.pop((m.group(1), m.group(3)), 0)
        return Requests(ops, nbytes)
