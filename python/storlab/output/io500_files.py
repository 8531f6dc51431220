"""io500's result files from a `storlab io500` document: result.txt (the `[run]` header, one
section per phase with its `score`, the `[SCORE]` section with BW, MD, SCORE and io500's score
hash), result_summary.txt (the `[RESULT]`/`[SCORE ]` lines io500 prints), config-orig.ini and
config.ini, in io500 02091cf's layout, so existing io500 tooling and `io500 CONFIG --verify
result.txt` read them. Also `render_summary`, the lines printed at the end of a run.

The score hash is io500's: its string hash of key and value XORed over `version`, the score of
each scored phase as `%f` prints it, MD, BW and SCORE, and `valid = NO` for an invalid run.
"""
from __future__ import annotations

import os
from typing import Any

from ..jobs.io500.ini import hash_key_value, parse_ini

__all__ = ["score_hash", "extended_hash", "render_result", "render_summary", "proposal_lines", "result_files", "write_result_files",
           "result_lines"]


def _pair(key: str, value: str) -> str:
    return f"{key:<15} = {value}"


def score_hash(doc: dict[str, Any]) -> str:
    """io500's score hash of the document (what `io500 --verify` recomputes from result.txt)."""
    acc = hash_key_value(0, "version", doc["io500"]["version"])
    for p in doc["phases"]:
        if p["group"] and not p.get("optional"):
            acc = hash_key_value(acc, p["name"], f"{p['score']:f}")
    s = doc["score"]
    acc = hash_key_value(acc, "MD", f"{s['MD']:f}")
    acc = hash_key_value(acc, "BW", f"{s['BW']:f}")
    acc = hash_key_value(acc, "SCORE", f"{s['SCORE']:f}")
    if not s["valid"]:
        acc = hash_key_value(acc, "valid", "NO")
    return f"{acc:X}"


def extended_hash(doc: dict[str, Any]) -> str:
    """io500's hash of the extended score ([SCOREX]): the optional phases' scores, then MD, BW and
    SCORE of the extended means, and `valid = NO` for an invalid extended run (no version)."""
    acc = 0
    for p in doc["phases"]:
        if p["group"] and p.get("optional"):
            acc = hash_key_value(acc, p["name"], f"{p['score']:f}")
    x = doc["score"]["extended"]
    for key in ("MD", "BW", "SCORE"):
        acc = hash_key_value(acc, key, f"{x[key]:f}")
    if not x["valid"]:
        acc = hash_key_value(acc, "valid", "NO")
    return f"{acc:X}"


def result_lines(doc: dict[str, Any]) -> list[str]:
    """The `[RESULT]` lines of each phase and the `[SCORE ]` line, as io500 prints them."""
    lines = [f"IO500 version {doc['io500']['version']} ({doc['io500']['mode']})"]
    for p in doc["phases"]:
        tag = "[RESULT]" if p["group"] else "[      ]"
        bad = "" if p["valid"] else " [INVALID]"
        lines.append(f"{tag} {p['name']:>20} {p['score']:>15f} {p['unit']} : time {p['seconds']:.3f} seconds{bad}")
    s = doc["score"]
    bad = "" if s["valid"] else " [INVALID]"
    lines.append(f"[SCORE ] Bandwidth {s['BW']:f} GiB/s : IOPS {s['MD']:f} kiops : TOTAL {s['SCORE']:f}{bad}")
    if "extended" in s:
        x = s["extended"]
        bad = "" if x["valid"] else " [INVALID]"
        lines.append(f"[SCOREX] Bandwidth {x['BW']:f} GiB/s : IOPS {x['MD']:f} kiops : TOTAL {x['SCORE']:f}{bad}")
    return lines


def render_summary(doc: dict[str, Any]) -> str:
    return "\n".join(result_lines(doc)) + "\n"


def proposal_lines(doc: dict[str, Any]) -> list[str]:
    """The proposals as lines of io500's summary table, marked as proposals (for the printed table)."""
    lines = []
    for p in (doc.get("proposals") or {}).get("phases", []):
        if not p["ran"]:
            lines.append(f"[PROPOSAL] {p['name']:>16} not run: {p['reason']}")
            continue
        bad = "" if p["valid"] else " [INVALID]"
        lines.append(f"[PROPOSAL] {p['name']:>16} {p['score']:>15f} {p['unit']} : time {p['seconds']:.3f} seconds"
                     f"{bad} (not in SCORE)")
        for name, part in (p["details"].get("parts") or {}).items():
            if part["procs"]:
                lines.append(f"[PROPOSAL]   {name:>16} {part['score']:>13f} {part['unit']} : {part['procs']} "
                             f"{'processes' if part['procs'] > 1 else 'process'}, time {part.get('seconds', 0.0):.3f} seconds")
    return lines


def render_result(doc: dict[str, Any]) -> str:
    """result.txt."""
    io = doc["io500"]
    out = ["[run]", _pair("procs", str(io["procs"])), _pair("version", io["version"]),
           _pair("config-hash", io["config_hash"]), _pair("result-dir", io["resultdir"]),
           _pair("mode", io["mode"]), f"; START {doc['phases'][0]['t_start'] if doc['phases'] else ''}"]
    out += [f"; ERROR INVALID {m}" for m in io["run_invalid"]]
    out.append("")
    for p in doc["phases"]:
        out += ["", f"[{p['name']}]", _pair("t_start", p["t_start"])]
        out += [_pair(k, v) for k, v in p.get("head", {}).items()]
        if p.get("exe"):
            out.append(_pair("exe", p["exe"]))
        out += [f"; ERROR INVALID {m}" for m in p["invalid"]]
        out += [_pair(k, v) for k, v in p["pairs"].items()]
        if p.get("error"):
            out.append(f"; ERROR {p['error']}")
        out += [f"; ERROR INVALID {m}" for m in p["judged"]]
        if p["name"] != "timestamp":
            out.append(_pair("score", f"{p['score']:f}"))
        out += [_pair("t_delta", f"{p['seconds']:.4f}"), _pair("t_end", p["t_end"])]
    s = doc["score"]
    out += ["", "[SCORE]", _pair("MD", f"{s['MD']:f}"), _pair("BW", f"{s['BW']:f}"),
            _pair("SCORE", f"{s['SCORE']:f}" + ("" if s["valid"] else " [INVALID]")),
            _pair("hash", score_hash(doc))]
    if "extended" in s:
        x = s["extended"]
        out += ["", "[SCOREX]", _pair("MD", f"{x['MD']:f}"), _pair("BW", f"{x['BW']:f}"),
                _pair("SCORE", f"{x['SCORE']:f}" + ("" if x["valid"] else " [INVALID]")), _pair("hash", extended_hash(doc))]
    out.append(f"; END {doc['io500'].get('end', '')}")
    return "\n".join(out) + "\n"


def _effective_ini(text: str) -> str:
    """config.ini: every section and key with its value, as io500 writes it."""
    from ..jobs.io500.ini import SECTIONS

    ini = parse_ini(text)
    lines: list[str] = []
    for section, keys in SECTIONS.items():
        lines.append(f"[{section}]")
        for k in keys:
            raw = ini.values.get((section, k.name), (k.default, 0))[0]
            lines.append(f"{k.name} = {'' if raw is None else raw}")
        lines.append("")
    return "\n".join(lines)


def result_files(doc: dict[str, Any], ini_text: str) -> dict[str, str]:
    """result.txt, result_summary.txt, config-orig.ini and config.ini: each file's path in the
    document's result folder and its text."""
    folder = doc["io500"]["resultdir"]
    files = {"result.txt": render_result(doc), "result_summary.txt": render_summary(doc),
             "config-orig.ini": ini_text, "config.ini": _effective_ini(ini_text)}
    return {os.path.join(folder, name): text for name, text in files.items()}


def write_result_files(doc: dict[str, Any], ini_text: str) -> list[str]:
    """Write result.txt, result_summary.txt, config-orig.ini and config.ini into the document's
    result folder; returns the paths written."""
    written = []
    for path, text in result_files(doc, ini_text).items():
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        written.append(path)
    return written
