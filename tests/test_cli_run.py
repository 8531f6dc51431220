"""`storlab run` end to end: real files on tmpfs, every backend, JSON schema, safety, Ctrl-C."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from importlib import resources

import pytest
from conftest import wait_for_progress
from storlab.cli.main import main

ENGINES = [
    pytest.param(("psync", 1), id="psync"),
    pytest.param(("io_uring", 1), id="io_uring-qd1"),
    pytest.param(("io_uring", 8), id="io_uring-qd8"),
]


def run_cli(*args: str) -> dict:
    """Run `storlab run ... --json FILE -q` in-process and return the result document."""
    import tempfile

    fd, out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        rc = main(["run", *args, "--json", out, "-q", "--no-store"])
        with open(out) as f:
            text = f.read()
        doc = json.loads(text) if text else None
        return {"rc": rc, "doc": doc}
    finally:
        os.unlink(out)


def schema() -> dict:
    return json.loads(resources.files("storlab.schemas").joinpath("run-1.schema.json").read_text())


def test_result_is_valid_json_against_the_schema(shm_dir):
    import jsonschema

    r = run_cli("--target", f"{shm_dir}/a.dat", "--size", "4m", "--rw", "randrw", "--bs", "4k",
                "--io-size", "1m", "--engine", "io_uring", "--qd", "4")
    assert r["rc"] == 0
    doc = r["doc"]
    jsonschema.validate(doc, schema())
    assert doc["schema"] == "storlab.run/1" and doc["complete"] is True
    phase = doc["phases"][0]
    for d in ("read", "write"):
        s = phase[d]
        assert sum(c for _, c in s["lat_hist"]["buckets"]) == s["ops"]
        lat = s["lat_ns"]
        assert lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["max"]
        assert "slat_ns" in s  # io_uring records submission latency
    assert phase["read"]["ops"] + phase["write"]["ops"] == 256
    env = doc["environment"]
    assert env["engine"] == "io_uring" and env["io_uring"]["setup_flags"]
    assert env["targets"][0]["type"] == "file" and env["targets"][0]["size_bytes"] == 4 << 20
    assert env["targets"][0]["fs_type"] == "tmpfs"


def test_json_on_stdout_is_nothing_but_json(shm_dir):
    out = subprocess.run([sys.executable, "-m", "storlab", "run", "--target", f"{shm_dir}/a.dat",
                          "--size", "1m", "--json", "-", "--no-store"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)  # the whole stream parses: no table, no messages
    assert doc["phases"][0]["read"]["bytes"] == 1 << 20
    assert "phase" in out.stderr  # the table went to stderr instead


@pytest.mark.parametrize("direct", [False, True], ids=["buffered", "direct"])
@pytest.mark.parametrize("engine", ENGINES)
def test_sequential_write_covers_every_block_on_every_backend(shm_dir, engine, direct):
    name, qd = engine
    path = f"{shm_dir}/w.dat"
    size, bs = 4 << 20, 64 << 10
    with open(path, "wb") as f:
        f.truncate(size)  # a hole reads as zeros: any block not written stays zero
    args = ["--target", path, "--rw", "write", "--bs", "64k", "--threads", "3",
            "--engine", name, "--qd", str(qd)]
    r = run_cli(*args, *(["--direct"] if direct else []))
    assert r["rc"] == 0, r
    w = r["doc"]["phases"][0]["write"]
    blocks = size // bs
    # 64 blocks over 3 threads: slices of 21, 21, 22 blocks, together the whole range once
    assert (w["ops"], w["bytes"]) == (blocks, size)
    assert sorted(x["write_ops"] for x in r["doc"]["phases"][0]["workers"]) == [21, 21, 22]
    with open(path, "rb") as f:
        data = f.read()
    zero = bytes(bs)
    assert all(data[i:i + bs] != zero for i in range(0, size, bs))


@pytest.mark.parametrize("direct", [False, True], ids=["buffered", "direct"])
def test_backends_agree_on_bytes_and_ops(shm_dir, direct):
    path = f"{shm_dir}/r.dat"
    counts = set()
    for engine, qd in [("psync", 1), ("io_uring", 1), ("io_uring", 16), ("null", 1), ("null", 16)]:
        r = run_cli("--target", path, "--size", "2m", "--rw", "randrw", "--bs", "4k", "--threads", "2",
                    "--engine", engine, "--qd", str(qd), "--seed", "7", *(["--direct"] if direct else []))
        assert r["rc"] == 0, (engine, r)
        p = r["doc"]["phases"][0]
        counts.add((p["read"]["ops"], p["read"]["bytes"], p["write"]["ops"], p["write"]["bytes"]))
    assert len(counts) == 1, counts
    (rops, rbytes, wops, wbytes), = counts
    assert rops + wops == 512 and rbytes + wbytes == 2 << 20
    assert 0.4 < rops / 512 < 0.6  # rwmix_read defaults to 50 %


def test_time_based_run_with_ramp_excludes_ramp_io(shm_dir):
    # null backend with a 1 ms synthetic delay at QD 1: one request at a time, none faster than 1 ms.
    # Checked on the run's own figures, which hold however late a loaded host wakes the worker.
    r = run_cli("--target", f"{shm_dir}/t.dat", "--size", "1m", "--engine", "null", "--null-delay", "1ms",
                "--ramp", "300ms", "--time", "600ms", "--interval", "200ms")
    assert r["rc"] == 0
    p = r["doc"]["phases"][0]
    read, lat = p["read"], p["read"]["lat_ns"]
    assert p["seconds"] == pytest.approx(0.6)        # time-based: exactly [ramp end, deadline]
    assert 1e6 <= lat["min"] < 1.5e6                  # the device's 1 ms
    # QD 1: the requests counted ran one after another, so their latencies add up to the measured
    # window (only the first may have started in the ramp). Counting the 300 ms ramp's requests
    # too would make them add up to ~0.9 s; measuring only part of the window, to much less.
    busy_s = read["ops"] * lat["mean"] / 1e9
    assert 0.8 * p["seconds"] <= busy_s <= p["seconds"] + lat["max"] / 1e9, (busy_s, read["ops"], lat)
    assert read["ops"] <= p["seconds"] / 1e-3 + 1     # no more than 1 ms apiece allows
    ts = read["timeseries"]
    assert ts["interval_s"] == pytest.approx(0.2) and len(ts["iops"]) == 3
    # the intervals split the measured requests: together they are all of them, none from the ramp
    assert sum(x * ts["interval_s"] for x in ts["iops"]) == pytest.approx(read["ops"], abs=1), ts["iops"]
    assert all(x * ts["interval_s"] <= 0.2 / 1e-3 + 1 for x in ts["iops"]), ts["iops"]


def test_queue_depth_multiplies_null_throughput(shm_dir):
    # IOPS = requests in flight / latency (Little's law): qd 8 keeps 8 requests of the 2 ms device in
    # flight where qd 1 keeps one. Each run is checked on its own figures: a loaded host lengthens
    # latency (and lowers IOPS) by different amounts in two runs, so their IOPS ratio is not 8.
    for qd in (1, 8):
        r = run_cli("--target", f"{shm_dir}/q.dat", "--size", "1m", "--engine", "null", "--null-delay", "2ms",
                    "--time", "400ms", "--qd", str(qd))
        read = r["doc"]["phases"][0]["read"]
        in_flight = read["iops"] * read["lat_ns"]["mean"] / 1e9
        assert 0.9 * qd <= in_flight <= 1.01 * qd, (qd, in_flight, read["lat_ns"])
        assert read["lat_ns"]["min"] >= 2e6


def test_fsync_every_counts_syncs(shm_dir):
    r = run_cli("--target", f"{shm_dir}/s.dat", "--size", "1m", "--rw", "write", "--bs", "64k",
                "--fsync-every", "4")
    p = r["doc"]["phases"][0]
    assert p["write"]["ops"] == 16
    # as fio's fsync=4: before the requests after writes 4, 8, 12 (none after the 16th, the last),
    # plus the end fsync
    assert p["sync"]["ops"] == 3 + 1


def test_fsync_every_syncs_before_the_next_request_like_fio(shm_dir):
    # Regression: a sync after the last batch of N writes, which fio does not make.
    r = run_cli("--target", f"{shm_dir}/s.dat", "--size", "1m", "--rw", "write", "--bs", "64k",
                "--fsync-every", "4", "--no-fsync-end")
    assert r["doc"]["phases"][0]["sync"]["ops"] == 3
    r = run_cli("--target", f"{shm_dir}/s.dat", "--size", "1m", "--rw", "write", "--bs", "64k",
                "--fsync-every", "5", "--no-fsync-end")   # 16 writes: after 5, 10, 15
    assert r["doc"]["phases"][0]["sync"]["ops"] == 3


def test_io_uring_registered_buffers_and_files_are_recorded(shm_dir):
    r = run_cli("--target", f"{shm_dir}/u.dat", "--size", "1m", "--engine", "io_uring", "--qd", "4",
                "--uring-fixed-buffers", "--uring-fixed-files", "--direct")
    flags = r["doc"]["environment"]["io_uring"]["setup_flags"]
    assert "FIXED_BUFFERS" in flags and "FIXED_FILES" in flags
    assert r["doc"]["phases"][0]["read"]["ops"] == 256


@pytest.mark.parametrize("given, mode", [
    pytest.param([], "auto", id="default"),
    pytest.param(["--uring-fixed-buffers", "off"], "off", id="off"),
    pytest.param(["--uring-fixed-buffers", "on"], "on", id="on"),
    pytest.param(["--uring-fixed-buffers"], "on", id="alone"),
    pytest.param(["--uring-fixed-buffers", "false"], "off", id="false"),
])
def test_io_uring_fixed_buffers_mode_and_what_was_registered_are_recorded(shm_dir, given, mode):
    """auto registers where the kernel allows, on requires it (a refusal is REFUSED and a warning),
    off never registers: the setup flags then have no FIXED_BUFFERS of any kind. The same bytes
    move through either path."""
    r = run_cli("--target", f"{shm_dir}/u.dat", "--size", "1m", "--rw", "randrw", "--bs", "8k",
                "--engine", "io_uring", "--qd", "4", *given)
    assert r["rc"] == 0
    doc = r["doc"]
    io = doc["environment"]["io_uring"]
    assert doc["job"]["uring.fixed_buffers"] == io["requested"]["uring.fixed_buffers"] == mode
    buffer_flags = [f for f in io["setup_flags"] if f.startswith("FIXED_BUFFERS")]
    if mode == "off":
        assert buffer_flags == [] and io["fixed_buffers"] is False
    else:
        refusal = "FIXED_BUFFERS_REFUSED(" if mode == "on" else "FIXED_BUFFERS_UNAVAILABLE("
        assert len(buffer_flags) == 1 and (buffer_flags[0] == "FIXED_BUFFERS" or buffer_flags[0].startswith(refusal))
        assert io["fixed_buffers"] == (buffer_flags[0] == "FIXED_BUFFERS")
        refused = [w for w in doc["warnings"] if w["code"] == "uring_option_refused"]
        assert len(refused) == (buffer_flags[0] != "FIXED_BUFFERS" and mode == "on")
    phase = doc["phases"][0]
    assert phase["read"]["bytes"] + phase["write"]["bytes"] == 1 << 20


@pytest.mark.parametrize("given, threads, expect", [
    pytest.param([], 1, "WAIT_SPIN(100us)", id="default"),
    pytest.param(["--uring-wait-spin", "40us"], 1, "WAIT_SPIN(40us)", id="given"),
    pytest.param(["--uring-wait-spin", "0"], 1, None, id="off"),
    pytest.param([], (os.cpu_count() or 1) + 1, "WAIT_SPIN_OFF(", id="more-threads-than-cpus"),
])
def test_io_uring_wait_spin_is_recorded(shm_dir, given, threads, expect):
    """The spin before sleeping for a completion is recorded with its budget; 0 turns it off, and
    it is off (with the reason) where the phase's threads outnumber the CPUs. The I/O is the same."""
    r = run_cli("--target", f"{shm_dir}/w.dat", "--size", "1m", "--engine", "io_uring", "--qd", "4",
                "--threads", str(threads), *given)
    assert r["rc"] == 0
    io = r["doc"]["environment"]["io_uring"]
    spin = [f for f in io["setup_flags"] if f.startswith("WAIT_SPIN")]
    if expect is None:
        assert spin == [] and io["requested"]["uring.wait_spin"] == 0
    else:
        assert len(spin) == 1 and spin[0].startswith(expect), spin
    assert r["doc"]["phases"][0]["read"]["bytes"] == 1 << 20   # the threads split the file


def test_io_uring_wait_spin_belongs_to_io_uring(capsys):
    rc = main(["run", "--no-store", "--engine", "psync", "--uring-wait-spin", "50us"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "uring.wait_spin" in err and "io_uring" in err, err
    rc = main(["run", "--no-store", "--engine", "io_uring", "--uring-wait-spin", "2s"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "uring.wait_spin" in err, err


def test_io_uring_fixed_buffers_bad_value_is_one_line(capsys):
    rc = main(["run", "--no-store", "--engine", "io_uring", "--uring-fixed-buffers", "sometimes"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "uring.fixed_buffers: 'sometimes' is not allowed; use one of: auto, on, off" in err


def _register_calls(shm_dir: str, mode: str) -> tuple[list[str], dict]:
    """`storlab run --uring-fixed-buffers MODE` under strace: its io_uring_register calls that
    register buffers, and the result's io_uring record."""
    trace, out = os.path.join(shm_dir, f"{mode}.strace"), os.path.join(shm_dir, f"{mode}.json")
    cmd = ["strace", "-f", "-qq", "-e", "trace=io_uring_register", "-o", trace, sys.executable, "-m", "storlab",
           "run", "--target", f"{shm_dir}/t.dat", "--size", "256k", "--engine", "io_uring", "--qd", "4",
           "--threads", "2", "--uring-fixed-buffers", mode, "--no-store", "-q", "--json", out]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 and "ptrace" in proc.stderr.lower():
        pytest.skip(f"strace cannot trace here: {proc.stderr.strip().splitlines()[0]}")
    assert proc.returncode == 0, proc.stderr
    with open(trace) as f:
        calls = [line for line in f if "IORING_REGISTER_BUFFERS" in line]
    with open(out) as f:
        return calls, json.load(f)["environment"]["io_uring"]


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_fixed_buffers_off_never_calls_io_uring_register_buffers(shm_dir):
    calls, io = _register_calls(shm_dir, "off")
    assert calls == [] and not any(f.startswith("FIXED_BUFFERS") for f in io["setup_flags"])
    # the control: strace sees the call when storlab makes it (auto tries on every worker's ring,
    # registered or refused)
    calls, io = _register_calls(shm_dir, "auto")
    assert len(calls) == 2, calls
    assert io["fixed_buffers"] == ("FIXED_BUFFERS" in io["setup_flags"])


def test_direct_alignment_error_names_size(shm_dir, capsys):
    rc = main(["run", "--target", f"{shm_dir}/a.dat", "--size", "1m", "--bs", "1000", "--direct", "--no-store"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert "bs: 1000 bytes is not a multiple of" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("args,words", [
    (["--rw", "sideways"], ["rw", "randread"]),
    (["--bs", "4q"], ["bs", "unknown size unit"]),
    (["--engine", "psync", "--qd", "4"], ["qd 4", "io_uring"]),
    (["--uring-sqpoll"], ["uring.sqpoll", "io_uring"]),
    (["--time", "fast"], ["time", "duration"]),
])
def test_bad_flags_give_one_line_error_and_exit_2(args, words, capsys):
    rc = main(["run", "--no-store", *args])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    for w in words:
        assert w in err, err


def test_missing_size_for_new_file(shm_dir, capsys):
    rc = main(["run", "--target", f"{shm_dir}/new.dat", "--no-store"])
    assert rc == 2 and "size: needed to create" in capsys.readouterr().err


def test_default_scratch_target_is_removed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc = main(["run", "--size", "1m", "--no-store"])
    out = capsys.readouterr().out
    assert rc == 0 and "read" in out and "MiB/s" in out
    assert list(tmp_path.iterdir()) == []  # the scratch folder is gone


def test_sigint_keeps_a_partial_result(shm_dir, tmp_path):
    out = tmp_path / "partial.json"
    proc = subprocess.Popen([sys.executable, "-m", "storlab", "run", "--target", f"{shm_dir}/i.dat",
                             "--size", "1m", "--engine", "null", "--null-delay", "100us", "--time", "60s",
                             "--checkpoint-every", "0.2s", "--json", str(out), "-q", "--no-store"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_progress(proc, out)     # the phase is under way
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 30, "Ctrl-C must stop the run long before its 60 s are up"
    assert proc.returncode == 130, err
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "interrupted"
    assert doc["phases"][0]["complete"] is False
    assert doc["phases"][0]["read"]["ops"] > 100


def test_run_is_saved_in_the_store(shm_dir, private_store):
    rc = main(["run", "--target", f"{shm_dir}/a.dat", "--size", "1m", "-q", "--tag", "t1"])
    assert rc == 0 and private_store.exists()
    from storlab import store

    runs = store.list_runs(path=str(private_store), tag="t1")
    assert len(runs) == 1


@pytest.mark.root
@pytest.mark.loop
def test_refuses_to_write_to_a_loop_device_with_ext4(loop_device, capsys):
    import shutil

    if not shutil.which("mkfs.ext4"):
        pytest.skip("mkfs.ext4 not installed")
    dev = loop_device(32 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True, capture_output=True)
    rc = main(["run", "--target", dev, "--rw", "write", "--bs", "64k", "--io-size", "1m", "--no-store", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "ext4" in err and f"--allow-destroy {dev}" in err
    with open(dev, "rb") as f:
        f.seek(1080)
        assert f.read(2) == b"\x53\xef", "the file system must be untouched"
    # reads are always allowed
    assert main(["run", "--target", dev, "--rw", "randread", "--io-size", "256k", "--no-store", "-q"]) == 0
    # naming the exact device opts in
    rc = main(["run", "--target", dev, "--rw", "write", "--bs", "64k", "--io-size", "1m",
               "--allow-destroy", dev, "--no-store", "-q"])
    assert rc == 0


@pytest.mark.root
@pytest.mark.loop
def test_blank_loop_device_direct_io_uring(loop_device):
    dev = loop_device(16 << 20, backing_dir="/dev/shm")
    r = run_cli("--target", dev, "--rw", "write", "--bs", "128k", "--engine", "io_uring", "--qd", "8", "--direct")
    assert r["rc"] == 0
    t = r["doc"]["environment"]["targets"][0]
    assert t["type"] == "block" and t["size_bytes"] == 16 << 20
    assert r["doc"]["phases"][0]["write"]["bytes"] == 16 << 20


def test_a_killed_run_leaves_the_phases_it_finished(shm_dir, tmp_path):
    job = tmp_path / "job.toml"
    job.write_text('size = "1m"\nengine = "null"\n[[phase]]\nname = "first"\nio_size = "64k"\n'
                   '[[phase]]\nname = "second"\nnull_delay = "1ms"\ntime = "60s"\n')
    out, db = tmp_path / "r.json", tmp_path / "r.db"
    proc = subprocess.Popen([sys.executable, "-m", "storlab", "run", str(job), "--target", f"{shm_dir}/k.dat",
                             "--json", str(out), "--store", str(db), "-q"])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not out.exists():
        time.sleep(0.1)
    time.sleep(0.3)
    proc.kill()  # no chance to clean up: only checkpoints remain
    proc.wait(timeout=10)
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "running"
    assert [p["name"] for p in doc["phases"]] == ["first"] and doc["phases"][0]["read"]["bytes"] == 64 << 10
    from storlab import store

    (row,) = store.list_runs(path=str(db))
    assert store.load(row["run_id"], path=str(db))["phases"][0]["name"] == "first"


def test_json_to_a_special_file_keeps_it(shm_dir, tmp_path):
    """Regression: --json /dev/null once replaced the device node with a regular file."""
    import stat
    import threading

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(open(fifo).read()))
    reader.start()
    assert main(["run", "--target", f"{shm_dir}/f.dat", "--size", "64k", "--json", str(fifo), "-q", "--no-store"]) == 0
    reader.join(timeout=10)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO must still be a FIFO"
    assert json.loads(received[0])["schema"] == "storlab.run/1"
    # a link to a regular file: the file is written, the link kept
    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert main(["run", "--target", f"{shm_dir}/f.dat", "--json", str(link), "-q", "--no-store"]) == 0
    assert link.is_symlink() and json.loads(real.read_text())["schema"] == "storlab.run/1"


@pytest.mark.parametrize("flags, enabled", [([], True), (["--invalidate"], True), (["--invalidate", "on"], True),
                                            (["--invalidate", "off"], False), (["--no-invalidate"], False)])
def test_invalidate_flag_forms_and_the_phase_record(shm_dir, flags, enabled):
    import jsonschema

    path = f"{shm_dir}/inv.dat"
    r = run_cli("--target", path, "--size", "1m", "--bs", "64k", *flags)
    assert r["rc"] == 0
    jsonschema.validate(r["doc"], schema())
    assert r["doc"]["job"]["invalidate"] is enabled
    inv = r["doc"]["phases"][0]["invalidate"]
    assert inv["enabled"] is enabled
    (t,) = inv["targets"]
    assert t["path"] == path and t["method"] == "none"   # tmpfs: nothing to drop either way
    assert t["reason"] == ("not droppable: tmpfs (its pages are the storage)" if enabled else "invalidate off")


def test_bool_flags_take_an_optional_on_off_value(shm_dir):
    r = run_cli("--target", f"{shm_dir}/b.dat", "--size", "1m", "--bs", "64k", "--fsync-end", "off",
                "--rw", "write")
    assert r["rc"] == 0 and r["doc"]["job"]["fsync_end"] is False and "sync" not in r["doc"]["phases"][0]


def test_a_bad_bool_value_names_the_option(shm_dir, capsys):
    rc = main(["run", "--target", f"{shm_dir}/b.dat", "--size", "1m", "--invalidate", "sometimes", "-q",
               "--no-store"])
    err = capsys.readouterr().err
    assert rc == 2 and "invalidate: expected on or off (true/false, yes/no, 1/0), got 'sometimes'" in err


# --- the kernel's memory devices as targets --------------------------------------------------------

@pytest.mark.parametrize("engine", ["psync", "io_uring"])
def test_writes_to_dev_null_skip_the_fsync_and_record_a_char_target(engine):
    res = run_cli("--target", "/dev/null", "--rw", "write", "--size", "1m", "--bs", "4k",
                  "--engine", engine, "--fsync-end", "on", "--fsync-every", "64")
    doc = res["doc"]
    assert res["rc"] == 0, doc and doc.get("error")
    import jsonschema

    jsonschema.validate(doc, schema())
    (target,) = doc["environment"]["targets"]
    assert (target["type"], target["size_bytes"], target["fsync_skipped"]) == ("char", 0, True)
    (phase,) = doc["phases"]
    assert phase["write"]["ops"] == 256
    assert "sync" not in phase or not phase["sync"].get("ops")
    assert {w["code"] for w in doc["warnings"]} >= {"memory_device_target", "fsync_skipped"}
    assert "small_buffered_read" not in {w["code"] for w in doc["warnings"]}
    (inv,) = phase["invalidate"]["targets"]
    assert inv["method"] == "none" and "character device" in inv["reason"]


def test_reads_from_dev_zero_give_no_cache_warning():
    res = run_cli("--target", "/dev/zero", "--rw", "randread", "--size", "1m", "--bs", "4k")
    doc = res["doc"]
    assert res["rc"] == 0 and doc["phases"][0]["read"]["ops"] == 256
    assert "fsync_skipped" not in doc["environment"]["targets"][0]
    codes = {w["code"] for w in doc["warnings"]}
    assert "memory_device_target" in codes and not codes & {"small_buffered_read", "likely_cached"}


@pytest.mark.parametrize("args, message", [
    (["--target", "/dev/null", "--rw", "write"], "size: /dev/null is a character device with no size of its own"),
    (["--target", "/dev/zero", "--rw", "read", "--size", "1m", "--verify", "crc32c"],
     "verify: reads from /dev/zero cannot return what was written"),
    (["--target", "/dev/random", "--rw", "write", "--size", "1m"],
     "refusing /dev/random: it is character device 1:8; the only character devices storlab uses are"),
])
def test_memory_device_refusals_are_one_line(capsys, args, message):
    assert main(["run", *args, "-q", "--no-store"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"storlab run: error: {message}"), err


def test_cpus_pin_each_worker_thread_while_it_runs(shm_dir):
    """--cpus LIST --cpus-policy split: worker thread i runs on the list's CPU i alone, seen in
    /proc while the run goes on; shared gives every worker the whole list; a CPU this process
    may not use is refused in one line before anything runs."""
    allowed = sorted(os.sched_getaffinity(0))
    cpus = ",".join(map(str, allowed[:2]))
    for policy, want in (("split", [{allowed[0]}, {allowed[1 % len(allowed)]}]), ("shared", [set(allowed[:2])] * 2)):
        proc = subprocess.Popen([sys.executable, "-m", "storlab", "run", "--target", os.path.join(shm_dir, "pin"),
                                 "--size", "8m", "--threads", "2", "--time", "3", "--cpus", cpus, "--cpus-policy", policy,
                                 "-q", "--no-store"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        seen: dict[str, set[int]] = {}
        deadline = time.monotonic() + 10
        while len(seen) < 2 and time.monotonic() < deadline and proc.poll() is None:
            for task in os.listdir(f"/proc/{proc.pid}/task"):
                try:
                    with open(f"/proc/{proc.pid}/task/{task}/comm") as f:
                        name = f.read().strip()
                    if name.startswith("storlab-w"):
                        seen[name] = os.sched_getaffinity(int(task))
                except (FileNotFoundError, ProcessLookupError):
                    pass
            time.sleep(0.05)
        proc.wait(timeout=30)
        assert proc.returncode == 0, proc.stderr.read()
        assert [seen.get(f"storlab-w{i}") for i in range(2)] == want, (policy, seen)
    beyond = allowed[-1] + 1
    out = subprocess.run([sys.executable, "-m", "storlab", "run", "--target", os.path.join(shm_dir, "pin"), "--size", "1m",
                          "--cpus", str(beyond), "-q", "--no-store"], capture_output=True, text=True)
    assert out.returncode != 0 and f"CPU {beyond} not available to this process" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_rate_process_poisson_spaces_requests_as_a_poisson_process(shm_dir):
    """--rate-iops with --rate-process poisson: the issue times in the worker's iolog keep the
    cap's mean rate, with gaps as spread as an exponential law's (standard deviation about the
    mean; the even schedule's gaps barely vary). Without a cap, poisson is refused in one line."""
    log = os.path.join(shm_dir, "poisson.log")
    assert main(["run", "--target", os.path.join(shm_dir, "p"), "--size", "8m", "--rw", "randread", "--engine", "null",
                 "--rate-iops", "2000", "--rate-process", "poisson", "--time", "1.5", "--write-iolog", log,
                 "-q", "--no-store"]) == 0
    with open(log) as f:
        times = [int(p[0]) for p in (line.split() for line in f) if len(p) >= 4 and p[2] == "read"]
    gaps = [b - a for a, b in zip(times, times[1:])]
    mean = sum(gaps) / len(gaps)
    sd = (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5
    assert 0.8 * 500 <= mean <= 1.25 * 500, mean          # 2000 IOPS: 500 us apart on average
    assert sd / mean > 0.7, (sd, mean)
    assert main(["run", "--target", os.path.join(shm_dir, "p"), "--size", "1m", "--rate-process", "poisson",
                 "-q", "--no-store"]) != 0


def test_buffer_pattern_is_what_the_writes_and_the_layout_leave(shm_dir):
    """--buffer-pattern 0xdeadbeef --no-scramble: every byte a write job writes, and every byte a
    read job lays out, is the pattern, repeated from the start of each block."""
    for rw, path in (("write", "pw"), ("read", "pr")):
        target = os.path.join(shm_dir, path)
        assert main(["run", "--target", target, "--size", "1m", "--bs", "4k", "--rw", rw,
                     "--buffer-pattern", "0xdeadbeef", "--no-scramble", "-q", "--no-store"]) == 0
        with open(target, "rb") as f:
            assert f.read() == bytes.fromhex("deadbeef") * (1 << 18), rw
    # scrambled (the default), each 512-byte sector still starts from the pattern's bytes mostly
    target = os.path.join(shm_dir, "ps")
    assert main(["run", "--target", target, "--size", "64k", "--rw", "write", "--buffer-pattern", "0x00",
                 "-q", "--no-store"]) == 0
    with open(target, "rb") as f:
        data = f.read()
    assert data != bytes(len(data)) and data.count(0) > 0.9 * len(data)


@pytest.mark.parametrize("extra,message", [
    (["--buffer-pattern", "zz"], "buffer_pattern: 'zz' is not hex bytes; use 0x and hex digits"),
    (["--buffer-pattern", "0xab", "--verify", "crc32c"], "buffer_pattern: verify writes its own data"),
])
def test_a_bad_buffer_pattern_is_refused_in_one_line(shm_dir, extra, message):
    out = subprocess.run([sys.executable, "-m", "storlab", "run", "--target", os.path.join(shm_dir, "bp"), "--size", "1m",
                          "--rw", "write", *extra, "-q", "--no-store"], capture_output=True, text=True)
    assert out.returncode != 0 and message in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not os.path.exists(os.path.join(shm_dir, "bp"))
