"""Results other tools measured, read into storlab documents so they sit in the store beside native
runs (`storlab results import`, docs/store.md, Import): fio JSON (fio 3.x, json and json+, client/
server output), IOR JSON (`-O summaryFormat=JSON`) and mdtest's text output.

Each file becomes one document: a `storlab.run/1` run (fio, IOR: one phase per fio reporting group,
one per IOR operation) or meta run (mdtest: one phase per operation), with what the file measured,
where it ran and the tool's command line as far as the file has them, and an `imported` section
naming the tool, file and sha256 and saying what is missing (histograms, time series, the host's
hardware). Latency percentiles are the tool's own figures, not recomputed from storlab histograms.
The run_id comes from the file's sha256, so importing a file again replaces its run.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import re
import shlex
from pathlib import Path
from typing import Any, Callable, Sequence

from ..document import header, now_iso
from ..errors import StorlabError
from ..measure import stats

__all__ = ["ResultFileError", "FORMATS", "read_file", "parse", "fio_document", "ior_document", "mdtest_document"]

MiB = 1 << 20
FORMATS = ("fio JSON (fio --output-format=json or json+)", "IOR JSON (ior -O summaryFormat=JSON)",
           "mdtest text output")
EXPECTED = "expected " + ", ".join(FORMATS)
# percentiles storlab keeps, as fio names them in its percentile maps
_FIO_PCTS = {"p50": "50.000000", "p90": "90.000000", "p99": "99.000000", "p999": "99.900000"}


class ResultFileError(StorlabError, ValueError):
    """A file that is not a result storlab can import; the message is one line naming the file."""


def read_file(path: str | Path) -> dict[str, Any]:
    """The storlab document of one result file (format told from its content)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ResultFileError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ResultFileError(f"{path}: not a text file; {EXPECTED}") from None
    return parse(text, str(p), hashlib.sha256(data).hexdigest())


def parse(text: str, file: str, sha256: str) -> dict[str, Any]:
    """The storlab document of a result file's text; `file` and `sha256` go into `imported`."""
    obj = _json_in(text)
    if isinstance(obj, dict) and "fio version" in obj:
        if not isinstance(obj.get("jobs"), list) and not isinstance(obj.get("client_stats"), list):
            raise ResultFileError(f"{file}: fio JSON without a 'jobs' list; {EXPECTED}")
        return _checked(fio_document, obj, file, sha256)
    if isinstance(obj, dict) and isinstance(obj.get("summary"), list) and ("Began" in obj or "tests" in obj):
        return _checked(ior_document, obj, file, sha256)
    if obj is None and re.search(r"^mdtest-\S+ was launched", text, re.M):
        return _checked(mdtest_document, text, file, sha256)
    if isinstance(obj, dict) and str(obj.get("schema", "")).startswith("storlab."):
        raise ResultFileError(f"{file}: already a storlab document ({obj['schema']}); "
                           f"`storlab results show/compare/report` read it as it is")
    what = "JSON of another kind" if obj is not None else "no JSON object and no mdtest output"
    raise ResultFileError(f"{file}: {what}; {EXPECTED}")


def _checked(build: Callable[..., dict[str, Any]], obj: Any, file: str, sha256: str) -> dict[str, Any]:
    """Run a format's builder; a file whose fields have unexpected types or values is one line."""
    try:
        return build(obj, file, sha256)
    except ResultFileError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        tool = build.__name__.split("_")[0]
        raise ResultFileError(f"{file}: {tool} output with an unexpected field ({type(e).__name__}: {e}); "
                           f"{EXPECTED}") from None


def _json_in(text: str) -> Any:
    """The JSON object in a file, after any lines a tool printed before it (fio's notes, MPI
    warnings); None when there is none."""
    for m in re.finditer(r"^\s*\{", text, re.M):
        try:
            obj, _ = json.JSONDecoder().raw_decode(text[m.end() - 1:])
            return obj
        except json.JSONDecodeError:
            continue
    return None


def _run_id(sha256: str) -> str:
    return sha256[:32]


def _imported(tool: str, version: str | None, fmt: str, file: str, sha256: str, command: str | None,
              options: dict[str, Any], latency: str, missing: Sequence[str]) -> dict[str, Any]:
    return {"imported_from": {"tool": tool, "version": version, "format": fmt,
                              "file": str(Path(file).resolve()), "sha256": sha256},
            "imported_at": now_iso(), "command": command, "options": options,
            "latency": latency, "missing": list(missing)}


def _environment(host: str | None, engine: str | None, targets: list[dict[str, Any]],
                 **extra: Any) -> dict[str, Any]:
    """What an imported file tells of where it ran; the rest is null (not known, not zero)."""
    return {"host": host, "kernel": None, "os": extra.pop("os", None), "cpu_model": None, "cpu_count": None,
            "memory_bytes": None, "engine": engine, "targets": targets, **extra}


def _iso(t: _dt.datetime) -> str:
    return t.astimezone(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _target_type(path: str) -> str:
    """char for the memory devices fio's jobs use without storage (/dev/null, /dev/zero,
    /dev/full), block for other device nodes, else file (from the name: the device is not here
    to look at)."""
    if path in ("/dev/null", "/dev/zero", "/dev/full"):
        return "char"
    return "block" if path.startswith("/dev/") and not path.startswith(("/dev/shm/", "/dev/mqueue/")) else "file"


# -- fio -----------------------------------------------------------------------------------------
_FIO_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", re.I)


def _fio_size(text: Any) -> int | None:
    """A fio size option in bytes ("4k", "1M", "512"), with fio's default base of 1024 for k, m,
    g, t, p; None for ranges and splits (bsrange, bssplit) or anything else."""
    if isinstance(text, int):
        return text
    m = _FIO_SIZE.match(str(text or ""))
    if not m:
        return None
    scale = 1024 ** "kmgtp".find(m.group(2).lower()) * 1024 if m.group(2) else 1
    return int(float(m.group(1)) * scale)


def _fio_seconds(text: Any) -> float | None:
    """fio's time options: seconds by default, or with a unit (ms, s, m, h)."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s|m|h|d)?\s*$", str(text or ""))
    if not m:
        return None
    return float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}[m.group(2)]


def _fio_rw(text: str | None) -> str:
    rw = (text or "read").split(":")[0].strip()
    return {"readwrite": "rw", "randreadwrite": "randrw"}.get(rw, rw)


def _fio_targets(opts: dict[str, Any]) -> list[str]:
    names = [f for f in str(opts.get("filename") or "").split(":") if f]
    if not names and opts.get("directory"):
        names = [d for d in str(opts["directory"]).split(":") if d]
    return names


def _fio_lat(stat: dict[str, Any] | None, ns: bool) -> dict[str, Any] | None:
    """{min, mean, stddev, max, pXX..., N, bins} of one fio latency in ns (older fio wrote usec)."""
    if not isinstance(stat, dict) or not stat.get("N"):
        return None
    k = 1 if ns else 1000
    out: dict[str, Any] = {"min": stat["min"] * k, "mean": float(stat["mean"]) * k,
                           "stddev": float(stat.get("stddev") or 0.0) * k, "max": stat["max"] * k,
                           "N": int(stat["N"])}
    pct = stat.get("percentile") or {}
    for key, label in _FIO_PCTS.items():
        if label in pct:
            out[key] = pct[label] * k
    if isinstance(stat.get("bins"), dict):
        out["bins"] = [[stats.index(int(v) * k), int(c)] for v, c in stat["bins"].items() if int(c)]
    return out


def _merged_lat(parts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Latency of the jobs of one reporting group: exact min/max, N-weighted mean, pooled stddev;
    percentiles from the merged json+ bins, from the one job's figures, or none (fio's percentiles of
    several jobs cannot be merged)."""
    parts = [p for p in parts if p]
    if not parts:
        return None
    n = sum(p["N"] for p in parts)
    if len(parts) == 1:     # one job: fio's own mean and stddev, exactly (mean x N / N may round)
        mean, stddev = parts[0]["mean"], parts[0]["stddev"]
    else:
        mean = sum(p["mean"] * p["N"] for p in parts) / n
        ss = sum((p["N"] - 1) * p["stddev"] ** 2 + p["N"] * (p["mean"] - mean) ** 2 for p in parts)
        stddev = math.sqrt(ss / (n - 1)) if n > 1 else 0.0
    out: dict[str, Any] = {"min": min(p["min"] for p in parts), "mean": mean, "stddev": stddev,
                           "max": max(p["max"] for p in parts)}
    if all("bins" in p for p in parts):
        buckets = stats.merge(*(p["bins"] for p in parts))
        out["hist"] = buckets
        if len(parts) > 1 or not all(k in parts[0] for k in _FIO_PCTS):
            for key in _FIO_PCTS:
                out[key] = stats.percentile(buckets, {"p50": 50, "p90": 90, "p99": 99, "p999": 99.9}[key],
                                            out["min"], out["max"])
    if len(parts) == 1:
        out.update({k: parts[0][k] for k in _FIO_PCTS if k in parts[0]})
    return out


def _fio_direction(jobs: list[dict[str, Any]], d: str, notes: set[str]) -> dict[str, Any] | None:
    dirs = [j.get(d) for j in jobs if isinstance(j.get(d), dict)]
    ops = sum(int(x.get("total_ios") or 0) for x in dirs)
    if not ops:
        return None
    nbytes = sum(int(x["io_bytes"]) if "io_kbytes" in x else int(x.get("io_bytes") or 0) * 1024 for x in dirs)
    out: dict[str, Any] = {
        "bytes": nbytes, "ops": ops,
        "seconds": max(float(x.get("runtime") or 0) for x in dirs) / 1000,
        "iops": sum(float(x.get("iops") or 0.0) for x in dirs),
        "bw_bytes": float(sum(float(x["bw_bytes"]) if "bw_bytes" in x else float(x.get("bw") or 0) * 1024
                              for x in dirs)),
    }
    lats = {}
    for kind in ("lat", "clat", "slat"):
        ns = any(f"{kind}_ns" in x for x in dirs)
        lats[kind] = _merged_lat([_fio_lat(x.get(f"{kind}_ns") if ns else x.get(kind), ns) for x in dirs])
    lat, clat, slat = lats["lat"], lats["clat"], lats["slat"]
    if lat is not None and "p50" not in lat and clat is not None and "p50" in clat and slat is None:
        # fio's default: percentiles of clat only. With no submission latency measured (sync
        # engines: slat N = 0) fio's lat and clat differ only by the request setup, so the
        # percentiles of clat stand for lat's; said in imported.latency
        lat.update({k: clat[k] for k in _FIO_PCTS if k in clat})
        notes.add("lat_ns percentiles are fio's clat percentiles (no submission latency measured)")
    for kind, value in (("lat", lat), ("clat", clat), ("slat", slat)):
        if value is None:
            continue
        hist = value.pop("hist", None)
        out[f"{kind}_ns"] = value
        if hist is not None:
            out[f"{kind}_hist"] = {"scheme": stats.SCHEME, "buckets": hist}
            notes.add(f"{kind}_hist from fio's json+ bins")
    return out


def _fio_phase(jobs: list[dict[str, Any]], global_opts: dict[str, Any], groupid: int,
               notes: set[str]) -> dict[str, Any]:
    opts = [{**global_opts, **(j.get("job options") or {})} for j in jobs]
    names = list(dict.fromkeys(str(j.get("jobname") or f"group{groupid}") for j in jobs))
    error = next((j.get("error") for j in jobs if j.get("error")), 0)
    phase: dict[str, Any] = {
        "name": "+".join(names),
        "rw": _fio_rw(opts[0].get("rw")),
        "complete": not error, "stop_reason": "error" if error else "done",
        "error": f"fio reported error {error} (errno)" if error else None,
        "seconds": max(float(j.get("job_runtime") or 0) for j in jobs) / 1000,
        "groups": names,
    }
    for d in ("read", "write"):
        direction = _fio_direction(jobs, d, notes)
        if direction is not None:
            phase[d] = direction
    trim = _fio_direction(jobs, "trim", notes)
    if trim is not None:
        phase["trim"] = trim
    sync = jobs[0].get("sync") if len(jobs) == 1 else None
    if isinstance(sync, dict) and sync.get("total_ios"):
        phase["sync"] = {"ops": int(sync["total_ios"])}
    phase["workers"] = [{
        "id": i, "group": str(j.get("jobname") or ""), "target": ":".join(_fio_targets(o)),
        "start_s": 0.0, "end_s": float(j.get("job_runtime") or 0) / 1000,
        "read_bytes": _fio_bytes(j.get("read")), "write_bytes": _fio_bytes(j.get("write")),
        "read_ops": int((j.get("read") or {}).get("total_ios") or 0),
        "write_ops": int((j.get("write") or {}).get("total_ios") or 0),
    } for i, (j, o) in enumerate(zip(jobs, opts))]
    return phase


def _fio_bytes(d: dict[str, Any] | None) -> int:
    d = d or {}
    return int(d["io_bytes"]) if "io_kbytes" in d else int(d.get("io_bytes") or 0) * 1024


def _fio_command(global_opts: dict[str, Any], jobs: list[dict[str, Any]]) -> str:
    """fio's command line for these jobs, rebuilt from the options the file lists (fio's JSON has
    no command line of its own)."""
    words = ["fio"] + [f"--{k}={v}" for k, v in global_opts.items()]
    seen: set[str] = set()
    for j in jobs:
        opts = dict(j.get("job options") or {})
        name = str(opts.pop("name", j.get("jobname") or "job"))
        if name in seen:          # numjobs clones: one section
            continue
        seen.add(name)
        words += [f"--name={name}"] + [f"--{k}={v}" for k, v in opts.items()]
    return shlex.join(words)


def fio_document(obj: dict[str, Any], file: str, sha256: str) -> dict[str, Any]:
    """A run document from fio's JSON: one phase per reporting group (groupid), its jobs (numjobs
    clones without group_reporting) summed, latencies merged."""
    fmt = "fio-json"
    jobs = obj.get("jobs")
    host = None
    if not isinstance(jobs, list):      # client/server: one entry per job and host, plus "All clients"
        jobs = [j for j in obj["client_stats"] if j.get("jobname") != "All clients"]
        hosts = sorted({str(j.get("hostname")) for j in jobs if j.get("hostname")})
        host = ",".join(hosts) or None
    if not jobs:
        raise ResultFileError(f"{file}: fio JSON with no jobs; {EXPECTED}")
    if any(isinstance((j.get(d) or {}).get(k), dict) and "bins" in j[d][k]
           for j in jobs for d in ("read", "write") for k in ("clat_ns", "lat_ns")):
        fmt = "fio-json+"
    global_opts = dict(obj.get("global options") or {})
    groups: dict[int, list[dict[str, Any]]] = {}
    for j in jobs:
        groups.setdefault(int(j.get("groupid") or 0), []).append(j)
    notes: set[str] = set()
    phases = [_fio_phase(g, global_opts, gid, notes) for gid, g in sorted(groups.items())]
    first = {**global_opts, **(jobs[0].get("job options") or {})}
    targets = list(dict.fromkeys(t for j in jobs for t in _fio_targets({**global_opts, **(j.get("job options") or {})})))
    size = _fio_size(first.get("size"))
    end = float(obj.get("timestamp_ms") or 0) / 1000 or float(obj.get("timestamp") or 0)
    elapsed = max(float(j.get("elapsed") or 0) for j in jobs)
    finished = _dt.datetime.fromtimestamp(end, _dt.timezone.utc) if end else None
    started = finished - _dt.timedelta(seconds=elapsed) if finished else None
    engine = str(first.get("ioengine") or "psync")
    job = {"target": targets, "rw": phases[0]["rw"], "bs": _fio_size(first.get("bs") or "4k"),
           "engine": engine, "threads": _fio_threads(jobs, global_opts),
           "qd": int(str(first.get("iodepth") or 1)), "size": size,
           "direct": str(first.get("direct") or "0") not in ("0", "false"),
           "time": _fio_seconds(first.get("runtime")) if first.get("runtime") else None,
           "phases": [{"name": p["name"], "fio_options": [{**global_opts, **(j.get("job options") or {})}
                                                          for j in groups[gid]]}
                      for p, gid in zip(phases, sorted(groups))]}
    error = next((p["error"] for p in phases if p["error"]), None)
    command = _fio_command(global_opts, jobs)
    latency = ("fio's own figures (min, mean, stddev, max; percentiles as fio computed them from its "
               "histogram)" + "".join(f"; {n}" for n in sorted(notes)))
    missing = ["time series", "kernel and hardware of the host"] + \
              ([] if fmt == "fio-json+" else ["latency histograms (json+ has them)"])
    if host is None:
        missing.append("host name")
    doc = {
        **header("run", argv=shlex.split(command), run_id=_run_id(sha256),
                 started_at=_iso(started) if started else None,
                 finished_at=_iso(finished) if finished else None),
        "complete": error is None, "stop_reason": "error" if error else "done", "error": error,
        "job": job,
        "environment": _environment(host, engine, [
            {"path": t, "type": _target_type(t), "size_bytes": size} for t in targets if size is not None],
            disk_util=list(obj.get("disk_util") or [])),
        "warnings": [],
        "phases": phases,
        "imported": _imported("fio", str(obj.get("fio version") or "") or None, fmt, file, sha256, command,
                              {"global options": global_opts,
                               "jobs": [{"jobname": j.get("jobname"), "groupid": j.get("groupid"),
                                         "job options": j.get("job options") or {}} for j in jobs]},
                              latency, missing),
    }
    return doc


def _fio_threads(jobs: list[dict[str, Any]], global_opts: dict[str, Any]) -> int:
    """Threads of the first group: its job entries, or numjobs when group_reporting folded them."""
    first = [j for j in jobs if int(j.get("groupid") or 0) == int(jobs[0].get("groupid") or 0)]
    opts = {**global_opts, **(first[0].get("job options") or {})}
    # group_reporting folds numjobs clones into one entry (fio lists it in no job's options)
    return int(str(opts.get("numjobs") or 1)) if len(first) == 1 else len(first)


# -- IOR -----------------------------------------------------------------------------------------
def _ior_time(text: Any) -> _dt.datetime | None:
    """IOR's times ("Mon Nov 23 01:08:03 2026", local time of the machine that ran it; taken as this
    machine's local time)."""
    try:
        return _dt.datetime.strptime(str(text).strip(), "%a %b %d %H:%M:%S %Y").astimezone()
    except ValueError:
        return None


def ior_document(obj: dict[str, Any], file: str, sha256: str) -> dict[str, Any]:
    """A run document from IOR's JSON summary: one phase per test and operation (write, read), with
    the mean over repetitions as the figure and max/min/mean/stddev kept under `rates`."""
    tests = {int(t.get("TestID", i)): t for i, t in enumerate(obj.get("tests") or [])}
    rows = [s for s in obj["summary"] if s.get("operation") in ("write", "read")]
    if not rows:
        raise ResultFileError(f"{file}: IOR JSON without write or read results in 'summary'; {EXPECTED}")
    several = len({s.get("TestID") for s in rows}) > 1
    phases = []
    for s in rows:
        test = tests.get(int(s.get("TestID", 0))) or {}
        params = test.get("Parameters") or {}
        op = s["operation"]
        nbytes = int(round(float(s["xsizeMiB"]) * MiB))
        xfer = int(s.get("transferSize") or params.get("transferSize") or 0)
        random = bool(params.get("randomOffset"))
        direction = {
            "bytes": nbytes, "ops": nbytes // xfer if xfer else 0,
            "seconds": float(s["MeanTime"]), "iops": float(s["OPsMean"]),
            "bw_bytes": float(s["bwMeanMIB"]) * MiB,
            "rates": {"iterations": int(s.get("repetitions") or 1),
                      "bw_bytes": {"max": float(s["bwMaxMIB"]) * MiB, "min": float(s["bwMinMIB"]) * MiB,
                                   "mean": float(s["bwMeanMIB"]) * MiB, "stddev": float(s["bwStdMIB"]) * MiB},
                      "iops": {"max": float(s["OPsMax"]), "min": float(s["OPsMin"]),
                               "mean": float(s["OPsMean"]), "stddev": float(s["OPsSD"])}},
        }
        name = f"{op}.{s.get('TestID')}" if several else op
        phases.append({"name": name, "rw": ("rand" if random else "") + op, "complete": True,
                       "stop_reason": "done", "error": None, "seconds": float(s["MeanTime"]),
                       op: direction, "workers": []})
    first = rows[0]
    test = tests.get(int(first.get("TestID", 0))) or {}
    params = test.get("Parameters") or {}
    path = str(params.get("testFileName") or (test.get("Options") or {}).get("test filename") or "")
    tasks = int(first.get("numTasks") or params.get("numTasks") or 1)
    per_task = int(first.get("blockSize") or 0) * int(first.get("segmentCount") or 1)
    machine = str(obj.get("Machine") or "").split()
    began, finished = _ior_time(obj.get("Began")), _ior_time(obj.get("Finished"))
    command = obj.get("Command line")
    api = str(first.get("API") or params.get("api") or "POSIX").lower()
    doc = {
        **header("run", argv=shlex.split(command) if command else [], run_id=_run_id(sha256),
                 started_at=_iso(began) if began else None, finished_at=_iso(finished) if finished else None),
        "job": {"target": [path] if path else [], "rw": phases[0]["rw"], "bs": int(first.get("transferSize") or 0) or None,
                "engine": api, "threads": tasks, "ranks": tasks, "qd": 1,
                "size": per_task or None, "direct": bool(params.get("useO_DIRECT")),
                "files": "per-rank" if first.get("filePerProc") else "shared",
                "phases": [{"name": p["name"]} for p in phases]},
        "environment": _environment(machine[1] if len(machine) > 1 else None, api,
                                    [{"path": path, "type": _target_type(path), "size_bytes": per_task * tasks}]
                                    if path and per_task else [],
                                    os=machine[0] if machine else None),
        "warnings": [],
        "phases": phases,
        "imported": _imported("ior", obj.get("Version"), "ior-json", file, sha256, command,
                              {"tests": [{"TestID": k, "Parameters": t.get("Parameters") or {},
                                          "Options": t.get("Options") or {}} for k, t in tests.items()]},
                              "none: IOR's JSON has no per-operation latency",
                              ["latency", "latency histograms", "time series", "per-rank figures",
                               "kernel and hardware of the host"]),
    }
    return doc


# -- mdtest --------------------------------------------------------------------------------------
# mdtest's operations, named as storlab meta names the same operation where there is one
_MDTEST_OPS = {"Directory creation": "mkdir", "Directory stat": "dir-stat", "Directory rename": "dir-rename",
               "Directory removal": "rmdir", "File creation": "create", "File stat": "stat",
               "File read": "read", "File rename": "rename", "File removal": "remove",
               "Tree creation": "tree-create", "Tree removal": "tree-remove"}
_RATE_ROW = re.compile(r"^\s*([A-Za-z][A-Za-z ]*?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


def _mdtest_shape(command: str | None) -> dict[str, int]:
    """Tree depth (-z, default 0), fanout (-b, default 1) and bytes written per file (-w, default
    0) from mdtest's command line."""
    flags = {"-z": "depth", "-b": "fanout", "-w": "file_size"}
    shape = {"depth": 0, "fanout": 1, "file_size": 0}
    words = shlex.split(command or "")
    for i, w in enumerate(words):
        for flag, key in flags.items():
            if not w.startswith(flag):
                continue
            value = w[len(flag):] or (words[i + 1] if i + 1 < len(words) else "")
            if value.isdigit():
                shape[key] = int(value)
    return shape


def _mdtest_time(text: str) -> _dt.datetime | None:
    try:
        return _dt.datetime.strptime(text.strip(), "%m/%d/%Y %H:%M:%S").astimezone()
    except ValueError:
        return None


def mdtest_document(text: str, file: str, sha256: str) -> dict[str, Any]:
    """A meta document from mdtest's text output: one phase per operation of its SUMMARY rate table
    (mean ops/s as the rate; max/min/mean/stddev over iterations under `rates`). Tree creation and
    removal are kept as rates only: mdtest does not print how many tree directories there were."""
    launched = re.search(r"^mdtest-(\S+) was launched with (\d+) total task\(s\) on (\d+) node", text, re.M)
    assert launched is not None      # parse() checked it
    version, tasks, nodes = launched.group(1), int(launched.group(2)), int(launched.group(3))
    cmd = re.search(r"^Command line used: (.*)$", text, re.M)
    command = " ".join(shlex.split(cmd.group(1))) if cmd else None
    items_m = re.search(r"^\s*(\d+) tasks?, (\d+) (files/directories|files|directories)", text, re.M)
    items = int(items_m.group(2)) if items_m else None
    path_m = re.search(r"^Path\s*:\s*(.+?)\s*$", text, re.M)
    path = path_m.group(1) if path_m else None
    started = re.search(r"^-- started at (.+?) --", text, re.M)
    finished = re.search(r"^-- finished at (.+?) --", text, re.M)
    summary = re.search(r"^SUMMARY rate[^\n]*?(?:\(of (\d+) iterations?\))?\s*\n(.*?)(?:\n\s*\n|\n--|\Z)",
                        text, re.M | re.S)
    if summary is None:
        raise ResultFileError(f"{file}: mdtest output without a 'SUMMARY rate' table (an interrupted run?); {EXPECTED}")
    iterations = int(summary.group(1) or 1)
    phases, tree_rates = [], {}
    for line in summary.group(2).splitlines():
        m = _RATE_ROW.match(line)
        if not m:
            continue
        label = m.group(1).strip()
        name = _MDTEST_OPS.get(label, re.sub(r"\W+", "-", label.lower()))
        rates = {"iterations": iterations, "max": float(m.group(2)), "min": float(m.group(3)),
                 "mean": float(m.group(4)), "stddev": float(m.group(5))}
        if name.startswith("tree-") or items is None:
            tree_rates[name] = rates
            continue
        mean = rates["mean"]
        phases.append({"name": name, "complete": True, "stop_reason": "done", "error": None,
                       "ops": items, "seconds": items / mean if mean > 0 else 0.0,
                       "ops_per_s": mean, "rates": rates, "workers": []})
    if not phases:
        raise ResultFileError(f"{file}: mdtest output whose SUMMARY rate table has no operations; {EXPECTED}")
    t0 = _mdtest_time(started.group(1)) if started else None
    t1 = _mdtest_time(finished.group(1)) if finished else None
    doc = {
        **header("meta", argv=shlex.split(command) if command else [], run_id=_run_id(sha256),
                 started_at=_iso(t0) if t0 else None, finished_at=_iso(t1) if t1 else None),
        "workers": tasks,
        "cleanup": None,
        "job": {"target": [path] if path else [], "rw": None, "bs": None, "engine": "posix",
                "threads": tasks, "ranks": tasks, "files": items // tasks if items else None,
                "dir": path, "workdir": path, **_mdtest_shape(command), "phases": []},
        "environment": _environment(None, "posix", [], directory={"path": path} if path else None,
                                    nodes=nodes),
        "warnings": [],
        "phases": phases,
        "imported": _imported("mdtest", version, "mdtest-text", file, sha256, command,
                              {"items": items, "tasks": tasks, "nodes": nodes, "iterations": iterations,
                               "tree_rates": tree_rates},
                              "none: mdtest's summary has rates only",
                              ["latency", "latency histograms", "per-task figures", "host name",
                               "kernel and hardware of the host"]),
    }
    return doc
