"""`storlab meta` on an s3:// prefix against a real S3 server (the Versity S3 Gateway on a folder,
started by each test), and the time to first byte of `storlab run`'s GETs: each phase is one
request per object (PUT, HEAD, GET, DELETE; LIST a page at a time), the objects are the server's
files under the run's own new prefix, rename is refused before any request, and nothing of the
run is left on the server after it, a failure or Ctrl-C."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from storlab import schemas
from storlab.jobs.meta_options import resolve_meta_options
from storlab.measure.benchmark import PhaseHooks
from storlab.measure.meta import run_meta
from testbed.servers import VersityServer, s3_unavailable

WHY = s3_unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"S3: {WHY}")
URL = "s3://bench/p"
# an access-log line: operation, key ("-" for a LIST), the request's path and query, status
_LOGGED = re.compile(r" s3_(\w+) (\S+) (\S+) (\d{3}) ")


def meta(srv: VersityServer, *args: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "meta.json"
    out.unlink(missing_ok=True)
    r = subprocess.run([sys.executable, "-m", "storlab", "meta", "--no-store", "--quiet", "--json", str(out),
                        "--endpoint", srv.endpoint, *args], capture_output=True, text=True, timeout=180, env=srv.env)
    return r, (json.loads(out.read_text()) if out.exists() else {})


def logged(srv: VersityServer, since: int = 0) -> list[tuple[str, str, str, int]]:
    """(operation, key, path and query, status) of every request the server logged from line `since`."""
    lines = srv.requests().splitlines()[since:]
    return [(m[1], m[2], m[3], int(m[4])) for m in map(_LOGGED.search, lines) if m]


def held(srv: VersityServer, prefix: str) -> dict[str, int]:
    """Every object under bucket bench's `prefix` (the server's files, at any depth), relative
    to it, with its size."""
    folder = srv.root / "bench" / prefix
    if not folder.is_dir():
        return {}
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*")
            if p.is_file() and ".sgwtmp" not in p.parts}


def test_each_phase_is_one_request_per_object_and_the_run_leaves_nothing(tmp_path):
    threads, files, page = 2, 25, 10
    names = {f"w{w}/f{w}.{i}" for w in range(threads) for i in range(files)}
    with VersityServer(tmp_path) as srv:
        r, kept = meta(srv, "--target", URL, "--threads", str(threads), "--files-per-thread", str(files),
                       "--file-size", "1000", "--list-page", str(page), "--verify-read", "--order", "random",
                       "--keep", tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        requests = logged(srv)
        kept_prefix = kept["job"]["workdir"].removeprefix("s3://bench/")
        on_server = held(srv, kept_prefix)
        since = len(srv.requests().splitlines())
        r, doc = meta(srv, "--target", URL, "--threads", str(threads), "--files-per-thread", str(files),
                      tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        second = logged(srv, since)
        prefix = doc["job"]["workdir"].removeprefix("s3://bench/")
        left = held(srv, prefix)
        still_kept = held(srv, kept_prefix)
    schemas.validate(kept)
    schemas.validate(doc)
    assert re.fullmatch(r"p/storlab-meta-[0-9a-f]{12}", kept_prefix) and prefix != kept_prefix
    # create PUT each object, with its bytes: the server holds exactly them
    assert on_server == dict.fromkeys(names, 1000)
    by_op = {op: sorted(key.removeprefix(kept_prefix + "/") for o, key, _, status in requests if o == op and status == 200)
             for op in ("PutObject", "HeadObject", "GetObject")}
    assert by_op["PutObject"] == by_op["HeadObject"] == by_op["GetObject"] == sorted(names)
    assert not [x for x in requests if x[0].startswith("Delete")], "a kept run deletes nothing"
    phases = {p["name"]: p for p in kept["phases"]}
    assert list(phases) == ["mkdir", "create", "stat", "read", "list"]
    assert [phases[n]["ops"] for n in ("create", "stat", "read")] == [threads * files] * 3
    assert phases["create"]["bytes"] == phases["read"]["bytes"] == threads * files * 1000
    # the list phase: each thread lists its own tree a page at a time, every name once
    lists = [q for o, _, q, _ in requests if o == "ListObjectsV2" and f"max-keys={page}&" in q]
    assert phases["list"]["ops"] == threads * files
    assert phases["list"]["requests"] == len(lists) == threads * -(-files // page)
    for p in phases.values():
        assert p["complete"] and set(p["lat_ns"]) >= {"p50", "p99", "max"}
    for name in ("mkdir",):
        assert phases[name]["ops"] == 0 and phases[name]["skipped"].startswith("S3 has no directories")
    assert kept["cleanup"]["kept"] and kept["environment"]["engine"] == "s3"
    (target,) = kept["environment"]["targets"]
    assert target["type"] == "s3" and target["server"] == srv.endpoint and target["path"] == kept["job"]["workdir"]
    assert srv.secret not in json.dumps(kept) + json.dumps(doc) + r.stdout + r.stderr
    # the second run, by default: no rename, list added, every object deleted again, the first
    # run's prefix untouched
    assert [p["name"] for p in doc["phases"]] == ["mkdir", "create", "stat", "read", "list", "remove", "rmdir"]
    deletes = sorted(key.removeprefix(prefix + "/") for op, key, _, _ in second if op == "DeleteObject")
    assert deletes == sorted(f"w{w}/f{w}.{i}" for w in range(threads) for i in range(files))
    assert doc["phases"][-1]["skipped"] and doc["phases"][-2]["ops"] == threads * files
    assert left == {} and still_kept == on_server
    assert doc["cleanup"] == {"kept": False, "files_removed": 0, "dirs_removed": 0, "error": None}


def test_rename_is_refused_in_one_line_before_any_request(tmp_path):
    with VersityServer(tmp_path) as srv:
        r, doc = meta(srv, "--target", URL, "--files-per-thread", "5", "--phases", "create,stat,rename", tmp_path=tmp_path)
        requests = logged(srv)
        on_server = held(srv, "p")
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "rename: S3 has no rename" in lines[0]
    assert requests == [] and on_server == {} and doc == {}


def test_a_failed_phase_still_removes_every_object_the_run_made(tmp_path, monkeypatch):
    """An object cut short on the server between create and read fails the read (the GET brings
    fewer bytes than create wrote) with its key named; the clean-up then deletes every object."""
    with VersityServer(tmp_path) as srv:
        for k in [k for k in os.environ if k.startswith("AWS_")]:
            monkeypatch.delenv(k)
        for k, v in srv.env.items():
            if k.startswith("AWS_"):
                monkeypatch.setenv(k, v)
        values = resolve_meta_options({"target": URL, "endpoint": srv.endpoint, "threads": 2, "files": 20,
                                       "file_size": "1k"})
        cut: list[Path] = []

        class CutOneShort(PhaseHooks):
            def before_start(self, phase, run) -> None:
                if phase == "read":
                    (victim,) = [p for p in (srv.root / "bench" / "p").rglob("f1.7") if ".sgwtmp" not in p.parts]
                    victim.write_bytes(b"")
                    cut.append(victim)

        doc = run_meta(values, hooks=CutOneShort())
        prefix = doc["job"]["workdir"].removeprefix("s3://bench/")
        left = held(srv, prefix)
        deletes = [key for op, key, _, _ in logged(srv) if op == "DeleteObject"]
    assert cut, "the hook ran before read"
    assert not doc["complete"] and doc["stop_reason"] == "error"
    assert f"read of s3://bench/{prefix}/w1/f1.7 failed at GET: the object holds 0 bytes, expected 1024" in doc["error"]
    assert [p["name"] for p in doc["phases"]] == ["mkdir", "create", "stat", "read"]
    assert left == {} and len(deletes) == 40 and doc["cleanup"]["error"] is None


def test_ctrl_c_stops_the_run_and_removes_every_object(tmp_path):
    with VersityServer(tmp_path) as srv:
        run = subprocess.Popen([sys.executable, "-m", "storlab", "meta", "--no-store", "--quiet", "--endpoint", srv.endpoint,
                                "--target", URL, "--threads", "2", "--files-per-thread", "1000000"],
                               env=srv.env, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while len(held(srv, "p")) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        seen = held(srv, "p")
        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=120) == 130, run.stderr.read()
        left = held(srv, "p")
    assert len(seen) >= 20, "the run put objects before the signal"
    assert left == {}


def test_reads_of_an_s3_target_carry_their_time_to_first_byte(tmp_path):
    with VersityServer(tmp_path) as srv:
        def run(target: str, *args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "storlab", "run", "--no-store", "--endpoint", srv.endpoint,
                                   "--target", target, "--bs", "1m", "--threads", "2", "--qd", "2", *args],
                                  env=srv.env, capture_output=True, text=True, timeout=120)

        w = run(URL, "--quiet", "--rw", "write", "--size", "16m", "--keep-objects")
        assert w.returncode == 0, w.stderr
        r = run(URL, "--rw", "read", "--json", str(tmp_path / "read.json"))
        assert r.returncode == 0, r.stderr
        # a timed read after a ramp: the GETs of the ramp are in neither histogram
        ramped = run(URL, "--quiet", "--rw", "randread", "--time", "1s", "--ramp", "0.5s",
                     "--json", str(tmp_path / "ramped.json"))
        assert ramped.returncode == 0, ramped.stderr
        # a write to a prefix of its own (the read's holds objects): no GET, no first byte
        w = run("s3://bench/w", "--quiet", "--rw", "write", "--size", "4m", "--json", str(tmp_path / "write.json"))
        assert w.returncode == 0, w.stderr
    doc = json.loads((tmp_path / "read.json").read_text())
    wdoc = json.loads((tmp_path / "write.json").read_text())
    schemas.validate(doc)
    schemas.validate(wdoc)
    read = doc["phases"][0]["read"]
    ttfb, lat = read["ttfb_ns"], read["lat_ns"]
    assert read["ops"] == 16 and sum(n for _, n in read["ttfb_hist"]["buckets"]) == read["ops"]
    for key in ("min", "p50", "p90", "p99", "max"):
        assert 0 < ttfb[key] <= lat[key], (key, ttfb, lat)
    assert "read time to first byte" in r.stdout
    ramped = json.loads((tmp_path / "ramped.json").read_text())["phases"][0]["read"]
    assert ramped["ops"] > 0
    assert sum(n for _, n in ramped["ttfb_hist"]["buckets"]) == sum(n for _, n in ramped["lat_hist"]["buckets"]) == ramped["ops"]
    assert "ttfb_ns" not in wdoc["phases"][0]["write"], "a PUT has no first byte to wait for"
