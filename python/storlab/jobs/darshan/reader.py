"""Reads one Darshan log with PyDarshan in a child process and prints it as JSON on stdout.

`python -m storlab.jobs.darshan.reader LOG` is what jobs/darshan/log.py runs. darshan-util (the C
library inside PyDarshan) prints its errors straight to file descriptor 2 and aborts the process
on some corrupt logs (an assertion in darshan_log_close), so storlab never calls it in its own
process: a crash or an error here becomes one line naming the log, and nothing else is affected.

The JSON holds only what the translator reads: the job header, the modules present (version,
partial flag), the name records, every POSIX, MPI-IO and STDIO record (counters by name, zeros
left out), and the DXT_POSIX / DXT_MPIIO segments as [offset, length, start, end] lists.
"""
from __future__ import annotations

import json
import os
import sys

MODULES = ("POSIX", "MPI-IO", "STDIO")
DXT_MODULES = ("DXT_POSIX", "DXT_MPIIO")


class _Stderr:
    """What darshan-util prints on file descriptor 2 while one module is read (its only way of
    saying that a module was skipped, e.g. a module version it does not know)."""

    def __enter__(self):
        import tempfile

        sys.stderr.flush()
        self.file = tempfile.TemporaryFile(mode="w+b")
        self.saved = os.dup(2)
        os.dup2(self.file.fileno(), 2)
        return self

    def __exit__(self, *exc) -> None:
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.file.seek(0)
        self.lines = [line.strip() for line in self.file.read().decode("utf-8", "replace").splitlines() if line.strip()]
        self.file.close()


def read(path: str) -> dict:
    import darshan  # PyDarshan (pip darshan): the translator checks it is there before starting us

    report = darshan.DarshanReport(path, read_all=False)
    job = report.metadata.get("job", {})
    modules = {name: {"ver": int(m.get("ver", 0)), "partial": bool(m.get("partial_flag", False)),
                      "bytes": int(m.get("len", 0))}
               for name, m in report.modules.items()}
    out: dict = {"job": {k: v for k, v in job.items() if isinstance(v, (int, float, str))},
                 "exe": report.metadata.get("exe", ""), "modules": modules, "records": {}, "dxt": {}}
    out["errors"] = {}
    for name in MODULES:
        if name not in report.modules:
            continue
        with _Stderr() as err:
            report.mod_read_all_records(name, dtype="numpy")
        if err.lines:
            out["errors"][name] = err.lines
        counter_names = report.counters[name]["counters"]
        fcounter_names = report.counters[name]["fcounters"]
        rows = []
        for rec in report.records[name]._records:
            rows.append({"id": int(rec["id"]), "rank": int(rec["rank"]),
                         "c": {n: int(v) for n, v in zip(counter_names, rec["counters"]) if v},
                         "f": {n: float(v) for n, v in zip(fcounter_names, rec["fcounters"]) if v}})
        out["records"][name] = rows
    for name in DXT_MODULES:
        if name not in report.modules:
            continue
        with _Stderr() as err:
            report.mod_read_all_dxt_records(name, dtype="dict")
        if err.lines:
            out["errors"][name] = err.lines
        rows = []
        for rec in report.records[name]._records:
            rows.append({"id": int(rec["id"]), "rank": int(rec["rank"]),
                         "write_count": int(rec.get("write_count", 0)),
                         "read_count": int(rec.get("read_count", 0)),
                         "write": [[int(s["offset"]), int(s["length"]), float(s["start_time"]), float(s["end_time"])]
                                   for s in rec.get("write_segments", [])],
                         "read": [[int(s["offset"]), int(s["length"]), float(s["start_time"]), float(s["end_time"])]
                                  for s in rec.get("read_segments", [])]})
        out["dxt"][name] = rows
    with _Stderr() as err:
        out["names"] = {str(k): v for k, v in report.name_records.items()}
    if err.lines:
        out["errors"]["names"] = err.lines
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m storlab.jobs.darshan.reader LOG", file=sys.stderr)
        return 2
    try:
        doc = read(argv[0])
    except Exception as e:  # darshan-util's own failure: the parent turns it into one line
        print(f"Error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    json.dump(doc, sys.stdout, separators=(",", ":"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
