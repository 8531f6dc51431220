"""The versioned JSON Schemas shipped in storlab.schemas validate real documents of each kind, every
fixture document, and reject broken ones; the common header is built in storlab.document only.
(Every document a test writes is also validated by the autouse fixture in conftest.py.)"""
from __future__ import annotations

import contextlib
import io
import json
import re
import sqlite3
import sys
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")
referencing = pytest.importorskip("referencing")

import storlab  # noqa: E402
from storlab import document  # noqa: E402
from storlab.schemas import SCHEMA_FILES, DocumentInvalid, load, schema_file, validate, validator  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "results"
sys.path.insert(0, str(FIXTURES))
import rundoc  # noqa: E402

PACKAGE = Path(document.__file__).parent


def cli_json(argv: list[str]) -> dict:
    """Run the CLI in-process and parse the document it prints on standard output."""
    from storlab.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    assert code == 0
    return json.loads(out.getvalue())


def test_every_schema_file_is_a_valid_draft_2020_12_schema_named_by_its_id():
    names = sorted(p.name for p in (PACKAGE / "schemas").glob("*.schema.json"))
    assert names == sorted({*SCHEMA_FILES.values()})
    for name in names:
        schema = load(name)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$id"].endswith("/" + name)


def test_a_real_sweep_validates_and_a_broken_one_does_not(shm_dir):
    from storlab.cli.main import main

    out = f"{shm_dir}/sweep.json"
    assert main(["sweep", "--target", f"{shm_dir}/s.dat", "--size", "1m", "--engine", "null",
                 "--null-delay", "1ms", "--qd", "1,2", "--time", "150ms", "--json", out, "-q", "--no-store"]) == 0
    doc = json.loads(open(out).read())
    v = validator("sweep-1.schema.json")
    v.validate(doc)                     # its runs are checked against run-1 through the $ref
    doc["runs"][0]["schema"] = "storlab.run/0"
    assert not v.is_valid(doc)
    del doc["series"]
    assert not v.is_valid(doc)


def test_a_real_run_validates_against_run_1(shm_dir):
    from storlab.cli.main import main

    out = f"{shm_dir}/run.json"
    assert main(["run", "--target", f"{shm_dir}/r.dat", "--size", "1m", "--engine", "null", "--time", "100ms",
                 "--json", out, "-q", "--no-store"]) == 0
    doc = json.loads(open(out).read())
    assert validate(doc) == "run-1.schema.json"
    doc["phases"][0]["read"]["lat_hist"]["scheme"] = "linear"
    with pytest.raises(DocumentInvalid, match="phases/0/read/lat_hist/scheme"):
        validate(doc)


def test_a_real_metadata_run_validates_against_meta_1(shm_dir):
    from storlab.jobs.meta_options import resolve_meta_options
    from storlab.measure.meta import run_meta

    doc = run_meta(resolve_meta_options({"target": shm_dir, "files": "20", "no_store": True}, None, "job"))
    assert validate(doc) == "meta-1.schema.json"
    validator("run-1.schema.json").validate(doc)            # a meta document is a run document too
    doc["phases"][0]["name"] = "truncate"
    assert not validator("meta-1.schema.json").is_valid(doc)


@pytest.mark.parametrize("argv", [
    ["plan", "geometry", "R50/6/x", "--drives", "24", "--chunk", "256k", "--json"],
    ["plan", "reliability", "R60/6/48", "--drive", "2TB", "--mtbf", "600000h", "--rebuild-rate", "50MB/s", "--json"],
    ["plan", "perf", "R6/12", "--count", "4", "--drive-read", "130MB/s", "--json"],
    ["plan", "recommend", "--drives", "24", "--controllers", "2", "--json"],
    ["plan", "script", "R6/10", "--chunk", "512k", "--fs", "ext4", "--json"],
])
def test_every_plan_command_s_document_validates_against_plan_1(argv, capsys):
    doc = cli_json(argv)
    assert doc["schema"] == document.plan_schema(argv[1]) and doc["kind"] == "plan"
    assert validate(doc) == "plan-1.schema.json"
    broken = {k: v for k, v in doc.items() if k not in ("lines", "layout", "pareto")}
    assert not validator("plan-1.schema.json").is_valid(broken)


def test_a_real_doctor_document_validates_against_doctor_1(capsys):
    doc = cli_json(["doctor", "--json"])
    assert validate(doc) == "doctor-1.schema.json"
    doc["summary"]["error"] = -1
    assert not validator("doctor-1.schema.json").is_valid(doc)


def test_doctor_and_plan_documents_lacked_a_kind_and_plan_a_version(capsys):
    """Every document opens with schema, kind and storlab_version, in that order."""
    for doc in (cli_json(["doctor", "--json"]), cli_json(["plan", "geometry", "R6/10", "--json"])):
        assert list(doc)[:3] == ["schema", "kind", "storlab_version"]
        assert doc["storlab_version"] == storlab.__version__


def test_fixture_run_documents_lacked_phase_outcomes_and_job_phases():
    """rundoc builds documents through storlab.document and storlab.jobs.job: they validate, in every
    shape the tests ask for."""
    docs = [rundoc.make_run(), rundoc.make_run(engine="io_uring", rw="randrw", threads=2, qd=8),
            rundoc.make_run(ranks=4, threads=2, phases=["write", "read"]),
            rundoc.interrupted(rundoc.make_run(seed=3)), *rundoc.bs_sweep()]
    for doc in docs:
        assert validate(doc) == "run-1.schema.json"
        assert [p["name"] for p in doc["job"]["phases"]] == [p["name"] for p in doc["phases"]]
    assert docs[3]["phases"][-1]["stop_reason"] == "interrupted"
    assert validate(rundoc.make_sweep()) == "sweep-1.schema.json"
    assert validate(rundoc.make_plan()) == "plan-1.schema.json"


@pytest.mark.parametrize("name", ["engine-null-bs-sweep.json", "store-v1-run.json"])
def test_every_fixture_document_file_validates(name):
    data = json.loads((FIXTURES / name).read_text())
    for doc in data if isinstance(data, list) else [data]:
        validate(doc)


def test_the_document_inside_the_v1_store_fixture_validates():
    con = sqlite3.connect(":memory:")
    con.executescript((FIXTURES / "store-v1.sql").read_text())
    docs = [json.loads(row[0]) for row in con.execute("SELECT document FROM runs")]
    assert docs
    for doc in docs:
        validate(doc)


def test_a_document_of_no_known_schema_and_kind_is_refused_by_name():
    with pytest.raises(DocumentInvalid, match="'storlab.plan/1', 'plan' name no storlab document"):
        schema_file({"schema": "storlab.plan/1", "kind": "plan"})
    with pytest.raises(DocumentInvalid, match="'storlab.run/1', 'sweep'"):
        validate({"schema": "storlab.run/1", "kind": "sweep"})


def test_header_gives_measured_kinds_their_run_fields_and_others_only_identity():
    run = document.header("run", argv=("storlab", "run"))
    assert list(run) == ["schema", "kind", "storlab_version", "run_id", "started_at", "finished_at",
                         "complete", "stop_reason", "error", "argv"]
    assert re.fullmatch(r"[0-9a-f]{32}", run["run_id"]) and run["argv"] == ["storlab", "run"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", run["started_at"])
    assert (run["finished_at"], run["complete"], run["stop_reason"], run["error"]) == (None, True, "done", None)
    assert document.header("sweep", run_id="a" * 32)["run_id"] == "a" * 32
    assert document.header("doctor") == {"schema": "storlab.doctor/1", "kind": "doctor",
                                         "storlab_version": run["storlab_version"]}
    assert document.header("plan", schema=document.plan_schema("perf"))["schema"] == "storlab.plan.perf/1"
    assert document.header("diagnose")["schema"] == "storlab.diagnose/1"
    with pytest.raises(ValueError, match="kind: 'benchmark' is not a document kind; allowed: "):
        document.header("benchmark")
    with pytest.raises(ValueError, match="schema: a plan document needs its schema"):
        document.header("plan")


def test_the_header_and_the_clock_were_copied_into_several_modules():
    """Only storlab/document.py builds a header (version, new run id) or reads the clock for one."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "document.py":
            continue
        text = path.read_text()
        if re.search(r"def _?now_iso\b|[\"']storlab_version[\"']\s*:\s*__version__"
                     r"|[\"']run_id[\"']\s*:\s*uuid\.uuid4", text):
            offenders.append(str(path.relative_to(PACKAGE)))
    assert offenders == []
