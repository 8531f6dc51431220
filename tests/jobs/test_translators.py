"""The faces every foreign-format translator shares (jobs/translation.py), checked for each format
registered in TRANSLATORS over its fixtures:

(a) translate(FILE) gives a Translation whose job resolves (Translation.resolve());
(b) its to_toml(), written to a file and read back as a storlab TOML job file (what
    `--emit FILE` then `storlab run FILE` does), resolves to the same core_spec for every phase;
(c) record() names the format, the source and its sha256 (the file's), is JSON, fits the run
    document's schema, and has a Mapped entry for each key the source sets (at its line when the
    format has lines);
(d) each bad fixture raises Refusal: one line of at most 200 characters, in the shared wording
    `FORMAT FILE:LINE: KEY = VALUE: REASON`, naming the file, the line (when the format has
    lines), the key and the value, and each further refused key the fixture expects.

How a new format joins:
1. register its translator module in storlab.jobs.translation.TRANSLATORS;
2. put real inputs under tests/fixtures/translators/<format>/good/ (each must translate and run)
   and inputs storlab must refuse under tests/fixtures/translators/<format>/bad/ (or name real
   inputs kept elsewhere, e.g. inside a package, with the row's `inputs`), with
   bad/expected.json: {"FILE": {"key": ..., "value": ..., "line": N or null, "also": [...]}};
3. add its row to FORMATS below: the file pattern of its inputs, whether its keys have lines, and
   a function listing the keys a source file sets as (key, line) pairs, written independently of
   the translator (it is what (c) checks the record against); a format whose job runs with its own
   command (DLIO's workload job) names how an emitted file is read back and what must be equal.
A registered format without a row, or without good and bad fixtures, fails here.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from storlab.jobs.job import core_spec, load_jobfile, resolve_job
from storlab.jobs.translation import HOW, MAX_REFUSAL, TRANSLATORS, Refusal, sha256_of, translator

FIXTURES = Path(__file__).parent.parent / "fixtures" / "translators"


def fio_keys(path: Path) -> list[tuple[str, int | None]]:
    """The `key[=value]` lines of a fio job file under a [section] (comments after ; or #)."""
    keys = []
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = re.split(r"[;#]", raw, maxsplit=1)[0].strip()
        if line and not line.startswith("[") and not line.startswith("include "):
            keys.append((line.partition("=")[0].strip(), n))
    return keys


def ini_keys(path: Path) -> list[tuple[str, int | None]]:
    """The `key = value` lines of an io500 .ini file as `section.key` (comments after # or ;)."""
    keys, section = [], ""
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = re.split(r"[;#]", raw, maxsplit=1)[0].strip()
        if line.startswith("["):
            section = line.strip("[] ")
        elif "=" in line:
            keys.append((f"{section}.{line.partition('=')[0].strip()}", n))
    return keys


def darshan_example_logs() -> Path | None:
    """The real logs inside the pip `darshan` wheel (opened by path: the package's own name lookup
    maps dxt.darshan to another file); None without PyDarshan."""
    try:
        import darshan
    except ImportError:
        return None
    return Path(darshan.__file__).parent / "examples" / "example_logs"


def darshan_inputs(kind: str) -> list[Path]:
    logs = darshan_example_logs()
    if logs is None:
        return []
    names = {"good": ["ior_hdf5_example.darshan", "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan",
                      "dxt.darshan"],
             "bad": []}[kind]
    return [logs / n for n in names if (logs / n).exists()]


def darshan_keys(path: Path) -> list[tuple[str, int | None]]:
    """The rank count and every module a Darshan log holds (read with PyDarshan, not the translator)."""
    import darshan

    report = darshan.DarshanReport(str(path), read_all=False)
    return [("job.nprocs", None)] + [(m.replace("-", ""), None) for m in report.modules]


def dlio_configs() -> Path | None:
    """DLIO's own workload YAMLs (the dlio-benchmark wheel's configs/workload/, which scripts/test.sh
    downloads and names in STORLAB_DLIO_CONFIGS); None when they are not here."""
    folder = os.environ.get("STORLAB_DLIO_CONFIGS")
    return Path(folder) if folder and Path(folder).is_dir() else None


def dlio_inputs(kind: str) -> list[Path]:
    folder = dlio_configs()
    names = {"good": ["unet3d_h100.yaml", "resnet50_h100.yaml", "cosmoflow_a100.yaml", "dlrm.yaml", "default.yaml"],
             "bad": ["megatron_deepspeed.yaml"]}[kind]
    return [folder / n for n in names if (folder / n).exists()] if folder else []


def yaml_keys(path: Path) -> list[tuple[str, int | None]]:
    """The leaf keys of a DLIO workload YAML as dotted paths with their lines (read by PyYAML's
    node tree, not the translator)."""
    import yaml

    keys: list[tuple[str, int | None]] = []

    def walk(node, prefix: str) -> None:
        for k, v in node.value:
            name = f"{prefix}{k.value}"
            if isinstance(v, yaml.MappingNode):
                walk(v, name + ".")
            else:
                keys.append((name, k.start_mark.line + 1))

    root = yaml.compose(path.read_text())
    if isinstance(root, yaml.MappingNode):
        walk(root, "")
    return keys


def load_job(path: Path):
    """An emitted storlab job file as `storlab run FILE` resolves it."""
    return resolve_job({}, load_jobfile(str(path)), jobfile_name=str(path))


def job_phases(job) -> list:
    return [core_spec(p) for p in job.phases]


def load_workload(path: Path):
    """An emitted workload job as `storlab workload FILE.toml` reads it."""
    from storlab.jobs.tomlfile import read_toml
    from storlab.jobs.workload import spec_from_table

    return spec_from_table(read_toml(str(path), "workload file"), source=path.name)


def workload_table(spec) -> dict:
    return spec.to_table()


@dataclass(frozen=True)
class Format:
    pattern: str                                             # the inputs among the fixtures
    has_lines: bool                                          # refusals and Mapped entries carry a line
    source_keys: Callable[[Path], list[tuple[str, int | None]]]
    # real inputs kept outside the fixtures (e.g. inside a package), by kind "good"/"bad"
    inputs: Callable[[str], list[Path]] = lambda kind: []
    # why those outside inputs are not on this machine (the format's tests skip with it), or None
    unavailable: Callable[[], str | None] = lambda: None
    # what runs an emitted file (`storlab run FILE`, or the format's own command) and the part of
    # the resolved job that must be equal
    load_emitted: Callable[[Path], object] = load_job
    comparable: Callable[[object], object] = job_phases


FORMATS: dict[str, Format] = {
    "fio": Format("*.fio", True, fio_keys),
    "darshan": Format("*.darshan", False, darshan_keys, darshan_inputs),
    "io500": Format("*.ini", True, ini_keys),
    "dlio": Format("*.yaml", True, yaml_keys, dlio_inputs,
                   lambda: None if dlio_configs() else "DLIO's workload YAMLs are not here: set STORLAB_DLIO_CONFIGS "
                                                       "(scripts/test.sh downloads the dlio-benchmark wheel)",
                   load_workload, workload_table),
}


def _fixtures(kind: str) -> list[tuple[str, Path]]:
    return [(fmt, p) for fmt in sorted(TRANSLATORS) if fmt in FORMATS
            for p in sorted((FIXTURES / fmt / kind).glob(FORMATS[fmt].pattern)) + FORMATS[fmt].inputs(kind)]


GOOD = _fixtures("good")
BAD = _fixtures("bad")


def _ids(cases):
    return [f"{fmt}/{p.name}" for fmt, p in cases]


@pytest.mark.parametrize("fmt", sorted(TRANSLATORS))
def test_every_registered_format_has_a_row_and_fixtures(fmt):
    assert fmt in FORMATS, f"add {fmt!r} to FORMATS in {__file__}"
    assert translator(fmt).FORMAT == fmt
    if FORMATS[fmt].unavailable():
        pytest.skip(FORMATS[fmt].unavailable())
    assert any(f == fmt for f, _ in GOOD), f"no good fixtures in {FIXTURES / fmt / 'good'}"
    assert any(f == fmt for f, _ in BAD), f"no bad fixtures in {FIXTURES / fmt / 'bad'}"


@pytest.mark.parametrize("fmt, path", GOOD, ids=_ids(GOOD))
def test_translation_resolves_and_its_emitted_toml_is_the_same_job(fmt, path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)            # a default target (replay's storlab-replay/) lands here
    tr = translator(fmt).translate(str(path))
    assert tr.format == fmt
    assert FORMATS[fmt].comparable(tr.resolve())                        # (a)
    emitted = tmp_path / "emitted.toml"                                 # (b)
    tr.emit(str(emitted))      # a translator may place files the job names beside it (replay's iologs)
    job = tr.resolve()
    row = FORMATS[fmt]
    again = row.load_emitted(emitted)
    assert row.comparable(again) == row.comparable(job)
    if row.load_emitted is load_job:
        run_keys = [k for k in tr.job if k in job.run]    # top-level engine options are in core_spec above
        assert {k: again.run[k] for k in run_keys} == {k: job.run[k] for k in run_keys}
    assert emitted.read_text().startswith(f"# storlab job translated from {fmt} {path.name}\n")


@pytest.mark.parametrize("fmt, path", GOOD, ids=_ids(GOOD))
def test_record_names_the_source_its_hash_and_every_key(fmt, path):
    tr = translator(fmt).translate(str(path))
    rec = json.loads(json.dumps(tr.record()))                           # (c) plain JSON
    assert (rec["format"], rec["source"], rec["sha256"]) == (fmt, str(path), sha256_of(path))
    assert all(m["how"] in HOW for m in rec["mapped"])
    recorded = {(m["key"], m["line"]) for m in rec["mapped"]}
    for key, line in FORMATS[fmt].source_keys(path):
        if FORMATS[fmt].has_lines:
            assert (key, line) in recorded, f"{path.name}: {key} (line {line}) has no Mapped entry"
        else:   # a key without lines may stand for a group of counters: "MPIIO" for "MPIIO_COLL_*"
            assert any(k == key or k.startswith((key + " ", key + "_")) for k, _ in recorded), \
                f"{path.name}: {key} has no Mapped entry"
    assert all(isinstance(n, str) and "\n" not in n for n in rec["notes"])


FIRST_GOOD = [next(c for c in GOOD if c[0] == fmt) for fmt in dict.fromkeys(f for f, _ in GOOD)]


@pytest.mark.parametrize("fmt, path", FIRST_GOOD, ids=_ids(FIRST_GOOD))
def test_record_fits_the_run_documents_schema(fmt, path):
    jsonschema = pytest.importorskip("jsonschema")
    from storlab.schemas import load

    schema = load("run-1.schema.json")["properties"]["translation"]
    jsonschema.validate(translator(fmt).translate(str(path)).record(), schema)


def _expected(fmt: str, path: Path) -> dict:
    table = json.loads((FIXTURES / fmt / "bad" / "expected.json").read_text())
    assert path.name in table, f"{path.name}: add what it refuses to {fmt}/bad/expected.json"
    return table[path.name]


@pytest.mark.parametrize("fmt, path", BAD, ids=_ids(BAD))
def test_bad_input_is_one_refusal_line_naming_file_line_key_and_value(fmt, path):
    want = _expected(fmt, path)
    with pytest.raises(Refusal) as e:                                   # (d)
        translator(fmt).translate(str(path))
    msg = str(e.value)
    assert "\n" not in msg and len(msg) <= MAX_REFUSAL, msg
    where = f"{path.name}:{want['line']}" if FORMATS[fmt].has_lines else path.name
    value = f" = {want['value']}" if want.get("value") not in (None, "") else ""
    assert msg.startswith(f"{fmt} {where}: {want['key']}{value}: "), msg
    assert (e.value.key, e.value.line) == (want["key"], want["line"] if FORMATS[fmt].has_lines else None)
    for other in want.get("also", ()):
        # a further key may carry where it is ("reader.x (line 19)")
        assert any(m == other or m.startswith(other + " (") for m in e.value.more), msg
        assert re.search(rf"; also: .*\b{re.escape(other)}(?![\w.])", msg), msg
