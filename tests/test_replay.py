"""`storlab replay`: a Darshan log replayed under a target folder, with the fidelity table and the
what-if ratio; --emit; refusals. Inputs are real logs: PyDarshan's example logs, and logs these
tests record with darshan-runtime (LD_PRELOAD) around workloads whose parameters are known (IOR,
a storlab job), so the replay is checked against those parameters, not only against the log.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

darshan = pytest.importorskip("darshan", reason="PyDarshan (pip install darshan, the replay extra) is not installed")

from storlab.cli.main import main  # noqa: E402
from storlab.jobs.darshan.log import load  # noqa: E402

EXAMPLES = Path(darshan.__file__).parent / "examples" / "example_logs"
IOR_HDF5 = str(EXAMPLES / "ior_hdf5_example.darshan")
MACSIO = str(EXAMPLES / "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan")
KIB, MIB = 1024, 1024 * 1024


def replay(*args: str) -> int:
    return main(["replay", *args, "--no-store"])


def _doc(path: Path) -> dict:
    return json.loads(path.read_text())


def _determined(doc: dict) -> list[dict]:
    return [r for r in doc["replay"]["fidelity"]["rows"] if r["status"] in ("ok", "differs")]


def _files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("mode", [[], ["--no-dxt"]], ids=["dxt", "counters"])
def test_replay_agrees_with_the_log(tmp_path, mode):
    out = tmp_path / "r.json"
    assert replay(IOR_HDF5, "--target", str(tmp_path / "t"), "--json", str(out), "-q", *mode) == 0
    doc = _doc(out)
    assert doc["translation"]["format"] == "darshan" and doc["translation"]["mapped"]
    rows = {r["counter"]: r for r in doc["replay"]["fidelity"]["rows"]}
    assert rows["POSIX_BYTES_WRITTEN"]["log"] == 4195800 == rows["POSIX_BYTES_WRITTEN"]["replay"]
    assert rows["POSIX_READS"]["replay"] == 36 and rows["POSIX_WRITES"]["replay"] == 23
    bad = [r for r in _determined(doc) if r["status"] != "ok"]
    assert not bad, bad
    assert rows["POSIX_OPENS"]["status"] == "not reproduced" and rows["POSIX_OPENS"]["reason"]
    shared = doc["replay"]["fidelity"]["classes"]["shared"]   # the one file all 4 ranks opened (rank -1)
    assert shared["records"] == 1 and shared["log"] == shared["replay"]
    # its only STDIO record is <STDOUT>: a standard stream, not a file, named with its counts
    assert any(n["what"] == "STDIO <STDOUT>" and "128 writes" in n["reason"]
               for n in doc["replay"]["fidelity"]["not_reproduced"])
    wi = doc["replay"]["what_if"]
    assert wi["log_io_s"] > 0 and wi["replay_io_s"] > 0 and wi["ratio"] == pytest.approx(wi["replay_io_s"] / wi["log_io_s"])
    assert doc["replay"]["from_dxt" if not mode else "from_counters"] == 4
    # the data files and iologs are gone; nothing was written outside the target
    assert _files_under(tmp_path / "t") == []


def test_counters_replay_of_several_files(tmp_path):
    out = tmp_path / "r.json"
    assert replay(MACSIO, "--target", str(tmp_path / "t"), "--json", str(out), "-q") == 0
    rows = {r["counter"]: r for r in _doc(out)["replay"]["fidelity"]["rows"]}
    for k in ("files", "POSIX_WRITES", "POSIX_BYTES_WRITTEN", "POSIX_SEQ_WRITES", "POSIX_SIZE_WRITE_100_1K"):
        assert rows[k]["status"] == "ok", rows[k]
    assert rows["files"]["replay"] == 3


def test_keep_leaves_the_files_the_log_names_under_the_target(tmp_path):
    assert replay(IOR_HDF5, "--target", str(tmp_path / "t"), "--keep-files", "-q") == 0
    kept = tmp_path / "t" / "test123.h5"
    assert kept.is_file() and kept.stat().st_size >= 4196352


def test_a_folder_of_kept_files_is_taken_by_the_next_replay_and_emptied(tmp_path, monkeypatch):
    """The request logs live outside the target (in TMPDIR); kept files get the marker after the
    run, by which the next replay takes the folder (and, not keeping, leaves it empty)."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr("tempfile.tempdir", None)     # read TMPDIR again
    target = tmp_path / "t"
    assert replay(IOR_HDF5, "--target", str(target), "--keep-files", "-q") == 0
    assert _files_under(target) == [".storlab-replay/MARKER", "test123.h5"]
    assert replay(IOR_HDF5, "--target", str(target), "-q") == 0
    assert _files_under(target) == [] and list((tmp_path / "tmp").iterdir()) == []


def test_timed_replay_keeps_the_recorded_times(tmp_path):
    out = tmp_path / "r.json"
    assert replay(IOR_HDF5, "--target", str(tmp_path / "t"), "--timed", "--json", str(out), "-q") == 0
    wi = _doc(out)["replay"]["what_if"]
    assert wi["dxt_span_s"] > 0.2
    assert wi["replay_io_s"] >= 0.9 * wi["dxt_span_s"]    # the think time between requests is kept
    assert wi["log_basis"].startswith("DXT span")


def test_emit_writes_the_job_and_its_logs_only(tmp_path, capsys):
    job = tmp_path / "job.toml"
    target = tmp_path / "t"
    assert replay(IOR_HDF5, "--target", str(target), "--emit", str(job)) == 0
    assert _files_under(target) == []     # at most the empty folders the job's files go in
    text = job.read_text()
    assert text.startswith("# storlab job translated from darshan ior_hdf5_example.darshan") and "read_iolog" in text
    logs = sorted(glob.glob(str(tmp_path / "job.toml.iologs" / "logs" / "*.iolog")))
    assert len(logs) == 4
    assert "job written to" in capsys.readouterr().out
    # the emitted job runs as an ordinary storlab job
    assert main(["run", str(job), "--no-store", "-q"]) == 0
    assert (target / "test123.h5").stat().st_size >= 4196352


@pytest.mark.parametrize("make", ["not-a-log", "truncated"])
def test_bad_logs_exit_2_in_one_line_with_nothing_written(tmp_path, capsys, make):
    if make == "not-a-log":
        log = tmp_path / "x.darshan"
        log.write_text("not a log\n")
    else:
        log = tmp_path / "cut.darshan"
        data = (EXAMPLES / "example.darshan").read_bytes()
        log.write_bytes(data[: len(data) * 9 // 10])
    target = tmp_path / "t"
    assert replay(str(log), "--target", str(target)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and log.name in err
    assert not target.exists()


def test_a_target_holding_other_files_is_refused(tmp_path, capsys):
    target = tmp_path / "t"
    target.mkdir()
    (target / "mine.dat").write_text("keep me")
    assert replay(IOR_HDF5, "--target", str(target)) == 2
    assert "is not empty" in capsys.readouterr().err
    assert _files_under(target) == ["mine.dat"] and (target / "mine.dat").read_text() == "keep me"


def test_stdio_only_log_replays_its_stream_calls_folded_by_default(tmp_path, capsys):
    """PyDarshan's noposix.darshan: 512 ranks, modules LUSTRE and STDIO only. Its one file is read
    in 199,687 freads (1.8 GB); its 2,190,437 fwrites went to <STDOUT> (named by darshan-convert's
    hash of it), which is no file. At --scale 0.001, folded onto 256 ranks without being asked."""
    log = EXAMPLES / "noposix.darshan"
    if not log.exists():
        pytest.skip(f"noposix.darshan is not in this PyDarshan wheel ({EXAMPLES})")
    out = tmp_path / "r.json"
    assert replay(str(log), "--target", str(tmp_path / "t"), "--scale", "0.001", "--json", str(out)) == 0
    err = capsys.readouterr().err
    assert "folded the log's 512 ranks onto 256 replay ranks (2 log ranks each" in err and "--ranks N" in err
    doc = _doc(out)
    assert doc["replay"]["ranks"] == 256 and doc["replay"]["files"] == 1
    rows = {r["counter"]: r for r in doc["replay"]["fidelity"]["rows"]}
    assert rows["STDIO_READS"]["log"] == round(199687 * 0.001) == rows["STDIO_READS"]["replay"]
    assert rows["STDIO_BYTES_READ"]["log"] == round(1812408359 * 0.001) == rows["STDIO_BYTES_READ"]["replay"]
    assert rows["STDIO mean read size (bytes / calls)"]["status"] == "ok"
    assert rows["STDIO_SEEKS"]["status"] == "not reproduced"
    assert "POSIX_READS" not in rows          # no POSIX record: no POSIX rows
    assert not [r for r in _determined(doc) if r["status"] != "ok"]
    not_rep = {n["what"]: n["reason"] for n in doc["replay"]["fidelity"]["not_reproduced"]}
    assert "2,190,437 writes of 29,562,779 bytes" in not_rep["STDIO <STDOUT>"]
    assert "buffering" in not_rep["STDIO buffering"]
    wi = doc["replay"]["what_if"]
    assert wi["log_io_s"] > 0 and "STDIO_F_" in wi["log_basis"]
    assert _files_under(tmp_path / "t") == []


# -- logs recorded here with darshan-runtime around known workloads -----------------------------------
def _darshan_prefix() -> str:
    prefix = os.environ.get("STORLAB_DARSHAN", "/tmp/darshan")
    if not os.path.exists(os.path.join(prefix, "lib", "libdarshan.so")):
        pytest.skip(f"darshan-runtime not built (no {prefix}/lib/libdarshan.so; scripts/test.sh builds it with "
                    "../shared/peers/build-darshan.sh and sets STORLAB_DARSHAN)")
    return prefix


def _mpiexec() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = here if os.path.exists(here) else shutil.which("mpiexec")
    if not found:
        pytest.skip("no mpiexec (pip install mpich, the mpi extra)")
    return found


def _record(tmp_path: Path, argv: list[str], program: str, nonmpi: bool = False) -> str:
    """Run argv under LD_PRELOAD of libdarshan with DXT on; the log of `program` (helpers the
    program starts, e.g. a shell, leave logs of their own)."""
    logs = tmp_path / "darshan-logs"
    logs.mkdir(exist_ok=True)
    env = {**os.environ, "DARSHAN_LOGPATH": str(logs), "DXT_ENABLE_IO_TRACE": "1",
           "LD_PRELOAD": os.path.join(_darshan_prefix(), "lib", "libdarshan.so")}
    if nonmpi:
        env["DARSHAN_ENABLE_NONMPI"] = "1"
    before = set(logs.iterdir())
    subprocess.run(argv, env=env, check=True, capture_output=True, timeout=120)
    made = [p for p in logs.iterdir() if p not in before and p.name.split("_id")[0].endswith(f"_{program}")]
    assert len(made) == 1, made
    return str(made[0])


def _emitted_ops(tmp_path: Path, log: str, target: Path, *extra: str) -> dict[str, list[list[tuple]]]:
    """The requests the replay will issue: --emit's iologs, by file (one list per worker)."""
    job = tmp_path / "emitted.toml"
    assert replay(log, "--target", str(target), "--emit", str(job), "-q", *extra) == 0
    out: dict[str, list[list[tuple]]] = {}
    for path in sorted(glob.glob(str(tmp_path / "emitted.toml.iologs" / "logs" / "*.iolog"))):
        ops = []
        name = None
        for line in Path(path).read_text().splitlines()[1:]:
            w = line.split()
            name = w[1]
            if w[2] in ("read", "write"):
                ops.append((w[2], int(w[3]), int(w[4])))
        out.setdefault(os.path.basename(name), []).append(ops)
    shutil.rmtree(tmp_path / "emitted.toml.iologs")
    return out


def _ior() -> str:
    ior = os.environ.get("STORLAB_IOR") or shutil.which("ior")
    if not ior or not os.path.exists(ior):
        pytest.skip("IOR not built (scripts/test.sh builds it with ../shared/peers/build-ior.sh and sets STORLAB_IOR)")
    return ior


def test_ior_shared_file_replays_iors_layout(tmp_path):
    """IOR, 2 ranks, one shared file: -t 64k -b 1m -s 4, write then read. The replay (from the
    counters: this PyDarshan cannot read the runtime's newer DXT) has IOR's parameters."""
    app = tmp_path / "app"
    app.mkdir()
    log = _record(tmp_path, [_mpiexec(), "-n", "2", _ior(), "-a", "POSIX", "-w", "-r", "-t", "64k", "-b", "1m",
                             "-s", "4", "-k", "-o", str(app / "ior.dat")], "ior")
    assert load(log).nprocs == 2
    ops = _emitted_ops(tmp_path, log, tmp_path / "t")
    assert list(ops) == ["ior.dat"] and len(ops["ior.dat"]) == 2
    for rank, seq in enumerate(ops["ior.dat"]):
        writes = [op for op in seq if op[0] == "write"]
        reads = [op for op in seq if op[0] == "read"]
        want = [s * 2 * MIB + rank * MIB + k * 64 * KIB for s in range(4) for k in range(16)]
        assert [o for _, o, _ in writes] == want          # IOR's segmented layout, rank by rank
        assert [o for _, o, _ in reads] == want
        assert {n for _, _, n in seq} == {64 * KIB}
        assert seq.index(reads[0]) > seq.index(writes[-1])  # write phase, then read phase
    # and the replay itself agrees with the log
    out = tmp_path / "r.json"
    assert replay(log, "--target", str(tmp_path / "t"), "--json", str(out), "-q") == 0
    doc = _doc(out)
    rows = {r["counter"]: r for r in doc["replay"]["fidelity"]["rows"]}
    assert rows["POSIX_BYTES_WRITTEN"]["replay"] == 8 * MIB == rows["POSIX_BYTES_READ"]["replay"]
    assert rows["POSIX_SIZE_WRITE_10K_100K"]["replay"] == 128
    assert not [r for r in _determined(doc) if r["status"] != "ok"]
    assert not (app / "ior.dat").stat().st_size > 8 * MIB    # the application's file untouched


def test_ior_file_per_process_and_the_logs_own_folder_is_refused(tmp_path, capsys):
    app = tmp_path / "app"
    app.mkdir()
    log = _record(tmp_path, [_mpiexec(), "-n", "2", _ior(), "-a", "POSIX", "-w", "-F", "-t", "256k", "-b", "2m",
                             "-k", "-o", str(app / "fpp")], "ior")
    ops = _emitted_ops(tmp_path, log, tmp_path / "t")
    assert sorted(ops) == ["fpp.00000000", "fpp.00000001"]
    for seqs in ops.values():
        assert [o for _, o, _ in seqs[0]] == list(range(0, 2 * MIB, 256 * KIB))
    # the log's files exist here: a target holding them is refused, and they are untouched
    before = {p.name: p.stat().st_mtime_ns for p in app.iterdir()}
    assert replay(log, "--target", str(app)) == 2
    assert "a file the log names" in capsys.readouterr().err
    assert {p.name: p.stat().st_mtime_ns for p in app.iterdir()} == before


def test_a_storlab_job_replays_as_itself(tmp_path):
    """`storlab run` writing 4 MiB in 128 KiB requests, recorded by Darshan: the replay writes the
    same 32 requests at the same offsets."""
    app = tmp_path / "app"
    app.mkdir()
    log = _record(tmp_path, [sys.executable, "-m", "storlab", "run", "--target", str(app / "s.dat"), "--size", "4m",
                             "--rw", "write", "--bs", "128k", "--no-store", "-q"], os.path.basename(sys.executable),
                  nonmpi=True)
    ops = _emitted_ops(tmp_path, log, tmp_path / "t")
    (seq,) = ops["s.dat"]
    assert [(d, o, n) for d, o, n in seq if d == "write"] == [("write", k * 128 * KIB, 128 * KIB) for k in range(32)]


def test_a_random_storlab_job_replays_aligned_over_its_range(tmp_path):
    """`storlab run --rw randread --bs 4k` over 1 MiB, recorded by Darshan (no DXT read back): the
    counters say 256 reads of 4 KiB, all aligned (POSIX_FILE_NOT_ALIGNED = 0), half of them not
    sequential; the replay's requests are so, and spread over the whole MiB."""
    app = tmp_path / "app"
    app.mkdir()
    log = _record(tmp_path, [sys.executable, "-m", "storlab", "run", "--target", str(app / "r.dat"), "--size", "1m",
                             "--rw", "randread", "--bs", "4k", "--no-store", "-q"], os.path.basename(sys.executable),
                  nonmpi=True)
    (seq,) = _emitted_ops(tmp_path, log, tmp_path / "t")["r.dat"]
    reads = [op for op in seq if op[0] == "read"]
    assert len(reads) == 256 and {n for _, _, n in reads} == {4 * KIB}
    assert all(o % (4 * KIB) == 0 for _, o, _ in reads)
    assert 0.9 * MIB <= max(o + n for _, o, n in reads) <= MIB
    rec = next(r for r in load(log).module_records("POSIX") if r.path.endswith("/r.dat"))
    from storlab.jobs.darshan.counters import count_ops

    got = count_ops(reads)
    assert abs(got["POSIX_SEQ_READS"] - rec.c("POSIX_SEQ_READS")) <= 0.05 * rec.c("POSIX_SEQ_READS")


STDIO_APP = r"""
/* fopen/fwrite/fread/fseek on a file; a second one written with write() and then through fdopen */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    char path[4096], buf[4096];
    memset(buf, 'x', sizeof buf);
    snprintf(path, sizeof path, "%s/stream.dat", argv[1]);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 1000; i++) fwrite(buf, 1, 100, f);
    fflush(f);
    fclose(f);
    f = fopen(path, "r");
    for (int i = 0; i < 250; i++) fread(buf, 1, 400, f);
    fseek(f, 0, SEEK_SET);
    for (int i = 0; i < 10; i++) fread(buf, 1, 400, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/mixed.dat", argv[1]);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (int i = 0; i < 10; i++) write(fd, buf, 4096);
    f = fdopen(fd, "a");
    for (int i = 0; i < 20; i++) fwrite(buf, 1, 500, f);
    fclose(f);
    return 0;
}
"""


def _stdio_app_log(tmp_path: Path) -> str:
    """A C program doing its I/O through stdio, compiled and recorded here (non-MPI); the program
    is tmp_path/stdio_app, its folder tmp_path/app."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler (cc) to build the stdio program")
    prefix = _darshan_prefix()
    (tmp_path / "stdio_app.c").write_text(STDIO_APP)
    subprocess.run([cc, "-O1", "-o", str(tmp_path / "stdio_app"), str(tmp_path / "stdio_app.c")], check=True,
                   capture_output=True, timeout=60)
    app = tmp_path / "app"
    app.mkdir()
    assert prefix
    return _record(tmp_path, [str(tmp_path / "stdio_app"), str(app)], "stdio_app", nonmpi=True)


def test_a_stdio_program_replays_its_calls(tmp_path):
    """fwrite 1000 x 100 B, fflush, fread 250 x 400 B, fseek to 0, fread 10 x 400 B on stream.dat;
    write() 10 x 4 KiB then fdopen and fwrite 20 x 500 B on mixed.dat. Darshan's POSIX module sees
    only the write() calls (no double counting); the replay does each stream call as one request."""
    log = _stdio_app_log(tmp_path)
    loaded = load(log)
    stdio = {os.path.basename(r.path): r for r in loaded.module_records("STDIO")}
    posix = {os.path.basename(r.path): r for r in loaded.module_records("POSIX")}
    assert stdio["stream.dat"].c("STDIO_WRITES") == 1000 and stdio["stream.dat"].c("STDIO_READS") == 260
    assert "stream.dat" not in posix or not posix["stream.dat"].c("POSIX_WRITES")
    assert posix["mixed.dat"].c("POSIX_BYTES_WRITTEN") == 10 * 4096          # stdio's 10,000 bytes not in it
    assert stdio["mixed.dat"].c("STDIO_BYTES_WRITTEN") == 20 * 500
    ops = _emitted_ops(tmp_path, log, tmp_path / "t")
    (stream,) = ops["stream.dat"]
    writes = [op for op in stream if op[0] == "write"]
    reads = [op for op in stream if op[0] == "read"]
    assert writes == [("write", k * 100, 100) for k in range(1000)]
    # the stream read the file once, then (after its seek to 0) 10 requests more from the start
    assert reads == [("read", k * 400, 400) for k in range(250)] + [("read", k * 400, 400) for k in range(10)]
    assert stream.index(reads[0]) > stream.index(writes[-1])                 # written first, then read
    mixed = sorted(ops["mixed.dat"], key=len)
    assert [op[2] for op in mixed[0]] == [4096] * 10 and [op[2] for op in mixed[1]] == [500] * 20
    out = tmp_path / "r.json"
    assert replay(log, "--target", str(tmp_path / "t"), "--json", str(out), "-q") == 0
    doc = _doc(out)
    rows = {r["counter"]: r for r in doc["replay"]["fidelity"]["rows"]}
    assert (rows["STDIO_READS"]["log"], rows["STDIO_READS"]["replay"]) == (260, 260)
    assert (rows["STDIO_WRITES"]["log"], rows["STDIO_WRITES"]["replay"]) == (1020, 1020)
    assert rows["STDIO_BYTES_WRITTEN"]["replay"] == 110000 and rows["POSIX_BYTES_WRITTEN"]["replay"] == 40960
    assert rows["STDIO mean read size (bytes / calls)"]["replay"] == 400
    assert rows["STDIO_MAX_BYTE_READ (extent, summed over files)"]["replay"] == 100000
    assert rows["STDIO_FLUSHES"]["status"] == "not reproduced"
    assert not [r for r in _determined(doc) if r["status"] != "ok"]
    assert doc["replay"]["fidelity"]["records_within_tolerance"] == 3
    assert any(m["key"].startswith("STDIO_READS") for m in doc["translation"]["mapped"])
    wi = doc["replay"]["what_if"]
    assert wi["log_io_s"] > 0 and wi["ratio"] is not None
    # --timed: each file's worker starts at its recorded time; the what-if still compares
    out = tmp_path / "timed.json"
    assert replay(log, "--target", str(tmp_path / "t"), "--timed", "--json", str(out), "-q") == 0
    doc = _doc(out)
    assert doc["replay"]["timed"] and doc["replay"]["what_if"]["ratio"] is not None
    assert not [r for r in _determined(doc) if r["status"] != "ok"]


def test_a_log_without_records_is_refused_in_one_line(tmp_path, capsys):
    """A program doing no file I/O (true) leaves a log with no module at all."""
    log = _record(tmp_path, ["true"], "true", nonmpi=True)
    assert replay(log, "--target", str(tmp_path / "t")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "modules = none: no POSIX, MPI-IO or STDIO records to replay" in err
    assert not (tmp_path / "t").exists()


def _syscalls_by_file(trace: str) -> dict[str, dict[str, list[int]]]:
    """strace -e read,write,openat,close output: per file name, the byte counts of its read and
    write system calls."""
    import re

    names: dict[int, str] = {}
    out: dict[str, dict[str, list[int]]] = {}
    for line in trace.splitlines():
        m = re.match(r"\d*\s*openat\(AT_FDCWD, \"([^\"]+)\".*= (\d+)$", line)
        if m:
            names[int(m.group(2))] = os.path.basename(m.group(1))
            continue
        m = re.match(r"\d*\s*(read|write)\((\d+),.*= (\d+)$", line)
        if m and int(m.group(2)) in names:
            out.setdefault(names[int(m.group(2))], {"read": [], "write": []})[m.group(1)].append(int(m.group(3)))
        m = re.match(r"\d*\s*close\((\d+)\)", line)
        if m:
            names.pop(int(m.group(1)), None)
    return out


def test_stdio_buffer_replays_the_system_calls_glibc_made(tmp_path):
    """--stdio-buffer 4k: the same program's stream calls become the system calls of a 4 KiB glibc
    stream buffer; where strace is here, they are the very calls the program made (counted on it)."""
    log = _stdio_app_log(tmp_path)
    ops = _emitted_ops(tmp_path, log, tmp_path / "t", "--stdio-buffer", "4k")
    (stream,) = ops["stream.dat"]
    writes = [n for d, _, n in stream if d == "write"]
    reads = [n for d, _, n in stream if d == "read"]
    assert writes == [4096] * 24 + [1696] and len(reads) == 26 and sum(reads) == 104096
    stdio_mixed = min(ops["mixed.dat"], key=len)          # the fdopen'ed stream's worker (the write()s: 10)
    assert [n for _, _, n in stdio_mixed] == [4096, 4096, 1808]
    strace = shutil.which("strace")
    if strace:
        trace = tmp_path / "strace.txt"
        app = tmp_path / "again"
        app.mkdir()
        subprocess.run([strace, "-f", "-e", "trace=read,write,openat,close", "-o", str(trace),
                        str(tmp_path / "stdio_app"), str(app)], check=True, capture_output=True, timeout=60)
        calls = _syscalls_by_file(trace.read_text())
        assert calls["stream.dat"]["write"] == writes                 # what glibc did, call for call
        assert len(calls["stream.dat"]["read"]) == len(reads)
        assert sorted(calls["mixed.dat"]["write"]) == sorted([4096] * 10 + [4096, 4096, 1808])
    out = tmp_path / "r.json"
    assert replay(log, "--target", str(tmp_path / "t"), "--stdio-buffer", "4k", "--json", str(out), "-q") == 0
    doc = _doc(out)
    rows = {r["counter"]: r for r in doc["replay"]["fidelity"]["rows"]}
    assert rows["STDIO_WRITES"]["status"] == "buffered" and rows["STDIO_WRITES"]["log"] == 1020   # the application's
    assert rows["STDIO_WRITES"]["replay"] == 28 and "1,020 write calls replayed as 28 system calls" in \
        rows["STDIO_WRITES"]["reason"]
    planned = rows["write system calls, 4096-byte buffer (planned from STDIO_WRITES)"]
    assert (planned["log"], planned["replay"], planned["status"]) == (28, 28, "ok")
    assert rows["STDIO_BYTES_WRITTEN"]["status"] == "ok" and rows["STDIO_FLUSHES"]["status"] == "buffered"
    assert not [r for r in _determined(doc) if r["status"] != "ok"]
    assert doc["replay"]["stdio_buffer"] == 4096
