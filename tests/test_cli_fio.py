"""Tests of `storlab fio` (cli/fio.py): fio's command line run in-process on /dev/shm or tmp files,
its fio-style report, --parse-only, --showcmd, --output, JSON, logs, unlink and refusals."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from storlab.cli.main import main


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STORLAB_STORE", str(tmp_path / "store.db"))
    return tmp_path


def test_normal_report_has_fios_blocks_and_the_engine_line(workdir, capsys):
    code = main(["fio", "--name=rr", f"--filename={workdir}/a", "--size=1m", "--rw=randread",
                 "-ioengine", "libaio", "-iodepth", "4", "-thread"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0] == "storlab: libaio → io_uring: same asynchronous queue-depth semantics"
    assert "rr: (groupid=0, jobs=1): err= 0" in out
    assert "  read: IOPS=" in out and "(1024KiB/" in out          # fio prints sizes so: 4 digits
    assert "lat percentiles" in out and "99.90th=[" in out
    assert "Run status group 0 (all jobs):" in out and "READ: bw=" in out


def test_parse_only_runs_nothing_and_showcmd_echoes(workdir, capsys):
    assert main(["fio", "--parse-only", "--name=w", f"--filename={workdir}/w", "--size=1m",
                 "--rw=write", "--ioengine=sync"]) == 0
    assert not (workdir / "w").exists()
    assert "sync → psync" in capsys.readouterr().out
    assert main(["fio", "--showcmd", "--name=w", "-rw", "write", "-thread"]) == 0
    assert capsys.readouterr().out.strip() == "fio --name=w --rw=write --thread"


def test_refusal_is_one_line_with_exit_code_2(workdir, capsys):
    code = main(["fio", "--name=n", "--ioengine=rdma", "--filename=/x"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err.startswith("storlab fio: error: fio command line: ioengine = rdma: not supported (docs/fio.md): ")
    assert len(err) <= 200 + len("storlab fio: error: ")


def test_json_output_in_fios_layout_to_a_file(workdir, capsys):
    out = workdir / "out.json"
    assert main(["fio", "--output-format=json", f"--output={out}", "--name=j",
                 f"--filename={workdir}/j", "--size=256k", "--bs=4k", "--rw=write"]) == 0
    doc = json.loads(out.read_text())
    assert doc["fio version"].startswith("storlab-")
    (job,) = doc["jobs"]
    assert job["write"]["total_ios"] == 64 and job["read"]["total_ios"] == 0
    assert capsys.readouterr().out == ""          # the report went to --output


def test_unlink_removes_the_jobs_files_and_null_makes_none(workdir):
    assert main(["fio", "--name=u", f"--directory={workdir}", "--size=256k", "--rw=write",
                 "--numjobs=2", "--unlink=1", "--output=/dev/null"]) == 0
    assert not (workdir / "u.0.0").exists() and not (workdir / "u.1.0").exists()
    assert main(["fio", "--name=n", "--ioengine=null", f"--filename={workdir}/nothing", "--size=1m",
                 "--rw=randwrite", "--output=/dev/null"]) == 0
    assert not (workdir / "nothing").exists()
    assert sorted(p.name for p in workdir.iterdir()) == ["store.db"]


def test_bandwidth_log_in_fios_format(workdir):
    assert main(["fio", "--name=l", f"--filename={workdir}/l", "--size=1m", "--rw=read",
                 "--write_bw_log=trace", "--write_iops_log", "--log_avg_msec=100", "--runtime=0.3",
                 "--time_based", "--output=/dev/null"]) == 0
    rows = [line.split(", ") for line in (workdir / "trace_bw.1.log").read_text().splitlines()]
    # fio 3.33 writes block size 0 in an averaged (log_avg_msec) entry
    assert rows and all(len(r) == 5 and r[2] == "0" and r[3] == "0" for r in rows)
    assert [int(r[0]) for r in rows] == sorted(int(r[0]) for r in rows)
    assert (workdir / "l_iops.1.log").exists()


@pytest.mark.parametrize("engine, slat_rows", [("psync", False), ("io_uring", True)])
def test_latency_logs_hold_each_intervals_mean_latencies_in_fios_format(workdir, engine, slat_rows):
    """write_lat_log was refused; now PREFIX_lat/clat/slat.N.log come from the time series: one
    row per interval and direction with requests, the mean in ns, averaging to the job's mean
    latency; psync's slat log is empty, as fio's (no submission samples)."""
    out = workdir / "l.json"
    assert main(["fio", "--name=l", f"--filename={workdir}/l", "--size=1m", "--rw=randrw",
                 f"--ioengine={engine}", "--iodepth=2" if engine == "io_uring" else "--iodepth=1",
                 "--write_lat_log=trace", "--log_avg_msec=100", "--runtime=0.5", "--time_based",
                 "--output-format=json", f"--output={out}"]) == 0
    job = json.loads(out.read_text())["jobs"][0]
    logs = {k: [[int(x) for x in line.split(", ")]
                for line in (workdir / f"trace_{k}.1.log").read_text().splitlines()]
            for k in ("lat", "clat", "slat")}
    assert logs["lat"] and len(logs["lat"]) == len(logs["clat"])
    assert bool(logs["slat"]) == slat_rows
    for rows in logs.values():
        assert all(len(r) == 5 and r[1] > 0 and r[2] in (0, 1) and r[3:] == [0, 0] for r in rows)
        assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    for ddir, direction in enumerate(("read", "write")):
        means = [r[1] for r in logs["lat"] if r[2] == ddir]
        assert means, direction
        # the interval means bracket the job's mean (fio's lat_ns.mean, in ns)
        assert min(means) <= job[direction]["lat_ns"]["mean"] * 1.01
        assert max(means) >= job[direction]["lat_ns"]["mean"] * 0.99
    lat = {(r[0], r[2]): r[1] for r in logs["lat"]}
    clat = {(r[0], r[2]): r[1] for r in logs["clat"]}
    slat = {(r[0], r[2]): r[1] for r in logs["slat"]}
    for key, value in lat.items():          # lat = slat + clat, interval by interval (rounding)
        assert abs(value - clat[key] - slat.get(key, 0)) <= 1, key


def test_file_engine_runs_as_a_meta_phase(workdir, capsys):
    # with an I/O job after it: a run of metadata phases only has no I/O fields for its job record
    assert main(["fio", "--name=fc", "--ioengine=filecreate", "--nrfiles=50", "--numjobs=2",
                 f"--directory={workdir}", "--filesize=4k", "--name=w", "--stonewall",
                 f"--filename={workdir}/w", "--size=64k", "--rw=write", "--unlink=1"]) == 0
    out = capsys.readouterr().out
    assert "fc:create: 100 ops" in out and "w: (groupid=1, jobs=1)" in out
    assert [p.name for p in workdir.iterdir() if p.name.startswith("storlab-meta")] == []


def test_help(capsys):
    assert main(["fio", "--help"]) == 0
    assert "--output-format" in capsys.readouterr().out


def test_section_runs_only_the_named_job(workdir, capsys):
    job = workdir / "two.fio"
    job.write_text(f"[global]\nfilename={workdir}/t\nsize=256k\n[a]\nrw=write\n[b]\nrw=read\n")
    assert main(["fio", str(job), "--section=b"]) == 0
    out = capsys.readouterr().out
    assert "b: (groupid=0" in out and "a: (groupid" not in out
    assert os.path.getsize(workdir / "t") == 256 << 10


def test_overwrite_layout_is_not_a_job_in_fios_json(workdir):
    out = workdir / "o.json"
    assert main(["fio", "--output-format=json", f"--output={out}", "--name=ow", f"--filename={workdir}/f",
                 "--size=256k", "--rw=randwrite", "--overwrite=1"]) == 0
    jobs = json.loads(out.read_text())["jobs"]
    assert [j["jobname"] for j in jobs] == ["ow"] and jobs[0]["write"]["total_ios"] == 64


def test_concurrent_jobs_report_their_own_io_and_say_when_latency_is_shared(workdir, capsys):
    assert main(["fio", f"--filename={workdir}/c", "--size=512k", "--name=r", "--rw=randread",
                 "--name=w", "--rw=randwrite", "--bs=64k", "--name=r2", "--rw=read"]) == 0
    blocks = capsys.readouterr().out.split("\n\n")[0].split("\nr2: ")
    r_and_w, r2 = blocks
    r, w = r_and_w.split("\nw: ")
    assert "(512KiB/" in r and "write:" not in r and "every read of the phase" in r
    assert "(512KiB/" in w and "read:" not in w and "every write" not in w   # w alone writes
    assert "(512KiB/" in r2 and "every read of the phase" in r2


def test_readonly_refuses_a_job_that_writes(workdir, capsys):
    assert main(["fio", "--readonly", "--name=w", f"--filename={workdir}/w", "--size=64k",
                 "--rw=randwrite"]) == 2
    assert "--readonly: a job writes" in capsys.readouterr().err
    assert not (workdir / "w").exists()


def test_terse_output_is_fios_version_3_line_without_disk_utilisation(workdir, capsys):
    assert main(["fio", "--minimal", "--name=t", f"--filename={workdir}/t", "--size=1m",
                 "--rw=randread", "--bs=4k"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    fields = line.split(";")
    # fio 3.33's terse v3 has 130 fields, the last 9 its disk utilisation
    assert len(fields) == 121
    assert fields[:5] == ["3", fields[1], "t", "0", "0"] and fields[1].startswith("storlab-")
    assert fields[5] == "1024"                      # read: KiB transferred
    assert fields[46] == "0"                        # write: none
    assert fields[17].startswith("1.000000%=") and fields[36] == "0%=0"   # 17 percentiles, then 3 empty


# -- the translator's faces on the command line: --emit, the recorded translation ----------------
JOB = "[global]\nsize=1m\nbs=64k\n[w]\nrw=write\nfilename={dir}/f\n[r]\nstonewall\nrw=read\nfilename={dir}/f\n"


def test_run_fio_emit_writes_the_job_runs_nothing_and_the_file_runs_the_same_job(workdir, capsys):
    job = workdir / "job.fio"
    job.write_text(JOB.format(dir=workdir))
    assert main(["run", "--fio", str(job), "--emit", "job.toml", "--bs", "128k"]) == 0
    assert not (workdir / "f").exists()                     # nothing ran
    text = (workdir / "job.toml").read_text()
    assert text.startswith("# storlab job translated from fio job.fio\n# source sha256 ")
    assert 'bs = "128k"' in text                            # the flags given beside it, in each group
    assert main(["run", "--fio", str(job), "--bs", "128k", "--quiet", "--json", "a.json"]) == 0
    assert main(["run", "job.toml", "--quiet", "--json", "b.json"]) == 0
    a, b = (json.loads((workdir / n).read_text()) for n in ("a.json", "b.json"))
    assert [p["name"] for p in a["phases"]] == [p["name"] for p in b["phases"]] == ["w", "r"]
    moved = [[(p.get(d) or {}).get("bytes", 0) for d in ("read", "write")] for p in a["phases"]]
    assert moved == [[0, 1 << 20], [1 << 20, 0]]
    assert moved == [[(p.get(d) or {}).get("bytes", 0) for d in ("read", "write")] for p in b["phases"]]
    # the run from the fio file records its translation; the TOML run is storlab's own job
    tr = a["translation"]
    assert (tr["format"], tr["source"]) == ("fio", str(job)) and len(tr["sha256"]) == 64
    assert {(m["key"], m["line"], m["how"]) for m in tr["mapped"]} >= {("rw", 5, "translated"), ("stonewall", 8, "translated")}
    assert "translation" not in b
    from storlab.output.table import render_table  # the table (and `results show`) says so in one line

    assert f"translated from fio job.fio (sha256 {tr['sha256'][:12]}; " in render_table(a)
    assert "translated from" not in render_table(b)


def test_storlab_fio_emit_to_stdout_runs_nothing(workdir, capsys):
    assert main(["fio", "--emit", "-", "--name=j", f"--filename={workdir}/g", "--size=1m",
                 "--rw=randwrite", "--unlink=1"]) == 0
    out = capsys.readouterr().out
    assert not (workdir / "g").exists()
    assert out.startswith("# storlab job translated from fio command line\n")
    assert "# note: [j] unlink: carried out by `storlab fio` only, not by this job" in out
    assert '[[phase.group]]\nname = "j"\nrw = "randwrite"' in out


def test_emit_needs_a_foreign_job_and_is_no_job_file_key(workdir, capsys):
    assert main(["run", "--emit", "x.toml", "--target", str(workdir / "t"), "--size", "1m"]) == 2
    assert "give --fio JOBFILE" in capsys.readouterr().err
    (workdir / "j.toml").write_text('emit = "x.toml"\n')
    assert main(["run", "j.toml"]) == 2
    assert "'emit' is a command-line flag (--emit), not a job-file key" in capsys.readouterr().err


def test_emit_carries_a_job_files_top_level_options_and_refuses_its_phases(workdir, capsys):
    job = workdir / "job.fio"
    job.write_text(JOB.format(dir=workdir))
    (workdir / "top.toml").write_text('passes = 2\n')
    assert main(["run", "top.toml", "--fio", str(job), "--emit", "out.toml"]) == 0
    text = (workdir / "out.toml").read_text()
    assert "passes = 2" in text and not (workdir / "f").exists()
    (workdir / "phased.toml").write_text('[[phase]]\nrw = "read"\n')
    assert main(["run", "phased.toml", "--fio", str(job), "--emit", "out2.toml"]) == 2
    assert "has [[phase]] tables and --fio" in capsys.readouterr().err
    assert not (workdir / "out2.toml").exists()


def test_fixedbufs_difference_is_printed_once_and_the_modes_are_recorded(workdir, capsys):
    """`storlab fio` says once, before the report, that an io_uring job without fixedbufs has its
    buffers registered (fio's would not); fixedbufs=0 runs without registered buffers, recorded so."""
    from storlab.jobs.fio.map import FIXEDBUFS_NOTE

    text = "[global]\nioengine=io_uring\nsize=256k\niodepth=4\nfilename={dir}/f\n{fixedbufs}[a]\nrw=read\n[b]\nrw=randread\n"
    (workdir / "unset.fio").write_text(text.format(dir=workdir, fixedbufs=""))
    assert main(["fio", str(workdir / "unset.fio")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines().count(f"storlab: {FIXEDBUFS_NOTE}") == 1      # two jobs, one line
    for value, mode in (("0", "off"), ("1", "on"), (None, "auto")):
        job = workdir / f"{mode}.fio"
        job.write_text(text.format(dir=workdir, fixedbufs=f"fixedbufs={value}\n" if value else ""))
        assert main(["fio", str(job)]) == 0
        assert (FIXEDBUFS_NOTE in capsys.readouterr().out) == (value is None)
        assert main(["run", "--fio", str(job), "--quiet", "--json", f"{mode}.json"]) == 0
        assert capsys.readouterr().err.splitlines().count(f"storlab: {FIXEDBUFS_NOTE}") == (value is None)
        doc = json.loads((workdir / f"{mode}.json").read_text())
        io = doc["environment"]["io_uring"]
        assert io["requested"]["uring.fixed_buffers"] == mode
        flags = [f for f in io["setup_flags"] if f.startswith("FIXED_BUFFERS")]
        assert (flags == []) == (mode == "off"), flags
        hows = {(m["key"], m["how"]) for m in doc["translation"]["mapped"] if m["key"] == "fixedbufs"}
        assert hows == ({("fixedbufs", "chosen")} if value is None else {("fixedbufs", "translated")})
        assert (FIXEDBUFS_NOTE in doc["translation"]["notes"]) == (value is None)


def test_a_flag_beside_a_fio_job_replaces_storlabs_choice_in_the_record(workdir, capsys):
    """`storlab run --fio JOB --uring-fixed-buffers off`: the flag wins in the run, and the record
    and notes say so instead of storlab's choice (auto) for the unset fixedbufs."""
    from storlab.jobs.fio.map import FIXEDBUFS_NOTE

    job = workdir / "j.fio"
    job.write_text(f"[a]\nioengine=io_uring\nsize=256k\niodepth=4\nfilename={workdir}/f\nrw=read\n")
    assert main(["run", "--fio", str(job), "--uring-fixed-buffers", "off", "--quiet", "--json", "o.json"]) == 0
    err = capsys.readouterr().err
    doc = json.loads((workdir / "o.json").read_text())
    assert doc["environment"]["io_uring"]["requested"]["uring.fixed_buffers"] == "off"
    assert FIXEDBUFS_NOTE not in err and FIXEDBUFS_NOTE not in doc["translation"]["notes"]
    assert "uring.fixed_buffers = off given as a flag" in err
    [chosen] = [m for m in doc["translation"]["mapped"] if m["key"] == "fixedbufs"]
    assert chosen["how"] == "chosen" and chosen["storlab"] == "uring.fixed_buffers = off (given as a flag)"


def test_scramble_buffers_0_writes_the_slot_as_it_is_and_the_default_scrambles(workdir, capsys):
    """`storlab fio` with fio's scramble_buffers: by default (on, in both tools) every 4 KiB block
    written is unique; scramble_buffers=0 writes the one psync slot's bytes every time."""
    import hashlib

    def blocks(name):
        data = (workdir / name).read_bytes()
        return len({hashlib.sha256(data[i:i + 4096]).digest() for i in range(0, len(data), 4096)})

    for value, expected in ((None, 256), ("1", 256), ("0", 1)):
        name = f"f{value}"
        args = ["fio", "--name=w", f"--filename={workdir}/{name}", "--size=1m", "--rw=randwrite", "--bs=4k",
                "--loops=3"] + ([f"--scramble_buffers={value}"] if value else [])
        assert main(args) == 0
        capsys.readouterr()
        assert blocks(name) == expected, value


def test_each_stonewalled_job_reports_its_own_steady_state_line(workdir, capsys):
    """fio's examples/steadystate.fio scaled down: two stonewalled jobs with their own criteria each
    stop at steady state; fio's `steadystate  :` line says each job's criterion."""
    job = workdir / "ss.fio"
    job.write_text("[global]\nioengine=null\nsize=1m\ntime_based\nruntime=20\ngroup_reporting\n"
                   "[w]\nrw=write\nss=iops:50%\nss_dur=1\nss_interval=500ms\n"
                   "[r]\nstonewall\nrw=randread\nss=lat:50%\nss_dur=1\nss_ramp=250ms\nss_interval=250ms\n")
    assert main(["fio", str(job)]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("  steadystate  :")]
    assert len(lines) == 2
    assert lines[0].startswith("  steadystate  : attained=yes, bw=") and lines[0].count("iops mean dev=") == 1
    assert lines[1].startswith("  steadystate  : attained=yes, bw=") and ", lat=" in lines[1] and " lat mean dev=" in lines[1]
    runs = [int(ln.rpartition("run=")[2].partition("msec")[0]) for ln in out.splitlines() if "run=" in ln]
    assert len(runs) == 2 and all(ms < 15000 for ms in runs), runs


# --- fio's memory-device targets ------------------------------------------------------------------

def _fio_json(args: list[str]) -> dict:
    """fio's own JSON for a job given as arguments (fio's errors go to its stderr)."""
    out = subprocess.run(["fio", "--output-format=json", *args], capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])


MEMORY_JOBS = [
    ["--filename=/dev/zero", "--rw=read"],
    ["--filename=/dev/zero", "--rw=randread", "--ioengine=io_uring", "--iodepth=4"],
    ["--filename=/dev/null", "--rw=write"],
    ["--filename=/dev/null", "--rw=randwrite", "--ioengine=io_uring", "--iodepth=4"],
]


@pytest.mark.skipif(not shutil.which("fio"), reason="fio is not installed")
@pytest.mark.parametrize("job", MEMORY_JOBS, ids=lambda j: " ".join(j))
def test_memory_devices_do_fios_request_counts(workdir, capsys, job):
    args = ["--name=m", "--bs=4k", "--size=1m", *job]
    fio = _fio_json(args)["jobs"][0]
    out = workdir / "m.json"
    assert main(["fio", "--output-format=json", f"--output={out}", *args]) == 0
    ours = json.loads(out.read_text())["jobs"][0]
    assert fio["error"] == 0 and ours["error"] == 0
    assert [ours[d]["total_ios"] for d in ("read", "write")] == [fio[d]["total_ios"] for d in ("read", "write")]
    assert sum(fio[d]["total_ios"] for d in ("read", "write")) == 256
    assert "memory device" in capsys.readouterr().err


@pytest.mark.skipif(not shutil.which("fio"), reason="fio is not installed")
def test_a_write_to_dev_full_fails_with_enospc_as_fios(workdir, capsys):
    args = ["--name=f", "--bs=4k", "--size=1m", "--filename=/dev/full", "--rw=write"]
    fio = _fio_json(args)["jobs"][0]
    out = workdir / "f.json"
    assert main(["fio", "--output-format=json", f"--output={out}", *args]) == 1
    ours = json.loads(out.read_text())["jobs"][0]
    assert ours["error"] == fio["error"] == 28                          # ENOSPC
    err = capsys.readouterr().err
    assert "write of 4096 bytes at offset 0 on /dev/full failed: No space left on device" in err
    assert main(["fio", *args]) == 1
    assert capsys.readouterr().out.startswith("f: (groupid=0, jobs=1): err=28")


@pytest.mark.parametrize("extra, message", [
    (["--filename=/dev/zero", "--rw=randread", "--verify=crc32c"],
     "verify: reads from /dev/zero cannot return what was written"),
    (["--filename=/dev/zero", "--rw=read", "--direct=1"], "direct: the kernel refuses O_DIRECT on /dev/zero"),
    (["--filename=/dev/null", "--rw=read"], "rw: reads from /dev/null return end of file"),
])
def test_what_a_memory_device_cannot_do_is_refused_in_one_line(workdir, capsys, extra, message):
    assert main(["fio", "--name=r", "--bs=4k", "--size=1m", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"storlab fio: error: {message}"), err


def test_fios_steadystate_example_runs_both_phases_on_dev_null_and_dev_zero(workdir, capsys):
    """fio's examples/steadystate.fio as shipped, its runtimes and windows shortened."""
    (workdir / "ss.fio").write_text(
        "[global]\nthreads=1\ngroup_reporting\ntime_based\nsize=128m\n\n"
        "[ss-write]\nfilename=/dev/null\nrw=write\nbs=128k\nnumjobs=4\nruntime=1s\n"
        "ss=iops:10%\nss_dur=2s\nss_ramp=0\n\n"
        "[ss-read]\nnew_group\nstonewall\nfilename=/dev/zero\nrw=randread\nbs=4k\nnumjobs=4\n"
        "runtime=1s\nss=bw_slope:1%\nss_dur=2s\nss_ramp=0\n")
    out = workdir / "ss.json"
    assert main(["fio", "--output-format=json", f"--output={out}", "ss.fio"]) == 0
    jobs = {j["jobname"]: j for j in json.loads(out.read_text())["jobs"]}
    assert jobs["ss-write"]["write"]["total_ios"] > 0 and jobs["ss-write"]["read"]["total_ios"] == 0
    assert jobs["ss-read"]["read"]["total_ios"] > 0 and jobs["ss-read"]["write"]["total_ios"] == 0
