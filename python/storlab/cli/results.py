"""`storlab results list|show|compare|export|delete|tag|import`: browse the results store.

Machine output (tables asked for, JSON, CSV, Markdown) goes to standard output; confirmations go to
standard error. Runs are named by run_id, a unique prefix of one, `last` (the most recent stored
run) or `last~N` (N runs before it, as git's HEAD~N); `show`, `compare` and `export` also take a
path to a JSON result file written with `storlab run --json`. Reading actions open the
store read-only and never create it; `delete` and `tag` need it to exist. A store that cannot be
used is one line naming it and what is wrong (store.StoreUnusable), exit code 2. Flags come from
the option tables in jobs/tables/results.py (reference: docs/options-results.md).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from .. import store
from ..jobs.options import BY_NAME
from ..jobs.tables.results import COMMANDS, RUN_NAMES, STORE, WITH_TAG
from ..output import export, render_table
from ..output.base import align, fmt_number, short_id
from ..output.compare import compare, render_compare
from ..output.files import check_destination, write_output
from ..output.json import write_json
from ..output.views import VIEWS, render
from ..units import format_size
from .main import UsageError
from .options_cli import add_table_arguments, parse_table_args, takes_json_name

__all__ = ["register", "run", "load_docs", "COMMANDS", "WITH_TAG", "RUN_NAMES"]

MiB = 1 << 20


# Filter option -> the store's keyword for it.
FILTER_KEYS = {"with_tag": "tag", "target_glob": "target", "since": "since", "until": "until",
               "kind": "kind", "host": "host"}

def register(subparsers) -> None:
    top, *actions = COMMANDS
    p = subparsers.add_parser("results", help="list, show, compare, export, delete and tag stored runs",
                              description=__doc__.split("\n\n")[0])
    add_table_arguments(p, top.options, command="results")
    sub = p.add_subparsers(dest="results_command", metavar="ACTION")
    sub.required = True
    for table in actions:
        name = table.command.split()[1]
        action = sub.add_parser(name, help=table.summary, description=table.summary)
        # --store is accepted before and after the action; the action's parser must not reset a
        # value given before it (keep_given)
        add_table_arguments(action, (STORE,), command="results", keep_given=True)
        add_table_arguments(action, table.options[1:], command="results", json_takes=takes_json_name)
        action.set_defaults(_results_table=table)
    p.set_defaults(func=run)


# -- helpers shared with `storlab report` --------------------------------------------------------
def load_docs(specs: list[str], store_path: str | None) -> list[dict[str, Any]]:
    """Documents for run ids, prefixes or selectors (last, last~N) in the store, or JSON result
    files (one document or a list). A selector is never read as a file: `./last` is one."""
    docs: list[dict[str, Any]] = []
    for spec in specs:
        path = Path(spec)
        if store.parse_last(spec) is None and path.is_file():
            try:
                data = json.loads(path.read_text())
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
                raise UsageError(f"{spec}: cannot read as a JSON result file ({e})") from None
            items = data if isinstance(data, list) else [data]
            for item in items:
                if not isinstance(item, dict) or "schema" not in item:
                    raise UsageError(f"{spec}: not a storlab result (no 'schema' field)")
            docs.extend(items)
        else:
            docs.append(store.load(spec, store_path))
    return docs


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    """The store's keywords of the selection flags given."""
    return {key: getattr(args, name) for name, key in FILTER_KEYS.items()}


def _select(args: argparse.Namespace) -> list[dict[str, Any]]:
    filters = _filters(args)
    if args.runs and any(v is not None for v in filters.values()):
        raise UsageError("give either run ids or filters (--with-tag, --since ...), not both")
    if args.runs:
        return load_docs(args.runs, args.store)
    if not any(v is not None for v in filters.values()):
        raise UsageError("name the runs to export, or select them with --with-tag, --target-glob, --since ...")
    with store.Store(args.store, write=False) as s:
        return [s.load(r["run_id"]) for r in s.list_runs(**filters)]


def _job_value(key: str, value: Any) -> str:
    opt = BY_NAME.get(key)
    if opt is not None and opt.kind == "size" and isinstance(value, int):
        return format_size(value).replace(" ", "")
    if opt is not None and opt.kind == "duration" and isinstance(value, (int, float)):
        return f"{value:g}s"
    return str(value)


def _mib_s(v: float | None) -> str:
    return fmt_number(None if v is None else v / MiB)


# -- actions -------------------------------------------------------------------------------------
def _list(args: argparse.Namespace) -> int:
    if args.store is None and not os.environ.get("STORLAB_STORE") and not store.default_path().exists():
        # A new user's first look: the default store appears with the first stored run. A store
        # named with --store or $STORLAB_STORE that does not exist is an error (a typo, likely).
        if args.json:
            write_json([], args.json, indent=2)
        else:
            print(f"no stored runs yet (the default store {store.default_path()} is created by the "
                  "first run)", file=sys.stderr)
        return 0
    runs = store.list_runs(args.store, **_filters(args), limit=args.limit)
    if args.json:
        write_json(runs, args.json, indent=2)
        return 0
    if not runs:
        print("no stored runs match", file=sys.stderr)
        return 0
    headers = ["run", "started (UTC)", "kind", "host", "rw", "bs", "engine",
               "read MiB/s (pass mean)", "write MiB/s (pass mean)", "p99 us (worst phase)", "done", "tags", "note"]
    cells = []
    for r in runs:
        p99 = max((v for v in (r["read_lat_p99_ns"], r["write_lat_p99_ns"]) if v is not None),
                  default=None)
        cells.append([short_id(r["run_id"]), (r["started_at"] or "-")[:19], r["kind"],
                      r["host"] or "-", r["rw"] or "-",
                      format_size(r["bs"]).replace(" ", "") if r["bs"] else "-", r["engine"] or "-",
                      _pass_mean(r, "read"), _pass_mean(r, "write"),
                      fmt_number(None if p99 is None else p99 / 1e3),
                      "yes" if r["complete"] else "NO", ",".join(r["tags"]) or "-",
                      (r["note"] or "")[:40]])
    numeric = [h.endswith(("MiB/s", "us", ")")) and h != "started (UTC)" for h in headers]
    print("\n".join(align(headers, cells, numeric)))
    return 0


def _pass_mean(summary: dict[str, Any], direction: str) -> str:
    """The direction's bandwidth as `passes` and `results show` report it: the mean over passes of
    its one phase (a single pass: that phase's own figure). Several phases in one direction (a
    sequential and a random write, say) have no single figure worth a column: `N phases`."""
    phases = summary.get(f"{direction}_phases") or 0
    if phases > 1:
        return f"{phases} phases"
    return _mib_s(summary.get(f"{direction}_bw_bytes_pass_mean"))


def _show(args: argparse.Namespace) -> int:
    (doc,) = load_docs([args.run], args.store)
    if args.json:
        write_json(doc, args.json, indent=2)
        return 0
    meta: dict[str, Any] = {}
    if store.parse_last(args.run) is not None or not Path(args.run).is_file():
        meta = store.summary(doc["run_id"], args.store)
    env, job = doc.get("environment") or {}, doc.get("job") or {}
    lines = [f"run {doc.get('run_id', '-')}  ({doc.get('schema')}, kind {doc.get('kind')})",
             f"started {doc.get('started_at', '-')}  finished {doc.get('finished_at', '-')}  "
             f"complete: {'yes' if doc.get('complete', True) else 'NO (' + str(doc.get('stop_reason')) + ')'}"]
    if meta.get("tags") or meta.get("note"):
        lines.append(f"tags: {', '.join(meta.get('tags') or []) or '-'}  note: {meta.get('note') or '-'}")
    if env:
        lines.append(f"host {env.get('host') or '-'}  kernel {env.get('kernel') or '-'}  {env.get('os') or ''}")
        cpu = f"cpu {env.get('cpu_model')} x{env.get('cpu_count')}" if env.get("cpu_model") else "cpu -"
        mem = f"memory {format_size(env['memory_bytes'])}" if env.get("memory_bytes") else ""
        lines.append(f"{cpu}  {mem}  engine {env.get('engine')}")
        if isinstance(env.get("io_uring"), dict):
            lines.append(_uring_line(env["io_uring"]))
        if env.get("launcher") or env.get("slurm_job_id"):
            lines.append(f"launched by {env.get('launcher') or '-'}  Slurm job {env.get('slurm_job_id') or '-'}")
        for t in env.get("targets") or []:
            size = format_size(t["size_bytes"]) if t.get("size_bytes") is not None else "?"
            lines.append(f"target {t.get('path')}: {t.get('type')}, {size}, fs {t.get('fs_type') or '-'}")
    if job:
        shown = ("rw", "rwmix_read", "bs", "size", "threads", "qd", "engine", "direct", "time",
                 "ramp", "io_size", "fsync_every", "fsync_end", "seed")
        lines.append("job: " + " ".join(f"{k}={_job_value(k, job[k])}" for k in shown
                                        if job.get(k) is not None))
    for w in doc.get("warnings") or []:
        lines.append(f"warning [{w.get('code')}]: {w.get('message')}")
    lines += _imported_lines(doc)
    if doc.get("kind") in VIEWS:        # each kind's own table, as its command printed it
        lines += ["", render(doc)]
    elif doc.get("phases") is not None:
        lines += ["", render_table(doc)]
    print("\n".join(lines))
    return 0


def _compare(args: argparse.Namespace) -> int:
    if len(args.runs) < 2:
        raise UsageError("compare needs at least two runs")
    cmp = compare(load_docs(args.runs, args.store))
    if args.json:
        write_json(cmp, args.json, indent=2)
    else:
        print(render_compare(cmp))
    return 0


def _export(args: argparse.Namespace) -> int:
    check_destination(args.output, "output")
    docs = _select(args)
    if not docs:
        raise UsageError("no stored runs match the filters")
    text = export(docs, args.format)
    if args.output:
        write_output(text, args.output, "output")
        print(f"wrote {len(docs)} run(s) as {args.format} to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _delete(args: argparse.Namespace) -> int:
    deleted = store.delete(args.runs, args.store)
    print(f"deleted {len(deleted)} run(s): {' '.join(short_id(r) for r in deleted)}", file=sys.stderr)
    return 0


def _tag(args: argparse.Namespace) -> int:
    if not args.tags and args.note is None:
        raise UsageError("give tags to add (or --remove them) or a --note")
    with store.Store(args.store, create=False) as s:
        run_id = s.resolve(args.run)
        if args.tags:
            tags = s.remove_tags(run_id, args.tags) if args.remove else s.add_tags(run_id, args.tags)
        else:
            tags = s.tags(run_id)
        if args.note is not None:
            s.set_note(run_id, args.note)
    print(f"run {short_id(run_id)}: tags {', '.join(tags) or '-'}", file=sys.stderr)
    return 0


# -- import: other tools' result files (store/imports.py) ----------------------------------------
def _import(args: argparse.Namespace) -> int:
    """Store every file that reads as a result; one line per file, each bad one named (exit 2)."""
    from ..store.imports import ResultFileError, read_file

    failed = 0
    for path in args.files:
        try:
            doc = read_file(path)
        except ResultFileError as e:
            print(f"storlab results import: error: {e}", file=sys.stderr)
            failed += 1
            continue
        tool = doc["imported"]["imported_from"]["tool"]
        run_id = store.save(doc, path=args.store, tags=["imported", tool, *(args.tag or ())], note=args.note)
        src = doc["imported"]["imported_from"]
        print(f"imported {src['tool']} {src['version'] or ''} result {path} as run {short_id(run_id)} "
              f"({len(doc['phases'])} phase(s), kind {doc['kind']})", file=sys.stderr)
    return 2 if failed else 0


def _uring_line(record: dict[str, Any]) -> str:
    """What io_uring set up: the buffers registered or not, against the mode asked for, and the
    kernel's set-up flags (environment.io_uring)."""
    flags = [str(f) for f in record.get("setup_flags") or []]
    asked = (record.get("requested") or {}).get("uring.fixed_buffers")
    if isinstance(asked, bool):   # recorded as a switch by an earlier release: false meant off
        asked = BY_NAME["uring.fixed_buffers"].aliases[str(asked).lower()]
    buffers = "registered" if record.get("fixed_buffers") else "not registered"
    asked_text = f" (uring.fixed_buffers = {asked})" if asked else ""
    return f"io_uring: buffers {buffers}{asked_text}; set-up flags {' '.join(flags) or '-'}"


def _imported_lines(doc: dict[str, Any]) -> list[str]:
    """`results show`: where an imported run came from and what it lacks."""
    imp = doc.get("imported")
    if not isinstance(imp, dict):
        return []
    src = imp.get("imported_from") or {}
    return [f"imported from {src.get('tool')} {src.get('version') or ''} ({src.get('format')}): {src.get('file')} "
            f"sha256 {str(src.get('sha256'))[:16]}…",
            f"command: {imp.get('command') or '-'}",
            f"latency: {imp.get('latency')}",
            f"not in the file: {', '.join(imp.get('missing') or []) or '-'}"]


_ACTIONS = {"list": _list, "show": _show, "compare": _compare, "export": _export,
            "delete": _delete, "tag": _tag, "import": _import}


def run(args: argparse.Namespace) -> int:
    parse_table_args(args, args._results_table.options)
    check_destination(getattr(args, "json", None), "json")
    return _ACTIONS[args.results_command](args)
