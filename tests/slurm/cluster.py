"""A single-host Slurm cluster for the tests: munged with a generated key, slurmctld and slurmd on
localhost, all state under one temporary folder, started once per test session and stopped after.

Debian's slurm-wlm and munge (scripts/test.sh installs them when root). Every daemon runs in the
foreground as a child of the test process, on ports chosen free at start, so two test sessions on one
machine do not meet, and nothing of the host's own Slurm or munge configuration is read or changed.
Whatever keeps Slurm from starting becomes the reason the Slurm tests skip, with the daemon's log.
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SlurmCluster", "SlurmUnavailable", "start_cluster"]

KILL_WAIT_S = 2          # SIGTERM to SIGKILL at a time limit or scancel (slurm.conf KillWait)
START_TIMEOUT_S = 60.0   # until sinfo shows the node idle


class SlurmUnavailable(Exception):
    """Slurm cannot run here; the message is the reason a test skips with."""


@dataclass
class SlurmCluster:
    root: Path                                   # every file the cluster writes is under it
    conf: Path                                   # slurm.conf: export SLURM_CONF=conf for srun & co
    node: str
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        """The environment for Slurm's client commands (srun, sinfo, squeue, scancel)."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def log_tail(self, daemon: str, lines: int = 15) -> str:
        path = self.root / "log" / f"{daemon}.log"
        try:
            text = path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return f"(no {daemon} log)"
        return " | ".join(text[-lines:]) or f"({daemon} log empty)"

    def client(self, *argv: str, timeout_s: float = 20.0) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env, timeout=timeout_s)

    def node_state(self) -> str:
        try:
            p = self.client("sinfo", "-h", "-N", "-n", self.node, "-o", "%T", timeout_s=10)
        except subprocess.TimeoutExpired:
            return "(sinfo timed out)"
        return p.stdout.strip() if p.returncode == 0 else f"(sinfo: {p.stderr.strip()})"

    def wait_idle(self, timeout_s: float) -> bool:
        """True when the node is idle (no job, or the last one fully completed) within timeout_s;
        False at once when a daemon has exited."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.dead_daemon() is None:
            if self.node_state() == "idle":
                return True
            time.sleep(0.3)
        return False

    def dead_daemon(self) -> str | None:
        return next((name for name, p in self.procs.items() if p.poll() is not None), None)

    def stop(self) -> None:
        """Cancel what still runs, stop the daemons, end any process of this cluster's jobs that
        outlived them, and remove the state folder."""
        if self.dead_daemon() is None and "slurmctld" in self.procs:
            try:
                self.client("scancel", "--full", "--user", str(os.geteuid()), timeout_s=10)
                self.wait_idle(KILL_WAIT_S + 10)
            except subprocess.TimeoutExpired:
                pass
        for name in ("slurmd", "slurmctld", "munged"):
            p = self.procs.pop(name, None)
            if p is None or p.poll() is not None:
                continue
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self._kill_leftovers()
        shutil.rmtree(self.root, ignore_errors=True)

    def _kill_leftovers(self) -> None:
        """slurmstepd and its tasks detach from slurmd: a task stuck where SIGTERM does nothing
        (MPI_Init waiting for a dead peer) would outlive the cluster. Each of them inherited
        SLURM_CONF naming this cluster's slurm.conf, which tells them from anything else."""
        mark = f"SLURM_CONF={self.conf}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if mark in f.read().split(b"\0"):
                        os.kill(int(entry), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                continue


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _slurm_conf(root: Path, node: str, cpus: int, ctld_port: int, slurmd_port: int) -> str:
    d = {k: root / k for k in ("state", "spool", "log", "run")}
    return "\n".join([
        "# generated by tests/slurm/cluster.py: a one-node cluster for the test session",
        "ClusterName=storlabtest",
        f"SlurmctldHost={node}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={d['run'] / 'munge.socket'}",
        f"StateSaveLocation={d['state']}",
        f"SlurmdSpoolDir={d['spool']}",
        f"SlurmctldPidFile={d['run'] / 'slurmctld.pid'}",
        f"SlurmdPidFile={d['run'] / 'slurmd.pid'}",
        f"SlurmctldLogFile={d['log'] / 'slurmctld.log'}",
        f"SlurmdLogFile={d['log'] / 'slurmd.log'}",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        # No cgroups: track a job's processes through /proc and bind no tasks to CPUs.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=pmi2",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SchedulerType=sched/builtin",
        "ReturnToService=2",
        # What a time limit does, quickly: SIGTERM, then SIGKILL KillWait seconds later.
        f"KillWait={KILL_WAIT_S}",
        "OverTimeLimit=0",
        "MinJobAge=2",
        "InactiveLimit=0",
        "MessageTimeout=10",
        # Job ids of their own: the ranks of job 3.0 here met a leftover rank of another cluster's
        # job 3.0 on this host (the PMI job id `<job>.<step>` was the same), and MPI_Init failed
        # ("Message truncated") or hung. A concurrent test session's cluster would do the same.
        f"FirstJobId={random.randrange(1_000, 60_000_000)}",
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN",
        f"PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def _missing_tools() -> list[str]:
    return [t for t in ("munged", "mungekey", "slurmctld", "slurmd", "srun", "sinfo", "squeue", "scancel")
            if shutil.which(t) is None]


def start_cluster(cpus: int = 2) -> SlurmCluster:
    """Start munged, slurmctld and slurmd; return once the node is idle, or raise
    SlurmUnavailable with the reason (and the failing daemon's log tail)."""
    if os.geteuid() != 0:
        raise SlurmUnavailable("needs root to run slurmctld and slurmd as SlurmUser=root")
    missing = _missing_tools()
    if missing:
        raise SlurmUnavailable(f"Slurm or munge not installed (missing {', '.join(missing)}; "
                               "apt-get install slurm-wlm munge, as scripts/test.sh does)")
    node = socket.gethostname().split(".")[0]
    root = Path(tempfile.mkdtemp(prefix="storlab-slurm-"))
    for sub in ("state", "spool", "log", "run"):
        (root / sub).mkdir(mode=0o700)
    conf = root / "slurm.conf"
    conf.write_text(_slurm_conf(root, node, cpus, _free_port(), _free_port()))
    cluster = SlurmCluster(root, conf, node)
    try:
        _start_munge(cluster)
        _start_daemon(cluster, "slurmctld", ["slurmctld", "-D", "-i", "-f", str(conf)])
        _start_daemon(cluster, "slurmd", ["slurmd", "-D", "-f", str(conf), "-N", node])
        if not cluster.wait_idle(START_TIMEOUT_S):
            dead = cluster.dead_daemon()
            if dead is not None:
                raise SlurmUnavailable(f"{dead} exited with code {cluster.procs[dead].returncode}: "
                                       f"{_said(cluster, dead)}")
            raise SlurmUnavailable(f"node {node} not idle after {START_TIMEOUT_S:g} s (sinfo: "
                                   f"{cluster.node_state()}); {_said(cluster, 'slurmctld')}; "
                                   f"{_said(cluster, 'slurmd')}")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _start_munge(cluster: SlurmCluster) -> None:
    run, log = cluster.root / "run", cluster.root / "log"
    key = run / "munge.key"
    p = subprocess.run(["mungekey", "--create", "--keyfile", str(key)], capture_output=True, text=True)
    if p.returncode != 0:
        raise SlurmUnavailable(f"mungekey failed: {p.stderr.strip()}")
    _start_daemon(cluster, "munged", [
        "munged", "--foreground", "--force", f"--key-file={key}", f"--socket={run / 'munge.socket'}",
        f"--pid-file={run / 'munged.pid'}", f"--seed-file={run / 'munged.seed'}",
        f"--log-file={log / 'munged.log'}"])
    deadline = time.monotonic() + 10
    while not (run / "munge.socket").exists():
        if time.monotonic() > deadline:
            raise SlurmUnavailable(f"munged made no socket in 10 s; munged log: {cluster.log_tail('munged')}")
        time.sleep(0.1)


def _start_daemon(cluster: SlurmCluster, name: str, argv: list[str]) -> None:
    """Start one daemon in the foreground; its own log goes to log/NAME.log, anything it prints
    before the log is open to log/NAME.out. A daemon that exits within a second failed to start."""
    out = open(cluster.root / "log" / f"{name}.out", "wb")
    p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         env=cluster.env, start_new_session=True)
    out.close()
    cluster.procs[name] = p
    try:
        code = p.wait(1.0)
    except subprocess.TimeoutExpired:
        return
    raise SlurmUnavailable(f"{name} exited with code {code} at start: {_said(cluster, name)}")


def _said(cluster: SlurmCluster, name: str) -> str:
    """The tail of a daemon's log, or what it printed when it failed before opening its log."""
    if (cluster.root / "log" / f"{name}.log").exists():
        return f"{name} log: {cluster.log_tail(name)}"
    printed = (cluster.root / "log" / f"{name}.out").read_text(errors="replace").strip().splitlines()
    return f"{name} printed: {' | '.join(printed[-15:]) or '(nothing)'}"
