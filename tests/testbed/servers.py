"""Real storage servers for the tests, started and stopped by them: nbdkit (a user-space NBD
server, Debian `nbdkit`) exporting memory or a file, on a Unix socket or a loopback port; and
nfs-ganesha (a user-space NFS server, Debian `nfs-ganesha` with `nfs-ganesha-vfs`) exporting a
folder, in a network namespace of its own or on a node of the cluster in a box.

nbdkit's log filter records every request the server received (`Read`, `Write`, `Trim`, `Flush`
with offset and count), so a test can check what crossed the wire against what storlab reports,
as the server saw it.
"""
from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
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
    `place(argv) -> argv` runs the server elsewhere (a cluster node's `Cluster.command`), serving
    TCP on `address`.
    """

    def __init__(self, workdir: Path, size: str = "64M", *, plugin: str = "memory", backing: Path | None = None,
                 read_only: bool = False, tcp: bool = False, log: bool = True, place=None,
                 address: str = "127.0.0.1") -> None:
        self.workdir = Path(workdir)
        self.logfile = self.workdir / "nbdkit-requests.log"
        self.socket = self.workdir / "nbd.sock"
        self.place = place
        self.address = address
        self.port = 10809 if place else free_port() if tcp else None
        args = ["nbdkit", "--foreground"] + ([] if place else ["--exit-with-parent"])
        args += ["--port", str(self.port), "--ipaddr", address] if self.port else ["--unix", str(self.socket)]
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
            return f"nbd://{self.address}:{self.port}/"
        return f"nbd+unix:///?socket={self.socket}"

    def __enter__(self) -> NbdServer:
        argv = self.place(self.args) if self.place else self.args
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
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
        if self.place:
            out = subprocess.run(self.place(["ss", "-Hltn"]), capture_output=True, text=True).stdout
            return f"{self.address}:{self.port} " in out
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


# --- NFS: nfs-ganesha -----------------------------------------------------------------------------

# NFSv3 and v4 over TCP; v3's MOUNT on a fixed port, registered with an rpcbind of the server's own;
# no grace period (a fresh server has no clients to reclaim); the recovery state in the work folder.
_GANESHA_CONF = """\
NFS_CORE_PARAM {{
    Protocols = 3, 4;
    MNT_Port = 20048;
    Enable_NLM = false;
    Enable_RQUOTA = false;
}}
NFSV4 {{
    Graceless = true;
    RecoveryBackend = fs;
    RecoveryRoot = {state};
}}
EXPORT {{
    Export_Id = 1;
    Path = {export};
    Pseudo = /export;
    Access_Type = RW;
    Squash = No_Root_Squash;
    Protocols = 3, 4;
    Transports = TCP;
    FSAL {{ Name = VFS; }}
}}
LOG {{ Default_Log_Level = WARN; }}
"""

# rpcbind and ganesha in a mount namespace of their own, so that rpcbind's socket and lock under
# /run are the server's, not the host's (NFSv3 clients find MOUNT and NFS through it)
_GANESHA_START = """\
mount -t tmpfs storlab-nfs-run /run && mkdir -p /run/rpcbind
rpcbind -f -w &
i=0; while [ ! -S /run/rpcbind.sock ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
exec ganesha.nfsd -F -f {conf} -L {log} -p {pid} -N NIV_WARN
"""


def nfs_unavailable() -> str | None:
    """Why NFS tests cannot run here, or None: root (namespaces), ganesha with its VFS backend,
    rpcbind, and libnfs (the engine's client)."""
    if os.geteuid() != 0:
        return "needs root (the server runs in namespaces of its own)"
    for tool, package in (("ganesha.nfsd", "nfs-ganesha"), ("rpcbind", "rpcbind"), ("unshare", "util-linux"),
                          ("ip", "iproute2")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed ({package}; scripts/test.sh installs it when run as root)"
    if not any(Path(d, "libfsalvfs.so").exists() for d in ("/usr/lib/x86_64-linux-gnu/ganesha", "/usr/lib/ganesha")):
        return "nfs-ganesha's VFS backend is not installed (nfs-ganesha-vfs)"
    from storlab import _core

    kind = _core.remote_target("nfs://127.0.0.1/e/f")
    return kind[1] if kind and kind[1] else None


class GaneshaServer:
    """`with GaneshaServer(workdir, export_dir, run=...) as srv:` nfs-ganesha exporting
    `export_dir` (VFS backend) as NFSv3 `export_dir` and NFSv4 `/export`.

    `run(argv) -> argv` places a command on the server's network: a cluster node's
    `Cluster.command`, or by default a network namespace of the server's own (`ip netns exec`),
    made and removed here; then `srv.run_here(argv)` runs a client beside it.
    """

    def __init__(self, workdir: Path, export_dir: Path, run=None, address: str = "127.0.0.1") -> None:
        self.workdir = Path(workdir)
        self.export_dir = Path(export_dir)
        self.address = address
        self.own_netns = None if run else f"storlab-nfs-{os.getpid()}-{secrets.token_hex(2)}"
        self.place = run or (lambda argv: ["ip", "netns", "exec", self.own_netns, *argv])
        self.log = self.workdir / "ganesha.log"
        self.proc: subprocess.Popen | None = None

    def url(self, name: str, version: int = 3) -> str:
        """The URL of file `name` in the export, over NFSv3 (the export's path) or v4 (/export)."""
        if version == 4:
            return f"nfs://{self.address}/export/{name}"
        return f"nfs://{self.address}{self.export_dir}/{name}?version=3"

    def run_here(self, argv: list[str]) -> list[str]:
        return self.place(argv)

    def __enter__(self) -> GaneshaServer:
        state = self.workdir / "ganesha-state"
        state.mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "ganesha.conf"
        conf.write_text(_GANESHA_CONF.format(state=state, export=self.export_dir))
        script = _GANESHA_START.format(conf=conf, log=self.log, pid=self.workdir / "ganesha.pid")
        if self.own_netns:
            subprocess.run(["ip", "netns", "add", self.own_netns], check=True)
            subprocess.run(["ip", "-n", self.own_netns, "link", "set", "lo", "up"], check=True)
        self.proc = subprocess.Popen(self.place(["unshare", "-m", "--propagation", "private", "sh", "-c", script]),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().strip()
                self.__exit__(None, None, None)
                raise RuntimeError(f"ganesha exited at start: {err or self._log_tail()}")
            if self._listening():
                return self
            time.sleep(0.1)
        self.__exit__(None, None, None)
        raise RuntimeError(f"ganesha did not listen on 2049 and 20048 within 20 s: {self._log_tail()}")

    def _log_tail(self) -> str:
        return " | ".join(self.log.read_text().splitlines()[-3:]) if self.log.exists() else "no log"

    def _listening(self) -> bool:
        out = subprocess.run(self.place(["ss", "-Hltn"]), capture_output=True, text=True).stdout
        return all(f":{port} " in out for port in (2049, 20048, 111))

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)      # ganesha and its rpcbind
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.own_netns:
            subprocess.run(["ip", "netns", "del", self.own_netns], capture_output=True)
            self.own_netns = None
