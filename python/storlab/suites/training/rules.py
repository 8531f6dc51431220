"""MLPerf Storage v3.0's rules as checks on one `storlab workload` run, and the provenance record
that says what ran.

Each check is a line: the rule, its section of MLPerf Storage's Rules (v3.0 edition), pass or
fail, and the figures it compared. A training run is checked for the dataset size (§3.1.2),
the workload's AU threshold (§3.3.2), one warm-up and five measured runs whose samples/s agree
within 5 % (§2.1.17; `--runs`), and the log folder on another file system than the data, as
`df` shows them (§3.4.2); a checkpoint run for 3 x the client's memory or a cache clear between
write and read (§4.3.1), subset mode's limits (§4.3.5), the model's process count (§4.6.1) and
the log folder (§4.4.2); a generate-only run for the dataset size (§3.2.1) and the log folder.

These are storlab's reading of the rules: they say how far a run is from one MLPerf would take.
storlab is not MLPerf's tool, so no run of it is an MLPerf submission (NOT_A_SUBMISSION).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from typing import Any

from ...jobs import mlperf_v3 as v3
from ...jobs.translation import sha256_of
from ...jobs.workload import WorkloadSpec, is_object_url

__all__ = ["NOT_A_SUBMISSION", "check_training", "check_checkpoint", "check_generation", "check_runs", "df_line",
           "provenance", "config_hash", "code_hash", "SITE_KEYS", "judge", "judge_runs", "run_summary"]

NOT_A_SUBMISSION = ("storlab emulates MLPerf Storage's workloads; no storlab run is an MLPerf Storage submission: "
                    "closed and open results must come from MLPerf's own tool (mlpstorage running DLIO)")

# Site settings left out of the configuration hash (the Rules' tunables for CLOSED, paths, and
# storlab's own run settings), so two runs of the same workload hash alike wherever they ran
SITE_KEYS = ("workload.accelerators", "workload.seed", "dataset.folder", "dataset.subfolders", "dataset.files",
             "reader.read_threads", "reader.prefetch", "reader.transfer_size", "checkpoint.folder",
             "checkpoint.scale", "train.drop_cache")


def _check(rule: str, section: str, passed: bool, detail: str) -> dict[str, Any]:
    return {"rule": rule, "source": f"MLPerf Storage Rules v{v3.RULES_EDITION} §{section}",
            "result": "pass" if passed else "fail", "detail": detail}


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def check_dataset(size_rule: dict[str, Any], section: str = "3.1.2") -> dict[str, Any]:
    """The dataset-size rule: files >= max(5 x the clients' memory, 500 steps x batch x
    accelerators samples) / samples per file."""
    r = size_rule
    return _check("dataset size: max(5 x clients' memory, 500 steps x batch x accelerators)", section,
                  bool(r["compliant"]),
                  f"{r['files']} files; the rule asks >= {r['min_files']} ({r['min_samples_memory']} samples for 5 x "
                  f"{_gib(r['client_memory_bytes'])} of client memory, {r['min_samples_steps']} for 500 steps x batch x "
                  f"{r['accelerators']} accelerators)")


def check_au(spec: WorkloadSpec, au: float, epochs_done: int) -> dict[str, Any]:
    """The AU threshold of the workload (v3.0's value for its model where it has one)."""
    model = v3.model_of(spec.name)
    rule_value = v3.AU_THRESHOLDS.get(model)
    passed = epochs_done > 0 and au >= spec.au_threshold
    detail = f"AU {100 * au:.2f} % against {100 * spec.au_threshold:g} %"
    if rule_value is not None and abs(rule_value - spec.au_threshold) > 1e-9:
        passed = False
        detail += f"; v3.0's threshold for {model} is {100 * rule_value:g} %"
    elif rule_value is not None:
        detail += f" (v3.0's for {model})"
    return _check("AU at or above the workload's threshold", "3.3.2", passed, detail)


def check_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One warm-up run and five measured runs, their samples/s within 5 % of their mean."""
    measured = [r for r in runs if not r["warmup"]]
    want = v3.WARMUP_RUNS + v3.MEASURED_RUNS
    rates = [r["samples_per_s"] for r in measured if r.get("samples_per_s")]
    mean = sum(rates) / len(rates) if rates else 0.0
    spread = max(abs(x - mean) / mean for x in rates) if mean > 0 else None
    enough = len(runs) >= want and len(measured) >= v3.MEASURED_RUNS
    close = spread is not None and spread <= v3.RUN_SPREAD
    detail = (f"{len(runs)} run(s): {len(runs) - len(measured)} warm-up, {len(measured)} measured; v3.0 asks "
              f"{v3.WARMUP_RUNS} + {v3.MEASURED_RUNS} (--runs {want})")
    if spread is not None:
        detail += f"; measured samples/s within {100 * spread:.2f} % of their mean (at most {100 * v3.RUN_SPREAD:g} %)"
    return _check("one warm-up and five measured runs, within 5 % of each other", "2.1.17", enough and close, detail)


def df_line(path: str) -> dict[str, Any]:
    """`df -P` of a folder (its nearest existing parent): the file system, its mount point and
    device number."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    try:
        out = subprocess.run(["df", "-P", probe], capture_output=True, text=True, timeout=30)
        line = out.stdout.strip().splitlines()[-1] if out.returncode == 0 and out.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):     # no df: the device numbers still decide
        line = ""
    fields = line.split()
    return {"path": probe, "df": line, "filesystem": fields[0] if fields else "",
            "mounted_on": fields[-1] if len(fields) >= 6 else "", "device": os.stat(probe).st_dev}


def check_log_folder(data_folder: str, log_folder: str, section: str) -> dict[str, Any]:
    """The results and logs on a file system other than the data's, as `df` shows them (data on
    objects, an s3:// folder, is on no file system of this host)."""
    if is_object_url(data_folder):
        log = df_line(log_folder)
        result = _check("log folder on another file system than the data (df)", section, True,
                        f"data on objects at {data_folder}; log {log['path']} on {log['filesystem']} ({log['mounted_on']})")
        result["df"] = {"data": data_folder, "log": log["df"]}
        return result
    data, log = df_line(data_folder), df_line(log_folder)
    passed = data["device"] != log["device"]
    result = _check("log folder on another file system than the data (df)", section, passed,
                    f"data {data['path']} on {data['filesystem']} ({data['mounted_on']}); log {log['path']} on "
                    f"{log['filesystem']} ({log['mounted_on']})")
    result["df"] = {"data": data["df"], "log": log["df"]}
    return result


def check_training(spec: WorkloadSpec, doc: dict[str, Any], *, data_folder: str, log_folder: str,
                   runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [check_dataset(doc["dataset"]["size_rule"]),
            check_au(spec, doc.get("au", 0.0), len(doc.get("epochs", []))),
            check_runs(runs),
            check_log_folder(data_folder, log_folder, "3.4.2")]


def check_generation(doc: dict[str, Any], *, data_folder: str, log_folder: str) -> list[dict[str, Any]]:
    return [check_dataset(doc["dataset"]["size_rule"], "3.2.1"),
            check_log_folder(data_folder, log_folder, "3.4.2")]


def _filesystem_type(path: str) -> str:
    """The type of the file system holding `path` (/proc/mounts, longest matching mount point)."""
    path = os.path.realpath(path)
    best, kind = "", ""
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    mount = parts[1].replace("\\040", " ")
                    inside = path == mount or path.startswith(mount.rstrip("/") + "/")
                    if inside and len(mount) >= len(best):
                        best, kind = mount, parts[2]
    except OSError:
        pass
    return kind


def check_checkpoint(spec: WorkloadSpec, doc: dict[str, Any], *, folder: str, log_folder: str,
                     client_memory_bytes: int, hosts: int) -> list[dict[str, Any]]:
    ck, c = doc["checkpoint"], spec.checkpoint
    per_client = ck["bytes_per_checkpoint"] / max(1, hosts)
    per_host_memory = client_memory_bytes / max(1, hosts)
    big = per_client > v3.CHECKPOINT_MEMORY_MULTIPLIER * per_host_memory
    fs = "s3 objects" if is_object_url(folder) else _filesystem_type(folder)    # objects: no page cache here
    cleared = c.count_read > 0 and c.count_write > 0 and fs not in ("tmpfs", "ramfs")
    detail = (f"{_gib(per_client)} per client per checkpoint against 3 x {_gib(per_host_memory)} of memory: "
              + ("more" if big else "not more"))
    if not big:
        detail += ("; read back from objects (no page cache of this host holds them)" if cleared and is_object_url(folder)
                   else "; the cache was cleared between write and read (fadvise DONTNEED on every file)" if cleared else
                   f"; the cache could not be cleared ({fs or 'no read-back'}: its pages are the storage)"
                   if c.count_read else "; nothing read back")
    checks = [_check("checkpoint data per client > 3 x its memory, or the cache cleared between write and read",
                     "4.3.1", big or cleared, detail)]
    model = v3.model_of(spec.name)
    world = ck["ranks_total"]
    if ck.get("subset"):
        ok = model == v3.SUBSET_MODEL and world == v3.SUBSET_PROCESSES
        checks.append(_check("subset mode: the 8B model with 8 processes only", "4.3.5", ok,
                             f"subset run of {model}: {ck['writers']} of {world} ranks write"))
    else:
        checks.append(_check("subset mode: the 8B model with 8 processes only", "4.3.5", True, "not a subset run"))
    want = v3.CHECKPOINT_PROCESSES.get(model)
    checks.append(_check("the model's process count (CLOSED: 8, 64, 512, 1024)", "4.6.1",
                         want is not None and world == want,
                         f"{world} ranks for {model}" + (f"; CLOSED asks {want}" if want else
                                                         "; not one of v3.0's llama3 models")))
    checks.append(check_log_folder(folder, log_folder, "4.4.2"))
    return checks


# -- provenance ---------------------------------------------------------------------------------------
def code_hash() -> dict[str, Any]:
    """SHA-256 over storlab's Python files (relative path and contents, in path order) and the
    compiled engine, with the git commit of the checkout when there is one."""
    import storlab

    root = os.path.dirname(os.path.abspath(storlab.__file__))
    h = hashlib.sha256()
    files = 0
    for folder, dirs, names in sorted(os.walk(root)):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
        for name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.join(folder, name)
            h.update(os.path.relpath(path, root).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
            files += 1
    from ... import _core

    engine = sha256_of(_core.__file__) if os.path.isfile(_core.__file__ or "") else "unknown"
    try:
        git = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        commit = git.stdout.strip() if git.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):     # no git, or not a checkout
        commit = "unknown"
    return {"python_sha256": h.hexdigest(), "python_files": files, "engine_sha256": engine, "git_commit": commit}


def config_hash(spec: WorkloadSpec) -> dict[str, Any]:
    """SHA-256 (16 hex digits) of the workload's defining settings: its job as canonical JSON
    without the site settings (SITE_KEYS), so a workload hashes alike wherever it runs."""
    table = spec.to_table()
    table["workload"]["train"] = spec.train_enabled
    keys = {}
    for section, values in sorted(table.items()):
        for key, value in sorted(values.items()):
            if f"{section}.{key}" not in SITE_KEYS:
                keys[f"{section}.{key}"] = value
    text = json.dumps(keys, sort_keys=True, separators=(",", ":"), default=str)
    return {"algorithm": "sha256 of the canonical JSON of the keys, first 16 hex digits",
            "hash": hashlib.sha256(text.encode()).hexdigest()[:16], "keys": sorted(keys), "left_out": list(SITE_KEYS)}


def provenance(spec: WorkloadSpec, source: str, translation: dict[str, Any] | None) -> dict[str, Any]:
    """What ran: storlab's version and code hashes, the workload's source and its hashes, and
    the v3.0 rules edition and division the checks use."""
    from ... import __version__

    src: dict[str, Any] = {"source": source}
    if translation and translation.get("sha256"):
        src["source_sha256"] = translation["sha256"]
    elif source and os.path.isfile(source):
        src["source_sha256"] = sha256_of(source)
    return {"tool": {"name": "storlab", "version": __version__, **code_hash()},
            "workload": {**src, "name": spec.name, "accelerator": spec.accelerator or "unknown",
                         "division": v3.division(spec.name, spec.accelerator), "config": config_hash(spec)},
            "rules_edition": v3.RULES_EDITION, "statement": NOT_A_SUBMISSION}


def run_summary(doc: dict[str, Any], index: int, warmup: bool) -> dict[str, Any]:
    """One run of `--runs` in a few figures."""
    return {"run": index, "warmup": warmup, "run_id": doc.get("run_id"), "au": doc.get("au"),
            "samples_per_s": doc.get("samples_per_s"), "seconds": doc.get("seconds"),
            "complete": doc.get("complete", True)}


def judge(spec: WorkloadSpec, doc: dict[str, Any], *, log_folder: str, source: str,
          translation: dict[str, Any] | None, client_memory_bytes: int, hosts: int) -> None:
    """Add the rule checks (`doc["mlperf"]`) and the provenance record to a finished document."""
    log_folder = log_folder or os.getcwd()
    if spec.mode == "training":
        checks = check_training(spec, doc, data_folder=spec.dataset.folder, log_folder=log_folder,
                                runs=[run_summary(doc, 1, False)])
    elif spec.mode == "checkpoint":
        checks = check_checkpoint(spec, doc, folder=spec.checkpoint.folder, log_folder=log_folder,
                                  client_memory_bytes=client_memory_bytes, hosts=hosts)
    else:
        checks = check_generation(doc, data_folder=spec.dataset.folder, log_folder=log_folder)
    doc["mlperf"] = {"rules_edition": v3.RULES_EDITION, "division": v3.division(spec.name, spec.accelerator),
                     "accelerator": spec.accelerator or "unknown", "checks": checks,
                     "passed": all(c["result"] == "pass" for c in checks), "statement": NOT_A_SUBMISSION}
    doc["provenance"] = provenance(spec, source, translation)


def judge_runs(doc: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    """The runs of `--runs` in the last run's document: the list, and its runs check redone."""
    doc["runs"] = runs
    checks = doc.get("mlperf", {}).get("checks", [])
    for i, c in enumerate(checks):
        if c["source"].endswith("§2.1.17"):
            checks[i] = check_runs(runs)
    if "mlperf" in doc:
        doc["mlperf"]["passed"] = all(c["result"] == "pass" for c in checks)
