"""`storlab results list|show|compare|export|delete|tag|import`: browse the results store.

Machine output (tables asked for, JSON, CSV, Markdown) goes to standard output; confirmations go to
standard error. Runs are named by run_id or a unique prefix of one; `show`, `compare` and `export`
also take a path to a JSON result file written with `storlab run --json`. Reading actions open the
store read-only and never create it; `delete` and `tag` need it to exist. A store that cannot be
used is one line naming it and what is wrong (store.StoreUnusable), exit code 2.
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
from ..output import EXPORTERS, export, render_table
from ..output.base import align, fmt_number, short_id
from ..output.compare import compare, render_compare
from ..units import format_size
from .main import UsageError
from .outputs import check_destination, write_output

__all__ = ["register", "run", "load_docs"]

MiB = 1 << 20


def _store_option(p: argparse.ArgumentParser, top: bool = False) -> None:
    # accepted before and after the action; the action's parser must not reset a value given
    # before it, hence SUPPRESS there
    p.add_argument("--store", metavar="PATH", default=None if top else argparse.SUPPRESS,
                   help="results database (default: $STORLAB_STORE or ~/.local/share/storlab/results.db)")


def _filter_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tag", help="only runs with this tag")
    p.add_argument("--target", help="only runs on this target path (glob patterns allowed)")
    p.add_argument("--since", help="only runs started at or after this time (2026-11-21, "
                   "2026-11-21T15:00, or an age such as 2h, 7d)")
    p.add_argument("--until", help="only runs started before this time (same forms as --since)")
    p.add_argument("--kind", help="only documents of this kind (run, sweep, meta, scale, plan)")
    p.add_argument("--host", help="only runs on this host")


def register(subparsers) -> None:
    p = subparsers.add_parser("results", help="list, show, compare, export, delete and tag stored runs",
                              description=__doc__.split("\n\n")[0])
    _store_option(p, top=True)
    sub = p.add_subparsers(dest="results_command", metavar="ACTION")
    sub.required = True

    ls = sub.add_parser("list", help="list stored runs, oldest first")
    _store_option(ls)
    _filter_options(ls)
    ls.add_argument("--limit", type=int, metavar="N", help="only the newest N runs")
    ls.add_argument("--json", action="store_true", help="JSON list of run summaries")

    show = sub.add_parser("show", help="show one run: job, environment, results table")
    _store_option(show)
    show.add_argument("run", metavar="RUN", help="run id, unique prefix, or JSON result file")
    show.add_argument("--json", action="store_true", help="print the whole stored document")

    cmp = sub.add_parser("compare", help="runs side by side with ratios to the first; flags "
                         "differences that make them incomparable")
    _store_option(cmp)
    cmp.add_argument("runs", metavar="RUN", nargs="+", help="two or more runs; the first is the baseline")
    cmp.add_argument("--json", action="store_true", help="the comparison as JSON")

    ex = sub.add_parser("export", help="export runs as JSON, CSV or Markdown")
    _store_option(ex)
    ex.add_argument("runs", metavar="RUN", nargs="*", help="runs to export (or select with the filters)")
    _filter_options(ex)
    ex.add_argument("--format", "-f", default="json", choices=list(EXPORTERS),
                    help="output format (default: json)")
    ex.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of standard output")

    rm = sub.add_parser("delete", help="delete runs from the store")
    _store_option(rm)
    rm.add_argument("runs", metavar="RUN", nargs="+")

    tag = sub.add_parser("tag", help="add (or remove) tags and set the note of a run")
    _store_option(tag)
    tag.add_argument("run", metavar="RUN")
    tag.add_argument("tags", metavar="TAG", nargs="*")
    tag.add_argument("--remove", action="store_true", help="remove the given tags instead of adding them")
    tag.add_argument("--note", metavar="TEXT", help="set the run's note ('' removes it)")

    _register_import(sub)

    p.set_defaults(func=run)


# -- helpers shared with `storlab report` --------------------------------------------------------
def load_docs(specs: list[str], store_path: str | None) -> list[dict[str, Any]]:
    """Documents for run ids / prefixes in the store, or JSON result files (one document or a list)."""
    docs: list[dict[str, Any]] = []
    for spec in specs:
        path = Path(spec)
        if path.is_file():
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


def _select(args: argparse.Namespace) -> list[dict[str, Any]]:
    filters = {k: getattr(args, k, None) for k in ("tag", "target", "since", "until", "kind", "host")}
    if args.runs and any(v is not None for v in filters.values()):
        raise UsageError("give either run ids or filters (--tag, --since ...), not both")
    if args.runs:
        return load_docs(args.runs, args.store)
    if not any(v is not None for v in filters.values()):
        raise UsageError("name the runs to export, or select them with --tag, --target, --since ...")
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
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit: must be at least 1, got {args.limit}")
    if args.store is None and not os.environ.get("STORLAB_STORE") and not store.default_path().exists():
        # A new user's first look: the default store appears with the first stored run. A store
        # named with --store or $STORLAB_STORE that does not exist is an error (a typo, likely).
        if args.json:
            print("[]")
        else:
            print(f"no stored runs yet (the default store {store.default_path()} is created by the "
                  "first run)", file=sys.stderr)
        return 0
    runs = store.list_runs(args.store, tag=args.tag, target=args.target, since=args.since,
                           until=args.until, kind=args.kind, host=args.host, limit=args.limit)
    if args.json:
        print(json.dumps(runs, indent=2))
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
        print(json.dumps(doc, indent=2))
        return 0
    meta: dict[str, Any] = {}
    if not Path(args.run).is_file():
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
    if doc.get("phases") is not None:
        lines += ["", render_table(doc)]
    print("\n".join(lines))
    return 0


def _compare(args: argparse.Namespace) -> int:
    if len(args.runs) < 2:
        raise UsageError("compare needs at least two runs")
    cmp = compare(load_docs(args.runs, args.store))
    print(json.dumps(cmp, indent=2) if args.json else render_compare(cmp))
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
def _register_import(sub) -> None:
    imp = sub.add_parser("import", help="store fio JSON, IOR JSON and mdtest results as runs",
                         description="Read result files of other tools and store each as a run beside "
                                     "storlab's own, for `results compare` and `report`: fio JSON "
                                     "(--output-format=json or json+), IOR JSON (-O summaryFormat=JSON) "
                                     "and mdtest's text output. The format is told from the content; "
                                     "importing a file again replaces its run (docs/store.md, Import).")
    _store_option(imp)
    imp.add_argument("files", metavar="FILE", nargs="+", help="result files to import")
    imp.add_argument("--tag", action="append", default=[], metavar="TAG", help="tag the imported runs (repeatable)")
    imp.add_argument("--note", metavar="TEXT", help="free-text note kept with each imported run")


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
        run_id = store.save(doc, path=args.store, tags=["imported", tool, *args.tag], note=args.note)
        src = doc["imported"]["imported_from"]
        print(f"imported {src['tool']} {src['version'] or ''} result {path} as run {short_id(run_id)} "
              f"({len(doc['phases'])} phase(s), kind {doc['kind']})", file=sys.stderr)
    return 2 if failed else 0


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
    return _ACTIONS[args.results_command](args)
