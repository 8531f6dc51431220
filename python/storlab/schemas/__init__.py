"""JSON Schemas of storlab result documents, one file per kind (docs/result-format.md), and the
lookup of the schema that a document's `schema` and `kind` name.

Validation needs the `jsonschema` package (a test dependency, not a runtime one): `validator`
and `validate` import it when called.
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

__all__ = ["SCHEMA_FILES", "schema_file", "load", "validator", "validate", "DocumentInvalid"]

# Schema file of each (schema, kind); the kinds sharing storlab.run/1 each have their own file,
# which builds on run-1.
SCHEMA_FILES = {
    ("storlab.run/1", "run"): "run-1.schema.json",
    ("storlab.run/1", "meta"): "meta-1.schema.json",
    ("storlab.run/1", "scale"): "scale-1.schema.json",
    ("storlab.sweep/1", "sweep"): "sweep-1.schema.json",
    ("storlab.doctor/1", "doctor"): "doctor-1.schema.json",
    ("storlab.diagnose/1", "diagnose"): "diagnose-1.schema.json",
    ("storlab.io500/1", "io500"): "io500-1.schema.json",
    ("storlab.workload/1", "workload"): "workload-1.schema.json",
    ("storlab.net/1", "net"): "net-1.schema.json",
    ("storlab.kvcache/1", "kvcache"): "kvcache-1.schema.json",
    **{(f"storlab.plan.{c}/1", "plan"): "plan-1.schema.json"
       for c in ("geometry", "reliability", "perf", "recommend", "script", "profile")},
}


class DocumentInvalid(ValueError):
    """A document that no schema covers, or that breaks its schema."""


def schema_file(doc: Mapping[str, Any]) -> str:
    """The schema file for a document, from its `schema` and `kind`."""
    key = (doc.get("schema"), doc.get("kind"))
    try:
        return SCHEMA_FILES[key]
    except KeyError:
        known = ", ".join(f"{s} kind {k}" for s, k in SCHEMA_FILES)
        raise DocumentInvalid(f"schema, kind: {key[0]!r}, {key[1]!r} name no storlab document; "
                              f"allowed: {known}") from None


@lru_cache(maxsize=None)
def load(name: str) -> dict[str, Any]:
    """The parsed schema file `name` (e.g. run-1.schema.json)."""
    return json.loads(resources.files(__name__).joinpath(name).read_text())


@lru_cache(maxsize=None)
def validator(name: str):
    """A Draft 2020-12 validator for schema file `name`, resolving the other files by $ref."""
    import jsonschema
    import referencing

    names = sorted({*SCHEMA_FILES.values()})
    registry = referencing.Registry().with_resources(
        (load(n)["$id"], referencing.Resource.from_contents(load(n))) for n in names)
    return jsonschema.Draft202012Validator(load(name), registry=registry)


def validate(doc: Mapping[str, Any]) -> str:
    """Check a document against its schema; returns the schema file, raises DocumentInvalid
    naming the first error's place in the document."""
    name = schema_file(doc)
    error = next(iter(sorted(validator(name).iter_errors(doc), key=lambda e: list(e.absolute_path))), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(document)"
        raise DocumentInvalid(f"{name}: at {where}: {error.message[:300]}")
    return name
