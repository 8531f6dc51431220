#!/usr/bin/env python3
"""storlab's s3 engine beside fio 3.42's http engine (S3 mode), s3dlio and boto3 on one S3 server
(issue 34: storlab's ratio to the best peer on every row, and its client CPU per GiB).

The server is the tests' Versity S3 Gateway (tests/testbed/servers.py), on loopback TCP, its
folder on tmpfs (/dev/shm), its access log off. The grid: PUT and GET of whole objects of 64 KiB,
1 MiB and 16 MiB at 1, 16 and 64 requests outstanding, and ranged GETs of 4 KiB inside 1 MiB
objects at the same depths. Each cell runs every tool once per round, the order rotating round by
round so a slow spell does not always land on one tool. Outstanding requests are: storlab one
worker with `--qd N`; fio `numjobs=N` (its http engine is synchronous, one request per job; the
clones' ranges follow on with offset_increment); s3dlio `max_in_flight=N` (put_many, get_many;
ranges: N get_range_async at once); boto3 N threads sharing one client with N pooled connections.

Figures, per tool and cell (median over rounds): MB/s (10^6 bytes/s: storlab and fio their own
bandwidth, the Python peers bytes over the wall time of their requests), the client's CPU seconds
per GiB moved (storlab: the phase's own CPU; fio: its whole process, as the kernel accounted it;
the Python peers: their process's CPU over the requests only, each run in a process of its own so
the CPU is theirs alone), and the server's CPU seconds per GiB (/proc/PID/stat of the gateway over
the tool's run). The ratio is the median of the per-round ratios storlab / the best peer of that
round. The server's ceiling row of a cell is the highest MB/s any tool reached there, with the
gateway's share of the machine's CPUs during that run: near all the CPUs the client left it, that
cell measures the server (on loopback, client and server share the CPUs), not the client. A tool
that fails or runs past 120 s in a cell gives that cell no figure and says why; the others go on.

Objects read: storlab, s3dlio and boto3 read storlab's objects (PREFIX/obj-NNNNNNNNNNNN, laid out
once per size); fio's block mode names its own (KEY_OFFSET_BS), laid out by fio; its ranged reads
are http_object_mode=range on storlab's objects (a `:` list of them, one fio file each), objects
both tools name alike in that mode (docs/fio.md).

    python3 benchmarks/vs_s3.py [--rounds 3] [--quick] [--fio PATH] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "python")]

GiB, MiB, KiB = 1 << 30, 1 << 20, 1 << 10
SIZES = (64 * KiB, MiB, 16 * MiB)
DEPTHS = (1, 16, 64)
RANGE_BS, RANGE_OBJECT = 4 * KiB, MiB
CAP_S = 120
TOOLS = ("storlab", "fio", "s3dlio", "boto3")
BUCKET = "bench"


def label_size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n // KiB} KiB"


# -- running a tool ---------------------------------------------------------------------------------
class NoFigure(RuntimeError):
    """A tool failed or hung in a cell: the cell gets no figure for it, with this reason."""


def server_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(cmd: list[str], env: dict) -> tuple[subprocess.CompletedProcess, float]:
    """Run cmd (at most CAP_S); the CPU seconds (user + system) the kernel accounted to it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=CAP_S, cwd=REPO, env=env)
    except subprocess.TimeoutExpired:
        raise NoFigure(f"{Path(cmd[0]).name} did not finish within {CAP_S} s") from None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:     # the last line says why (a Python peer's exception, storlab's one line)
        lines = [line.strip() for line in (r.stderr or r.stdout).splitlines() if line.strip()]
        raise NoFigure(f"{Path(cmd[0]).name} exit {r.returncode}: {(lines or ['no message'])[-1][-300:]}")
    return r, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


class Bench:
    """The server, the objects laid out for reading, and one run of each tool."""

    def __init__(self, srv, work: Path, fio: str | None) -> None:
        self.srv, self.work, self.fio = srv, work, fio
        self.env = {**srv.env, "PYTHONPATH": str(REPO / "python"), "S3_ID": srv.access_key, "S3_KEY": srv.secret}
        self.host = srv.endpoint.split("//", 1)[1]
        self.runs = 0
        self.objects = 1       # objects laid out under the read prefix

    def fresh_prefix(self, tool: str) -> str:
        self.runs += 1
        return f"w{self.runs}-{tool}"

    def drop(self, prefix: str) -> None:
        shutil.rmtree(self.srv.root / BUCKET / prefix, ignore_errors=True)

    # storlab: `storlab run` on the s3 target; its phase's bandwidth and CPU
    def storlab(self, op: str, size: int, depth: int, count: int, prefix: str) -> tuple[float, float, int]:
        out = self.work / "storlab.json"
        out.unlink(missing_ok=True)
        args = ["--target", f"s3://{BUCKET}/{prefix}", "--endpoint", self.srv.endpoint, "--qd", str(depth),
                "--threads", "1", "--no-store", "-q", "--json", str(out)]
        if op == "put":
            args += ["--rw", "write", "--bs", str(size), "--size", str(size * count)]
        elif op == "get":
            args += ["--rw", "read", "--bs", str(size), "--size", str(size * count), "--keep-objects"]
        else:
            args += ["--rw", "randread", "--bs", str(RANGE_BS), "--object-size", str(RANGE_OBJECT),
                     "--io-size", str(RANGE_BS * count), "--keep-objects"]
        run([sys.executable, "-m", "storlab", "run", *args], self.env)
        phase = json.loads(out.read_text())["phases"][0]
        d = phase["write" if op == "put" else "read"]
        return d["bw_bytes"], phase["cpu"]["self_user_s"] + phase["cpu"]["self_system_s"], d["bytes"]

    # fio 3.42's http engine in S3 mode; the keys come from the environment (${S3_ID}, ${S3_KEY})
    def fio_job(self, body: str) -> Path:
        job = self.work / "fio.fio"
        job.write_text(f"[global]\nioengine=http\nhttp_mode=s3\nhttp_host={self.host}\nhttp_s3_keyid=${{S3_ID}}\n"
                       f"http_s3_key=${{S3_KEY}}\ngroup_reporting\n{body}")
        return job

    def fio_run(self, op: str, size: int, depth: int, count: int, prefix: str) -> tuple[float, float, int]:
        if not self.fio:
            raise NoFigure("no fio 3.42 with the http engine (../shared/peers/build-fio.sh)")
        per_job = max(1, count // depth)
        held = self.srv.root / BUCKET / prefix
        if op != "put" and (not held.is_dir() or len(os.listdir(held)) < (self.objects if op == "range" else count)):
            # fio's http engine reads a missing object as zeroes (its 404): that would be no figure
            raise NoFigure(f"the objects fio reads are not all under {prefix} (fio would read zeroes)")
        if op == "range":    # range mode over storlab's objects, one fio file each (fio's `:` list)
            files = ":".join(f"/{BUCKET}/{prefix}/obj-{k:012d}" for k in range(self.objects))
            body = (f"[r]\nhttp_object_mode=range\nfilename={files}\nsize={self.objects * RANGE_OBJECT}\n"
                    f"rw=randread\nbs={RANGE_BS}\nio_size={per_job * RANGE_BS}\nnumjobs={depth}\n")
        else:
            body = (f"[j]\nfilename=/{BUCKET}/{prefix}/key\nrw={'write' if op == 'put' else 'read'}\nbs={size}\n"
                    f"size={per_job * size}\noffset_increment={per_job * size}\nnumjobs={depth}\n")
        r, cpu = run([self.fio, "--output-format=json", str(self.fio_job(body))], self.env)
        job = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]
        d = job["write" if op == "put" else "read"]
        if job.get("error"):
            raise NoFigure(f"fio error {job['error']}")
        return d["bw_bytes"], cpu, d["io_bytes"]

    def fio_layout(self, size: int, count: int, prefix: str) -> None:
        """fio's block-mode objects KEY_OFFSET_BS for its GET cells (fio reads a missing one as zeroes)."""
        if self.fio:
            jobs = min(16, count)
            per_job = count // jobs
            run([self.fio, str(self.fio_job(f"[lay]\nfilename=/{BUCKET}/{prefix}/key\nrw=write\nbs={size}\n"
                                             f"size={per_job * size}\noffset_increment={per_job * size}\n"
                                             f"numjobs={jobs}\n"))], self.env)

    # s3dlio and boto3: this script as a worker process of their own
    def python_peer(self, tool: str, op: str, size: int, depth: int, count: int, prefix: str) -> tuple[float, float, int]:
        r, _ = run([sys.executable, str(Path(__file__).resolve()), "--worker", tool, "--op", op, "--size", str(size),
                    "--depth", str(depth), "--count", str(count), "--prefix", prefix, "--objects", str(self.objects),
                    "--endpoint", self.srv.endpoint], self.env)
        got = json.loads(r.stdout.strip().splitlines()[-1])
        return got["bytes"] / got["seconds"], got["cpu_s"], got["bytes"]

    def one(self, tool: str, op: str, size: int, depth: int, count: int, read_prefix: dict) -> dict:
        """One run of a tool in a cell: its MB/s, client CPU s/GiB and the server's CPU s/GiB."""
        # fio's whole GETs read its own block-mode objects; every ranged GET reads storlab's objects
        prefix = self.fresh_prefix(tool) if op == "put" else read_prefix["fio" if tool == "fio" and op == "get" else "storlab"]
        cpu0, t0 = server_cpu_s(self.srv.proc.pid), time.monotonic()
        try:
            if tool == "storlab":
                bw, cpu, moved = self.storlab(op, size, depth, count, prefix)
            elif tool == "fio":
                bw, cpu, moved = self.fio_run(op, size, depth, count, prefix)
            else:
                bw, cpu, moved = self.python_peer(tool, op, size, depth, count, prefix)
        finally:
            if op == "put":
                self.drop(prefix)
        wall = time.monotonic() - t0
        server = server_cpu_s(self.srv.proc.pid) - cpu0
        if not moved:
            raise NoFigure("moved no bytes")
        return {"mb_s": bw / 1e6, "cpu_s_per_gib": cpu / (moved / GiB), "server_cpu_s_per_gib": server / (moved / GiB),
                "server_cpu_share": server / wall / (os.cpu_count() or 1)}


# -- the Python peers' worker ------------------------------------------------------------------------
def worker(args: argparse.Namespace) -> int:
    """One tool's requests, timed; prints {"bytes", "seconds", "cpu_s"} (the CPU over the requests)."""
    uris = [f"{args.prefix}/obj-{k:012d}" for k in range(args.count)]
    payload = os.urandom(args.size)
    ranges = []
    if args.op == "range":
        # spread over the laid-out objects and their blocks, as storlab's random reads are
        ranges = [(f"{args.prefix}/obj-{(k * 7919) % args.objects:012d}", ((k * 104729) % (RANGE_OBJECT // RANGE_BS)) * RANGE_BS)
                  for k in range(args.count)]
    if args.worker == "s3dlio":
        import asyncio

        import s3dlio

        s3dlio.configure_s3(endpoint_url=args.endpoint, region="us-east-1")

        async def ranged() -> int:
            gate = asyncio.Semaphore(args.depth)

            async def one(key: str, off: int) -> int:
                async with gate:
                    return len(await s3dlio.get_range_async(f"s3://{BUCKET}/{key}", off, RANGE_BS))
            return sum(await asyncio.gather(*(one(k, o) for k, o in ranges)))

        def go() -> int:
            if args.op == "put":
                s3dlio.put_many([(f"s3://{BUCKET}/{u}", payload) for u in uris], max_in_flight=args.depth)
                return args.size * len(uris)
            if args.op == "get":
                got = s3dlio.get_many([f"s3://{BUCKET}/{u}" for u in uris], max_in_flight=args.depth)
                return sum(len(data) for _, data in got)      # (uri, BytesView) pairs
            return asyncio.run(ranged())
    else:
        from concurrent.futures import ThreadPoolExecutor

        import boto3
        from botocore.config import Config

        client = boto3.client("s3", endpoint_url=args.endpoint, region_name="us-east-1",
                              config=Config(max_pool_connections=max(10, args.depth), retries={"max_attempts": 3}))

        def put(key: str) -> int:
            client.put_object(Bucket=BUCKET, Key=key, Body=payload)
            return args.size

        def get(key: str) -> int:
            return len(client.get_object(Bucket=BUCKET, Key=key)["Body"].read())

        def get_range(item: tuple[str, int]) -> int:
            key, off = item
            return len(client.get_object(Bucket=BUCKET, Key=key, Range=f"bytes={off}-{off + RANGE_BS - 1}")["Body"].read())

        def go() -> int:
            fn, items = {"put": (put, uris), "get": (get, uris), "range": (get_range, ranges)}[args.op]
            with ThreadPoolExecutor(args.depth) as pool:
                return sum(pool.map(fn, items))
    usage0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    moved = go()
    seconds, usage1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    print(json.dumps({"bytes": moved, "seconds": seconds, "cpu_s": cpu}))
    return 0


# -- the comparison ----------------------------------------------------------------------------------
def cell(bench: Bench, label: str, op: str, size: int, depth: int, count: int, read_prefix: dict, rounds: int,
         tools: list[str]) -> dict:
    runs: dict[str, list[dict]] = {t: [] for t in tools}
    errors: dict[str, str] = {}
    for i in range(rounds):
        order = tools[i % len(tools):] + tools[:i % len(tools)]   # rotate who goes first
        for tool in order:
            if tool in errors:
                continue
            try:
                runs[tool].append(bench.one(tool, op, size, depth, count, read_prefix))
            except (NoFigure, OSError, ValueError, KeyError) as e:
                errors[tool] = str(e) or type(e).__name__
    row: dict = {"figure": label, "tools": {}}
    for tool in tools:
        if tool in errors:
            row["tools"][tool] = {"error": errors[tool]}
        elif runs[tool]:
            row["tools"][tool] = {k: statistics.median(r[k] for r in runs[tool]) for k in runs[tool][0]}
    peers = [t for t in tools if t != "storlab" and t not in errors and runs[t]]
    ratios = [runs["storlab"][i]["mb_s"] / max(runs[p][i]["mb_s"] for p in peers)
              for i in range(len(runs.get("storlab", []))) if peers and "storlab" not in errors]
    row["ratio"] = statistics.median(ratios) if ratios else None
    ok = {t: v for t, v in row["tools"].items() if "mb_s" in v}
    if ok:
        best = max(ok, key=lambda t: ok[t]["mb_s"])
        row["server_ceiling"] = {"mb_s": ok[best]["mb_s"], "by": best,
                                 "server_cpu_share": ok[best]["server_cpu_share"],
                                 "server_cpu_s_per_gib": ok[best]["server_cpu_s_per_gib"]}
    shown = "  ".join(f"{t} {v['mb_s']:8.1f}" if "mb_s" in v else f"{t} (no figure)" for t, v in row["tools"].items())
    ratio = f"{row['ratio']:.3f}" if row["ratio"] is not None else "—"
    print(f"{label:26s} MB/s: {shown}  storlab/best peer {ratio}", flush=True)
    for tool, why in errors.items():
        print(f"{'':26s} {tool}: no figure: {why}", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a smoke test: depths 1 and 16, fewer bytes (not figures)")
    ap.add_argument("--fio", default=str(Path.home() / ".cache/storlab-peers/fio/bin/fio"),
                    help="fio 3.42 built with the http engine (../shared/peers/build-fio.sh)")
    ap.add_argument("--only", default=",".join(TOOLS), help="tools to run (storlab always runs)")
    ap.add_argument("--cell-mib", type=int, default=256, help="MiB each tool moves per run of a cell")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--worker", choices=("s3dlio", "boto3"), help=argparse.SUPPRESS)
    for name in ("op", "prefix", "endpoint"):
        ap.add_argument(f"--{name}", help=argparse.SUPPRESS)
    for name in ("size", "depth", "count", "objects"):
        ap.add_argument(f"--{name}", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    from testbed.servers import VersityServer, s3_unavailable

    why = s3_unavailable()
    if why:
        print(f"vs_s3: {why}", file=sys.stderr)
        return 2
    tools = ["storlab"] + [t for t in TOOLS[1:] if t in args.only.split(",")]
    fio = args.fio if os.access(args.fio, os.X_OK) else None
    depths = (1, 16) if args.quick else DEPTHS
    # per run, at least 2 objects per request outstanding (boto3 moves 64 KiB objects at about
    # 11 MB/s here: a GiB a run made one cell take minutes)
    cell_bytes = 32 * MiB if args.quick else args.cell_mib * MiB
    ranged = 2048 if args.quick else 20000             # ranged GETs per run
    rounds = 1 if args.quick else args.rounds
    rows = []
    work = Path(tempfile.mkdtemp(prefix="storlab-vs-s3-", dir="/dev/shm"))
    try:
        srv = VersityServer(work, (BUCKET,))
        i = srv.args.index("--access-log")     # the server's access log costs it CPU per request: off
        del srv.args[i:i + 2]
        with srv:
            bench = Bench(srv, work, fio)
            for size in SIZES:
                count = max(2 * max(depths), cell_bytes // size)
                layout = {"storlab": f"lay-{size}", "fio": f"flay-{size}"}
                for depth in depths:
                    rows.append(cell(bench, f"PUT {label_size(size)} x{depth}", "put", size, depth, count, layout,
                                     rounds, tools))
                # the objects the GETs read, laid out once per size (untimed, kept)
                run([sys.executable, "-m", "storlab", "run", "--target", f"s3://{BUCKET}/{layout['storlab']}",
                     "--endpoint", srv.endpoint, "--rw", "write", "--bs", str(size), "--size", str(size * count),
                     "--qd", "16", "--keep-objects", "--no-store", "-q"], bench.env)
                bench.objects = count
                if "fio" in tools:
                    try:
                        bench.fio_layout(size, count, layout["fio"])
                    except NoFigure as e:
                        print(f"vs_s3: fio's layout of {label_size(size)} objects failed: {e}", file=sys.stderr)
                for depth in depths:
                    rows.append(cell(bench, f"GET {label_size(size)} x{depth}", "get", size, depth, count, layout,
                                     rounds, tools))
                if size == RANGE_OBJECT:
                    for depth in depths:
                        rows.append(cell(bench, f"GET 4 KiB range x{depth}", "range", RANGE_BS, depth, ranged,
                                         layout, rounds, tools))
                for prefix in layout.values():
                    bench.drop(prefix)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # issue 34's goals: storlab >= 1.2x the best peer on every row; client CPU per GiB <= 0.5x fio's
    goal_rows = [{"figure": f"vs_s3: {r['figure']} (storlab/best peer MB/s)", "value": r["ratio"], "goal": ">= 1.2",
                  "met": r["ratio"] >= 1.2} for r in rows if r["ratio"] is not None]
    for r in rows:
        mine, fio = r["tools"].get("storlab", {}), r["tools"].get("fio", {})
        if mine.get("cpu_s_per_gib") and fio.get("cpu_s_per_gib"):
            cpu = mine["cpu_s_per_gib"] / fio["cpu_s_per_gib"]
            goal_rows.append({"figure": f"vs_s3: {r['figure']} (storlab/fio client CPU per GiB)", "value": cpu,
                              "goal": "<= 0.5", "met": cpu <= 0.5})
    doc = {"rows": goal_rows,
           "detail": rows, "quick": args.quick, "rounds": rounds,
           "server": "versitygw posix, folder on tmpfs, loopback TCP, access log off"}
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
