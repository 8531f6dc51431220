"""The Python binding of the engine's S3 client (storlab._core.ObjectStore) and the operation mix
on objects (measure/opmix.py ObjectMixRun), against a real S3 server (the Versity S3 Gateway on a
folder): bytes round trip as the server's files, ranged GETs, LIST and DELETE, failures in one
line that names the key id and never the secret, and a mix whose per-operation counts add up to
what was drawn and match the requests the server logged."""
from __future__ import annotations

import os
import re

import pytest
from storlab import _core
from storlab.errors import FailureError, TargetError, from_core
from storlab.jobs import meta_options
from storlab.measure.opmix import RECREATE, ObjectMixLayout, ObjectMixRun, make_objects, open_object_store, remove_objects
from testbed.servers import VersityServer, s3_unavailable

WHY = s3_unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"S3: {WHY}")
MiB = 1 << 20
_LOGGED = re.compile(r" s3_(\w+) (\S+) \S+ (\d{3}) ")


def _client_env(srv: VersityServer, monkeypatch) -> None:
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(k)
    for k, v in srv.env.items():
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)


def _ops(srv: VersityServer, since: int = 0) -> list[tuple[str, str, int]]:
    return [(m[1], m[2], int(m[3])) for m in map(_LOGGED.search, srv.requests().splitlines()[since:]) if m]


def test_bytes_round_trip_as_the_servers_files_with_ranged_gets_lists_and_deletes(tmp_path, monkeypatch):
    small, big = os.urandom(100_000), os.urandom(9 * MiB + 123)      # big: above the 8 MiB part size
    with VersityServer(tmp_path) as srv:
        _client_env(srv, monkeypatch)
        store = _core.ObjectStore("s3://bench/p/q", endpoint=srv.endpoint)
        store.put("a/one.bin", small)
        store.put("a/big.bin", big)
        store.put("b.bin", b"")
        on_disk = {str(p.relative_to(srv.root / "bench")): p.read_bytes() for p in (srv.root / "bench").rglob("*")
                   if p.is_file()}
        whole = store.get("a/one.bin")
        whole_known = store.get("a/one.bin", 0, len(small), whole=True)
        ranged = store.get("a/big.bin", 5 * MiB, 4096)
        tail = store.get("a/one.bin", 99_000)
        big_back = store.get("a/big.bin")
        listed = store.list()
        under_a = store.list("a/")
        sizes = (store.size_of("a/one.bin"), store.size_of("a/one"), store.size_of("nothing"))
        store.delete("a/one.bin")
        store.delete("a/one.bin")            # a missing key is no error
        after_delete = store.list()
        store.delete_many(["a/big.bin", "b.bin"])
        after_many = store.list()
        ops = _ops(srv)
    assert on_disk["p/q/a/one.bin"] == small and on_disk["p/q/a/big.bin"] == big and on_disk["p/q/b.bin"] == b""
    assert whole == small and whole_known == small and big_back == big
    assert ranged == big[5 * MiB:5 * MiB + 4096] and tail == small[99_000:]
    assert listed == [("a/big.bin", len(big)), ("a/one.bin", len(small)), ("b.bin", 0)]
    assert under_a == [("a/big.bin", len(big)), ("a/one.bin", len(small))]
    assert sizes == (len(small), None, None)
    assert after_delete == [("a/big.bin", len(big)), ("b.bin", 0)] and after_many == []
    names = [op for op, _k, _s in ops]
    assert names.count("CompleteMultipartUpload") == 1 and names.count("UploadPart") == 2
    assert store.bucket == "bench" and store.prefix == "p/q" and store.endpoint == srv.endpoint


def test_failures_are_one_line_naming_the_key_id_never_the_secret(tmp_path, monkeypatch):
    with VersityServer(tmp_path) as srv:
        _client_env(srv, monkeypatch)
        good = _core.ObjectStore("s3://bench/p", endpoint=srv.endpoint)
        with pytest.raises(_core.CoreError) as missing_key:
            good.get("nothing-here", 0, 10)
        with pytest.raises(_core.CoreError) as missing_bucket:
            _core.ObjectStore("s3://nobucket/p", endpoint=srv.endpoint).list()
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "a-wrong-secret-value")
        bad = _core.ObjectStore("s3://bench/p", endpoint=srv.endpoint)
        with pytest.raises(_core.CoreError) as denied:
            bad.put("x", b"data")
        with pytest.raises(_core.CoreError) as denied_get:
            bad.get("x")
    with pytest.raises(_core.CoreError) as unreachable:
        _core.ObjectStore("s3://bench/p", endpoint="http://127.0.0.1:1").list()
    with pytest.raises(_core.CoreError) as bad_url:
        _core.ObjectStore("s3://NO/p", endpoint="http://127.0.0.1:1")
    with pytest.raises(_core.CoreError) as bad_endpoint:
        _core.ObjectStore("s3://bench/p", endpoint="http://user:pw@host/path")
    for e in (missing_key, missing_bucket, denied, denied_get, unreachable, bad_url, bad_endpoint):
        kind, message = e.value.args
        assert "\n" not in message and "a-wrong-secret-value" not in message and srv.secret not in message, message
    assert denied.value.args[0] == "io" and "access denied" in denied.value.args[1]
    assert srv.access_key in denied.value.args[1] and "s3://bench/p/x" in denied.value.args[1]
    assert "access denied" in denied_get.value.args[1]
    assert "NoSuchKey" in missing_key.value.args[1] and "s3://bench/p/nothing-here" in missing_key.value.args[1]
    assert "bucket 'nobucket' does not exist" in missing_bucket.value.args[1]
    assert unreachable.value.args == ("io", "s3://bench/p/: LIST: cannot reach http://127.0.0.1:1: connection refused")
    assert bad_url.value.args[0] == "target" and "names bucket 'NO'" in bad_url.value.args[1]
    assert bad_endpoint.value.args[0] == "target" and "pw" not in bad_endpoint.value.args[1]
    # storlab's hierarchy: a store that cannot be set up is the user's to fix, a failed request is not
    assert isinstance(from_core(*bad_url.value.args), TargetError)
    assert isinstance(from_core(*denied.value.args), FailureError)


def test_the_mix_on_objects_counts_each_operation_and_the_server_saw_each_request(tmp_path, monkeypatch):
    threads, files, per_thread, size = 3, 8, 150, 4096
    values = meta_options.resolve_meta_options(
        {"mix": "read=40,write=20,stat=15,delete=10,list=15", "mix_ops": per_thread, "threads": threads,
         "files": files, "file_size": size, "depth": 1, "fanout": 2, "target": "s3://bench/mix"})
    with VersityServer(tmp_path) as srv:
        _client_env(srv, monkeypatch)
        store = open_object_store("s3://bench/mix", endpoint=srv.endpoint)
        layout = ObjectMixLayout(store, values["dir"], values["depth"], values["fanout"], "")
        items = [files] * threads
        make_objects(layout, items, os.urandom(size))
        start = len(srv.requests().splitlines())
        run = ObjectMixRun(values, layout, items)
        run.start()
        while not run.wait(0.5):
            pass
        result = run.result()
        ops = _ops(srv, start)
        objects_during = sorted(k for k, _ in store.list())
        removed = remove_objects(layout, items)
        left = store.list()
    assert result["complete"], result["error"]
    rows = result["mix"]["operations"]
    drawn = {op: rows[op]["ops"] for op in ("read", "write", "stat", "delete", "list")}
    assert sum(drawn.values()) == result["ops"] == threads * per_thread
    assert sum(result["items_per_worker"]) == threads * per_thread
    assert rows[RECREATE]["ops"] == drawn["delete"]
    assert all(rows[op]["ops_per_s"] > 0 and rows[op]["lat_ns"]["p50"] > 0 for op in drawn if drawn[op])
    assert all(status < 300 for _op, _key, status in ops), [o for o in ops if o[2] >= 300][:3]
    seen = [op for op, _key, _status in ops]
    assert seen.count("GetObject") == drawn["read"]
    assert seen.count("PutObject") == drawn["write"] + drawn["delete"]        # writes and re-creates
    assert seen.count("DeleteObject") == drawn["delete"]
    assert seen.count("ListObjectsV2") == drawn["stat"] + drawn["list"]       # stat is a LIST of the key
    assert result["bytes"] == size * (drawn["read"] + drawn["write"] + drawn["delete"])
    assert len(objects_during) == threads * files, "a delete re-creates its object"
    assert removed == threads * files and left == []


def test_storlab_meta_mix_on_an_s3_target_runs_between_the_engines_phases_and_removes_its_objects(tmp_path):
    """`storlab meta --mix` on a prefix: the engine's create PUTs the objects, the mix draws from
    them through the Python client, the engine's remove DELETEs them; every request is the
    server's, nothing is left, and a wrong secret is one line that never shows it."""
    import json
    import subprocess
    import sys

    out = tmp_path / "meta.json"
    with VersityServer(tmp_path) as srv:
        base = [sys.executable, "-m", "storlab", "meta", "--target", "s3://bench/m", "--endpoint", srv.endpoint,
                "--files-per-thread", "6", "--threads", "2", "--no-store", "--quiet"]
        r = subprocess.run([*base, "--mix", "read=50,write=20,stat=10,delete=10,list=10", "--mix-ops", "60",
                            "--json", str(out)], env=srv.env, capture_output=True, text=True, timeout=120)
        ops = _ops(srv)
        left = [p for p in (srv.root / "bench").rglob("*") if p.is_file()]
        denied = subprocess.run([*base, "--mix", "read=100"], env={**srv.env, "AWS_SECRET_ACCESS_KEY": "wrong-one"},
                                capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    by = {p["name"]: p for p in doc["phases"]}
    assert [p["name"] for p in doc["phases"] if p["ops"]] == ["create", "mix", "remove"]
    mix = by["mix"]
    rows = mix["mix"]["operations"]
    assert mix["complete"] and mix["ops"] == 2 * 60
    assert sum(rows[op]["ops"] for op in ("read", "write", "stat", "delete", "list")) == mix["ops"]
    seen = [op for op, _key, _status in ops]
    assert seen.count("GetObject") == rows["read"]["ops"]
    assert seen.count("PutObject") == 12 + rows["write"]["ops"] + rows["recreate"]["ops"]   # made, written, re-made
    assert seen.count("DeleteObject") == rows["delete"]["ops"] + 12                          # the mix's, remove's
    assert left == [] and doc["environment"]["engine"] == "s3"
    assert doc["environment"]["targets"][0]["path"].startswith("s3://bench/m/storlab-meta-")
    assert denied.returncode in (1, 2) and len(denied.stderr.strip().splitlines()) == 1
    assert "access denied" in denied.stderr and "wrong-one" not in denied.stderr and srv.secret not in denied.stderr
