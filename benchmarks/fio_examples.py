#!/usr/bin/env python3
"""Run every job file of fio's examples/ directory under `storlab fio` and write the outcome table
(file, ran/refused/failed, the reason) into docs/fio.md; for each file that ran, fio runs the same
prepared file too and the table gives both tools' requests per direction.

Each file runs as shipped except: every `filename=` and `directory=` points into a scratch folder
(a `[global]` with `directory=SCRATCH` is put first, so files that name none land there too, and
every `filename=` becomes a name relative to it, since fio puts `directory` before absolute names too);
sizes are capped so the whole set takes minutes: size/filesize/io_size at most 16 MiB (16 MiB
added where the file gives no size, since scratch files do not exist yet), runtime at most 1 s,
ramp_time and startdelay at most 0.2 s, nrfiles at most 64, numjobs at most 4, loops at most 2
and number_ios at most 4096. The fio sources are read from a folder given on the command line
(e.g. `git archive` of fio's repository into /tmp); nothing of them is committed.

    PYTHONPATH=python python3 benchmarks/fio_examples.py FIO_SOURCE_DIR [--write docs/fio.md]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

from storlab.jobs.fio.options import write_docs  # noqa: E402
from storlab.jobs.fio.parse import parse_fio_size, parse_fio_time  # noqa: E402

BEGIN = "<!-- begin generated: benchmarks/fio_examples.py -->"
END = "<!-- end generated: benchmarks/fio_examples.py -->"
SIZE_CAP = 16 << 20
CAPS_S = {"runtime": 1.0, "timeout": 1.0, "ramp_time": 0.2, "startdelay": 0.2}
COUNT_CAPS = {"nrfiles": 64, "nr_files": 64, "numjobs": 4, "loops": 2, "number_ios": 4096}
TIMEOUT_S = 120


def _capped(key: str, value: str) -> str:
    """A value with the time caps above applied (kept as written when within them or unreadable)."""
    try:
        if key in ("size", "filesize", "io_size", "io_limit") and not value.endswith("%"):
            lo, _, hi = value.partition("-")
            if parse_fio_size(lo) > SIZE_CAP or (hi and parse_fio_size(hi) > SIZE_CAP):
                return "16m"
        if key in CAPS_S and "-" not in value and parse_fio_time(value) > CAPS_S[key]:
            return f"{int(CAPS_S[key] * 1000)}ms"
        if key in COUNT_CAPS and int(value) > COUNT_CAPS[key]:
            return str(COUNT_CAPS[key])
    except ValueError:
        pass
    return value


def prepare(text: str, scratch: str) -> str:
    """The job file with its files in `scratch` and the caps applied."""
    lines = []
    for raw in text.splitlines():
        body, comment = re.match(r"([^;#]*)(.*)", raw).groups()   # comment: from ';' or '#' on
        key, eq, value = body.partition("=")
        k = key.strip().lower()
        if eq and k == "filename":
            # a name relative to the scratch folder: fio puts `directory` before every file name,
            # an absolute one too (filesetup.c add_file), so an absolute name would be doubled
            names = [n for n in re.split(r"(?<!\\):", value.strip()) if n]
            value = ":".join(re.sub(r"[^A-Za-z0-9._-]", "_", n.strip("/")) or "f" for n in names)
            body = f"{key}={value}"
        elif eq and k == "directory":
            body = f"{key}={scratch}"
        elif eq:
            body = f"{key}={_capped(k, value.strip())}"
        lines.append(body + comment)
    head = f"[global]\ndirectory={scratch}\n"
    if not re.search(r"^\s*(size|filesize)\s*=", text, re.M):
        head += "size=16m\n"
    return head + "\n".join(lines) + "\n"


def _requests(json_path: Path) -> dict[str, int]:
    """Requests per direction summed over the jobs of an fio-layout JSON file."""
    text = json_path.read_text()
    doc = json.loads(text[text.index("{"):])
    totals = {d: sum(j[d]["total_ios"] for j in doc["jobs"]) for d in ("read", "write", "trim")}
    return {d: n for d, n in totals.items() if n}


def run_fio(path: Path, scratch_root: str) -> dict[str, int] | str:
    """fio 3.x on the same prepared job in a scratch folder of its own: its requests per direction,
    or why it did not run."""
    scratch = tempfile.mkdtemp(dir=scratch_root, prefix=path.stem + "-fio-")
    try:
        job = Path(scratch) / path.name
        job.write_text(prepare(path.read_text(errors="replace"), scratch))
        out = Path(scratch) / "fio.json"
        try:
            p = subprocess.run(["fio", "--output-format=json", f"--output={out}", str(job)], cwd=scratch,
                               capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"fio did not finish within {TIMEOUT_S} s"
        if p.returncode != 0 or not out.exists():
            return "fio failed: " + ((p.stderr or p.stdout).strip().splitlines() or ["?"])[0][:80]
        return _requests(out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _compared(fio: dict[str, int] | str, storlab: dict[str, int], time_based: bool) -> str:
    if isinstance(fio, str):
        return fio
    text = "; ".join(f"{d} {fio.get(d, 0)} / {storlab.get(d, 0)}" for d in ("read", "write", "trim")
                     if fio.get(d) or storlab.get(d)) or "no data requests in either"
    return text + (" (time-based: counts follow each tool's speed)" if time_based else "")


def run_one(path: Path, scratch_root: str) -> tuple[str, str, str]:
    """(outcome, storlab's reason, requests fio / storlab) for one example."""
    scratch = tempfile.mkdtemp(dir=scratch_root, prefix=path.stem + "-")
    try:
        job = Path(scratch) / path.name
        text = prepare(path.read_text(errors="replace"), scratch)
        job.write_text(text)
        out = Path(scratch) / "storlab.json"
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent / "python"),
                   STORLAB_STORE=os.path.join(scratch, "store.db"))
        try:
            p = subprocess.run([sys.executable, "-m", "storlab.cli.main", "fio", "--output-format=json",
                                f"--output={out}", str(job)], cwd=scratch, env=env, capture_output=True,
                               text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return "failed", f"did not finish within {TIMEOUT_S} s", ""
        errors = [ln for ln in p.stderr.splitlines() if "error:" in ln]
        if p.returncode == 0:
            compared = ""
            if shutil.which("fio"):
                time_based = re.search(r"^\s*time_based\s*(=\s*1)?\s*$", text, re.M) is not None
                compared = _compared(run_fio(path, scratch_root), _requests(out), time_based)
            return "ran", "", compared
        reason = errors[0].split("error:", 1)[1].strip() if errors else (p.stderr.strip().splitlines() or ["?"])[-1]
        reason = reason.replace(str(job), path.name).replace(scratch, "SCRATCH")
        # the refusal's one line (jobs/translation.py) without the file the row already names
        reason = re.sub(r"^fio [^:\s]+:(\d+): ", r"line \1: ", reason)
        reason = re.sub(r"^fio job [^:]+: ", "", reason)
        return ("refused" if p.returncode == 2 else "failed"), reason, ""
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def render(rows: list[tuple[str, str, str, str]]) -> str:
    counts = {s: sum(1 for _, st, _, _ in rows if st == s) for s in ("ran", "refused", "failed")}
    lines = [BEGIN, "", f"{len(rows)} job files: {counts['ran']} ran, {counts['refused']} refused, "
             f"{counts['failed']} failed.", "",
             "| file | outcome | reason | requests per direction, fio / storlab |", "|---|---|---|---|"]
    for name, status, reason, compared in rows:
        lines.append(f"| `{name}` | {status} | {reason.replace('|', '/')} | {compared} |")
    lines += ["", END]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fio_source", help="fio's source tree (its examples/ folder is run)")
    ap.add_argument("--scratch", default="/dev/shm", help="folder for the jobs' files")
    ap.add_argument("--write", metavar="DOC", help="put the table into this page (docs/fio.md)")
    args = ap.parse_args()
    examples = sorted(Path(args.fio_source, "examples").glob("*.fio"))
    if not examples:
        print(f"no examples/*.fio under {args.fio_source}", file=sys.stderr)
        return 2
    root = tempfile.mkdtemp(dir=args.scratch, prefix="storlab-fio-examples-")
    rows = []
    try:
        for path in examples:
            status, reason, compared = run_one(path, root)
            rows.append((path.name, status, reason, compared))
            print(f"{path.name:40} {status:8} {reason}{compared}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table = render(rows)
    if args.write:
        write_docs(args.write, table, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
