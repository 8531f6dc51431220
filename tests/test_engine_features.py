"""Engine features fio jobs need, through `storlab run`: rate limits and think time, trims, and
fio's I/O logs (written by storlab and replayed by fio, written by fio and replayed by storlab)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from storlab.cli.main import main
from storlab.jobs.options import OptionError, parse_value
from test_cli_run import run_cli  # tests/ is on sys.path (pytest prepend mode)

MiB = 1 << 20


def iolog_ios(path: str) -> list[tuple[str, int, int]]:
    """(action, offset, length) of every read/write/trim line of a version 3 iolog."""
    with open(path) as f:
        lines = f.read().splitlines()
    assert lines[0] == "fio version 3 iolog"
    out = []
    for line in lines[1:]:
        words = line.split()
        if words[2] in ("read", "write", "trim"):
            out.append((words[2], int(words[3]), int(words[4])))
    return out


def need_fio() -> str:
    fio = shutil.which("fio")
    if fio is None:
        pytest.skip("fio is not installed")
    return fio


# --- rate and think time ---------------------------------------------------------------------

def test_rate_values_per_direction_follow_fio_forms():
    assert parse_value("rate", "10m") == (10 * MiB,) * 3
    assert parse_value("rate", "1m,2m") == (MiB, 2 * MiB, 0)
    assert parse_value("rate", ",2m") == (0, 2 * MiB, 0)
    assert parse_value("rate_iops", "100,,5") == (100, 0, 5)
    assert parse_value("rate_iops", 250) == (250, 250, 250)
    for bad in ("1m,2m,3m,4m", "fast", "-1m"):
        with pytest.raises(OptionError) as e:
            parse_value("rate", bad)
        assert str(e.value).startswith("rate: ") and "\n" not in str(e.value)


@pytest.mark.parametrize("target", ["null", "tmpfs"])
def test_rate_10m_gives_10_mib_per_second(shm_dir, target):
    args = ["--engine", "null"] if target == "null" else ["--target", f"{shm_dir}/rate.dat", "--size", "16m"]
    r = run_cli(*args, "--rw", "read", "--rate", "10m", "--time", "2s")
    assert r["rc"] == 0, r["doc"] and r["doc"]["error"]
    read = r["doc"]["phases"][0]["read"]
    assert abs(read["bw_bytes"] / MiB - 10.0) < 0.3, read["bw_bytes"] / MiB
    # latency is of the requests themselves, not of the waits between them: far below 1/2560 s
    assert read["lat_ns"]["p50"] < 200_000


def test_rate_min_not_met_fails_the_run_with_one_line(capsys):
    rc = main(["run", "--engine", "null", "--rate-min", "20m", "--thinktime", "10ms", "--time", "1s",
               "--no-store", "-q"])
    err = capsys.readouterr().err.strip()
    assert rc == 1
    assert err.startswith("storlab run: error: rate_min not met: read ") and "MiB/s < 20.0 MiB/s" in err, err
    assert "\n" not in err


def test_a_rate_floor_above_its_cap_is_refused_before_running(capsys):
    rc = main(["run", "--engine", "null", "--rate", "10m", "--rate-min", "20m", "--time", "1s", "--no-store", "-q"])
    assert rc == 2
    assert "rate_min: the floor of the read direction is above its cap" in capsys.readouterr().err


def test_rate_flag_with_values_per_direction_is_one_value_not_a_repeated_flag(capsys):
    """After the option rows took the engine's defaults, rate's (0, 0, 0) made --rate a repeatable
    flag, so `--rate 1m,2m` reached the parser whole and was refused as a size."""
    rc = main(["run", "--engine", "null", "--rate", "1m,2m", "--rate-min", "2m,1m", "--time", "1s",
               "--no-store", "-q"])
    assert rc == 2
    assert "rate_min: the floor of the read direction is above its cap" in capsys.readouterr().err
    r = run_cli("--engine", "null", "--rw", "write", "--rate", ",4m", "--rate-iops", "100,200,300", "--time", "1s")
    assert r["rc"] == 0
    assert (r["doc"]["job"]["rate"], r["doc"]["job"]["rate_iops"]) == ([0, 4 * MiB, 0], [100, 200, 300])


def test_thinktime_slows_a_run_by_its_pauses(shm_dir):
    # 64 requests, a 5 ms pause after every 8: at least 7 pauses, so at least 35 ms
    r = run_cli("--engine", "null", "--size", "256k", "--thinktime", "5ms", "--thinktime-blocks", "8",
                "--thinktime-spin", "1ms")
    assert r["rc"] == 0
    phase = r["doc"]["phases"][0]
    assert phase["read"]["ops"] == 64 and phase["seconds"] >= 0.035


# --- trims -----------------------------------------------------------------------------------

def test_trim_on_a_file_punches_holes_and_reports_a_trim_direction(shm_dir):
    path = f"{shm_dir}/trim.dat"
    with open(path, "wb") as f:
        f.write(b"\x55" * (4 * MiB))
    r = run_cli("--target", path, "--rw", "trim", "--bs", "64k")
    assert r["rc"] == 0, r["doc"]["error"]
    phase = r["doc"]["phases"][0]
    assert "read" not in phase and "write" not in phase
    assert (phase["trim"]["ops"], phase["trim"]["bytes"]) == (64, 4 * MiB)
    assert phase["trim"]["slat_ns"]["max"] == 0
    assert os.stat(path).st_blocks == 0 and os.path.getsize(path) == 4 * MiB
    with open(path, "rb") as f:
        assert f.read(4096) == b"\0" * 4096


def test_trimwrite_trims_then_writes_each_block_and_the_table_shows_both(shm_dir, capsys):
    path = f"{shm_dir}/tw.dat"
    rc = main(["run", "--target", path, "--size", "1m", "--rw", "trimwrite", "--bs", "64k", "--no-store"])
    out = capsys.readouterr().out
    assert rc == 0
    rows = [line.split()[1] for line in out.splitlines()[1:] if line.startswith("trimwrite ")]
    assert rows == ["write", "trim"], out
    assert os.stat(path).st_blocks * 512 >= 1024 * 1024, "every block was written after its trim"


def test_runs_without_trims_have_no_trim_fields(shm_dir):
    r = run_cli("--target", f"{shm_dir}/n.dat", "--size", "1m", "--rw", "randrw")
    phase = r["doc"]["phases"][0]
    assert "trim" not in phase
    assert all("trim_bytes" not in w for w in phase["workers"])


@pytest.mark.root
@pytest.mark.loop
def test_trim_on_a_loop_device_with_a_file_system_is_refused_and_discards_nothing(loop_device, capsys):
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 is not installed")
    dev = loop_device(64 * MiB)
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True, capture_output=True)
    with open(dev, "rb") as f:
        before = f.read(2 * MiB)
    rc = main(["run", "--target", dev, "--rw", "trim", "--bs", "1m", "--size", "2m", "--no-store", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "ext4" in err and "\n" not in err.strip(), err
    with open(dev, "rb") as f:
        assert f.read(2 * MiB) == before


@pytest.mark.root
@pytest.mark.loop
def test_trim_on_a_named_loop_device_discards(loop_device):
    dev = loop_device(16 * MiB)
    with open(dev, "r+b") as f:
        f.write(b"\xaa" * MiB)
    r = run_cli("--target", dev, "--rw", "randtrim", "--bs", "64k", "--size", "1m", "--allow-destroy", dev)
    assert r["rc"] == 0, r["doc"]["error"]
    assert r["doc"]["phases"][0]["trim"]["ops"] == 16
    with open(dev, "rb") as f:
        assert f.read(MiB) == b"\0" * MiB, "a discarded loop range reads back as zeros"


# --- I/O logs --------------------------------------------------------------------------------

def test_an_iolog_written_by_storlab_replays_in_storlab(shm_dir):
    target, log, log2 = f"{shm_dir}/io.dat", f"{shm_dir}/w.log", f"{shm_dir}/r.log"
    first = run_cli("--target", target, "--size", "2m", "--rw", "randrw", "--bs", "8k", "--write-iolog", log)
    again = run_cli("--read-iolog", log, "--replay-no-stall", "--write-iolog", log2)
    assert first["rc"] == 0 and again["rc"] == 0, again["doc"]["error"]
    for d in ("read", "write"):
        a, b = first["doc"]["phases"][0][d], again["doc"]["phases"][0][d]
        assert (a["ops"], a["bytes"]) == (b["ops"], b["bytes"])
    assert iolog_ios(log) == iolog_ios(log2)
    assert again["doc"]["phases"][0]["workers"][0]["target"] == target, "the target named by the log"


def test_several_threads_write_one_log_each(shm_dir):
    log = f"{shm_dir}/t.log"
    r = run_cli("--target", f"{shm_dir}/t.dat", "--size", "1m", "--threads", "2", "--rw", "write",
                "--write-iolog", log)
    assert r["rc"] == 0
    assert sorted(os.listdir(shm_dir)) == ["t.dat", "t.log.0", "t.log.1"]
    assert len(iolog_ios(f"{log}.0")) + len(iolog_ios(f"{log}.1")) == 256


def test_a_bad_iolog_is_one_line_naming_file_and_line(shm_dir, capsys):
    log = f"{shm_dir}/bad.log"
    with open(log, "w") as f:
        f.write("fio version 3 iolog\n0 /x add\n5 /x scribble 0 4096\n")
    rc = main(["run", "--read-iolog", log, "--no-store", "-q"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and f"{log} line 3: unknown action" in err and "\n" not in err, err


def test_a_log_fio_wrote_replays_in_storlab_with_the_same_ops_and_bytes(shm_dir):
    fio = need_fio()
    target, log = f"{shm_dir}/fio.dat", f"{shm_dir}/fio.log"
    out = subprocess.run([fio, "--name=w", f"--filename={target}", "--size=2m", "--rw=randrw", "--bs=4k",
                          "--bssplit=4k/50:16k/50", "--fsync=8", "--ioengine=psync", f"--write_iolog={log}",
                          "--output-format=json"], capture_output=True, text=True, check=True)
    job = json.loads(out.stdout)["jobs"][0]
    r = run_cli("--read-iolog", log, "--replay-no-stall", "--no-fsync-end")
    assert r["rc"] == 0, r["doc"]["error"]
    phase = r["doc"]["phases"][0]
    for d in ("read", "write"):
        assert (phase[d]["ops"], phase[d]["bytes"]) == (job[d]["total_ios"], job[d]["io_bytes"]), d
    assert job["sync"]["total_ios"] > 0 and phase["sync"]["ops"] == job["sync"]["total_ios"], "the log's syncs"
    assert phase["name"] == "randrw", "the phase is named after the log's pattern"


def test_a_log_storlab_wrote_replays_in_fio(shm_dir):
    fio = need_fio()
    target, log = f"{shm_dir}/s.dat", f"{shm_dir}/s.log"
    r = run_cli("--target", target, "--size", "2m", "--rw", "randrw", "--bs", "4k", "--write-iolog", log,
                "--no-fsync-end")
    assert r["rc"] == 0
    phase = r["doc"]["phases"][0]
    out = subprocess.run([fio, "--name=replay", f"--read_iolog={log}", "--ioengine=psync", "--replay_no_stall=1",
                          "--output-format=json"], capture_output=True, text=True, check=True)
    job = json.loads(out.stdout)["jobs"][0]
    for d in ("read", "write"):
        assert (job[d]["total_ios"], job[d]["io_bytes"]) == (phase[d]["ops"], phase[d]["bytes"]), d


@pytest.mark.parametrize("mode", ["time", "size"])
def test_bssplit_draws_each_requests_size_by_its_share_of_the_requests(shm_dir, mode):
    """fio's bssplit per request, time-based or size-based: each size's share of the requests is
    its percentage (norandommap, so no request is cut), offsets multiples of the smallest size."""
    log = f"{shm_dir}/mix.log"
    limit = ["--time", "0.5"] if mode == "time" else ["--io-size", "2g"]
    r = run_cli("--target", f"{shm_dir}/mix.dat", "--size", "1g", "--engine", "null", "--rw", "randrw",
                "--bssplit", "4k/50:64k/30:1m/20", "--no-random-map", "--write-iolog", log, *limit)
    assert r["rc"] == 0, r["doc"]["error"]
    phase = r["doc"]["phases"][0]
    for d in ("read", "write"):
        sizes = {e["bs"]: e for e in phase[d]["sizes"]}
        assert set(sizes) == {4096, 65536, 1 << 20}, sizes
        assert sum(e["ops"] for e in sizes.values()) == phase[d]["ops"] > 2000
        for bs, share in ((4096, 0.5), (65536, 0.3), (1 << 20, 0.2)):
            assert abs(sizes[bs]["share"] - share) < 0.03, (d, bs, sizes[bs])
    with open(log) as f:
        requests = [line.split() for line in f if line.split()[2:3] in (["read"], ["write"])]
    assert requests and all(int(off) % 4096 == 0 and int(off) + int(n) <= 1 << 30 for *_, off, n in requests)


def test_sizes_per_direction_and_bad_splits(shm_dir):
    r = run_cli("--target", f"{shm_dir}/dir.dat", "--size", "8m", "--engine", "null", "--rw", "randrw",
                "--bssplit", "4k/100,16k/100")
    assert r["rc"] == 0
    phase = r["doc"]["phases"][0]
    assert [e["bs"] for e in phase["read"]["sizes"]] == [4096]
    assert {e["bs"] for e in phase["write"]["sizes"]} <= {4096, 8192, 12288, 16384}  # cut by the map
    with pytest.raises(OptionError, match="bssplit: .*add up to 120"):
        parse_value("bssplit", "4k/60:8k/60")
    assert parse_value("bsrange", "1k:16k") == "1k-16k"


def _distinct(path: str, unit: int) -> tuple[int, int]:
    """(distinct pieces, pieces): the file cut into `unit`-byte pieces, compared by hash."""
    import hashlib

    with open(path, "rb") as f:
        data = f.read()
    hashes = {hashlib.blake2b(data[i:i + unit], digest_size=16).digest() for i in range(0, len(data), unit)}
    return len(hashes), len(data) // unit


@pytest.mark.parametrize("engine,qd", [("psync", 1), ("io_uring", 4)])
def test_written_data_is_unique_per_sector_unless_scramble_is_off(shm_dir, engine, qd):
    """Many passes over a 4 MiB file through qd request slots of 4 KiB: with the default (scramble,
    fio's scramble_buffers) every 4 KiB block and every 512-byte sector of the file differs from
    every other, so deduplicating storage would store the whole file; with scramble off the file
    holds at most qd distinct blocks, the slots' contents."""
    path = f"{shm_dir}/s.dat"
    with open(path, "wb") as f:
        f.truncate(4 * MiB)
    base = ["--target", path, "--rw", "randwrite", "--bs", "4k", "--io-size", "16m", "--engine", engine,
            "--qd", str(qd), "--no-fsync-end"]
    r = run_cli(*base)
    assert r["rc"] == 0, r
    assert r["doc"]["phases"][0]["write"]["bytes"] == 16 * MiB
    assert _distinct(path, 4096) == (1024, 1024)
    assert _distinct(path, 512) == (8192, 8192)
    r = run_cli(*base, "--no-scramble")
    assert r["rc"] == 0, r
    blocks, total = _distinct(path, 4096)
    assert total == 1024 and blocks <= qd, blocks


def test_a_laid_out_file_is_unique_per_sector_unless_scramble_is_off(shm_dir):
    """A read of a file that does not exist yet lays it out first: scrambled, no two sectors of it
    alike; with scramble off its 1 MiB chunks repeat."""
    for flag, expected in (([], 3 * MiB // 512), (["--scramble", "off"], MiB // 512)):
        path = f"{shm_dir}/layout-{len(flag)}.dat"
        r = run_cli("--target", path, "--size", "3m", "--rw", "read", "--bs", "64k", *flag)
        assert r["rc"] == 0, r
        assert _distinct(path, 512) == (expected, 3 * MiB // 512)


# --- an offset that is not a multiple of bs ---------------------------------------------------

@pytest.mark.parametrize("rw", ["write", "randwrite"])
def test_an_offset_off_the_bs_grid_moves_every_request_as_in_fio(shm_dir, rw):
    """fio places requests at offset + k x bs whatever the offset (its cross-stripe example: bs=16k,
    offset=120k); storlab does the same, sequential or random: the same offsets as fio's iolog."""
    fio = need_fio()
    ours, theirs = os.path.join(shm_dir, "ours.log"), os.path.join(shm_dir, "fio.log")
    r = run_cli("--target", f"{shm_dir}/o.dat", "--rw", rw, "--bs", "16k", "--offset", "120k", "--size", "64k",
                "--write-iolog", ours)
    assert r["rc"] == 0
    subprocess.run([fio, "--name=j", f"--filename={shm_dir}/f.dat", f"--rw={rw}", "--bs=16k", "--offset=120k",
                    "--size=64k", f"--write_iolog={theirs}", "--output=/dev/null"], check=True, timeout=60)
    want = [120 * 1024 + k * 16384 for k in range(4)]
    assert sorted(off for _, off, _ in iolog_ios(ours)) == sorted(off for _, off, _ in iolog_ios(theirs)) == want


def test_seq_rewind_reads_the_range_backwards(tmp_path):
    """fio's rw=read:-8k with bs 4k: from the last block back to the first, each once (strace's
    pread offsets are the proof)."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    target = tmp_path / "f"
    target.write_bytes(b"\1" * 64 * 1024)
    trace = tmp_path / "trace"
    r = subprocess.run(["strace", "-f", "-e", "trace=pread64", "-o", str(trace), sys.executable, "-m", "storlab",
                        "run", "--target", str(target), "--rw", "read", "--bs", "4k", "--seq-rewind", "8k",
                        "--no-store", "-q"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    offsets = [int(m) for m in re.findall(r"pread64\(\d+, .*?, 4096, (\d+)\) = 4096", trace.read_text())]
    assert offsets[-16:] == [4096 * k for k in range(15, -1, -1)], offsets[-20:]
