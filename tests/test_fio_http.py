"""fio's http engine in S3 mode (ioengine=http, http_mode=s3) translated to storlab's s3 engine:
the translation (endpoint, objects, credentials put in the run's environment and nowhere else),
its one-line refusals, and runs against a real S3 server (the Versity S3 Gateway on a folder):
a fio job file writes then reads objects the server holds, and fio 3.42 itself reads the object
storlab wrote (and storlab the one fio wrote) where the two name objects alike (range mode with a
filename of storlab's PREFIX/obj-NNNNNNNNNNNN pattern)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from storlab.jobs.fio import translator
from storlab.jobs.fio.cmdline import parse_command_line, redacted_argv, show_command
from storlab.jobs.translation import Refusal
from testbed.servers import VersityServer, s3_unavailable

KiB, MiB = 1 << 10, 1 << 20
SECRET = "s3cr3t-Never-Shown-0123456789"
KEYID = "AKIDNEVERSHOWN42"
ONE_LINE = re.compile(r"^fio (<text>|[\w.-]+)(:\d+)?: [\w.\[\]]+( = .+?)?: \S")


def http_job(body: str, host: str = "127.0.0.1:7070", keys: bool = True) -> str:
    head = f"[global]\nioengine=http\nhttp_mode=s3\nhttp_host={host}\n"
    if keys:
        head += f"http_s3_keyid={KEYID}\nhttp_s3_key={SECRET}\n"
    return head + body


def group(tr) -> dict:
    (phase,) = tr.plan.phases
    (g,) = phase["groups"]
    return g["options"]


def refusal(text: str) -> str:
    with pytest.raises(Refusal) as e:
        translator.translate(text)
    msg = str(e.value)
    assert ONE_LINE.match(msg) and "\n" not in msg and len(msg) <= 200, msg
    assert SECRET not in msg and KEYID not in msg, msg
    return msg


# -- the translation ------------------------------------------------------------------------------
def test_block_mode_is_an_object_per_request_under_the_key_as_prefix():
    tr = translator.translate(http_job("filename=/bench/p/run1\n[w]\nrw=write\nbs=64k\nsize=1m\n"
                                       "numjobs=2\niodepth=8\n"))
    g = group(tr)
    assert g["engine"] == "s3" and g["target"] == ("s3://bench/p/run1",)
    assert g["object_size"] == g["bs"] == 64 * KiB and g["size"] == MiB
    assert g["endpoint"] == "http://127.0.0.1:7070" and "insecure" not in g and "direct" not in g
    # fio's http engine is synchronous (iodepth capped at 1); its clones share the file
    assert g["qd"] == 1 and g["threads"] == 2 and g["thread_layout"] == "shared"
    assert tr.job["keep_objects"] is True, "fio leaves the objects it wrote"
    assert any("KEY_O_BS" in n for n in tr.notes) and any("iodepth is capped at 1" in n for n in tr.notes)
    assert tr.plan.environment == {"AWS_ACCESS_KEY_ID": KEYID, "AWS_SECRET_ACCESS_KEY": SECRET,
                                   "AWS_REGION": "us-east-1"}


def test_https_region_token_and_virtual_host_style():
    tr = translator.translate(http_job("https=insecure\nhttp_s3_region=eu-central-1\nhttp_s3_security_token=TOK\n"
                                       "filename=/bench/p\n[r]\nrw=randread\nbs=4k\nsize=64k\n", host="s3.local:9000"))
    g = group(tr)
    assert g["endpoint"] == "https://s3.local:9000" and g["insecure"] is True and g["rw"] == "randread"
    assert tr.plan.environment["AWS_REGION"] == "eu-central-1" and tr.plan.environment["AWS_SESSION_TOKEN"] == "TOK"
    # fio's own example: http_host=BUCKET.s3.REGION.amazonaws.com with filename=/KEY
    tr = translator.translate(http_job("https=on\nfilename=/k/e.y\n[w]\nrw=write\nbs=4k\nsize=64k\n",
                                       host="bucket-name.s3.eu-central-1.amazonaws.com"))
    g = group(tr)
    assert g["endpoint"] == "https://s3.eu-central-1.amazonaws.com" and g["virtual_host"] is True
    assert g["target"] == ("s3://bucket-name/k/e.y",)


def test_range_mode_reads_inside_the_one_object_named_by_filename():
    tr = translator.translate(http_job("http_object_mode=range\nfilename=/bench/p/obj-000000000003\n"
                                       "[r]\nrw=randread\nbs=4k\nsize=1m\n"))
    g = group(tr)
    # storlab's object 3 of object_size = size under the prefix p: the very object fio reads
    assert g["target"] == ("s3://bench/p",) and g["object_size"] == MiB and g["bs"] == 4 * KiB
    assert g["offset"] == 3 * MiB and g["size"] == MiB
    assert not any("not fio's KEY" in n for n in tr.notes)
    tr = translator.translate(http_job("http_object_mode=range\nfilename=/bench/some/key\n"
                                       "[w]\nrw=write\nbs=1m\nsize=1m\n"))
    g = group(tr)
    assert g["target"] == ("s3://bench/some/key",) and g["object_size"] == g["bs"] == MiB and "offset" not in g
    assert any("KEY/obj-000000000000, not fio's KEY" in n for n in tr.notes)


def test_unlink_removes_the_objects_and_several_http_jobs_share_one_environment():
    tr = translator.translate(http_job("filename=/bench/p\nunlink=1\n[w]\nrw=write\nbs=4k\nsize=64k\n"))
    assert tr.job["keep_objects"] is False and tr.plan.jobs[0].unlink == []
    msg = refusal(http_job("filename=/bench/p\nbs=4k\nsize=64k\n[a]\nrw=write\n[b]\nstonewall\nrw=read\n"
                           "http_s3_region=eu-west-1\n"))
    assert "one set of credentials and one region a run" in msg


@pytest.mark.parametrize("body, starts", [
    ("filename=/bench/p\n[w]\nrw=write\nbs=4k\nsize=64k\n", None),       # no http_mode: webdav
    ("http_mode=swift\nfilename=/bench/p\n[w]\nrw=write\nbs=4k\nsize=64k\n", "http_mode = swift: not supported"),
    ("http_mode=webdav\nfilename=/bench/p\n[w]\nrw=write\nbs=4k\nsize=64k\n", "http_mode = webdav: not supported"),
])
def test_http_modes_other_than_s3_are_refused(body, starts):
    text = f"[global]\nioengine=http\nhttp_host=h\n{body}"
    msg = refusal(text)
    if starts is None:
        assert msg.startswith("fio <text>:2: ioengine = http: not supported") and "add http_mode=s3" in msg
    else:
        assert starts in msg and "http_mode=s3 only" in msg


@pytest.mark.parametrize("body, key, why", [
    ("filename=bench/p\n[w]\nrw=write\nbs=4k\nsize=64k\n", "filename", "give /BUCKET/KEY"),
    ("filename=/bench\n[w]\nrw=write\nbs=4k\nsize=64k\n", "filename", "give /BUCKET/KEY"),
    ("[w]\nrw=write\nbs=4k\nsize=64k\n", "filename", "filename=/BUCKET/KEY"),
    ("filename=/bench/p:/bench/q\n[w]\nrw=write\nbs=4k\nsize=64k\n", "filename", "one prefix a job"),
    ("filename=/bench/p\n[w]\nrw=write\nbs=4k\n", "size", "give size"),
    ("filename=/bench/p\n[w]\nrw=write\nbs=4k\nsize=10k\n", "size", "whole number of objects of bs"),
    ("filename=/bench/p\n[w]\nrw=read\nbs=4k\nsize=64k\noffset=1k\n", "offset", "not a multiple of bs"),
    ("filename=/bench/p\n[w]\nrw=randread\nbssplit=4k/50:8k/50\nsize=64k\n", "bssplit", "one size"),
    ("filename=/bench/p\n[w]\nrw=randrw\nbs=4k,8k\nsize=64k\n", "bs", "one size"),
    ("http_object_mode=range\nfilename=/bench/p\n[w]\nrw=write\nbs=4k\nsize=64k\n", "bs", "bs = size (65536)"),
    ("http_object_mode=range\nfilename=/bench/p\n[w]\nrw=read\nbs=4k\nsize=64k\noffset=4k\n", "offset", "leave offset out"),
    ("http_object_mode=chunk\nfilename=/bench/p\n[w]\nrw=read\nbs=4k\nsize=64k\n", "http_object_mode", "block or range"),
    ("https=maybe\nfilename=/bench/p\n[w]\nrw=read\nbs=4k\nsize=64k\n", "https", "off, on or insecure"),
    ("http_s3_storage_class=GLACIER\nfilename=/bench/p\n[w]\nrw=read\nbs=4k\nsize=64k\n", "http_s3_storage_class",
     "no x-amz-storage-class"),
    ("http_s3_sse_customer_key=" + SECRET + "\nfilename=/bench/p\n[w]\nrw=read\nbs=4k\nsize=64k\n",
     "http_s3_sse_customer_key = <redacted>", "SSE-C"),
    ("http_user=u\nhttp_pass=" + SECRET + "\nfilename=/bench/p\n[w]\nrw=read\nbs=4k\nsize=64k\n", "http_user", "webdav"),
    ("directory=/d\nfilename=/bench/p\n[w]\nrw=read\nbs=4k\nsize=64k\n", "directory", "filename=/BUCKET/KEY alone"),
    # fio 3.42 has no http_s3_range (ranges are http_object_mode=range)
    ("http_s3_range=1\nfilename=/bench/p\n[w]\nrw=read\nbs=4k\nsize=64k\n", "http_s3_range", "not a fio option"),
])
def test_what_storlab_cannot_run_the_same_way_is_refused_in_one_line_naming_the_key(body, key, why):
    msg = refusal(http_job(body))
    assert f": {key}" in msg and why in msg, msg


def test_a_key_id_without_its_key_is_refused_and_never_shown():
    msg = refusal(f"[w]\nioengine=http\nhttp_mode=s3\nhttp_s3_keyid={KEYID}\nfilename=/b/p\nrw=read\nbs=4k\nsize=8k\n")
    assert "http_s3_key: missing" in msg


def test_the_http_options_belong_to_the_http_engine():
    msg = refusal("[w]\nfilename=/tmp/x\nsize=1m\nhttp_host=h\nhttp_mode=s3\n")
    assert "http_host = h: an option of ioengine=http, not of psync" in msg and "also: http_mode" in msg


def test_the_storage_class_fio_sends_by_default_runs():
    tr = translator.translate(http_job("http_s3_storage_class=STANDARD\nhttp_verbose=0\nfilename=/bench/p\n"
                                       "[r]\nrw=read\nbs=4k\nsize=8k\n"))
    assert group(tr)["engine"] == "s3"


def test_credentials_are_redacted_in_the_record_the_emitted_job_and_the_command_line():
    tr = translator.translate(http_job("filename=/bench/p\n[w]\nrw=write\nbs=4k\nsize=64k\n"))
    shown = json.dumps(tr.record()) + tr.to_toml() + "\n".join(tr.notes)
    assert SECRET not in shown and KEYID not in shown and "<redacted>" in json.dumps(tr.record())
    argv = ["--name=w", "--ioengine=http", "--http_mode=s3", f"--http_s3_keyid={KEYID}", "-http_s3_key", SECRET,
            "--filename=/bench/p", "--rw=write", "--bs=4k", "--size=64k"]
    cmd = parse_command_line(argv, environ={})
    line = show_command(cmd.sections)
    assert SECRET not in line and KEYID not in line and "--http_s3_key=<redacted>" in line
    assert redacted_argv(argv) == [a if a != SECRET and KEYID not in a else
                                   ("--http_s3_keyid=<redacted>" if KEYID in a else "<redacted>") for a in argv]
    assert translator.translate_command(cmd).plan.environment["AWS_SECRET_ACCESS_KEY"] == SECRET


def test_storlab_fio_emit_and_parse_only_show_the_translated_job_without_the_secret(tmp_path):
    job = tmp_path / "s3.fio"
    job.write_text(http_job("filename=/bench/p\n[w]\nrw=write\nbs=64k\nsize=1m\n"))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent / "python")}
    r = subprocess.run([sys.executable, "-m", "storlab", "fio", "--emit", "-", str(job)], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert 'engine = "s3"' in r.stdout and 'target = ["s3://bench/p"]' in r.stdout and "object_size = 65536" in r.stdout
    assert 'endpoint = "http://127.0.0.1:7070"' in r.stdout and "keep_objects = true" in r.stdout
    assert "AWS_SECRET_ACCESS_KEY" in r.stdout, "the emitted job says the credentials must be exported"
    r2 = subprocess.run([sys.executable, "-m", "storlab", "fio", "--parse-only", str(job)], capture_output=True,
                        text=True, env=env, timeout=60)
    r3 = subprocess.run([sys.executable, "-m", "storlab", "fio", "--showcmd", str(job)], capture_output=True,
                        text=True, env=env, timeout=60)
    assert r2.returncode == 0 and r3.returncode == 0, r2.stderr + r3.stderr
    assert "http (http_mode=s3) → s3" in r2.stdout and "--http_s3_key=<redacted>" in r3.stdout
    for out in (r, r2, r3):
        assert SECRET not in out.stdout + out.stderr and KEYID not in out.stdout + out.stderr


# -- against a real S3 server ----------------------------------------------------------------------
WHY = s3_unavailable()
needs_s3 = pytest.mark.skipif(WHY is not None, reason=f"S3: {WHY}")
FIO = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "storlab-peers/fio/bin/fio"


def fio_http_unavailable() -> str | None:
    if not os.access(FIO, os.X_OK):
        return f"{FIO} is not built (/work/shared/peers/build-fio.sh builds fio 3.42)"
    r = subprocess.run([str(FIO), "--enghelp"], capture_output=True, text=True, timeout=30)
    return None if re.search(r"^\s*http$", r.stdout, re.M) else f"{FIO} was built without the http engine (libcurl)"


def client_env(srv: VersityServer) -> dict[str, str]:
    """The server's client environment without its keys: the fio job gives them."""
    env = {k: v for k, v in srv.env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    env["PYTHONPATH"] = str(Path(__file__).parent.parent / "python")
    return env


def server_job(srv: VersityServer, body: str) -> str:
    return (f"[global]\nioengine=http\nhttp_mode=s3\nhttp_host={srv.endpoint.split('//', 1)[1]}\n"
            f"http_s3_keyid={srv.access_key}\nhttp_s3_key={srv.secret}\n" + body)


def storlab_fio(srv: VersityServer, job: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "storlab", "fio", *args, str(job)], capture_output=True,
                          text=True, env={**client_env(srv), "STORLAB_STORE": str(job.parent / "store.db")},
                          timeout=120)


def logged(srv: VersityServer, since: int = 0) -> list[tuple[str, str, int]]:
    """(operation, key, status) of each request the server logged from line `since`."""
    found = (re.search(r" s3_(\w+) (\S+) \S+ (\d{3}) ", line) for line in srv.requests().splitlines()[since:])
    return [(m[1], m[2], int(m[3])) for m in found if m]


@needs_s3
def test_a_fio_job_file_writes_then_reads_objects_the_server_holds(tmp_path):
    with VersityServer(tmp_path) as srv:
        write = tmp_path / "w.fio"
        write.write_text(server_job(srv, "filename=/bench/fio/run\nbs=64k\nsize=1m\n[w]\nrw=write\nnumjobs=1\n"))
        r = storlab_fio(srv, write, "--output-format=json", f"--output={tmp_path / 'w.json'}")
        assert r.returncode == 0, r.stderr
        held = srv.objects("bench", "fio/run")
        puts = [x for x in logged(srv) if x[0] == "PutObject"]
        since = len(srv.requests().splitlines())
        # the read as `storlab run --fio`: its result document carries the translation's record
        read = tmp_path / "r.fio"
        read.write_text(server_job(srv, "filename=/bench/fio/run\nbs=64k\nsize=1m\n[r]\nrw=randread\n"))
        rr = subprocess.run([sys.executable, "-m", "storlab", "run", "--no-store", "--quiet", "--fio", str(read),
                             "--json", str(tmp_path / "r.json")], capture_output=True, text=True,
                            env=client_env(srv), timeout=120)
        assert rr.returncode == 0, rr.stderr
        gets = [x for x in logged(srv, since) if x[0] == "GetObject"]
        held_after = srv.objects("bench", "fio/run")
    fio_json = json.loads((tmp_path / "w.json").read_text())
    assert fio_json["jobs"][0]["write"]["io_bytes"] == MiB
    assert held == {f"obj-{k:012d}": 64 * KiB for k in range(16)} == held_after, "kept, as fio keeps them"
    assert sorted(k for _, k, s in puts if s == 200) == [f"fio/run/obj-{k:012d}" for k in range(16)]
    assert sorted(k for _, k, s in gets if s in (200, 206)) == [f"fio/run/obj-{k:012d}" for k in range(16)]
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["phases"][0]["read"]["bytes"] == MiB and not doc["environment"]["targets"][0]["created"]
    assert doc["translation"]["format"] == "fio"
    everything = r.stdout + r.stderr + rr.stdout + rr.stderr + json.dumps(doc) + json.dumps(fio_json)
    assert srv.secret not in everything and srv.access_key not in json.dumps(doc["translation"])
    # `storlab fio` stored its result (with the translation's record) there, and the store's journal
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("store.db*"))
    assert b"http_s3_key" in stored and srv.secret.encode() not in stored


@needs_s3
def test_fio_and_storlab_read_each_others_object_in_range_mode(tmp_path):
    """fio 3.42 reads, with its pattern verification, the object storlab wrote from a fio job, and
    storlab reads the object fio wrote (without laying one out of its own): in range mode with a
    filename of storlab's PREFIX/obj-NNNNNNNNNNNN pattern both name the same object. A byte
    changed on the server's disk makes fio's verification fail, so the check has teeth."""
    why = fio_http_unavailable()
    if why:
        pytest.skip(why)
    with VersityServer(tmp_path) as srv:
        common = "http_object_mode=range\nsize=1m\nbuffer_pattern=0xdeadbeef\n"
        write = tmp_path / "w.fio"
        write.write_text(server_job(srv, common + "filename=/bench/s/obj-000000000000\n[w]\nrw=write\nbs=1m\n"))
        r = storlab_fio(srv, write)
        assert r.returncode == 0, r.stderr
        assert srv.objects("bench", "s") == {"obj-000000000000": MiB}
        read = tmp_path / "r.fio"
        read.write_text(server_job(srv, common + "filename=/bench/s/obj-000000000000\n[r]\nrw=randread\nbs=4k\n"
                                   "verify=pattern\nverify_pattern=0xdeadbeef\n"))
        fio = subprocess.run([str(FIO), "--output-format=json", str(read)], capture_output=True, text=True,
                             env=client_env(srv), timeout=120)
        assert fio.returncode == 0, fio.stderr
        assert json.loads(fio.stdout)["jobs"][0]["read"]["io_bytes"] == MiB
        with (srv.root / "bench/s/obj-000000000000").open("r+b") as f:
            f.seek(300 * KiB + 7)
            f.write(b"\x00")
        bad = subprocess.run([str(FIO), "--output-format=json", str(read)], capture_output=True, text=True,
                             env=client_env(srv), timeout=120)
        assert bad.returncode != 0 and "verify failed" in bad.stderr + bad.stdout
        # the other way: fio writes the object, storlab reads it
        fio_write = tmp_path / "fw.fio"
        fio_write.write_text(server_job(srv, common + "filename=/bench/f/obj-000000000000\n[w]\nrw=write\nbs=1m\n"))
        fw = subprocess.run([str(FIO), "--output-format=json", str(fio_write)], capture_output=True, text=True,
                            env=client_env(srv), timeout=120)
        assert fw.returncode == 0, fw.stderr
        written = (srv.root / "bench/f/obj-000000000000").read_bytes()
        since = len(srv.requests().splitlines())
        sread = tmp_path / "sr.fio"
        sread.write_text(server_job(srv, common + "filename=/bench/f/obj-000000000000\n[r]\nrw=randread\nbs=4k\n"))
        sr = subprocess.run([sys.executable, "-m", "storlab", "run", "--no-store", "--quiet", "--fio", str(sread),
                             "--json", str(tmp_path / "sr.json")], capture_output=True, text=True,
                            env=client_env(srv), timeout=120)
        assert sr.returncode == 0, sr.stderr
        gets = [x for x in logged(srv, since) if x[0] in ("GetObject", "PutObject")]
        after = (srv.root / "bench/f/obj-000000000000").read_bytes()
    assert written == bytes.fromhex("deadbeef") * (MiB // 4), "fio wrote its pattern unscrambled"
    assert after == written, "storlab read fio's object and left it as it was"
    doc = json.loads((tmp_path / "sr.json").read_text())
    (target,) = doc["environment"]["targets"]
    assert not target["created"] and doc["phases"][0]["read"]["bytes"] == MiB
    assert {op for op, _, _ in gets} == {"GetObject"} and {k for _, k, _ in gets} == {"f/obj-000000000000"}
    assert len(gets) == 256


@needs_s3
def test_fio_names_its_block_mode_objects_key_offset_bs_as_docs_say(tmp_path):
    """docs/fio.md says fio's block mode names the object at offset O `KEY_O_BS`, which storlab's
    KEY/obj-N cannot be: checked against fio itself."""
    why = fio_http_unavailable()
    if why:
        pytest.skip(why)
    with VersityServer(tmp_path) as srv:
        job = tmp_path / "b.fio"
        job.write_text(server_job(srv, "filename=/bench/blk/key\nsize=16k\n[w]\nrw=write\nbs=4k\n"))
        fio = subprocess.run([str(FIO), "--output-format=json", str(job)], capture_output=True, text=True,
                             env=client_env(srv), timeout=120)
        assert fio.returncode == 0, fio.stderr
        held = srv.objects("bench", "blk")
    assert held == {f"key_{o}_4096": 4096 for o in range(0, 16 * KiB, 4 * KiB)}



@needs_s3
def test_credentials_on_the_command_line_are_never_stored_with_the_result(tmp_path):
    """The stored document records the command line it ran: a key given on it is <redacted> there."""
    with VersityServer(tmp_path) as srv:
        host = srv.endpoint.split("//", 1)[1]
        r = subprocess.run([sys.executable, "-m", "storlab", "fio", "--name=w", "--ioengine=http", "--http_mode=s3",
                            f"--http_host={host}", f"--http_s3_keyid={srv.access_key}", "--http_s3_key", srv.secret,
                            "--filename=/bench/cli/run", "--bs=64k", "--size=256k", "--rw=write",
                            "--output-format=json", f"--output={tmp_path / 'w.json'}"],
                           capture_output=True, text=True, timeout=120,
                           env={**client_env(srv), "STORLAB_STORE": str(tmp_path / "store.db")})
        assert r.returncode == 0, r.stderr
        assert len(srv.objects("bench", "cli/run")) == 4
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("store.db*"))
    assert b"<redacted>" in stored and srv.secret.encode() not in stored
    assert srv.secret not in r.stdout + r.stderr + (tmp_path / "w.json").read_text()
