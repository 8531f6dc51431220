"""io500's score and validity (src/main.c of io500 02091cf): the checks its main loop makes after
each phase, each group's geometric mean, SCORE = sqrt(BW x MD), and when a run is valid.

Each bandwidth phase scores in GiB/s (bytes / time / 2^30), each metadata phase in kIOPS; BW and
MD are geometric means of the scored phases, skipping a score <= 0 (io500's quirk); the
extended mode's optional phases count only in the extended score ([SCOREX]). Validity:
stonewall-time must equal 300 s (30 s with scc), each write phase must last at least the
stonewall, a score of 0 and errors invalidate; the reasons are io500's words.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from ...jobs.io500.phases import Phase
from ...jobs.io500.translator import Io500Config
from .state import PhaseOutcome

__all__ = ["score_groups", "calc_score", "judge", "score_run"]


def score_groups(phases: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{"MD": {...}, "BW": {...}}: each group's geometric mean over its scores > 0 (io500 skips a
    score <= 0), with the scores used and those skipped."""
    out: dict[str, dict[str, Any]] = {}
    for group in ("MD", "BW"):
        used = [p["score"] for p in phases if p.get("group") == group and p["score"] > 0]
        skipped = [p["name"] for p in phases if p.get("group") == group and not p["score"] > 0]
        mean = math.prod(used) ** (1.0 / len(used)) if used else 0.0
        out[group] = {"score": mean, "used": len(used), "skipped": skipped}
    return out


def calc_score(phases: Sequence[dict[str, Any]], extended: bool = False) -> tuple[float, float, float]:
    """(BW, MD, SCORE) of phase results [{name, group, score}] as io500's calc_score computes them;
    the extended mode's optional phases count only in the extended score ([SCOREX])."""
    g = score_groups([p for p in phases if extended or not p.get("optional")])
    bw, md = g["BW"]["score"], g["MD"]["score"]
    return bw, md, math.sqrt(bw * md)


def judge(out: PhaseOutcome, cfg: Io500Config, dry: bool = False) -> None:
    """io500's main-loop checks after a phase (src/main.c), in its words and order."""
    if out.phase.family == "timestamp":
        return
    verify_stonewall = out.phase.stonewall
    if not dry:
        if verify_stonewall and out.seconds < cfg.stonewall_s:
            out.judged.append(f"Runtime of phase ({out.seconds:f}) is below stonewall time. This shouldn't happen!")
        elif out.score == 0.0:
            out.judged.append("Resulting score shouldn't be 0.0")
    if verify_stonewall and out.seconds < cfg.min_write_s:
        out.judged.append("Runtime is smaller than expected minimum runtime")


def score_run(doc: dict[str, Any], planned: Sequence[Phase], mode: str) -> None:
    """The document's score (and [SCOREX] in extended mode) and the run's validity, from its
    phases and the phases the mode `planned`. A run is valid without run-level reasons, with
    every phase of the standard score done and valid; an optional phase's failure invalidates
    the extended score only, as in io500."""
    phases = doc["phases"]
    done = {p["name"] for p in phases}
    valid = not doc["io500"]["run_invalid"] and all(p["valid"] for p in phases if not p["optional"]) \
        and all(p.name in done for p in planned if not p.optional)
    scored = [p for p in phases if p["group"]]
    bw, md, total = calc_score(scored)
    doc["score"] = {"BW": bw, "MD": md, "SCORE": total, "valid": valid,
                    "groups": score_groups([p for p in phases if not p["optional"]])}
    if mode == "extended":
        xbw, xmd, xtotal = calc_score(scored, extended=True)
        doc["score"]["extended"] = {"BW": xbw, "MD": xmd, "SCORE": xtotal,
                                    "valid": valid and all(p["valid"] for p in phases) and len(done) == len(planned)}
    doc["io500"]["valid"] = valid
