"""The s3 engine against a real S3 server (the Versity S3 Gateway on a folder, started by each
test): the objects written are the server's files with the bytes storlab reports, reads are GETs
(ranged inside an object for smaller requests), the write-safety rule for a prefix holding
objects, clean-up at the end unless kept, and bad input in one line that never shows the secret."""
from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from storlab import schemas
from testbed.servers import VersityServer, s3_unavailable

WHY = s3_unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"S3: {WHY}")
MiB = 1 << 20
URL = "s3://bench/p"
# an access-log line of a request: operation, key, path, status, error code, bytes sent, object
# size (versitygw logs a PUT's size there; its GETs' bytes are logged as 0)
_LOGGED = re.compile(r" s3_(\w+) (\S+) \S+ (\d{3}) \S+ \d+ (\d+) ")


def storlab(srv: VersityServer, *args: str, tmp_path: Path, env: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "run.json"
    out.unlink(missing_ok=True)
    r = subprocess.run([sys.executable, "-m", "storlab", "run", "--no-store", "--quiet", "--json", str(out),
                        "--endpoint", srv.endpoint, *args], capture_output=True, text=True, timeout=120,
                       env=env or srv.env)
    return r, (json.loads(out.read_text()) if out.exists() else {})


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr and "panicked" not in r.stderr, r.stderr
    return lines[0]


def logged(srv: VersityServer, since: int = 0) -> list[tuple[str, str, int, int]]:
    """(operation, key, status, object size) of every request the server logged, from line `since`."""
    lines = srv.requests().splitlines()[since:]
    return [(m[1], m[2], int(m[3]), int(m[4])) for m in map(_LOGGED.search, lines) if m]


def test_a_write_then_a_read_move_exactly_their_bytes_as_objects_on_the_server(tmp_path):
    with VersityServer(tmp_path) as srv:
        r, doc = storlab(srv, "--target", URL, "--rw", "write", "--bs", "1m", "--size", "64m", "--threads", "4",
                         "--keep-objects", tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        schemas.validate(doc)
        on_disk = srv.objects("bench", "p")
        puts = [x for x in logged(srv) if x[0] == "PutObject"]
        before_read = len(srv.requests().splitlines())
        r, doc_read = storlab(srv, "--target", URL, "--rw", "read", "--bs", "1m", "--threads", "4", "--keep-objects",
                              tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        schemas.validate(doc_read)
        gets = [x for x in logged(srv, before_read) if x[0] == "GetObject"]
        assert srv.objects("bench", "p") == on_disk, "a kept prefix stays after a read"
    (phase,) = doc["phases"]
    assert phase["write"]["bytes"] == 64 * MiB and phase["write"]["ops"] == 64
    assert on_disk == {f"obj-{k:012d}": MiB for k in range(64)}
    assert len(puts) == 64 and {(status, size) for _, _, status, size in puts} == {(200, MiB)}
    assert phase["engine_counters"] == {"slowdown_retries": 0}
    (target,) = doc["environment"]["targets"]
    assert target["type"] == "s3" and target["created"] and target["size_bytes"] == 64 * MiB
    assert target["server"] == srv.endpoint and doc["environment"]["engine"] == "s3"
    (read,) = doc_read["phases"]
    assert read["read"]["bytes"] == 64 * MiB and read["read"]["ops"] == 64
    # the size comes from the objects there; one GET of each object
    assert sorted(key for _, key, _, _ in gets) == [f"p/obj-{k:012d}" for k in range(64)]
    assert not doc_read["environment"]["targets"][0]["created"]
    assert srv.secret not in json.dumps(doc) + json.dumps(doc_read)


def test_random_reads_are_ranged_gets_of_the_right_bytes_inside_the_objects(tmp_path):
    """A byte flipped in an object's file on the server is found by a verified random read of 4 KiB
    requests at exactly that object's offset plus the byte's: each ranged GET brought the bytes
    of its range."""
    with VersityServer(tmp_path) as srv:
        r, _ = storlab(srv, "--target", URL, "--rw", "write", "--bs", "1m", "--size", "4m", "--verify", "crc32c",
                       "--keep-objects", tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        since = len(srv.requests().splitlines())
        r, doc = storlab(srv, "--target", URL, "--rw", "randread", "--bs", "4k", "--object-size", "1m", "--qd", "8",
                         "--keep-objects", tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        gets = [x for x in logged(srv, since) if x[0] == "GetObject"]
        with (srv.root / "bench/p/obj-000000000001").open("r+b") as f:
            f.seek(5000)
            byte = f.read(1)[0]
            f.seek(5000)
            f.write(bytes([byte ^ 0xFF]))
        r_bad, _ = storlab(srv, "--target", URL, "--rw", "randread", "--bs", "4k", "--object-size", "1m",
                           "--verify", "crc32c", "--keep-objects", tmp_path=tmp_path)
    (phase,) = doc["phases"]
    assert phase["read"]["ops"] == 1024 and phase["read"]["bytes"] == 4 * MiB
    assert len(gets) == 1024 and {key for _, key, _, _ in gets} == {f"p/obj-{k:012d}" for k in range(4)}
    # a verified read of 4 KiB inside blocks written as 1 MiB checks what it can (the block's
    # payload) and says the rest could not be verified; the flipped byte is a mismatch: exit 1.
    # Object 1 starts at 1 MiB; byte 5000 is in the request at 1 MiB + 4 KiB, 904 bytes in
    assert r_bad.returncode == 1, r_bad.stderr
    assert f"{URL} offset {MiB + 4096}: payload byte +904" in r_bad.stderr, r_bad.stderr


def test_a_read_of_missing_objects_lays_them_out_and_removes_them_at_the_end(tmp_path):
    with VersityServer(tmp_path) as srv:
        r, doc = storlab(srv, "--target", URL, "--rw", "read", "--bs", "256k", "--object-size", "1m",
                         "--size", "4m", tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        puts = [x for x in logged(srv) if x[0] == "PutObject"]
        left = srv.objects("bench", "p")
    (target,) = doc["environment"]["targets"]
    assert target["created"] and target["laid_out_bytes"] == 4 * MiB
    assert doc["phases"][0]["read"]["bytes"] == 4 * MiB
    assert len(puts) == 4 and left == {}, "the laid-out objects are the run's: gone at its end"


def test_objects_the_run_made_are_removed_at_the_end_unless_kept(tmp_path):
    with VersityServer(tmp_path) as srv:
        r, doc = storlab(srv, "--target", URL, "--rw", "write", "--bs", "1m", "--size", "8m", tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        removals = [op for op, _, _, _ in logged(srv) if op.startswith("Delete")]
        assert srv.objects("bench", "p") == {}
        assert doc["phases"][0]["write"]["ops"] == 8
        assert removals == ["DeleteObjects"], "the eight objects in one request"
        r, _ = storlab(srv, "--target", URL, "--rw", "write", "--bs", "1m", "--size", "8m", "--keep-objects",
                       tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        assert len(srv.objects("bench", "p")) == 8


def test_large_objects_go_up_in_parts_and_verify(tmp_path):
    with VersityServer(tmp_path) as srv:
        r, doc = storlab(srv, "--target", URL, "--rw", "write", "--bs", "12m", "--size", "24m", "--verify", "crc32c",
                         "--keep-objects", tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        ops = [op for op, _, _, _ in logged(srv)]
        on_disk = srv.objects("bench", "p")
    assert on_disk == {"obj-000000000000": 12 * MiB, "obj-000000000001": 12 * MiB}
    # 12 MiB in parts of 8 MiB: two parts an object
    assert ops.count("UploadPart") == 4 and ops.count("CompleteMultipartUpload") == 2 and "PutObject" not in ops
    assert doc["phases"][0]["verify"]["readback_blocks"] == 2


def test_a_prefix_holding_objects_is_written_only_when_named_in_allow_destroy(tmp_path):
    with VersityServer(tmp_path) as srv:
        r, _ = storlab(srv, "--target", URL, "--rw", "write", "--bs", "1m", "--size", "4m", "--keep-objects", tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        since = len(srv.requests().splitlines())
        r, _ = storlab(srv, "--target", URL, "--rw", "write", "--bs", "1m", "--size", "4m", tmp_path=tmp_path)
        line = one_line_error(r)
        assert line.startswith(f"storlab run: error: {URL}: holds 4 object(s)") and "--allow-destroy" in line, line
        assert not [x for x in logged(srv, since) if x[0] in ("PutObject", "DeleteObject", "DeleteObjects")], \
            "nothing written"
        r, doc = storlab(srv, "--target", URL, "--rw", "write", "--bs", "1m", "--size", "4m",
                         "--allow-destroy", URL, tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        assert not doc["environment"]["targets"][0]["created"]
        assert len(srv.objects("bench", "p")) == 4, "objects the run did not make stay"


def test_bad_credentials_name_the_key_id_and_never_the_secret(tmp_path):
    with VersityServer(tmp_path) as srv:
        wrong = "not-the-secret-" + srv.secret[:6]
        r, _ = storlab(srv, "--target", URL, "--rw", "write", "--bs", "1m", "--size", "4m", tmp_path=tmp_path,
                       env={**srv.env, "AWS_SECRET_ACCESS_KEY": wrong})
    line = one_line_error(r)
    assert "access denied" in line and srv.access_key in line, line
    assert wrong not in line and srv.secret not in line and "X-Amz-Signature" not in line, line


@pytest.mark.parametrize("case", ["missing bucket", "unreachable endpoint", "malformed URL", "bs not object_size",
                                  "no credentials"])
def test_bad_input_is_one_line(tmp_path, case):
    with VersityServer(tmp_path) as srv:
        args, env = ["--rw", "read", "--bs", "1m", "--size", "4m"], srv.env
        target = URL
        if case == "missing bucket":
            target = "s3://nobucket/p"
        elif case == "unreachable endpoint":
            args += ["--endpoint", "http://127.0.0.1:1"]
        elif case == "malformed URL":
            target = "s3://No_Such/p"
        elif case == "bs not object_size":
            args = ["--rw", "write", "--bs", "4k", "--object-size", "1m", "--size", "4m"]
        else:
            env = {k: v for k, v in srv.env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        r, _ = storlab(srv, "--target", target, *args, tmp_path=tmp_path, env=env)
        assert srv.objects("bench", "p") == {}
    line = one_line_error(r)
    want = {"missing bucket": "bucket 'nobucket' does not exist", "unreachable endpoint": "cannot reach http://127.0.0.1:1",
            "malformed URL": "names bucket 'No_Such'", "bs not object_size": "object_size: a write is a PUT of a whole object",
            "no credentials": "no credentials: set AWS_ACCESS_KEY_ID"}[case]
    assert want in line, line


def test_a_self_signed_certificate_is_refused_unless_insecure(tmp_path):
    with VersityServer(tmp_path, tls=True) as srv:
        r, _ = storlab(srv, "--target", URL, "--rw", "write", "--bs", "1m", "--size", "2m", tmp_path=tmp_path)
        line = one_line_error(r)
        assert f"TLS failure with {srv.endpoint}" in line and "--insecure" in line, line
        r, doc = storlab(srv, "--target", URL, "--rw", "write", "--bs", "1m", "--size", "2m", "--insecure", "--keep-objects",
                         tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        assert len(srv.objects("bench", "p")) == 2 and doc["phases"][0]["write"]["bytes"] == 2 * MiB


def test_a_signal_removes_the_objects_even_when_kept_and_leaves_no_upload(tmp_path):
    with VersityServer(tmp_path) as srv:
        run = subprocess.Popen([sys.executable, "-m", "storlab", "run", "--no-store", "--quiet", "--endpoint", srv.endpoint,
                                "--target", URL, "--rw", "write", "--bs", "12m", "--size", "24m", "--time", "60s",
                                "--keep-objects"], env=srv.env, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not srv.objects("bench", "p") and time.monotonic() < deadline:
            time.sleep(0.05)
        seen = srv.objects("bench", "p")
        time.sleep(0.2)   # parts of the next objects on their way
        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=60) == 130, run.stderr.read()
        left = srv.objects("bench", "p")
        uploads = [p for p in (srv.root / "bench").rglob("*") if ".sgwtmp" in p.parts and "multipart" in p.parts and p.is_file()]
    assert seen, "the run wrote objects before the signal"
    assert left == {} and uploads == []


def test_several_endpoints_are_dealt_round_robin_to_the_workers(tmp_path):
    with VersityServer(tmp_path) as first, VersityServer(tmp_path, same_store_as=first) as second:
        r, doc = storlab(first, "--target", URL, "--endpoint", f"{first.endpoint},{second.endpoint}", "--rw", "write",
                         "--bs", "1m", "--size", "8m", "--threads", "2", "--keep-objects", tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        # worker 0 has region [0, 4 MiB) on the first endpoint, worker 1 the rest on the second
        by_first = sorted(key for op, key, _, _ in logged(first) if op == "PutObject")
        by_second = sorted(key for op, key, _, _ in logged(second) if op == "PutObject")
        assert len(first.objects("bench", "p")) == 8
    assert by_first == [f"p/obj-{k:012d}" for k in range(4)] and by_second == [f"p/obj-{k:012d}" for k in range(4, 8)]
    assert doc["environment"]["targets"][0]["endpoint"] == f"{first.endpoint},{second.endpoint}"


def test_slowdown_answers_are_retried_and_counted(tmp_path):
    """A server serving one request at a time answers the others 503 SlowDown: every object is
    still written, and the retries are in the result, not hidden."""
    with VersityServer(tmp_path, max_requests=1) as srv:
        r, doc = storlab(srv, "--target", URL, "--rw", "write", "--bs", "1m", "--size", "32m", "--threads", "4",
                         "--qd", "4", "--keep-objects", tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        on_disk = srv.objects("bench", "p")
    (phase,) = doc["phases"]
    assert phase["write"]["ops"] == 32 and len(on_disk) == 32
    assert phase["engine_counters"]["slowdown_retries"] > 0


def test_a_failed_plan_removes_the_objects_it_laid_out(tmp_path):
    # the first target's objects are laid out for the read, the second's bucket does not exist:
    # the plan fails and the objects it made go again
    with VersityServer(tmp_path) as srv:
        r, _ = storlab(srv, "--target", URL, "--target", "s3://nobucket/p", "--rw", "read", "--bs", "1m",
                       "--size", "4m", "--keep-objects", tmp_path=tmp_path)
        puts = [x for x in logged(srv) if x[0] == "PutObject"]
        left = srv.objects("bench", "p")
    assert "bucket 'nobucket' does not exist" in one_line_error(r)
    assert len(puts) == 4 and left == {}


def test_a_sweep_over_object_size_and_depth_runs_every_point_and_leaves_nothing(tmp_path):
    """The s3-benchmark matrix as `storlab sweep`: object sizes (bs, one object per request) x
    requests outstanding, writes then reads; every point moves its bytes and the prefix is empty
    at the end."""
    out = tmp_path / "sweep.json"
    with VersityServer(tmp_path) as srv:
        r = subprocess.run([sys.executable, "-m", "storlab", "sweep", "--target", URL, "--endpoint", srv.endpoint,
                            "--rw", "write,read", "--bs", "64k,1m", "--qd", "1,8", "--size", "4m", "--no-store",
                            "--quiet", "--json", str(out)], capture_output=True, text=True, env=srv.env, timeout=300)
        left = srv.objects("bench", "p")
        puts = [x for x in logged(srv) if x[0] == "PutObject"]
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    points, runs = doc["points"], {run["run_id"]: run for run in doc["runs"]}
    assert len(points) == 8 and {p["status"] for p in points} == {"done"} and left == {}
    for point in points:
        (phase,) = runs[point["run_id"]]["phases"]
        direction, bs = point["params"]["rw"], point["params"]["bs"]
        assert phase[direction]["bytes"] > 0 and phase[direction]["bytes"] % bs == 0
        assert runs[point["run_id"]]["environment"]["engine"] == "s3"
    # each write point PUT whole objects of its bs: 64 of 64 KiB or 4 of 1 MiB per pass at least
    assert {size for _, _, status, size in puts if status == 200} == {64 << 10, MiB}


def test_connections_are_kept_alive_across_requests(tmp_path):
    """256 GETs at qd 2 open a handful of connections, not one each: a connection closed leaves a
    TIME-WAIT socket behind on this host, counted before and after."""
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) is not installed: cannot count the connections")

    def closed(srv: VersityServer) -> int:
        out = subprocess.run(["ss", "-Htan", "state", "time-wait"], capture_output=True, text=True).stdout
        return sum(f":{srv.port} " in line for line in out.splitlines())

    with VersityServer(tmp_path) as srv:
        r, _ = storlab(srv, "--target", URL, "--rw", "write", "--bs", "64k", "--size", "1m", "--keep-objects",
                       tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        before = closed(srv)
        r, doc = storlab(srv, "--target", URL, "--rw", "randread", "--bs", "4k", "--object-size", "64k", "--qd", "2",
                         "--io-size", "1m", "--keep-objects", tmp_path=tmp_path)
        assert r.returncode == 0, r.stderr
        after = closed(srv)
    assert doc["phases"][0]["read"]["ops"] == 256
    # the plan's LIST and the worker's two connections at most, give or take the server's own
    assert after - before <= 8, (before, after)


def test_a_server_gone_mid_run_ends_it_with_exit_1_in_one_line(tmp_path):
    with VersityServer(tmp_path) as srv:
        run = subprocess.Popen([sys.executable, "-m", "storlab", "run", "--no-store", "--quiet", "--endpoint", srv.endpoint,
                                "--target", URL, "--rw", "randwrite", "--bs", "1m", "--size", "16m", "--time", "30s",
                                "--qd", "4"], env=srv.env, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not srv.objects("bench", "p") and time.monotonic() < deadline:
            time.sleep(0.05)
        srv.proc.kill()
        srv.proc.wait()
        assert run.wait(timeout=60) == 1
    lines = run.stderr.read().strip().splitlines()
    assert len(lines) == 1 and f"{URL}/obj-" in lines[0] and f"cannot reach {srv.endpoint}" in lines[0], lines
