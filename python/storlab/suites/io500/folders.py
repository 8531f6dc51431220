"""io500's folders: the data and result folders checked and made before anything is written
(storlab never writes among files it did not make; a missing data folder is made as io500 makes
it, inside an existing folder, and removed at the end), each phase family's folder, and everything
the run made removed at its end, on every rank, also after a rank died."""
from __future__ import annotations

import json
import os
from typing import Any

from ... import _core
from ...devices.safety import TargetRefused, check_write_allowed
from ...errors import TargetError
from ...jobs.io500.translator import Io500Config
from ...measure.ranks import Ranks
from .state import Io500Run

__all__ = ["check_datadir", "open_folders", "make_phase_folders", "clean_up", "emptied", "PROPOSAL_FOLDERS"]

PHASE_FOLDERS = ("ior-easy", "ior-hard", "mdtest-easy", "mdtest-hard")
# the folders of io500's proposals (suites/io500/concurrent.py), made only when they run
PROPOSAL_FOLDERS = ("ior-rnd1MB", "ior-easy-concurrent", "mdworkbench-concurrent")


def check_datadir(datadir: str, timestamped: bool) -> str | None:
    """Why the data folder cannot be used (None when it can), checked before anything is written:
    it must be a writable folder (or one storlab may make: `datadir_to_make`); without a
    timestamp suffix it must be empty (storlab never writes among files it did not make)."""
    if not os.path.exists(datadir):
        return datadir_to_make(datadir)
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


def datadir_to_make(datadir: str) -> str | None:
    """Why storlab may not make the missing data folder `datadir` as io500 makes it (None when it
    may): its parent must be an existing writable folder (storlab makes the last level only, so a
    typo in a path is not built into a tree), and the write-safety gate must allow a file there
    (nothing is made on /dev's file system)."""
    parent = os.path.dirname(os.path.abspath(datadir))
    if not os.path.isdir(parent):
        return (f"datadir {datadir}: does not exist and neither does its parent {parent} (storlab makes the "
                "data folder, as io500 does, only inside an existing folder)")
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"datadir {datadir}: does not exist and its parent {parent} is not writable"
    try:
        check_write_allowed(datadir)
    except TargetRefused as e:
        return f"datadir {datadir}: {e}"
    return None


def _made_by_rank_0(cfg: Io500Config, datadir: str, resultdir: str, stamp: str) -> tuple[str | None, bool]:
    """Rank 0 checks the data folder (making it when missing, as io500 does), makes the result
    folder and the timestamped data folder; (why it could not, or None; whether it made the
    .ini's datadir itself)."""
    base = os.path.abspath(cfg.datadir)
    problem = check_datadir(base, cfg.timestamp_datadir)
    made_base = False
    if problem is None and not os.path.exists(base):
        try:
            os.mkdir(base, 0o700)       # io500's mkdir of the data folder: S_IRWXU
            made_base = True
        except OSError as e:
            problem = f"datadir {cfg.datadir}: cannot be made: {e.strerror}"
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
    if problem is not None and made_base:
        os.rmdir(base)
        made_base = False
    return problem, made_base


def open_folders(cfg: Io500Config, ranks: Ranks, stamp: str) -> tuple[str, str, bool]:
    """(data folder, result folder, whether rank 0 made the .ini's datadir) of the run with
    timestamp `stamp`, ready on every rank; TargetError on every rank when rank 0 found one
    unusable (nothing written then)."""
    datadir = os.path.join(cfg.datadir, stamp) if cfg.timestamp_datadir else cfg.datadir
    resultdir = os.path.join(cfg.resultdir, stamp) if cfg.timestamp_resultdir else cfg.resultdir
    problem, made_base = _made_by_rank_0(cfg, datadir, resultdir, stamp) if ranks.rank == 0 else (None, False)
    problem = ranks.bcast(problem)
    if problem:
        raise TargetError(problem)
    return datadir, resultdir, made_base


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
        for sub in PROPOSAL_FOLDERS:
            d = os.path.join(run.datadir, sub)
            if os.path.isdir(d):
                if rank_lost or sub == "mdworkbench-concurrent":
                    files, dirs = emptied(d, errors, files, dirs)
                dirs += _removed(os.rmdir, d, errors)
        for sub in PHASE_FOLDERS:
            d = os.path.join(run.datadir, sub)
            if run.cfg.easy_unique_dir and sub == "ior-easy" and os.path.isdir(d):
                for r in range(run.size):
                    try:
                        os.rmdir(os.path.join(d, str(r)))
                    except OSError:
                        pass
            if rank_lost:
                files, dirs = emptied(d, errors, files, dirs)
            dirs += _removed(os.rmdir, d, errors)
        bench = run.mdworkbench      # md-workbench's folder, when its delete phase did not empty it
        if bench is not None and bench.made_prefix:
            files, dirs = emptied(bench.prefix, errors, files, dirs)
            dirs += _removed(os.rmdir, bench.prefix, errors)
    return {"files_removed": files, "dirs_removed": dirs, "errors": errors}


def emptied(folder: str, errors: list[str], files: int, dirs: int) -> tuple[int, int]:
    """Remove everything below `folder`, a folder this run made (so all in it is the run's);
    returns the counts `files` and `dirs` plus what it removed."""
    if os.path.isdir(folder):
        for top, subdirs, names in os.walk(folder, topdown=False):
            files += sum(_removed(os.unlink, os.path.join(top, n), errors) for n in names)
            dirs += sum(_removed(os.rmdir, os.path.join(top, n), errors) for n in subdirs)
    return files, dirs


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
