#!/usr/bin/env python3
"""storlab io500 vs the real io500, side by side with the same .ini (issue 24).

Builds io500 (IOR, mdtest, pfind) with the peers' build script when PREFIX/io500 is missing (needs
mpicc: the mpich wheel's is on PATH next to python), then for each file system and rank count runs
`mpiexec -n N io500 cfg.ini` and `mpiexec -n N storlab io500 cfg.ini` alternately (--rounds
rounds) with a short stonewall, reads both result.txt files (storlab writes io500's layout) and
prints every phase's median ratio storlab/io500, BW, MD and SCORE, as a Markdown table, and the
figures as JSON (--json).

File systems: tmpfs (/dev/shm) always; ext4 on a loop device backed by a /dev/shm file with --fs
tmpfs,ext4 (root). The short stonewall makes both runs invalid by io500's rules; the figures
compare the same work, not a valid IO500 result. Before every run the last run's files are removed,
written back and (on ext4) trimmed, and the page cache dropped when root (`settle`).

    python3 benchmarks/vs_io500.py [--ranks 1,2,4] [--stonewall 2] [--rounds 1] [--fs tmpfs,ext4]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PHASES = ("ior-easy-write", "mdtest-easy-write", "ior-hard-write", "mdtest-hard-write", "find",
          "ior-easy-read", "mdtest-easy-stat", "ior-hard-read", "mdtest-hard-stat", "mdtest-easy-delete",
          "mdtest-hard-read", "mdtest-hard-delete", "ior-rnd4K-easy-read")


def read_result(path: str) -> dict[str, float]:
    """{phase: score, "BW", "MD", "SCORE"} from an io500 result.txt."""
    out: dict[str, float] = {}
    section = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
            elif "=" in line and not line.startswith(";"):
                key, value = (x.strip() for x in line.split("=", 1))
                if section == "SCORE" and key in ("BW", "MD", "SCORE"):
                    out[key] = float(value.split()[0])
                elif key == "score" and section:
                    out[section] = float(value)
                elif key == "t_delta" and section:
                    out[section + ".time"] = float(value)
    return out


def config(datadir: str, resultdir: str, stonewall: int, n_easy: int, n_hard: int) -> str:
    return (f"[global]\ndatadir = {datadir}\nresultdir = {resultdir}\ntimestamp-resultdir = FALSE\n"
            f"timestamp-datadir = TRUE\n[debug]\nstonewall-time = {stonewall}\n"
            f"[ior-easy]\ntransferSize = 2m\nblockSize = 9920000m\n[mdtest-easy]\nn = {n_easy}\n"
            f"[ior-hard]\nsegmentCount = 10000000\n[mdtest-hard]\nn = {n_hard}\n")


def mpiexec() -> str:
    found = shutil.which("mpiexec") or os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not os.path.exists(found):
        sys.exit("vs_io500: no mpiexec (pip install mpich)")
    return found


def build_io500(prefix: str) -> str:
    if os.path.exists(os.path.join(prefix, "io500")):
        return prefix
    script = os.path.join(os.path.dirname(REPO), "shared", "peers", "build-io500.sh")
    script = os.environ.get("IO500_BUILD", script)
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    subprocess.run(["bash", script, prefix], check=True, env=env, stdout=subprocess.DEVNULL)
    return prefix


def run_one(tool: str, n: int, ini: str, resultdir: str, io500_prefix: str, timeout_s: float) -> dict[str, float]:
    shutil.rmtree(resultdir, ignore_errors=True)
    os.makedirs(resultdir)
    env = {**os.environ, "PYTHONPATH": os.path.join(REPO, "python")}
    if tool == "io500":
        cmd = [mpiexec(), "-n", str(n), os.path.join(io500_prefix, "io500"), ini]
    else:
        cmd = [mpiexec(), "-n", str(n), sys.executable, "-m", "storlab", "io500", ini, "--quiet", "--no-store"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=resultdir)
    if p.returncode != 0:
        raise RuntimeError(f"{tool} -n {n} failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    return read_result(os.path.join(resultdir, "result.txt"))


def settle(data: str, loop: "Ext4Loop | None") -> None:
    """Every run starts from the same state: what the last run left (the ior files of a
    timestamped datadir) removed, nothing dirty or still being freed, an empty page cache. On ext4
    over a loop device, a run that starts while the last run's removal is still being written back
    and discarded pays for it in its fsync: ior-hard-write's phase (its fsync included) measured 2.5
    to 6.1 s for the same writes, in either tool, without this."""
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(data)
    os.sync()
    if loop is not None:
        subprocess.run(["fstrim", loop.mnt], check=False, capture_output=True)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass        # not root: the runs start with what the cache holds


class Ext4Loop:
    """An ext4 file system on a loop device backed by a /dev/shm file (root)."""

    def __init__(self, size_mb: int) -> None:
        self.backing = tempfile.mktemp(prefix="vs-io500-", suffix=".img", dir="/dev/shm")
        self.mnt = tempfile.mkdtemp(prefix="vs-io500-mnt-")
        subprocess.run(["truncate", "-s", f"{size_mb}M", self.backing], check=True)
        self.dev = subprocess.run(["losetup", "-f", "--show", self.backing], check=True, capture_output=True,
                                  text=True).stdout.strip()
        subprocess.run(["mkfs.ext4", "-q", "-F", self.dev], check=True)
        subprocess.run(["mount", self.dev, self.mnt], check=True)

    def close(self) -> None:
        subprocess.run(["umount", self.mnt], check=False)
        subprocess.run(["losetup", "-d", self.dev], check=False)
        os.unlink(self.backing)
        os.rmdir(self.mnt)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--stonewall", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--fs", default="tmpfs")
    ap.add_argument("--n-easy", type=int, default=1_000_000, help="mdtest-easy n (the stonewall ends it first)")
    ap.add_argument("--n-hard", type=int, default=1_000_000, help="mdtest-hard n")
    ap.add_argument("--io500", default="/tmp/io500b", help="io500 build prefix (built when missing)")
    ap.add_argument("--ext4-mb", type=int, default=12000)
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args()
    prefix = build_io500(args.io500)
    figures = []
    for fs in args.fs.split(","):
        loop = Ext4Loop(args.ext4_mb) if fs == "ext4" else None
        base = loop.mnt if loop else tempfile.mkdtemp(prefix="vs-io500-", dir="/dev/shm")
        try:
            data, res = os.path.join(base, "data"), os.path.join(base, "res")
            os.makedirs(data, exist_ok=True)
            ini = os.path.join(base, "cfg.ini")
            with open(ini, "w") as f:
                f.write(config(data, res, args.stonewall, args.n_easy, args.n_hard))
            for n in [int(x) for x in args.ranks.split(",")]:
                runs: dict[str, list[dict[str, float]]] = {"io500": [], "storlab": []}
                for _ in range(args.rounds):
                    for tool in ("io500", "storlab"):
                        runs[tool].append(run_one(tool, n, ini, res, prefix, 30 * args.stonewall + 300))
                        settle(data, loop)
                        time.sleep(1)
                med = {tool: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for tool, rs in runs.items()}
                figures.append({"fs": fs, "ranks": n, "stonewall_s": args.stonewall, "rounds": args.rounds,
                                "io500": med["io500"], "storlab": med["storlab"]})
                print(f"done: {fs} {n} ranks", file=sys.stderr)
        finally:
            if loop:
                loop.close()
            else:
                shutil.rmtree(base, ignore_errors=True)
    print(render(figures))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load": os.getloadavg(), "figures": figures}, f, indent=1)
    return 0


def render(figures: list[dict]) -> str:
    cols = [f"{f['fs']} {f['ranks']}r" for f in figures]
    lines = ["| phase | " + " | ".join(f"{c} io500 | {c} storlab | ratio" for c in cols) + " |",
             "|---|" + "---|---|---|" * len(cols)]
    for key in (*PHASES, "BW", "MD", "SCORE"):
        cells = []
        for f in figures:
            a, b = f["io500"].get(key), f["storlab"].get(key)
            ratio = f"{b / a:.2f}" if a and b is not None else "-"
            cells.append(f"{a if a is not None else '-':.6g} | {b if b is not None else '-':.6g} | {ratio}"
                         if a is not None and b is not None else "- | - | -")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
