"""What storlab costs before it does any work: wall time and peak resident memory of
`storlab --version`, `storlab run --help` and a 1 s `storlab run --no-store` on /dev/shm, each
started as a fresh process (`python -m storlab`), beside the bare interpreter (`python -c pass`:
what no change to storlab can remove). The median of several rounds, the cases taken in turn.

    python benchmarks/startup.py [--rounds 7] [--dir /dev/shm] [--json FILE] [--tree DIR ...]

`--tree DIR` (repeatable) runs the storlab found in DIR (a `python/` folder of a checkout, with its
built `_core`) instead of the one on the path; with two trees the rounds alternate between them
and the last column is each case's ratio to the first tree, the figure to read on a shared machine.

CPU s is the child's user + system time: on a shared machine it moves less with the load than
the wall time does (a 1 s run spends most of its second waiting or doing I/O). The children run
with bytecode caches (in a temporary folder, filled by an untimed first round), as an installed
storlab does, also where the shell sets PYTHONDONTWRITEBYTECODE. Peak memory is
the child's ru_maxrss (os.wait4), the figure `/usr/bin/time -v` prints as "Maximum
resident set size". The 1 s run's wall time includes its 1 s of I/O and the 1 MiB layout; its
start-up is shown as wall - 1 s. The goal (issue 25): <= 0.15 s and <= 35 MB for every command
that draws no chart.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def commands(folder: Path) -> dict[str, tuple[list[str], float]]:
    """Each case: its arguments after `python`, and the seconds of work it asks for."""
    target = str(folder / f"storlab-startup-{os.getpid()}.dat")
    return {
        "python -c pass (the interpreter)": (["-c", "pass"], 0.0),
        "storlab --version": (["-m", "storlab", "--version"], 0.0),
        "storlab run --help": (["-m", "storlab", "run", "--help"], 0.0),
        "storlab run (1 s, --no-store)": (["-m", "storlab", "run", "--no-store", "--target", target,
                                            "--size", "1m", "--rw", "read", "--bs", "64k", "--time", "1s"],
                                           1.0),
    }


# Bytecode caches for the children, in a folder of their own (the trees stay clean): an installed
# storlab has its .pyc files, so compiling every module from source (PYTHONDONTWRITEBYTECODE=1, set
# in some shells and CI images) is not start-up a user sees. Filled by an untimed first round.
PYCACHE = tempfile.mkdtemp(prefix="storlab-startup-pycache-")


def measure_once(args: list[str], tree: str | None) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system) and peak resident bytes of one `python ARGS` child."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = PYCACHE
    if tree:
        env["PYTHONPATH"] = tree
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"python {' '.join(args)} failed (exit {code}): {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024  # Linux reports KiB


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7, help="rounds of every case, taken in turn")
    ap.add_argument("--dir", default="/dev/shm", help="folder for the run's 1 MiB target")
    ap.add_argument("--tree", action="append", default=[],
                    help="a python/ folder whose storlab to measure (repeat to compare, alternating)")
    ap.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args()
    cases = commands(Path(a.dir))
    trees: list[str | None] = a.tree or [None]
    walls = {(t, n): [] for t in trees for n in cases}
    cpus = {(t, n): [] for t in trees for n in cases}
    rss = {(t, n): [] for t in trees for n in cases}
    try:
        for args, _work in cases.values():   # untimed: compiles the bytecode caches
            for tree in trees:
                measure_once(args, tree)
        for _ in range(a.rounds):
            for name, (args, _work) in cases.items():
                for tree in trees:
                    w, c, r = measure_once(args, tree)
                    walls[tree, name].append(w)
                    cpus[tree, name].append(c)
                    rss[tree, name].append(r)
    finally:
        shutil.rmtree(PYCACHE, ignore_errors=True)
        for args, _ in cases.values():
            if "--target" in args:
                Path(args[args.index("--target") + 1]).unlink(missing_ok=True)
    rows = []
    print(f"{'tree':24} {'command':34} {'wall s':>8} {'start-up s':>11} {'CPU s':>7} {'max RSS MB':>11} "
          f"{'/ first':>8}")
    for name, (_args, work) in cases.items():
        first = statistics.median(walls[trees[0], name]) - work
        for tree in trees:
            wall = statistics.median(walls[tree, name])
            mb = statistics.median(rss[tree, name]) / 1e6
            cpu = statistics.median(cpus[tree, name])
            rows.append({"tree": tree, "command": name, "wall_s": wall, "startup_s": wall - work,
                         "cpu_s": cpu, "max_rss_mb": mb, "rounds": a.rounds})
            label = (tree or "(the path's)")[-24:]
            print(f"{label:24} {name:34} {wall:8.3f} {wall - work:11.3f} {cpu:7.3f} {mb:11.1f} "
                  f"{(wall - work) / first if first > 0 else float('nan'):8.2f}")
    print(f"medians of {a.rounds} rounds; load average {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs); "
          "goal: start-up <= 0.15 s and <= 35 MB without charts")
    if a.json:
        Path(a.json).write_text(json.dumps({"machine": platform.node(), "python": sys.version.split()[0],
                                            "load_average": os.getloadavg()[0], "cases": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
