#!/usr/bin/env python3
"""storlab net vs iperf3 on the same shaped links (issue 35: storlab net within 5 % of iperf3).

Builds a cluster in a box (tests/testbed/cluster.py: a client node and a server node, the link
shaped with tc htb) for each link rate, and on it runs, alternately round by round, `storlab net`
(under mpiexec with a rank on each node) and iperf3 (its server on the server node, its client on
the client node), each sending one TCP stream for --seconds. The figure is the receiver's rate:
storlab net's pair rate and iperf3's `sum_received`. The table gives each tool's median and the
median of the per-round ratios storlab/iperf3. Needs root, iproute2, iperf3, mpiexec and mpi4py.

    sudo python3 benchmarks/vs_net.py [--rounds 3] [--rates 100mbit,400mbit,1gbit] [--seconds 3] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "python")]
from testbed.cluster import Cluster, Fabric, cluster_unavailable, mpi_unavailable, parse_rate_bits  # noqa: E402


def storlab_net(c: Cluster, seconds: float, work: Path) -> float:
    out = work / "net.json"
    r = subprocess.run(c.mpiexec(["cli", "srv"], 2) + [sys.executable, "-m", "storlab", "net", "--servers", "srv",
                       "--time", f"{seconds}s", "--no-aggregate", "--json", str(out), "--no-store", "-q"],
                       capture_output=True, text=True, timeout=300, cwd=REPO)
    if r.returncode != 0:
        raise RuntimeError(f"storlab net: {r.stderr.strip()[-400:]}")
    return json.loads(out.read_text())["pairs"][0]["bw_bytes"]


def iperf3(c: Cluster, seconds: float) -> float:
    server = c.popen("srv", ["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        doc = json.loads(c.run("cli", ["iperf3", "-c", c.address("srv"), "-t", f"{seconds:g}", "-J"], timeout=120))
        return doc["end"]["sum_received"]["bits_per_second"] / 8
    finally:
        server.wait(timeout=30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rates", default="100mbit,400mbit,1gbit", help="link rates, comma-separated")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    why = cluster_unavailable() or mpi_unavailable() or (None if shutil.which("iperf3") else "no iperf3")
    if why:
        print(f"vs_net: {why}", file=sys.stderr)
        return 2
    rows, figures = [], []
    with tempfile.TemporaryDirectory(prefix="storlab-vs-net-") as tmp:
        for text in args.rates.split(","):
            bits = parse_rate_bits(text)
            with Cluster(["cli", "srv"], [Fabric("storage", rate_bps=bits)]) as c:
                ours, theirs, ratios = [], [], []
                for k in range(args.rounds):
                    order = (storlab_net, iperf3) if k % 2 == 0 else (iperf3, storlab_net)
                    got = {}
                    for f in order:
                        got[f] = f(c, args.seconds, Path(tmp)) if f is storlab_net else f(c, args.seconds)
                    ours.append(got[storlab_net])
                    theirs.append(got[iperf3])
                    ratios.append(got[storlab_net] / got[iperf3])
            ratio = statistics.median(ratios)
            figures.append({"link": text, "storlab_bytes_per_s": statistics.median(ours),
                            "iperf3_bytes_per_s": statistics.median(theirs), "ratios": ratios, "ratio": ratio})
            rows.append({"figure": f"vs_net {text} link, one stream (storlab net/iperf3 receiver rate)",
                         "value": ratio, "goal": ">= 0.95", "met": ratio >= 0.95})
    print("| link | storlab net Mbit/s | iperf3 Mbit/s | storlab/iperf3 (median of rounds) |\n|---|---|---|---|")
    for f in figures:
        print(f"| {f['link']} | {f['storlab_bytes_per_s'] * 8 / 1e6:.1f} | {f['iperf3_bytes_per_s'] * 8 / 1e6:.1f} | "
              f"{f['ratio']:.3f} ({', '.join(f'{r:.3f}' for r in f['ratios'])}) |")
    if args.json:
        Path(args.json).write_text(json.dumps({"figures": figures, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
