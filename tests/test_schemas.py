"""The versioned JSON Schemas shipped in storlab.schemas validate real documents of each kind."""
from __future__ import annotations

import json
from importlib import resources

import pytest

jsonschema = pytest.importorskip("jsonschema")
referencing = pytest.importorskip("referencing")


def load(name: str) -> dict:
    return json.loads(resources.files("storlab.schemas").joinpath(name).read_text())


def validator(name: str):
    run = load("run-1.schema.json")
    registry = referencing.Registry().with_resource(run["$id"], referencing.Resource.from_contents(run))
    return jsonschema.Draft202012Validator(load(name), registry=registry)


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


def test_a_real_metadata_run_validates_against_run_1(shm_dir):
    from storlab.meta import resolve_meta_options, run_meta

    doc = run_meta(resolve_meta_options({"target": shm_dir, "files": "20", "no_store": True}, None, "job"))
    validator("run-1.schema.json").validate(doc)
