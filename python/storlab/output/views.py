"""What each kind of result document looks like once its command has run: the registry the emit
step (output/emit.py) reads, after hyperfine's export manager (src/export/mod.rs), which holds one
exporter per format and calls each once at the end.

A `View` holds, for one kind: its table (printed after the run, and by `storlab results show`),
the files a flag asks for beside --json (`--fio-json`, `--csv`, `-o`), the files the document
itself names (io500's result folder), the lines it adds on stderr (warnings, notes) and its checks
(what fails the command although the run ended: a block that did not verify, an unfinished
clean-up). `VIEWS` maps each kind to its view; a command may show its document another way:
`storlab replay` its fidelity table (`VIEWS["replay"]`), `storlab fio` fio's report (`fio_view`).
Renderers are imported when a document is shown, so a run loads only its own.
"""
from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

__all__ = ["Export", "View", "VIEWS", "JSON", "json_text", "view_of", "render", "fio_view", "warning_lines"]

Doc = dict[str, Any]


def json_text(value: Any, destination: str) -> str:
    """JSON as storlab writes it: compact on standard output ('-'), one space per level in a file."""
    return json.dumps(value, indent=None if destination == "-" else 1) + "\n"


@dataclass(frozen=True)
class Export:
    """A file a flag asks for (hyperfine's `Exporter`): `serialize(doc)` gives its content, text,
    or a value written as JSON when `as_json`."""
    serialize: Callable[[Doc], Any]
    as_json: bool = False
    allow_stdout: bool = True

    def text(self, doc: Doc, destination: str) -> str:
        content = self.serialize(doc)
        return json_text(content, destination) if self.as_json else content


def _lazy(module: str, name: str) -> Callable[..., Any]:
    """output/<module>.py's `name`, imported when first called: a command loads the renderers of
    what it shows and no others (tests/test_cli_main.py: a run loads no metadata table)."""
    def call(*args: Any) -> Any:
        return getattr(importlib.import_module(f"{__package__}.{module}"), name)(*args)
    return call


JSON = Export(lambda doc: doc, as_json=True)      # --json: the document itself


def _nothing(*_: Any) -> list:
    return []


def warning_lines(doc: Doc) -> list[str]:
    """The document's warnings, one line each."""
    return [f"warning: {w['message']}" for w in doc.get("warnings") or []]


@dataclass(frozen=True)
class View:
    """How the emit step shows one kind of document (see the module's doc)."""
    table: Callable[[Doc], str]                                      # no trailing newline
    exports: Mapping[str, Export] = field(default_factory=dict)     # settings key -> file
    files: Callable[[Doc], list[tuple[str, str]]] = _nothing          # (path, text) the document names
    files_option: str = "file"                                       # how a failed one is named
    notices: Callable[[Doc], list[str]] = warning_lines              # stderr lines after the table
    checks: Callable[[Doc, str], list[str]] = _nothing               # (doc, command) -> what failed
    kept: str = "partial results kept"                               # what an interrupted run keeps


# -- what the registry's views hold beyond a renderer ---------------------------------------------
def _io500_table(doc: Doc) -> str:
    """io500's summary lines and, as io500 ends, where its result files are."""
    from .io500_files import proposal_lines, render_summary

    proposals = "".join(line + "\n" for line in proposal_lines(doc))
    return (f"{render_summary(doc)}{proposals}\nThe result files are stored in the directory: "
            f"{doc['io500']['resultdir']}")


def _io500_files(doc: Doc) -> list[tuple[str, str]]:
    """io500's result files (output/io500_files.py), read from the .ini the run was given, and
    the document itself as storlab-io500.json, all in the run's result folder."""
    from .io500_files import result_files

    with open(doc["translation"]["source"], encoding="utf-8", errors="replace") as f:
        ini_text = f.read()
    own = os.path.join(doc["io500"]["resultdir"], "storlab-io500.json")
    return [*result_files(doc, ini_text).items(), (own, json_text(doc, own))]


# -- notices -------------------------------------------------------------------------------------
def _run_notices(doc: Doc) -> list[str]:
    """Warnings, then what a translated job (--fio) does differently from its source."""
    notes = (doc.get("translation") or {}).get("notes") or []
    return warning_lines(doc) + [f"storlab: {note}" for note in notes]


def _sweep_notices(doc: Doc) -> list[str]:
    """Each warning of the points once, with how many points gave it and the first of them."""
    from ..measure.sweep import point_label

    n_points = sum(1 for p in doc["points"] if p.get("run_id"))
    lines = []
    for w in doc["warnings"]:
        where = "every point" if len(w["points"]) == n_points else f"{len(w['points'])} of {n_points} points"
        first = next((p for p in doc["points"] if p["index"] == w["points"][0]), None)
        at = f"; first at {point_label(first['params'])}" if first and len(w["points"]) > 1 else ""
        lines.append(f"warning ({where}{at}): {w['message']}")
    return lines


# -- checks --------------------------------------------------------------------------------------
def _verification(doc: Doc, command: str) -> list[str]:
    """Blocks that did not verify (the first ones in full) and blocks read with another block
    size than they were written with: any of them fails the command."""
    lines = []
    for phase in doc["phases"]:
        v = phase.get("verify")
        if not v:
            continue
        if v["mismatches"]:
            lines.append(f"storlab {command}: verification failed in {phase['name']}: {v['mismatches']} of "
                         f"{v['checked_blocks']} blocks ({v['kind']})")
            lines += [f"  {m['target']} offset {m['offset']}: {_mismatch_text(m)}" for m in v["first"]]
            if v["mismatches"] > len(v["first"]):
                lines.append(f"  ... and {v['mismatches'] - len(v['first'])} more")
        if v.get("bs_mismatches"):
            m = v["first_bs_mismatch"]
            lines.append(f"storlab {command}: {phase['name']}: {v['bs_mismatches']} of {v['checked_blocks']} "
                         f"blocks could not be verified: {m['message']} (first at {m['target']} offset "
                         f"{m['offset']}); read with the block size the data was written with")
    return lines


def _mismatch_text(m: Doc) -> str:
    """One mismatch in words (documents from before `message` existed are spelled out here)."""
    if m.get("message"):
        return m["message"]
    where = f" at byte {m['first_bad_byte']} of the block" if m.get("first_bad_byte") is not None else ""
    return f"{m['field']} expected {m['expected']}, found {m['found']}{where}"


def _cleanup(doc: Doc, command: str) -> list[str]:
    """What the run made and could not remove (meta: `error`; io500: `errors`, one per rank)."""
    cleanup = doc.get("cleanup") or {}
    errors = cleanup.get("errors") or ([cleanup["error"]] if cleanup.get("error") else [])
    return [f"storlab {command}: error: clean-up incomplete: {'; '.join(errors)}"] if errors else []


# -- the registry --------------------------------------------------------------------------------
VIEWS: dict[str, View] = {
    "run": View(_lazy("table", "render_table"), notices=_run_notices, checks=_verification,
                exports={"fio_json": Export(_lazy("fiojson", "fio_json"), as_json=True, allow_stdout=False)}),
    "meta": View(_lazy("meta_table", "render_table"), checks=_cleanup),
    "scale": View(_lazy("mpi_summary", "render_scale")),
    "sweep": View(_lazy("sweep_table", "render_table"), exports={"csv": Export(_lazy("sweep_table", "to_csv"))},
                  notices=_sweep_notices, kept="the points done are kept"),
    "io500": View(_io500_table, files=_io500_files, files_option="result files", checks=_cleanup,
                  kept="the phases done are scored and kept"),
    "workload": View(_lazy("workload", "render_workload")),
    "diagnose": View(_lazy("diagnose", "render_table"), exports={"output": Export(_lazy("diagnose", "build_html"))},
                     kept="the layers measured so far are kept"),
    "net": View(_lazy("net_table", "render_net")),
    "kvcache": View(_lazy("kvcache_table", "render_kvcache"), kept="the trials done are kept"),
    # not a kind: how `storlab replay` shows its run document. Its warnings stay in the document:
    # they are a run's advice (--time, --size, --direct), and a replay's sizes are the log's.
    "replay": View(_lazy("replay_table", "render_replay"), notices=_nothing),
}


def fio_view(plan, output_format: str) -> View:
    """How `storlab fio` shows its run document: fio's report in `output_format` (normal, terse or
    json; output/fioview.py) of the fio `plan` that ran, and the log files its jobs asked for."""
    from .fioview import RENDERERS, log_files

    renderer = RENDERERS[output_format]
    return View(lambda doc: renderer(doc, plan).removesuffix("\n"), files=lambda doc: log_files(doc, plan),
                files_option="log", checks=_verification)


def view_of(doc: Doc) -> View:
    """The view of a document's kind (a document of no known kind is shown as a run)."""
    return VIEWS.get(doc.get("kind") or "run", VIEWS["run"])


def render(doc: Doc) -> str:
    """The table of any result document (no trailing newline)."""
    return view_of(doc).table(doc)
