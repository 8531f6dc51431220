"""Tests of `storlab results import` (store/imports.py): fio JSON in its variants, IOR JSON and mdtest
text become stored runs whose figures are the file's, that validate against their schemas (the
autouse fixture checks every document stored), and that list, show, compare and report beside
native runs; bad and foreign files are one line naming the file. The round trip (real fio and IOR
runs, imported and compared with a storlab run in one HTML report, checked in headless Chromium)
is at the end."""
from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "results"))

import rundoc  # noqa: E402
from storlab import store
from storlab.cli.main import main
from storlab.measure import stats
from storlab.store.imports import ResultFileError, parse, read_file

FIXTURES = Path(__file__).parent / "fixtures" / "imports"
MiB = 1 << 20
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


def fio_output(directory: str, *args: str, fmt: str = "json") -> str:
    """fio's output text for a small job on tmpfs."""
    cmd = ["fio", f"--filename={directory}/fio.dat", "--size=2M", "--bs=4k", f"--output-format={fmt}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- fio ----------------------------------------------------------------------------------------
@needs_fio
def test_a_fio_result_on_dev_null_has_a_char_target(tmp_path):
    cmd = ["fio", "--name=sink", "--filename=/dev/null", "--size=1M", "--bs=4k", "--rw=write",
           "--output-format=json"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    doc = read_file(write(tmp_path, "sink.json", text))
    assert doc["environment"]["targets"][0]["type"] == "char"
    assert doc["phases"][0]["write"]["ops"] == 256


@needs_fio
def test_fio_json_figures_are_fios(shm_dir, tmp_path):
    text = fio_output(shm_dir, "--name=mix", "--rw=randrw", "--ioengine=psync")
    fio = json.loads(text)
    doc = read_file(write(tmp_path, "fio.json", text))
    (phase,) = doc["phases"]
    job = fio["jobs"][0]
    assert phase["name"] == "mix" and phase["rw"] == "randrw"
    for d in ("read", "write"):
        src, got = job[d], phase[d]
        assert (got["ops"], got["bytes"]) == (src["total_ios"], src["io_bytes"])
        assert got["iops"] == src["iops"] and got["bw_bytes"] == src["bw_bytes"]
        assert got["seconds"] == src["runtime"] / 1000
        assert got["clat_ns"]["p99"] == src["clat_ns"]["percentile"]["99.000000"]
        assert got["clat_ns"]["p999"] == src["clat_ns"]["percentile"]["99.900000"]
        assert got["lat_ns"]["mean"] == src["lat_ns"]["mean"] and got["lat_ns"]["max"] == src["lat_ns"]["max"]
        # psync: fio measured no submission latency, so lat's percentiles are clat's (and said so)
        assert got["lat_ns"]["p50"] == src["clat_ns"]["percentile"]["50.000000"]
        assert "lat_hist" not in got and "timeseries" not in got
    assert "clat percentiles" in doc["imported"]["latency"]
    src = doc["imported"]["imported_from"]
    assert src["tool"] == "fio" and src["version"] == fio["fio version"] and src["format"] == "fio-json"
    assert src["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    # options before the first --name are fio's global options, and come first again
    assert doc["imported"]["command"] == (f"fio --filename={shm_dir}/fio.dat --size=2M --bs=4k --name=mix "
                                          "--rw=randrw --ioengine=psync")
    assert doc["job"]["target"] == [f"{shm_dir}/fio.dat"] and doc["job"]["bs"] == 4096
    assert doc["environment"]["targets"][0]["size_bytes"] == 2 * MiB
    assert doc["started_at"] < doc["finished_at"]


@needs_fio
def test_fio_lines_before_the_json_are_skipped(shm_dir, tmp_path):
    """fio prints notes ahead of the JSON (on its own stdout when both go to one file)."""
    text = fio_output(shm_dir, "--name=r", "--rw=read")
    noisy = "note: both iodepth >= 1 and synchronous I/O engine are selected\nfio: something {odd}\n" + text
    doc = read_file(write(tmp_path, "noisy.json", noisy))
    assert doc["phases"][0]["read"]["ops"] == json.loads(text)["jobs"][0]["read"]["total_ios"]


@needs_fio
def test_fio_json_plus_numjobs_clones_merge_into_one_phase_with_a_histogram(shm_dir, tmp_path):
    text = fio_output(shm_dir, "--name=clones", "--rw=randread", "--numjobs=2", "--ioengine=libaio",
                      "--iodepth=4", fmt="json+")
    fio = json.loads(text)
    doc = read_file(write(tmp_path, "plus.json", text))
    assert doc["imported"]["imported_from"]["format"] == "fio-json+"
    (phase,) = doc["phases"]
    assert len(phase["workers"]) == 2 and doc["job"]["threads"] == 2
    read = phase["read"]
    assert read["ops"] == sum(j["read"]["total_ios"] for j in fio["jobs"])
    assert read["bytes"] == sum(j["read"]["io_bytes"] for j in fio["jobs"])
    assert stats.count(read["clat_hist"]["buckets"]) == sum(j["read"]["clat_ns"]["N"] for j in fio["jobs"])
    assert read["clat_ns"]["min"] == min(j["read"]["clat_ns"]["min"] for j in fio["jobs"])
    assert read["clat_ns"]["min"] <= read["clat_ns"]["p50"] <= read["clat_ns"]["p99"] <= read["clat_ns"]["max"]
    assert "p50" not in read["lat_ns"]     # libaio: slat measured, lat has no percentiles of its own


@needs_fio
def test_fio_group_reporting_folds_numjobs(shm_dir, tmp_path):
    text = fio_output(shm_dir, "--name=g", "--rw=read", "--numjobs=3", "--group_reporting")
    doc = read_file(write(tmp_path, "g.json", text))
    assert doc["job"]["threads"] == 3 and len(doc["phases"]) == 1


@needs_fio
def test_stonewalled_fio_jobs_become_phases(shm_dir, tmp_path):
    jobfile = write(tmp_path, "two.fio", f"[global]\nfilename={shm_dir}/f\nsize=1M\nbs=4k\n"
                                         "[w]\nrw=write\n[r]\nstonewall\nrw=read\n")
    text = subprocess.run(["fio", "--output-format=json", str(jobfile)], capture_output=True, text=True,
                          check=True).stdout
    doc = read_file(write(tmp_path, "two.json", text))
    assert [(p["name"], p["rw"]) for p in doc["phases"]] == [("w", "write"), ("r", "read")]
    assert "write" in doc["phases"][0] and "read" in doc["phases"][1]
    assert doc["imported"]["options"]["global options"]["filename"] == f"{shm_dir}/f"


def _older_fio(fio: dict) -> dict:
    """fio's JSON as releases before nanosecond fields wrote it: clat/lat/slat in usec, io_bytes in
    KiB, no io_kbytes or bw_bytes."""
    old = copy.deepcopy(fio)
    for job in old["jobs"]:
        for d in ("read", "write", "trim"):
            x = job[d]
            x["io_bytes"] = x.pop("io_kbytes")
            x.pop("bw_bytes")
            for k in ("clat", "lat", "slat"):
                ns = x.pop(f"{k}_ns")
                us = {key: (v / 1000 if isinstance(v, (int, float)) and key != "N" else v)
                      for key, v in ns.items() if key != "percentile"}
                if "percentile" in ns:
                    us["percentile"] = {q: v // 1000 for q, v in ns["percentile"].items()}
                x[k] = us
    return old


@needs_fio
def test_fio_usec_fields_of_older_releases(shm_dir, tmp_path):
    fio = json.loads(fio_output(shm_dir, "--name=old", "--rw=read"))
    doc = read_file(write(tmp_path, "old.json", json.dumps(_older_fio(fio))))
    src, got = fio["jobs"][0]["read"], doc["phases"][0]["read"]
    assert got["bytes"] == src["io_kbytes"] * 1024 and got["ops"] == src["total_ios"]
    assert got["bw_bytes"] == src["bw"] * 1024
    assert got["lat_ns"]["max"] == pytest.approx(src["lat_ns"]["max"])
    assert got["clat_ns"]["p99"] == src["clat_ns"]["percentile"]["99.000000"] // 1000 * 1000


@needs_fio
def test_fio_client_server_output_names_the_hosts(shm_dir, tmp_path):
    fio = json.loads(fio_output(shm_dir, "--name=c", "--rw=read"))
    job = dict(fio["jobs"][0], hostname="node7")
    server = {k: v for k, v in fio.items() if k != "jobs"}
    server["client_stats"] = [job, dict(job, jobname="All clients", hostname=None)]
    doc = read_file(write(tmp_path, "client.json", json.dumps(server)))
    assert doc["environment"]["host"] == "node7"
    assert doc["phases"][0]["read"]["ops"] == job["read"]["total_ios"]


# -- IOR and mdtest (outputs of IOR 4.1.0 runs here, kept as fixtures) --------------------------
def test_ior_json_figures_are_iors():
    path = FIXTURES / "ior-4.1.0-posix-fpp.json"
    ior = json.loads(path.read_text())
    doc = read_file(path)
    assert [p["name"] for p in doc["phases"]] == ["write", "read"]
    for phase, s in zip(doc["phases"], ior["summary"]):
        d = phase[s["operation"]]
        assert d["bw_bytes"] == s["bwMeanMIB"] * MiB and d["iops"] == s["OPsMean"]
        assert d["bytes"] == round(s["xsizeMiB"] * MiB) and d["ops"] == d["bytes"] // s["transferSize"]
        assert d["seconds"] == s["MeanTime"] and d["rates"]["bw_bytes"]["max"] == s["bwMaxMIB"] * MiB
        assert "lat_ns" not in d
    assert doc["imported"]["command"] == ior["Command line"] and doc["argv"][1:3] == ["-a", "POSIX"]
    assert doc["environment"]["host"] == "vm" and doc["environment"]["os"] == "Linux"
    assert doc["job"]["threads"] == 2 and doc["job"]["bs"] == 65536 and doc["job"]["files"] == "per-rank"
    assert doc["imported"]["imported_from"]["version"] == "4.1.0+dev"


def test_ior_repetitions_and_random_offsets():
    doc = read_file(FIXTURES / "ior-4.1.0-random-2reps.json")
    write = doc["phases"][0]
    assert write["rw"] == "randwrite" and write["write"]["rates"]["iterations"] == 2
    r = write["write"]["rates"]["bw_bytes"]
    assert r["min"] < r["mean"] < r["max"]
    assert doc["job"]["files"] == "shared"


def test_mdtest_operations_become_meta_phases():
    doc = read_file(FIXTURES / "mdtest-4.1.0.txt")
    assert doc["kind"] == "meta" and doc["workers"] == 2
    by_name = {p["name"]: p for p in doc["phases"]}
    assert list(by_name) == ["mkdir", "dir-stat", "dir-rename", "rmdir", "create", "stat", "read", "remove"]
    create = by_name["create"]
    assert create["ops"] == 100 and create["ops_per_s"] == 718085.035
    assert create["rates"] == {"iterations": 2, "max": 746317.438, "min": 689852.632, "mean": 718085.035,
                               "stddev": 39926.647}
    assert "tree-create" in doc["imported"]["options"]["tree_rates"]
    assert doc["imported"]["command"] == "/tmp/ior-import/bin/mdtest -n 50 -d /dev/shm/imp-md -i 2"
    assert doc["started_at"].endswith("Z") and doc["job"]["target"] == ["/dev/shm/imp-md"]


def test_mdtest_files_only_run_reads_its_item_count_and_tree_shape():
    doc = read_file(FIXTURES / "mdtest-4.1.0-files-only.txt")
    assert [p["name"] for p in doc["phases"]] == ["create", "stat", "read", "remove"]
    assert all(p["ops"] == 36 for p in doc["phases"])
    assert (doc["job"]["depth"], doc["job"]["fanout"], doc["job"]["file_size"]) == (1, 2, 512)


# -- bad and foreign files ----------------------------------------------------------------------
@pytest.mark.parametrize("content, said", [
    ('{"a": 1}', "JSON of another kind"),
    ("hello\n", "no JSON object and no mdtest output"),
    ('{"fio version": "fio-3.33", "time": "x"}', "fio JSON without a 'jobs' list"),
    ('{"fio version": "fio-3.33", "jobs": []}', "fio JSON with no jobs"),
    ('{"fio version": "fio-3.33", "jobs": [{"jobname": "x", "read": {"total_ios": "many"}}]}',
     "fio output with an unexpected field"),
    ('{"Began": "x", "summary": [{"operation": "write"}]}', "ior output with an unexpected field"),
    ("mdtest-4.1 was launched with 2 total task(s) on 1 node(s)\n", "without a 'SUMMARY rate' table"),
])
def test_bad_files_are_one_line_naming_the_file(tmp_path, content, said):
    path = write(tmp_path, "bad.out", content)
    with pytest.raises(ResultFileError) as e:
        read_file(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: ") and said in msg and len(msg) < 300


def test_a_truncated_fio_json_is_refused(tmp_path):
    text = json.dumps({"fio version": "fio-3.33", "jobs": [{"jobname": "x"}]})
    with pytest.raises(ResultFileError, match="no JSON object"):
        parse(text[: len(text) // 2], "half.json", "0" * 64)


def test_a_storlab_document_is_pointed_to_show_and_compare(tmp_path):
    path = write(tmp_path, "run.json", json.dumps(rundoc.make_run()))
    with pytest.raises(ResultFileError, match="already a storlab document"):
        read_file(path)


def test_a_binary_file_is_refused(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(ResultFileError, match="not a text file"):
        read_file(path)


def test_import_stores_the_good_files_and_names_the_bad(tmp_path, capsys, private_store):
    bad = write(tmp_path, "foreign.json", '{"x": 1}')
    code, _, err = cli(capsys, "results", "import", str(FIXTURES / "ior-4.1.0-posix-fpp.json"), str(bad),
                       str(FIXTURES / "mdtest-4.1.0.txt"), "--tag", "old")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 3 and lines[1] == (f"storlab results import: error: {bad}: JSON of another kind; "
                                            "expected fio JSON (fio --output-format=json or json+), IOR JSON "
                                            "(ior -O summaryFormat=JSON), mdtest text output")
    runs = store.list_runs(private_store)
    assert sorted(r["kind"] for r in runs) == ["meta", "run"]
    assert all({"imported", "old"} <= set(r["tags"]) for r in runs)


def test_importing_a_file_again_replaces_its_run(capsys, private_store):
    for _ in range(2):
        assert cli(capsys, "results", "import", str(FIXTURES / "ior-4.1.0-posix-fpp.json"))[0] == 0
    assert len(store.list_runs(private_store)) == 1


# -- schemas: imported runs need what their file has, measured runs stay strict -----------------
def test_schema_still_requires_histograms_of_measured_runs():
    from storlab.schemas import DocumentInvalid, validate

    doc = rundoc.make_run()
    del doc["phases"][0]["read"]["lat_hist"]
    with pytest.raises(DocumentInvalid, match="lat_hist"):
        validate(doc)
    doc = rundoc.make_run()
    del doc["phases"][0]["read"]["lat_ns"]["p99"]
    with pytest.raises(DocumentInvalid, match="p99"):
        validate(doc)


def test_schema_checks_the_imported_section():
    from storlab.schemas import DocumentInvalid, validate

    doc = read_file(FIXTURES / "ior-4.1.0-posix-fpp.json")
    validate(doc)
    doc["imported"]["imported_from"]["sha256"] = "not-a-hash"
    with pytest.raises(DocumentInvalid, match="sha256"):
        validate(doc)
    meta = read_file(FIXTURES / "mdtest-4.1.0.txt")
    validate(meta)
    del meta["imported"]
    with pytest.raises(DocumentInvalid):       # without it, a meta phase needs a latency again
        validate(meta)


# -- beside native runs -------------------------------------------------------------------------
def test_imported_runs_list_show_and_compare_with_native_ones(capsys, private_store):
    native = rundoc.make_run(rw="write", bs=65536, seed=5)
    store.save(native, private_store)
    assert cli(capsys, "results", "import", str(FIXTURES / "ior-4.1.0-posix-fpp.json"))[0] == 0
    ior_id = read_file(FIXTURES / "ior-4.1.0-posix-fpp.json")["run_id"]
    code, out, _ = cli(capsys, "results", "list", "--tag", "ior")
    assert code == 0 and ior_id[:8] in out and native["run_id"][:8] not in out
    code, out, _ = cli(capsys, "results", "show", ior_id[:8])
    assert code == 0 and "imported from ior 4.1.0+dev (ior-json)" in out
    assert "not in the file: latency" in out and "write" in out
    code, out, _ = cli(capsys, "results", "compare", native["run_id"][:8], ior_id[:8])
    assert code == 0 and "bw MiB/s" in out
    ratio = (9005.4836 * MiB) / native["phases"][0]["write"]["bw_bytes"]
    assert f"{ratio:.2f}x" in out
    assert f"run {ior_id[:8]} was imported from ior 4.1.0+dev" in out


# -- round trip: real fio and IOR runs, imported, in one report with a storlab run ---------------
def _ior_binary() -> str | None:
    """IOR built with /work/shared/peers/build-ior.sh style scripts: $STORLAB_IOR, PATH, /tmp/ior/bin."""
    for cand in (os.environ.get("STORLAB_IOR"), shutil.which("ior"), "/tmp/ior/bin/ior"):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


@pytest.mark.browser
@needs_fio
def test_round_trip_fio_and_ior_results_in_one_report_with_a_storlab_run(shm_dir, tmp_path, capsys, private_store):
    from browser import chromium_path, in_page_check, screenshot
    from test_report import embedded_pngs

    if chromium_path() is None:
        pytest.skip("chromium not installed (apt-get install chromium)")
    ior = _ior_binary()
    if ior is None:
        pytest.skip("IOR not built: run shared/peers/build-ior.sh (needs mpicc) or set STORLAB_IOR")
    fio_file = write(tmp_path, "fio.json", fio_output(shm_dir, "--name=fio-randrw", "--rw=randrw",
                                                       "--ioengine=psync"))
    ior_run = subprocess.run([ior, "-a", "POSIX", "-w", "-r", "-t", "64k", "-b", "1m", "-s", "2",
                              "-o", f"{shm_dir}/ior.dat", "-O", "summaryFormat=JSON"],
                             capture_output=True, text=True, timeout=120)
    assert ior_run.returncode == 0, ior_run.stderr[-1000:]
    ior_file = write(tmp_path, "ior.json", ior_run.stdout)
    assert cli(capsys, "results", "import", str(fio_file), str(ior_file))[0] == 0
    assert cli(capsys, "run", "--target", f"{shm_dir}/native.dat", "--size", "2m", "--rw", "randrw",
               "--bs", "4k", "--time", "0.3s", "--quiet", "--tag", "native")[0] == 0
    ids = [r["run_id"] for r in store.list_runs(private_store)]
    assert len(ids) == 3
    html = tmp_path / "report.html"
    assert cli(capsys, "report", *ids, "-o", str(html))[0] == 0
    text = html.read_text()
    assert "Imported results" in text and str(fio_file) in text and str(ior_file) in text
    for rid in ids:
        assert rid[:8] in text

    ncolors, non_white, console, _ = screenshot(html, tmp_path)
    assert console == [] and ncolors > 50 and non_white > 0.03
    check, console = in_page_check(html, tmp_path)
    assert check["images"] == len(embedded_pngs(text)) > 0
    assert check["broken"] == 0 and check["errors"] == [] and console == []


def test_one_fio_job_keeps_fios_mean_exactly():
    # mean x N / N rounds for many means (1501.586777 x 3 / 3 does): one job is taken as fio wrote it
    from storlab.store.imports import _fio_lat, _merged_lat

    one = _fio_lat({"N": 3, "min": 1000, "max": 2000, "mean": 1501.586777, "stddev": 12.3456789}, ns=True)
    merged = _merged_lat([one])
    assert (merged["mean"], merged["stddev"]) == (1501.586777, 12.3456789)
