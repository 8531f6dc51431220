"""io500's folders: the data and result folders checked and made before anything is written
(storlab never writes among files it did not make), each phase family's folder, and everything
the run made removed at its end, on every rank, also after a rank died."""
from __future__ import annotations

import json
import os
from typing import Any

from ... import _core
from ...errors import TargetError
from ...jobs.io500.translator import Io500Config
from ...measure.ranks import Ranks
from .state import Io500Run

__all__ = ["check_datadir", "open_folders", "make_phase_folders", "clean_up"]

PHASE_FOLDERS = ("ior-easy", "ior-hard", "mdtest-easy", "mdtest-hard")


def check_datadir(datadir: str, timestamped: bool) -> str | None:
    """Why the data folder cannot be used (None when it can), checked before anything is written:
    it must exist and be a writable folder; without a timestamp suffix it must be empty (storlab
    never writes among files it did not make)."""
    if not os.path.exists(datadir):
        return f"datadir {datadir}: does not exist (make it first; storlab writes only into a folder you made)"
    if not os.path.isdir(datadir):
        return f"datadir {datadir}: not a directory"
    if not os.access(datadir, os.W_OK | os.X_OK):
        return f"datadir {datadir}: not writable"
    if not timestamped:
        try:
            entries = sorted(os.listdir(datadir))
        except OSError as e:
            return f"datadir {datadir}: cannot be read: {e.strerror}"
        if entries:
            shown = ", ".join(entries[:3]) + (f" (+{len(entries) - 3} more)" if len(entries) > 3 else "")
            return (f"datadir {datadir}: holds files storlab did not make ({shown}); give an empty folder "
                    "or set timestamp-datadir = TRUE")
    return None


def _made_by_rank_0(cfg: Io500Config, datadir: str, resultdir: str, stamp: str) -> str | None:
    """Rank 0 checks the data folder, makes the result folder and the timestamped data folder;
    why it could not (None when it could)."""
    problem = check_datadir(os.path.abspath(cfg.datadir), cfg.timestamp_datadir)
    if problem is None and cfg.timestamp_datadir and os.path.exists(datadir):
        problem = f"datadir {datadir}: already exists (another run with timestamp {stamp}?)"
    if problem is None:
        try:
            os.makedirs(resultdir, exist_ok=True)
            if not os.access(resultdir, os.W_OK):
                problem = f"resultdir {resultdir}: not writable"
        except OSError as e:
            problem = f"resultdir {resultdir}: cannot be made: {e.strerror}"
    if problem is None and cfg.timestamp_datadir:
        try:
            os.mkdir(datadir, 0o755)
        except OSError as e:
            problem = f"datadir {datadir}: cannot be made: {e.strerror}"
    return problem


def open_folders(cfg: Io500Config, ranks: Ranks, stamp: str) -> tuple[str, str]:
    """(data folder, result folder) of the run with timestamp `stamp`, ready on every rank;
    TargetError on every rank when rank 0 found one unusable (nothing written then)."""
    datadir = os.path.join(cfg.datadir, stamp) if cfg.timestamp_datadir else cfg.datadir
    resultdir = os.path.join(cfg.resultdir, stamp) if cfg.timestamp_resultdir else cfg.resultdir
    problem = _made_by_rank_0(cfg, datadir, resultdir, stamp) if ranks.rank == 0 else None
    problem = ranks.bcast(problem)
    if problem:
        raise TargetError(problem)
    return datadir, resultdir


def make_phase_folders(run: Io500Run) -> None:
    """Rank 0 makes each family's folder, then every rank its own (ior-easy uniqueDir); a barrier
    between, so no rank writes into a folder not made yet."""
    if run.rank == 0:
        for sub in PHASE_FOLDERS:
            os.makedirs(os.path.join(run.datadir, sub), exist_ok=True)
    run.ranks.barrier()
    if run.cfg.easy_unique_dir:
        os.makedirs(os.path.dirname(run.easy_file(run.rank)), exist_ok=True)


def clean_up(run: Io500Run, rank_lost: bool = False) -> dict[str, Any]:
    """Remove what the run made on this rank (the metadata runs' files, the I/O files), then
    rank 0 the phase folders and the data folder when empty. When a rank died (`rank_lost`)
    rank 0 also removes what that rank left in the phase folders: this run made those
    folders, so everything in them is the run's. Returns what was removed."""
    files = dirs = 0
    errors: list[str] = []

    def clean(kind: str, meta) -> None:
        nonlocal files, dirs
        try:
            rep = json.loads(meta.cleanup())
            files += rep.get("files_removed", 0)
            dirs += rep.get("dirs_removed", 0)
        except _core.CoreError as e:
            errors.append(f"mdtest-{kind}: {e.args[1]}")
        except Exception as e:     # noqa: BLE001 - reported, the rest is still removed
            errors.append(f"mdtest-{kind}: {e}")

    owner = None     # rank 0's first mdtest-hard run owns the shared folder: it goes last
    for kind, runs in list(run.meta.items()):
        for i in reversed(range(len(runs))):
            if kind == "hard" and i == 0 and run.rank == 0:
                owner = runs[0]
                continue
            clean(kind, runs[i])
    run.ranks.settle(1)
    if owner is not None:
        clean("hard", owner)
    files += sum(_removed(os.unlink, path, errors) for path in run.made)
    run.ranks.settle(2)
    if run.rank == 0:
        for sub in PHASE_FOLDERS:
            d = os.path.join(run.datadir, sub)
            if run.cfg.easy_unique_dir and sub == "ior-easy" and os.path.isdir(d):
                for r in range(run.size):
                    try:
                        os.rmdir(os.path.join(d, str(r)))
                    except OSError:
                        pass
            if rank_lost and os.path.isdir(d):
                for top, subdirs, names in os.walk(d, topdown=False):
                    files += sum(_removed(os.unlink, os.path.join(top, n), errors) for n in names)
                    dirs += sum(_removed(os.rmdir, os.path.join(top, n), errors) for n in subdirs)
            dirs += _removed(os.rmdir, d, errors)
    return {"files_removed": files, "dirs_removed": dirs, "errors": errors}


def _removed(remove, path: str, errors: list[str]) -> bool:
    """`remove(path)` (unlink or rmdir): True when it removed it; already gone is no error, any
    other failure is added to `errors` and the clean-up goes on."""
    try:
        remove(path)
        return True
    except FileNotFoundError:
        return False
    except OSError as e:
        errors.append(f"{path}: {e.strerror}")
        return False
