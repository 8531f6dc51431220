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


# --- S3: the Versity S3 Gateway ------------------------------------------------------------------

def versitygw_path() -> str | None:
    """The versitygw binary: $STORLAB_VERSITYGW, the one scripts/test.sh builds into the cache, or
    one on PATH."""
    cached = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "storlab-peers/versitygw/bin/versitygw"
    for candidate in (os.environ.get("STORLAB_VERSITYGW"), str(cached), shutil.which("versitygw")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def s3_unavailable() -> str | None:
    """Why S3 tests cannot run here, or None."""
    if versitygw_path() is None:
        return ("versitygw is not built (scripts/test.sh builds it with `go install "
                "github.com/versity/versitygw/cmd/versitygw@v1.8.0` into ~/.cache/storlab-peers/versitygw)")
    return None


class VersityServer:
    """`with VersityServer(tmp_path) as srv:` the Versity S3 Gateway serving the folder `srv.root`
    (posix backend: each sub-folder a bucket, each object a file under it) on a loopback port,
    `srv.endpoint` its URL; `srv.env` the AWS_* variables of its root user, whose access key and
    secret the test makes (passed to the server through its environment, not its command line).

    `buckets` are made before it starts; `tls` serves HTTPS with a self-signed certificate made
    by openssl. `srv.requests()` is its access log. `same_store_as` serves another server's
    folder with its keys (a second endpoint of one store). `max_requests` caps the requests it
    serves at once: those beyond are answered 503 SlowDown. `place(argv) -> argv` runs the server
    elsewhere (a cluster node's `Cluster.command`), serving on `address`.
    """

    def __init__(self, workdir: Path, buckets: tuple[str, ...] = ("bench",), *, tls: bool = False,
                 same_store_as: VersityServer | None = None, max_requests: int | None = None, place=None,
                 address: str = "127.0.0.1") -> None:
        self.workdir = Path(workdir)
        self.root = same_store_as.root if same_store_as else self.workdir / "vgw-root"
        for bucket in buckets:
            (self.root / bucket).mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.place = place
        self.address = address
        self.access_key = same_store_as.access_key if same_store_as else "STORLAB" + secrets.token_hex(6).upper()
        self.secret = same_store_as.secret if same_store_as else secrets.token_urlsafe(24)
        self.access_log = self.workdir / f"vgw-access-{self.port}.log"
        self.tls = tls
        # --keep-alive: without it the gateway closes the connection after every answer
        self.args = [versitygw_path() or "versitygw", "--port", f"{address}:{self.port}", "--quiet", "--keep-alive",
                     "--access-log", str(self.access_log)]
        if max_requests:
            self.args += ["--max-requests", str(max_requests)]
        if tls:
            cert, key = self.workdir / "vgw.crt", self.workdir / "vgw.key"
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
            self.args += ["--cert", str(cert), "--key", str(key)]
        self.args += ["posix", str(self.root)]
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.address}:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """The environment of a client of this server: the root user's keys, nothing else of AWS's."""
        kept = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        return {**kept, "AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret,
                "AWS_SHARED_CREDENTIALS_FILE": str(self.workdir / "no-credentials"),
                "AWS_CONFIG_FILE": str(self.workdir / "no-config")}

    def __enter__(self) -> VersityServer:
        env = {**os.environ, "ROOT_ACCESS_KEY_ID": self.access_key, "ROOT_SECRET_ACCESS_KEY": self.secret}
        argv = self.place(self.args) if self.place else self.args
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"versitygw exited at start: {self.proc.stderr.read().strip()[-500:]}")
            if self._listening():
                return self
            time.sleep(0.05)
        self.__exit__(None, None, None)
        raise RuntimeError("versitygw did not start listening within 20 s")

    def _listening(self) -> bool:
        if self.place:
            out = subprocess.run(self.place(["ss", "-Hltn"]), capture_output=True, text=True).stdout
            return f"{self.address}:{self.port} " in out
        with socket.socket() as s:
            return s.connect_ex((self.address, self.port)) == 0

    # stopped as nbdkit is: SIGTERM, then SIGKILL after 10 s
    __exit__ = NbdServer.__exit__

    def objects(self, bucket: str, prefix: str) -> dict[str, int]:
        """The files under BUCKET/PREFIX in the server's folder (its objects), with their sizes."""
        folder = self.root / bucket / prefix
        if not folder.is_dir():
            return {}
        return {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}

    def requests(self) -> str:
        """The server's access log so far (one line per request)."""
        return self.access_log.read_text() if self.access_log.exists() else ""


# --- a network file system through FUSE: SSHFS over loopback ----------------------------------------

def sshfs_unavailable() -> str | None:
    """Why an SSHFS mount cannot be made here, or None: root, sshd, sshfs and /dev/fuse."""
    if os.geteuid() != 0:
        return "needs root (mounting)"
    for tool, package in (("sshfs", "sshfs"), ("sshd", "openssh-server"), ("ssh-keygen", "openssh-client")):
        if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
            return f"{tool} is not installed ({package}; scripts/test.sh installs it when run as root)"
    if not Path("/dev/fuse").exists():
        return "no /dev/fuse (the kernel has no FUSE here)"
    return None


class SshfsMount:
    """`with SshfsMount(workdir) as m:` an sshd of the test's own on a loopback port (its own host
    key, a key pair made for it, root's login by key only) serving `m.served`, mounted with sshfs
    at `m.mount_point`: a network file system through FUSE, on loopback only."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.served = self.workdir / "served"
        self.mount_point = self.workdir / "mnt"
        self.port = free_port()
        self.sshd: subprocess.Popen | None = None
        self.mounted = False

    def __enter__(self) -> SshfsMount:
        self.served.mkdir(parents=True, exist_ok=True)
        self.mount_point.mkdir(parents=True, exist_ok=True)
        keys = self.workdir / "keys"
        keys.mkdir(exist_ok=True)
        for name in ("host", "client"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / name)], check=True)
        (keys / "authorized_keys").write_text((keys / "client.pub").read_text())
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        Path("/run/sshd").mkdir(exist_ok=True)            # sshd's privilege-separation folder
        self.sshd = subprocess.Popen(
            [sshd, "-D", "-e", "-f", "/dev/null", "-p", str(self.port), "-h", str(keys / "host"),
             "-o", "ListenAddress=127.0.0.1", "-o", f"AuthorizedKeysFile={keys / 'authorized_keys'}",
             "-o", "PermitRootLogin=prohibit-password", "-o", "PasswordAuthentication=no", "-o", "StrictModes=no",
             "-o", "Subsystem=sftp internal-sftp", "-o", f"PidFile={self.workdir / 'sshd.pid'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            if self.sshd.poll() is not None:
                raise RuntimeError(f"sshd exited at start: {self.sshd.stderr.read().strip()}")
            time.sleep(0.05)
        r = subprocess.run(["sshfs", "-p", str(self.port), "-o", f"IdentityFile={keys / 'client'}",
                            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                            f"root@127.0.0.1:{self.served}", str(self.mount_point)],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            self.__exit__(None, None, None)
            raise RuntimeError(f"sshfs: {r.stderr.strip()}")
        self.mounted = True
        return self

    def __exit__(self, *exc) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.mount_point)], capture_output=True)
            self.mounted = False
        if self.sshd and self.sshd.poll() is None:
            self.sshd.terminate()
            self.sshd.wait(timeout=10)
