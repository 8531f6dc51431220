"""A cluster in a box: nodes are network namespaces with host names of their own (a persistent UTS
namespace each), fabrics are Linux bridges with one veth link per node, each link shaped with tc htb
in both directions, and mpiexec (hydra) places ranks on the nodes through a bootstrap-exec helper
that enters a node's namespaces. Everything is removed on exit, after a failure or Ctrl-C.

    with Cluster(["n1", "n2", "srv"], [Fabric("storage", rate_bps=200_000_000,
                                              rates={"srv": 100_000_000})]) as c:
        c.run("n1", ["hostname"])                   # -> "n1"
        c.address("srv", "storage")                 # -> "10.213.1.3"
        subprocess.run(c.mpiexec(["n1", "n2"], 2) + [sys.executable, "-c", "..."])

Addresses: 10.213.F.N/24 (F the fabric's number from 1, N the node's from 1), set only inside the
namespaces the cluster makes; the bridges live in a namespace of their own (the switch), which also
holds the address mpiexec listens on (.254), so nothing is added to the host's own network.
Rates are bits per second, as tc and link speeds are written; htb shapes each direction of a link
(the node's side shapes what it sends, the switch's side what it receives).
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Cluster", "Fabric", "ClusterError", "cluster_unavailable", "mpi_unavailable", "find_mpiexec",
           "parse_rate_bits", "SUBNET"]

SUBNET = "10.213"                 # 10.213.F.N: private addresses used only inside the cluster's namespaces
SWITCH_HOST = 254                 # the switch namespace's address on every fabric (mpiexec's side)
RUN_ROOT = Path("/run/storlab-cluster")
MAX_NODES = 200
# htb's burst: what a link may send at line rate before the shaper holds it back. tc's default
# (rate / HZ) is too small at high rates for a timer-driven shaper; 1/100 s of traffic (at least
# 16 KiB, a few full frames) keeps the measured rate within a percent of the set one
BURST_S = 0.01
MIN_BURST_BYTES = 16 << 10


class ClusterError(RuntimeError):
    """A step of building or using the cluster failed; the message names the command and its error."""


def cluster_unavailable() -> str | None:
    """Why a cluster cannot be built here (None when it can): root, ip, tc, nsenter, unshare."""
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    for tool in ("ip", "tc", "nsenter", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} not found (iproute2, util-linux)"
    return None


cluster_unavailable.__test__ = False       # not a pytest test despite the name


def find_mpiexec() -> str | None:
    """The mpiexec beside this Python (the mpich wheel's), else the first on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else shutil.which("mpiexec")


def mpi_unavailable() -> str | None:
    """Why ranks cannot be placed on the nodes (None when they can): mpiexec and mpi4py."""
    if find_mpiexec() is None:
        return "no mpiexec (pip install mpich, or a site MPI on PATH)"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py not installed (pip install 'storlab[mpi]')"
    return None


def _run(cmd: list[str], check: bool = True) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise ClusterError(f"{' '.join(cmd)}: {(r.stderr or r.stdout).strip()}")
    return r.stdout


@dataclass(frozen=True)
class Fabric:
    """One network: a bridge with a link to every node. rate_bps shapes every link (None: not
    shaped); rates gives some nodes' links a rate of their own (a slower link)."""
    name: str
    rate_bps: int | None = None
    rates: dict[str, int] = field(default_factory=dict)

    def rate_of(self, node: str) -> int | None:
        return self.rates.get(node, self.rate_bps)


class Cluster:
    """Nodes and fabrics, built on enter and removed on exit (also after an exception or Ctrl-C)."""

    def __init__(self, nodes: list[str], fabrics: list[Fabric] | None = None, tag: str | None = None) -> None:
        if not nodes or len(nodes) > MAX_NODES or len(set(nodes)) != len(nodes):
            raise ClusterError(f"nodes: give 1 to {MAX_NODES} distinct names")
        for n in nodes:
            if not n.replace("-", "").isalnum() or not n.isascii() or len(n) > 10:
                raise ClusterError(f"node {n!r}: a host name of up to 10 letters, digits and '-'")
        self.nodes = list(nodes)
        self.fabrics = list(fabrics or [Fabric("storage")])
        if len({f.name for f in self.fabrics}) != len(self.fabrics) or len(self.fabrics) > 9:
            raise ClusterError("fabrics: give 1 to 9 distinct names")
        for f in self.fabrics:
            unknown = set(f.rates) - set(nodes)
            if unknown:
                raise ClusterError(f"fabric {f.name!r}: rates name nodes that are not in the cluster: {sorted(unknown)}")
        self.tag = tag or f"sl{secrets.token_hex(2)}"
        self.run_dir = RUN_ROOT / self.tag
        self.helper = self.run_dir / "bootstrap-exec"
        self._made: list[tuple[str, str]] = []      # (kind, name), in the order made, removed in reverse
        self._term_handler_before = None            # SIGTERM's handler before the cluster, while it lives

    # -- names ------------------------------------------------------------------------------------
    def netns(self, node: str) -> str:
        return f"{self.tag}-{node}"

    @property
    def switch(self) -> str:
        return f"{self.tag}-sw"

    def bridge(self, fabric: str) -> str:
        return f"br{self._fabric_number(fabric)}"

    def interface(self, fabric: str) -> str:
        """The node's interface on `fabric` (the same name on every node)."""
        return f"fab{self._fabric_number(fabric)}"

    def address(self, node: str, fabric: str | None = None) -> str:
        f = self._fabric_number(fabric or self.fabrics[0].name)
        return f"{SUBNET}.{f}.{self.nodes.index(node) + 1}"

    def switch_address(self, fabric: str | None = None) -> str:
        return f"{SUBNET}.{self._fabric_number(fabric or self.fabrics[0].name)}.{SWITCH_HOST}"

    def _fabric_number(self, fabric: str) -> int:
        for i, f in enumerate(self.fabrics, start=1):
            if f.name == fabric:
                return i
        raise ClusterError(f"fabric {fabric!r}: the cluster has {', '.join(f.name for f in self.fabrics)}")

    # -- building ---------------------------------------------------------------------------------
    def __enter__(self) -> "Cluster":
        why = cluster_unavailable()
        if why:
            raise ClusterError(why)
        previous = signal.getsignal(signal.SIGTERM)
        try:
            signal.signal(signal.SIGTERM, _raise_interrupt)   # a SIGTERM mid-build still tears down
        except ValueError:                                     # not the main thread: leave it
            previous = None
        # where nothing else handled SIGTERM, it keeps tearing down while the cluster lives (a
        # program ended by `timeout` would otherwise leave its namespaces): restored in __exit__
        keep = previous is signal.SIG_DFL
        try:
            self._build()
        except BaseException:
            self.close()
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
            raise
        if keep:
            self._term_handler_before = previous
        elif previous is not None:
            signal.signal(signal.SIGTERM, previous)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.close()
        finally:
            if self._term_handler_before is not None:
                signal.signal(signal.SIGTERM, self._term_handler_before)
                self._term_handler_before = None

    def _build(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._made.append(("dir", str(self.run_dir)))
        self._add_netns(self.switch)
        _run(["ip", "-n", self.switch, "link", "set", "lo", "up"])
        for node in self.nodes:
            self._add_node(node)
        for fabric in self.fabrics:
            self._add_fabric(fabric)
        self._write_helper()

    def _add_netns(self, name: str) -> None:
        _run(["ip", "netns", "add", name])
        self._made.append(("netns", name))

    def _add_node(self, node: str) -> None:
        ns = self.netns(node)
        self._add_netns(ns)
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        uts = self.run_dir / f"uts-{node}"
        uts.touch()
        # a persistent UTS namespace (bind-mounted on the file) with the node's host name
        _run(["unshare", f"--uts={uts}", "hostname", node])
        self._made.append(("uts", str(uts)))

    def _add_fabric(self, fabric: Fabric) -> None:
        br, number = self.bridge(fabric.name), self._fabric_number(fabric.name)
        _run(["ip", "-n", self.switch, "link", "add", br, "type", "bridge"])
        _run(["ip", "-n", self.switch, "addr", "add", f"{self.switch_address(fabric.name)}/24", "dev", br])
        _run(["ip", "-n", self.switch, "link", "set", br, "up"])
        for node in self.nodes:
            index = self.nodes.index(node) + 1
            inside, outside = self.interface(fabric.name), f"v{number}n{index}"
            # made in the switch, then one end moved into the node (names are per namespace)
            _run(["ip", "-n", self.switch, "link", "add", outside, "type", "veth", "peer", "name", inside,
                  "netns", self.netns(node)])
            _run(["ip", "-n", self.switch, "link", "set", outside, "master", br, "up"])
            _run(["ip", "-n", self.netns(node), "addr", "add", f"{self.address(node, fabric.name)}/24", "dev", inside])
            _run(["ip", "-n", self.netns(node), "link", "set", inside, "up"])
            rate = fabric.rate_of(node)
            if rate is not None:
                self._shape(self.netns(node), inside, rate)
                self._shape(self.switch, outside, rate)

    def _shape(self, ns: str, dev: str, rate_bps: int) -> None:
        if rate_bps < 8_000:
            raise ClusterError(f"link rate {rate_bps} bit/s: at least 8000")
        burst = max(MIN_BURST_BYTES, int(rate_bps / 8 * BURST_S))
        _run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb",
              "default", "1"])
        _run(["ip", "netns", "exec", ns, "tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:1",
              "htb", "rate", f"{rate_bps}bit", "ceil", f"{rate_bps}bit", "burst", str(burst), "cburst", str(burst)])

    def _write_helper(self) -> None:
        """mpiexec's bootstrap-exec: called as ssh would be (options, then the host, then the
        command as words a shell joins), it runs the command inside that node's namespaces."""
        nodes = " ".join(self.nodes)
        self.helper.write_text(f"""#!/bin/sh
# mpiexec bootstrap-exec of storlab's cluster in a box {self.tag}: HOST COMMAND... run in HOST's namespaces
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
node=$1; shift
case " {nodes} " in *" $node "*) ;; *) echo "bootstrap-exec: $node is not a node of {self.tag}" >&2; exit 2 ;; esac
exec nsenter --net=/run/netns/{self.tag}-$node --uts={self.run_dir}/uts-$node -- sh -c "$*"
""")
        self.helper.chmod(0o755)

    # -- using ------------------------------------------------------------------------------------
    def command(self, node: str, argv: list[str]) -> list[str]:
        """argv to run `argv` on `node` (its network and host name)."""
        if node not in self.nodes:
            raise ClusterError(f"node {node!r}: the cluster has {', '.join(self.nodes)}")
        return ["nsenter", f"--net=/run/netns/{self.netns(node)}", f"--uts={self.run_dir}/uts-{node}", "--", *argv]

    def run(self, node: str, argv: list[str], timeout: float = 60, check: bool = True) -> str:
        r = subprocess.run(self.command(node, argv), capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise ClusterError(f"{node}: {' '.join(argv)}: {(r.stderr or r.stdout).strip()}")
        return r.stdout

    def popen(self, node: str, argv: list[str], **kwargs) -> subprocess.Popen:
        return subprocess.Popen(self.command(node, argv), **kwargs)

    def mpiexec(self, hosts: list[str], ranks: int, mpiexec: str | None = None, fabric: str | None = None) -> list[str]:
        """The mpiexec command line (run from the switch namespace) that places `ranks` ranks
        round-robin on `hosts`; append the program and its arguments."""
        exe = mpiexec or find_mpiexec() or "mpiexec"
        return ["ip", "netns", "exec", self.switch, exe, "-bootstrap", "ssh", "-bootstrap-exec", str(self.helper),
                "-iface", self.bridge(fabric or self.fabrics[0].name), "-hosts", ",".join(hosts), "-n", str(ranks)]

    # -- removing ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Remove everything made, newest first; keeps going past failures and reports the first."""
        errors = []
        for kind, name in reversed(self._made):
            try:
                if kind == "netns":
                    _kill_in_netns(name)
                    _run(["ip", "netns", "del", name])
                elif kind == "uts":
                    _run(["umount", name], check=False)
                    os.unlink(name)
                elif kind == "dir":
                    shutil.rmtree(name, ignore_errors=True)
            except (ClusterError, OSError) as e:
                errors.append(str(e))
        self._made.clear()
        if errors:
            raise ClusterError("clean-up: " + "; ".join(errors))


def _kill_in_netns(ns: str) -> None:
    """End every process still inside a namespace (a server a test left), so it can go."""
    pids = _run(["ip", "netns", "pids", ns], check=False).split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def leftovers() -> list[str]:
    """Namespaces and folders of clusters not removed (a killed test): for a clean-up check."""
    names = [line.split()[0] for line in _run(["ip", "netns", "list"], check=False).splitlines() if line.strip()]
    found = [n for n in names if n.startswith("sl") and "-" in n and len(n.split("-")[0]) == 6]
    if RUN_ROOT.is_dir():
        found += [str(p) for p in RUN_ROOT.iterdir()]
    return found


_received: list[int] = []


def _raise_interrupt(signum, frame):   # noqa: ARG001 - a signal handler's signature
    _received.append(signum)
    raise KeyboardInterrupt


def parse_rate_bits(text: str) -> int:
    """'200mbit', '1gbit', '500kbit' or a number of bits per second."""
    units = {"gbit": 10**9, "mbit": 10**6, "kbit": 10**3, "bit": 1}
    t = text.strip().lower()
    for suffix, mult in units.items():
        if t.endswith(suffix):
            t, scale = t[: -len(suffix)], mult
            break
    else:
        scale = 1
    try:
        value = float(t) * scale
    except ValueError:
        raise ClusterError(f"--rate {text!r}: a rate such as 200mbit, 1gbit or bits per second") from None
    if not (8_000 <= value <= 10**12):
        raise ClusterError(f"--rate {text!r}: between 8kbit and 1000gbit")
    return int(value)


def main(argv: list[str] | None = None) -> int:
    """python -m tests.testbed.cluster --nodes n1,n2,srv [--rate 200mbit] [--slow srv=100mbit] --hold:
    build the cluster, print how to use it, wait for Ctrl-C or SIGTERM, remove it."""
    import argparse
    import time

    p = argparse.ArgumentParser(prog="python -m tests.testbed.cluster", description=main.__doc__.splitlines()[0])
    p.add_argument("--nodes", required=True, help="node names, comma-separated")
    p.add_argument("--rate", help="every link's rate (e.g. 200mbit); not shaped without it")
    p.add_argument("--slow", action="append", default=[], metavar="NODE=RATE", help="one node's link at its own rate")
    p.add_argument("--hold", action="store_true", help="wait for Ctrl-C or SIGTERM, then remove the cluster")
    args = p.parse_args(argv)
    # both tear down; SIGINT too when started with it ignored (a background job of a shell)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, _raise_interrupt)
    try:
        rates = {}
        for item in args.slow:
            node, _, rate = item.partition("=")
            rates[node] = parse_rate_bits(rate)
        fabric = Fabric("storage", parse_rate_bits(args.rate) if args.rate else None, rates)
        with Cluster(args.nodes.split(","), [fabric]) as c:
            print(f"cluster: {c.tag}: " + ", ".join(f"{n} {c.address(n)}" for n in c.nodes)
                  + f"; run on a node: {' '.join(c.command(c.nodes[0], ['CMD']))}; "
                  + f"mpiexec: {' '.join(c.mpiexec(c.nodes, len(c.nodes)))} PROGRAM", flush=True)
            while args.hold:
                time.sleep(0.2)     # short sleeps, not pause(): a signal before the pause would be lost
    except ClusterError as e:
        print(f"cluster: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cluster: interrupted; removed", file=sys.stderr)
        return 128 + (_received[-1] if _received else signal.SIGINT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
