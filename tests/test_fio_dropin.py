"""`storlab fio` as a drop-in for fio: typical real-world jobs (tests/fixtures/fio_dropin and a
single-dash command line) run with fio 3.33 and with `storlab fio` on tmpfs files, and must do the
same: the same directions, requests within 1 % for size-based jobs, the same file names."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from storlab.cli.main import main
from storlab.jobs.fio.cmdline import parse_command_line
from storlab.jobs.fio.map import translate_sections
from storlab.jobs.fio.translator import translate as fio_translate
from storlab.jobs.translation import Refusal

DROPIN = Path(__file__).parent / "fixtures" / "fio_dropin"
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed "
                               "(scripts/test.sh installs Debian's fio when run as root)")
DIRECTIONS = ("read", "write", "trim")


def _ops(doc: dict) -> dict:
    """Requests per direction of an fio JSON document (fio's own, or storlab's in fio's layout
    where storlab.output.fiojson is present), else of a storlab run document; `jobs` lists the
    reported jobs' names (phases' for a storlab document)."""
    if "jobs" in doc:
        ops = {d: sum(j[d]["total_ios"] for j in doc["jobs"]) for d in DIRECTIONS}
        names = [j["jobname"] for j in doc["jobs"]]
    else:
        ops = {d: sum((p.get(d) or {}).get("ops", 0) for p in doc["phases"]) for d in DIRECTIONS}
        names = [p["name"] for p in doc["phases"]]
    return {**{d: n for d, n in ops.items() if n}, "jobs": names}


def _fio(args: list[str], workdir: Path) -> dict:
    out = workdir / "fio.json"
    subprocess.run(["fio", "--output-format=json", f"--output={out}", *args], cwd=workdir,
                   check=True, capture_output=True, timeout=300)
    text = out.read_text()
    return _ops(json.loads(text[text.index("{"):]))


def _storlab(args: list[str], workdir: Path, monkeypatch) -> dict:
    out = workdir / "storlab.json"
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("STORLAB_STORE", str(workdir.parent / "store.db"))
    assert main(["fio", "--output-format=json", f"--output={out}", *args]) == 0
    return _ops(json.loads(out.read_text()))


def _files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if not p.name.endswith(".json")}


def _compare(tmp_path: Path, monkeypatch, fio_args: list[str], storlab_args: list[str],
             size_based: bool = True) -> None:
    a, b = tmp_path / "fio", tmp_path / "storlab"
    a.mkdir()
    b.mkdir()
    fio_ops = _fio([a_.replace("{dir}", str(a)) for a_ in fio_args], a)
    storlab_ops = _storlab([b_.replace("{dir}", str(b)) for b_ in storlab_args], b, monkeypatch)
    assert fio_ops.pop("jobs") == storlab_ops.pop("jobs")      # the same jobs reported, in order
    assert set(fio_ops) == set(storlab_ops)
    if size_based:
        total_fio, total_storlab = sum(fio_ops.values()), sum(storlab_ops.values())
        assert abs(total_storlab - total_fio) <= 0.01 * total_fio, (fio_ops, storlab_ops)
        for d, n in fio_ops.items():
            # a mix draws each request's direction: the split varies by a binomial's spread
            share = n / total_fio
            spread = 5 * (total_fio * share * (1 - share)) ** 0.5
            assert abs(storlab_ops[d] - n) <= max(0.01 * n, spread), (d, fio_ops, storlab_ops)
    assert _files(a) == _files(b)


@needs_fio
@pytest.mark.parametrize("name", ["four-corners.fio", "database.fio", "numjobs-group.fio",
                                  "bssplit.fio", "zipf.fio"])
def test_job_file_does_what_fio_does(name, tmp_path, monkeypatch):
    job = str(DROPIN / name)
    _compare(tmp_path, monkeypatch, ["--directory={dir}", job], ["--directory={dir}", job])


@needs_fio
def test_single_dash_command_line_does_what_fio_does(tmp_path, monkeypatch):
    args = ["-directory", "{dir}", "-name=cmdline", "-rw", "randwrite", "-bs", "16k", "-size", "4m",
            "-iodepth", "1", "-thread", "-ioengine", "sync", "-numjobs", "2", "-group_reporting"]
    _compare(tmp_path, monkeypatch, args, args)


def test_rate_iops_translates_to_storlabs_rate_limiter():
    cmd = parse_command_line([str(DROPIN / "rate-iops.fio")])
    (phase,) = translate_sections(cmd.sections, cmd.source).phases
    assert phase["groups"][0]["options"]["rate_iops"] == (500, 500, 500)
    cmd = parse_command_line(["--name=j", "--filename=/x", "--rw=randrw", "--rate=1m,", "--thinktime=50"])
    opts = translate_sections(cmd.sections, cmd.source).phases[0]["groups"][0]["options"]
    assert opts["rate"][:2] == (1 << 20, 0)               # fio's `R,` caps reads only
    assert opts["thinktime"] == pytest.approx(50e-6)      # fio's thinktime is in microseconds


@needs_fio
def test_rate_iops_paces_like_fio(tmp_path, monkeypatch):
    job = str(DROPIN / "rate-iops.fio")
    a, b = tmp_path / "fio", tmp_path / "storlab"
    a.mkdir()
    b.mkdir()
    fio_ops = _fio([f"--directory={a}", job], a)
    storlab_ops = _storlab([f"--directory={b}", job], b, monkeypatch)
    assert fio_ops.pop("jobs") == storlab_ops.pop("jobs") == ["paced"]
    assert set(fio_ops) == set(storlab_ops) == {"read"}
    assert abs(storlab_ops["read"] - fio_ops["read"]) <= 0.1 * fio_ops["read"]
    assert _files(a) == _files(b)


def translate(path_or_text):
    """The fio jobs as map.py's phases `[{"name", "groups": [{"name", "options"}]}]`."""
    return fio_translate(path_or_text).plan.phases


def test_clones_get_fios_file_names_and_directories_round_robin():
    g = translate("[w]\ndirectory=/a:/b\nsize=1m\nnumjobs=3\nnrfiles=2\n")[0]["groups"][0]
    assert g["options"]["target"] == ("/a/w.0.0", "/a/w.0.1", "/b/w.1.0", "/b/w.1.1",
                                      "/a/w.2.0", "/a/w.2.1")
    assert g["options"]["size"] == 512 << 10       # size is split over the clone's files


def test_four_corners_are_four_phases_in_file_order():
    phases = translate(DROPIN / "four-corners.fio")
    assert [p["name"] for p in phases] == ["seq1m-q8-read", "seq1m-q8-write", "rnd4k-q32-read",
                                           "rnd4k-q32-write"]
    for p in phases:
        (g,) = p["groups"]
        assert g["options"]["engine"] == "io_uring"      # libaio maps to io_uring


def test_bssplit_goes_to_the_engine_which_draws_each_requests_size():
    (g,) = translate(DROPIN / "bssplit.fio")[0]["groups"]
    assert g["options"]["bssplit"] == "4k/50:8k/50" and g["options"]["random_map"] is False
    assert g["options"]["target"] == ("mixed-sizes.0.0",)


@needs_fio
def test_an_iolog_fio_wrote_replays_under_storlab_fio(tmp_path, monkeypatch):
    log, data = tmp_path / "w.log", tmp_path / "data"
    subprocess.run(["fio", "--name=w", f"--filename={data}", "--size=1m", "--bs=4k", "--rw=randwrite",
                    f"--write_iolog={log}", "--output=/dev/null"], check=True, timeout=120)
    work = tmp_path / "storlab"
    work.mkdir()
    ops = _storlab(["--name=replay", f"--read_iolog={log}", "--replay_no_stall=1"], work, monkeypatch)
    assert ops == {"write": 256, "jobs": ["replay"]}


def _logged_requests(log: Path) -> list[tuple[str, int, int]]:
    """(direction, offset, length) of each request of an fio iolog v3, in order."""
    rows = [line.split() for line in log.read_text().splitlines()[1:]]
    return [(r[2], int(r[3]), int(r[4])) for r in rows if len(r) == 5]


@needs_fio
@pytest.mark.parametrize("rw, want", [
    # the 86th read ends exactly at the end of the file, where fio stops
    ("read:8k", [("read", k * 12288, 4096) for k in range(86)]),
    # a hole runs past the end: the cursor wraps, and 1 MiB of writes takes two passes
    ("write:4k", [("write", k * 8192, 4096) for k in range(128)] * 2)])
def test_rw_with_a_hole_skips_it_after_each_request_as_fio_does(rw, want, tmp_path, monkeypatch):
    """fio's rw=read:8k / write:4k over 1 MiB in 4 KiB requests, with the same offsets in both
    tools' iologs; storlab fio used to refuse the modifier."""
    logs = {}
    for side in ("fio", "storlab"):
        work = tmp_path / side
        work.mkdir()
        args = [f"--filename={work / 'hole.dat'}", "--name=h", "--size=1m", "--bs=4k",
                f"--rw={rw}", f"--write_iolog={work / 'iolog'}"]
        if side == "fio":
            _fio(args, work)
        else:
            _storlab(args, work, monkeypatch)
        logs[side] = _logged_requests(work / "iolog")
    assert logs["fio"] == want
    assert logs["storlab"] == want


@needs_fio
@pytest.mark.parametrize("mode,keys,terse_fields", [("mixed", ["mixed"], 80),
                                                   ("both", ["read", "write", "trim", "sync", "mixed"], 162)])
def test_unified_rw_reporting_reports_the_mixed_direction_as_fio_does(mode, keys, terse_fields, tmp_path, monkeypatch):
    """unified_rw_reporting: the JSON job holds the directions fio's holds (mixed alone, or beside
    read, write, trim and sync), the mixed requests are all of them, and fio's terse line has as
    many fields as fio's own."""
    args = ["--name=u", "--rw=randrw", "--bs=4k", "--size=4m", f"--unified_rw_reporting={mode}"]
    docs = {}
    for tool in ("fio", "storlab"):
        out = tmp_path / f"{tool}.json"
        target = f"--filename={tmp_path / tool}.dat"
        if tool == "fio":
            subprocess.run(["fio", *args, target, "--output-format=json", f"--output={out}"], check=True,
                           capture_output=True, timeout=120)
        else:
            monkeypatch.setenv("STORLAB_STORE", str(tmp_path / "store.db"))
            assert main(["fio", *args, target, "--output-format=json", f"--output={out}"]) == 0
        text = out.read_text()
        docs[tool] = json.loads(text[text.index("{"):])["jobs"][0]
    for tool, job in docs.items():
        assert [k for k in ("read", "write", "trim", "sync", "mixed") if k in job] == keys, tool
        assert job["mixed"]["total_ios"] == 1024 and job["mixed"]["io_bytes"] == 4 << 20, tool
        assert job["mixed"]["clat_ns"]["N"] == 1024, tool
    monkeypatch.chdir(tmp_path)
    terse = tmp_path / "storlab.terse"
    assert main(["fio", *args, f"--filename={tmp_path / 'storlab'}.dat", "--output-format=terse", f"--output={terse}"]) == 0
    assert len(terse.read_text().strip().split(";")) == terse_fields


def test_unified_rw_reporting_values_and_a_bad_one():
    for value, mode in (("0", "none"), ("none", "none"), ("1", "mixed"), ("mixed", "mixed"), ("2", "both"), ("both", "both")):
        cmd = parse_command_line(["--name=j", "--filename=/x", "--size=1m", f"--unified_rw_reporting={value}"])
        assert translate_sections(cmd.sections, cmd.source).jobs[0].unified == mode
    cmd = parse_command_line(["--name=j", "--filename=/x", "--size=1m", "--unified_rw_reporting=all"])
    with pytest.raises(Refusal, match="unified_rw_reporting = all: 'all' is not allowed; use none, mixed, both"):
        translate_sections(cmd.sections, cmd.source)
