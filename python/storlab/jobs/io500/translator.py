"""io500 .ini files as storlab jobs: io500's phases with io500's parameters.

`translate(path)` reads the .ini as io500 does (ini.py) and returns a `Translation` whose job holds
one storlab phase per io500 phase, in io500's order, with the exact parameters io500 hands IOR,
mdtest and pfind (src/phase_*.c of io500 02091cf):

- ior-easy-write/read: a file per rank (`files = "per_thread"`: ior_file_easy.N), transfers of
  transferSize (2 MiB), blockSize per rank, fsync at close (IOR -e); read back as IOR -C -Q 1
  places it (one node further; on one node by the writing rank itself);
- mdtest-easy: n empty files per rank, each rank in its own folder (mdtest -u -L -F);
- ior-hard-write/read: one shared file, 47,008-byte transfers and blocks,
  segmentCount segments interleaved over the ranks (IOR -t 47008 -b 47008 -s N), fsync at close;
- mdtest-hard: n files of 3,901 bytes per rank in one shared folder (mdtest -w 3901 -e 3901);
- find: names matching *01*, size 3901c, newer than the timestamp file;
- ior-rnd4K-easy-read: 4 KiB random reads of the ior-easy files (IOR -C -Q 2).

The write phases are time-limited by the stonewall ([debug] stonewall-time). `storlab io500`
runs these phases itself (suites/io500/): it interleaves the two mdtest runs in io500's
order, carries the stonewall counts to the reads (wear-out), runs find, and scores. The emitted
TOML runs each mdtest's file phases back to back in one `type = "meta"` phase instead.

A key storlab cannot honour is refused in one line (Refusal); keys that change nothing storlab
measures are accepted with the reason; io500's own defaults are recorded as `chosen`.
"""
from __future__ import annotations

import math
import os
import re
from typing import Any

from ...units import MAX_BYTES, MAX_COUNT, MAX_DURATION_S, format_size
from ..translation import Mapped, Refusal, Translation, sha256_of
from .ini import PROPOSAL_SECTIONS, SECTIONS, IniError, IniFile, config_hash, keys_of, parse_ini
from .phases import BY_NAME, extended_sections, phases_of

__all__ = ["FORMAT", "translate", "translate_text", "ior_size", "Io500Config", "mdworkbench_command", "IO500_VERSION",
           "io500_command", "config_from_ini", "STONEWALL_RULE_S", "STONEWALL_SCC_S", "HARD_XFER",
           "HARD_FILE_SIZE", "RND4K", "MDW_SETS", "MDW_OFFSET", "MDW_ITERATIONS"]

FORMAT = "io500"
# The version io500 02091cf is built with (shared/peers/build-io500.sh defines VERSION so): its
# verifier (`io500 CONFIG --verify result.txt`) warns when result.txt's `version` line differs,
# and the score hash includes that line. storlab's own version is in the document (storlab_version).
IO500_VERSION = "io500-02091cf"
STONEWALL_RULE_S = 300          # io500's rule: every write phase runs at least this long
STONEWALL_SCC_S = 30            # the Student Cluster Competition's
HARD_XFER = 47008               # ior-hard transfer and block size
HARD_FILE_SIZE = 3901           # mdtest-hard file size, find's -size 3901c
RND4K = 4096
MDW_SETS = 10                   # md-workbench as io500 runs it: -D=10 sets per rank,
MDW_OFFSET = 1                  # -O=1 between writer and reader,
MDW_ITERATIONS = 2              # mdworkbench-bench's -R=2


_SIZE = re.compile(r"^\s*([0-9]+)\s*([kKmMgGtTpP]?)\s*$")


def ior_size(text: str) -> int:
    """A size as IOR reads it: digits with an optional k, m, g, t, p (powers of 1024)."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a size (digits with an optional k/m/g/t/p)")
    return int(m.group(1)) * 1024 ** " kmgtp".index((m.group(2) or " ").lower())


class Io500Config:
    """The settings of one io500 run, typed, as the suite (suites/io500/) needs them."""

    def __init__(self, ini: IniFile, source: str) -> None:
        self.ini, self.source = ini, source
        g = lambda k: ini.get("global", k)  # noqa: E731
        self.datadir: str = g("datadir")
        self.resultdir: str = g("resultdir")
        self.timestamp_datadir: bool = g("timestamp-datadir")
        self.timestamp_resultdir: bool = g("timestamp-resultdir")
        self.scc: bool = g("scc")
        self.drop_caches: bool = g("drop-caches")
        self.drop_caches_cmd: str = g("drop-caches-cmd")
        self.data_packet_type: str = g("dataPacketType")
        sw = ini.get("debug", "stonewall-time")
        self.stonewall_s: int = STONEWALL_RULE_S if sw is None else sw
        self.min_write_s: int = STONEWALL_SCC_S if self.scc else STONEWALL_RULE_S
        self.easy_xfer: int = ior_size(ini.get("ior-easy", "transferSize"))
        self.easy_block: int = ior_size(ini.get("ior-easy", "blockSize"))
        self.easy_file_per_proc: bool = ini.get("ior-easy", "filePerProc")
        self.easy_unique_dir: bool = ini.get("ior-easy", "uniqueDir")
        self.hard_segments: int = ini.get("ior-hard", "segmentCount")
        self.md_easy_n: int = ini.get("mdtest-easy", "n")
        self.md_hard_n: int = ini.get("mdtest-hard", "n")
        self.find_nproc: int | None = ini.get("find", "nproc")
        # md-workbench's sizes (both set, or neither: then derived from mdtest-easy-write's rate)
        self.mdw_waiting: float = ini.get("mdworkbench", "waitingTime")
        self.mdw_precreate: int | None = ini.get("mdworkbench", "precreatePerSet")
        self.mdw_files: int | None = ini.get("mdworkbench", "filesPerProc")
        # io500 always verifies what it reads back (IOR -R on ior-easy/hard-read, mdtest -X on
        # mdtest-hard-read); no key of its .ini turns that off
        self.verify_reads: bool = True
        # io500's proposed concurrent phase (PROPOSAL_SECTIONS; extended mode, reported apart)
        self.rnd1mb_block: int = ini.get("ior-rnd1MB", "blockSize")
        self.rnd1mb_segments: int = ini.get("ior-rnd1MB", "segmentCount")
        self.concurrent_ratio_write: float = ini.get("concurrent", "ratio-write")
        self.concurrent_ratio_read: float = ini.get("concurrent", "ratio-read")
        self.config_hash: str = config_hash(ini)

    def runs(self, phase: str) -> bool:
        """Whether io500 runs this phase (its `run` and its parent section's `run`)."""
        if phase == "timestamp":
            return True
        if phase == "concurrent":
            return bool(self.ini.get("concurrent", "run"))
        if phase == "ior-rnd1MB-write":
            return bool(self.ini.get("ior-rnd1MB", "run")) and bool(self.ini.get("ior-rnd1MB-write", "run"))
        own = self.ini.get(phase, "run")
        parent = BY_NAME[phase].parent
        return bool(own) and (parent is None or bool(self.ini.get(parent, "run")))


def translate(path: str, **_: Any) -> Translation:
    """The io500 .ini at `path` as a storlab job (Refusal for what storlab cannot honour)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise Refusal(FORMAT, path, None, "file", path, e.strerror or str(e)) from None
    return translate_text(data.decode("utf-8", errors="replace"), path, sha256_of(data))


# Bounds of the values io500 takes as any integer: the run table's (a duration of at most 10
# years, counts up to 10^15, sizes up to 1 EiB), checked before anything is derived from them
_SIZE_KEYS = (("ior-easy", "transferSize"), ("ior-easy", "blockSize"))


def _check_bounds(ini: IniFile, source: str) -> None:
    """Refuse, in one line naming the key, a value no run can honour: a size IOR cannot read, zero
    or beyond MAX_BYTES, a count beyond MAX_COUNT, a stonewall beyond MAX_DURATION_S."""
    for (section, key), (value, line) in sorted(ini.values.items(), key=lambda kv: kv[1][1]):
        spec = next(k for k in keys_of(section) if k.name == key)
        reason = None
        if (section, key) in _SIZE_KEYS:
            try:
                size = ior_size(value)
            except ValueError as e:
                reason = str(e)
            else:
                if not 0 < size <= MAX_BYTES:
                    reason = f"must be from 1 byte to {format_size(MAX_BYTES)}"
        elif (section, key) == ("debug", "stonewall-time"):
            if not 1 <= int(value) <= MAX_DURATION_S:
                reason = f"must be from 1 to {int(MAX_DURATION_S)} seconds (10 years)"
        elif spec.type in ("int", "uint", "uint64") and abs(int(value)) > MAX_COUNT:
            reason = f"is out of range; allowed: at most {MAX_COUNT:.0e}"
        elif spec.type == "float" and not math.isfinite(float(value)):
            reason = "must be a finite number"
        if reason:
            raise Refusal(FORMAT, source, line, f"{section}.{key}", value, reason)


def _check_mdworkbench_sizes(ini: IniFile, source: str) -> None:
    """io500's validate of [mdworkbench]: precreatePerSet and filesPerProc are set together or not
    at all (io500 stops with a FATAL otherwise)."""
    given = [k for k in ("precreatePerSet", "filesPerProc") if ini.is_set("mdworkbench", k)]
    if len(given) == 1:
        key = given[0]
        raise Refusal(FORMAT, source, ini.line("mdworkbench", key), f"mdworkbench.{key}",
                      ini.values[("mdworkbench", key)][0],
                      "set both filesPerProc and precreatePerSet or neither (as io500 requires)")


def config_from_ini(text: str, source: str) -> Io500Config:
    try:
        ini = parse_ini(text)
    except IniError as e:
        raise Refusal(FORMAT, source, e.line, e.key, e.value, e.reason) from None
    _check_bounds(ini, source)
    _check_mdworkbench_sizes(ini, source)
    return Io500Config(ini, source)


def translate_text(text: str, source: str = "<text>", sha256: str | None = None) -> Translation:
    cfg = config_from_ini(text, source)
    ini = cfg.ini
    mapped: list[Mapped] = []
    notes: list[str] = []
    refused: list[tuple[int | None, str, Any, str]] = []

    def refuse(section: str, key: str, reason: str) -> None:
        refused.append((ini.line(section, key), f"{section}.{key}", ini.values[(section, key)][0], reason))

    def record(section: str, key: str, storlab: str, how: str = "translated", note: str = "") -> None:
        set_here = ini.is_set(section, key)
        value = ini.get(section, key)
        if not set_here:
            how, note = "chosen", (note or "io500's default")
        mapped.append(Mapped(f"{section}.{key}", value, storlab, how, ini.line(section, key), note))

    # -- what storlab cannot honour --------------------------------------------------------------
    for (section, key), (value, _line) in sorted(ini.values.items(), key=lambda kv: kv[1][1]):
        low = key.lower()
        if low == "api" and value.split()[0].upper() != "POSIX":
            refuse(section, key, "storlab does POSIX I/O only (IOR/mdtest's other backends are not built in)")
        elif key == "io-buffers-on-gpu" and value == "TRUE":
            refuse(section, key, "storlab has no GPU buffers")
        elif key == "collective" and value == "TRUE":
            refuse(section, key, "collective I/O is MPI-IO; storlab does POSIX I/O")
        elif key == "external-script":
            refuse(section, key, "storlab runs its own parallel find, not an external script")
        elif key == "files-per-dir":
            refuse(section, key, "mdtest -I (files per directory) is not built in; it invalidates an io500 run anyway")
        elif key == "pause-dir":
            refuse(section, key, "pausing between phases is not built in; it invalidates an io500 run anyway")
        elif key == "filePerProc" and value == "FALSE":
            refuse(section, key, "ior-easy with one shared file is not built in; use filePerProc = TRUE (io500's default)")
        elif key == "dataPacketType" and value not in ("timestamp", "offset", "incompressible", "random"):
            refuse(section, key, "io500 allows timestamp|offset|incompressible|random")
        elif key == "randomPrefill" and int(value) != 0:
            refuse(section, key, "IOR's --randomPrefill is not built in; leave it 0 (the proposal's default)")
        elif section == "concurrent" and key.startswith("ratio-") and not 0.0 <= float(value) <= 1.0:
            refuse(section, key, "allowed: a fraction from 0 to 1 (io500's proposal takes a ratio above 1 as 0)")
        elif section == "ior-rnd1MB" and key == "blockSize" and (int(value) < 1 << 20 or int(value) % (1 << 20)):
            refuse(section, key, "allowed: a multiple of 1 MiB (1048576), the transfer size")
        elif section == "ior-rnd1MB" and key == "segmentCount" and int(value) < 1:
            refuse(section, key, "allowed: 1 or more")
    if not refused and cfg.concurrent_ratio_write + cfg.concurrent_ratio_read > 1.0 + 1e-9:
        refused.append((ini.line("concurrent", "ratio-read"), "concurrent.ratio-read", ini.get("concurrent", "ratio-read"),
                        f"ratio-write + ratio-read = {cfg.concurrent_ratio_write + cfg.concurrent_ratio_read:g}: "
                        "allowed: at most 1 (the rest run md-workbench)"))
    # sizes and the stonewall were bounded before the config was made (_check_bounds)
    if not refused and cfg.easy_block % cfg.easy_xfer:
        refused.append((ini.line("ior-easy", "blockSize"), "ior-easy.blockSize", ini.get("ior-easy", "blockSize"),
                        "must be a multiple of transferSize (as IOR requires)"))
    extended = extended_sections()
    for section in extended:
        for key in SECTIONS[section]:
            if ini.is_set(section, key.name):
                mapped.append(Mapped(f"{section}.{key.name}", ini.get(section, key.name), "", "accepted",
                                     ini.line(section, key.name),
                                     "a phase of io500's extended mode (storlab io500 --mode extended runs "
                                     "md-workbench, find-easy and find-hard)"))
    for section, keys in PROPOSAL_SECTIONS.items():
        for key in keys:
            if ini.is_set(section, key.name):
                mapped.append(Mapped(f"{section}.{key.name}", ini.get(section, key.name), "", "accepted",
                                     ini.line(section, key.name),
                                     "io500's proposed concurrent phase (not in io500 02091cf): storlab io500 "
                                     "--mode extended runs it and reports it apart from the score"))
    if refused:
        line, key, value, reason = refused[0]
        raise Refusal(FORMAT, source, line, key, value, reason,
                      more=[f"{k} (line {ln})" if ln else k for ln, k, _, _ in refused[1:]])

    # -- the mapping ------------------------------------------------------------------------------
    sw = cfg.stonewall_s
    record("global", "datadir", "the target folder of every phase")
    record("global", "timestamp-datadir", "datadir/<timestamp> is the target folder" if cfg.timestamp_datadir
           else "datadir itself is the target folder")
    record("global", "resultdir", "the folder of result.txt and result_summary.txt")
    record("global", "timestamp-resultdir", "resultdir/<timestamp>" if cfg.timestamp_resultdir else "resultdir itself")
    record("global", "api", "engine = \"psync\" (POSIX read/write)")
    record("global", "drop-caches", "storlab drops the page cache before each phase (as root, no sudo)"
           if cfg.drop_caches else "")
    if ini.is_set("global", "drop-caches-cmd"):
        mapped.append(Mapped("global.drop-caches-cmd", cfg.drop_caches_cmd, "", "accepted",
                             ini.line("global", "drop-caches-cmd"),
                             "storlab drops the caches itself (sync, then /proc/sys/vm/drop_caches)"))
    record("global", "scc", f"validity needs write phases of at least {cfg.min_write_s} s")
    mapped.append(Mapped("global.dataPacketType", cfg.data_packet_type, "", "accepted" if ini.is_set("global", "dataPacketType")
                         else "chosen", ini.line("global", "dataPacketType"),
                         "storlab writes its own seeded incompressible fill (verify = fill) and compares every byte "
                         "read back with it, as IOR -R compares with its pattern"))
    for key in ("verbosity",):
        if ini.is_set("global", key):
            mapped.append(Mapped(f"global.{key}", ini.get("global", key), "", "accepted", ini.line("global", key),
                                 "output detail only"))
    record("debug", "stonewall-time", f"time = {sw} s on every write phase (and ior-rnd4K-easy-read)")
    record("ior-easy", "transferSize", f"bs = {cfg.easy_xfer}")
    record("ior-easy", "blockSize", f"size = {cfg.easy_block} per rank (the stonewall ends the phase first)")
    record("ior-easy", "filePerProc", "one file per rank")
    record("ior-easy", "uniqueDir", "a folder per rank's file" if cfg.easy_unique_dir else "")
    record("ior-hard", "segmentCount", f"segments = {cfg.hard_segments}, bs = block = {HARD_XFER}")
    record("mdtest-easy", "n", f"files = {cfg.md_easy_n} per rank")
    record("mdtest-hard", "n", f"files = {cfg.md_hard_n} per rank, file_size = {HARD_FILE_SIZE}")
    if ini.is_set("find", "nproc"):
        record("find", "nproc", f"find runs on the first {cfg.find_nproc} ranks")
    for section, keys in SECTIONS.items():
        if section in extended:
            continue
        for key in keys:
            if key.name.startswith("pfind-") and ini.is_set(section, key.name):
                mapped.append(Mapped(f"{section}.{key.name}", ini.get(section, key.name), "", "accepted",
                                     ini.line(section, key.name),
                                     "pfind's work queue; storlab's find spreads folders over the ranks its own way"))
            elif key.name in ("run",) and ini.is_set(section, "run"):
                mapped.append(Mapped(f"{section}.run", ini.get(section, "run"),
                                     "phase runs" if ini.get(section, "run") else "phase skipped (scores 0, as io500)",
                                     line=ini.line(section, "run")))
            elif key.name in ("API", "verbosity", "external-mpi-args", "external-extra-args") and ini.is_set(section, key.name):
                mapped.append(Mapped(f"{section}.{key.name}", ini.get(section, key.name), "", "accepted",
                                     ini.line(section, key.name), "POSIX (the only interface)" if key.name == "API"
                                     else "output detail only" if key.name == "verbosity" else "no external script"))
            elif key.name == "collective" and ini.is_set(section, key.name):
                mapped.append(Mapped(f"{section}.collective", False, "", "accepted", ini.line(section, key.name),
                                     "independent I/O, as set"))

    notes += [
        f"io500's phases in its order; write phases stop at the {sw} s stonewall, then every rank "
        "finishes as many transfers/files as the rank that did most (IOR/mdtest wear-out)",
        "`storlab io500` interleaves the mdtest phases in io500's order; this job file runs each "
        "mdtest's phases back to back in one meta phase",
        "reads are shifted as io500's IOR -C -Q 1 / -Q 2 and mdtest -N 1 shift them (a node for IOR, "
        "one rank per mdtest phase)",
        "reads are verified as io500 verifies them: ior-easy/hard-read compare every byte with the fill "
        "written (verify = fill, IOR -R), mdtest-hard-read every file's 3901 bytes (verify_read, mdtest -X)",
    ]
    if sw < cfg.min_write_s:
        notes.append(f"stonewall-time {sw} s != {cfg.min_write_s} s: the run is marked invalid, as io500 marks it")
    notes += ini.repeat_notes()     # a key set twice in its section: which value io500 keeps

    job = _job(cfg)
    return Translation(format=FORMAT, source=source, sha256=sha256 or sha256_of(text.encode()), job=job,
                       mapped=mapped, notes=notes,
                       details={"config_hash": cfg.config_hash, "stonewall_s": sw,
                                "phases": [p.name for p in phases_of("standard") if cfg.runs(p.name)]})


# IOR -R: one seeded fill written, every byte read compared with it (no read-back after writing)
_FILL = {"verify": "fill", "verify_readback": False}


def _job(cfg: Io500Config) -> dict[str, Any]:
    """The storlab job: one phase per io500 I/O phase, one meta phase per mdtest."""
    d = cfg.datadir
    sw = f"{cfg.stonewall_s}s"
    # a file per rank: storlab's files = per_thread makes PATH.N for participant N (rank N)
    easy = {"target": [os.path.join(d, "ior_file_easy")], "files": "per_thread"}
    hard = os.path.join(d, "ior_file_hard")
    phases: list[dict[str, Any]] = []
    if cfg.runs("ior-easy-write"):
        phases.append({"name": "ior-easy-write", **easy, "rw": "write", "bs": cfg.easy_xfer,
                       "size": cfg.easy_block, "time": sw, "fsync_end": True, **_FILL})
    if cfg.runs("mdtest-easy-write"):
        phases.append({"name": "mdtest-easy", "type": "meta", "target": d,
                       "files": cfg.md_easy_n, "dir": "unique", "stonewall": sw,
                       "phases": "create,stat,remove,rmdir", })
    if cfg.runs("ior-hard-write"):
        phases.append({"name": "ior-hard-write", "target": [hard], "rw": "write", "bs": HARD_XFER,
                       "thread_layout": "strided", "size": HARD_XFER * cfg.hard_segments, "time": sw,
                       "fsync_end": True, **_FILL})
    if cfg.runs("mdtest-hard-write"):
        phases.append({"name": "mdtest-hard", "type": "meta", "target": d,
                       "files": cfg.md_hard_n, "dir": "shared", "file_size": HARD_FILE_SIZE, "stonewall": sw,
                       "verify_read": cfg.verify_reads,
                       "phases": "create,stat,read,remove,rmdir", })
    if cfg.runs("ior-easy-read"):
        phases.append({"name": "ior-easy-read", **easy, "rw": "read", "bs": cfg.easy_xfer,
                       "size": cfg.easy_block, **_FILL})
    if cfg.runs("ior-hard-read"):
        phases.append({"name": "ior-hard-read", "target": [hard], "rw": "read", "bs": HARD_XFER,
                       "thread_layout": "strided", "size": HARD_XFER * cfg.hard_segments, **_FILL})
    if cfg.runs("ior-rnd4K-easy-read"):
        phases.append({"name": "ior-rnd4K-easy-read", **easy, "rw": "randread", "bs": RND4K,
                       "size": cfg.easy_block, "time": sw})
    return {"reorder": 1, "phase": phases}


# -- io500's command lines (result.txt's `exe`) ------------------------------------------------------
def _phase_number(name: str, timestamp: str) -> int:
    """io500's u_phase_unique_random_number: its hash of the phase name then the timestamp, as the
    signed int `%d` prints (4711 when the hash is 0 or -1)."""
    from .ini import io500_hash

    h = io500_hash(timestamp, io500_hash(name))
    if h in (0, 0xFFFFFFFF):
        return 4711
    return h - (1 << 32) if h >= 1 << 31 else h


def _api(cfg: Io500Config, section: str, parent: str) -> list[str]:
    """`-a API [--api.options]`: the phase's API, else its parent section's, else [global] api."""
    value = cfg.ini.get(section, "API") or cfg.ini.get(parent, "API") or cfg.ini.get("global", "api")
    return ["-a", *value.split()]


def io500_command(cfg: Io500Config, phase: str, datadir: str, resultdir: str, timestamp: str) -> str | None:
    """The command line io500 02091cf runs for `phase` (its `exe` line in result.txt): the IOR,
    mdtest or pfind arguments src/phase_*.c build, flattened with spaces. None for timestamp and
    md-workbench (its sizes are known only when it runs: `mdworkbench_command`)."""
    ini, sw, packet = cfg.ini, cfg.stonewall_s, f"--dataPacketType={cfg.data_packet_type}"
    gpu = ini.get("global", "io-buffers-on-gpu")
    record = BY_NAME[phase]
    if record.parent == "ior-easy":
        std = phase != "ior-rnd4K-easy-read"
        a = ["./ior", packet, *["-v"] * (ini.get("ior-easy", "verbosity") or 0),
             *(["-O", "allocateBufferOnGPU=1"] if gpu else []),
             "-g", "-G", str(_phase_number("ior-easy", timestamp)), "-k", "-e", "-o", f"{datadir}/ior-easy/ior_file_easy"]
        if std:
            a += ["-C", "-Q", "1", "-O", f"stoneWallingStatusFile={resultdir}/ior-easy.stonewall",
                  "-t", ini.get("ior-easy", "transferSize"), "-b", ini.get("ior-easy", "blockSize")]
        a += ["-u"] if cfg.easy_unique_dir else []
        a += ["-F"] if cfg.easy_file_per_proc else []
        csv = ["-O", f"saveRankPerformanceDetailsCSV={resultdir}/{phase}.csv"]
        if phase == "ior-easy-write":
            a += ["-w", "-D", str(sw), "-O", "stoneWallingWearOut=1", *_api(cfg, phase, record.parent), *csv]
        elif phase == "ior-easy-read":
            a += ["-r", "-R", *_api(cfg, phase, record.parent), *csv]
        else:
            a += ["-r", "-D", str(sw), "-z", "-z", *_api(cfg, phase, record.parent), *csv, "-t=4096", "-b=4096",
                  "-s=10000000", "-O", "stoneWallingWearOut=1"]
            a += ["-C", "-Q", "2"] if cfg.easy_file_per_proc else []
    elif record.parent == "ior-hard":
        a = ["./ior", packet, *["-v"] * (ini.get("ior-hard", "verbosity") or 0),
             *(["-O", "allocateBufferOnGPU=1"] if gpu else []),
             "-C", "-Q", "1", "-g", f"-G={_phase_number('ior-hard', timestamp)}", "-k", "-e",
             "-o", f"{datadir}/ior-hard/file", "-O", f"stoneWallingStatusFile={resultdir}/ior-hard.stonewall",
             "-t", str(HARD_XFER), "-b", str(HARD_XFER), "-s", str(cfg.hard_segments)]
        collective = ["-c"] if (ini.get(phase, "collective") or ini.get("ior-hard", "collective")) else []
        csv = ["-O", f"saveRankPerformanceDetailsCSV={resultdir}/{phase}.csv"]
        if phase == "ior-hard-write":
            a += ["-w", *collective, "-D", str(sw), *_api(cfg, phase, record.parent), *csv, "-O", "stoneWallingWearOut=1"]
        else:
            a += ["-r", "-R", *collective, *_api(cfg, phase, record.parent), *csv]
    elif record.family == "mdtest":
        kind = phase.split("-")[1]
        a = ["./mdtest", packet, *(["--allocateBufferOnGPU"] if gpu else [])]
        if kind == "easy":
            a += ["-n", str(cfg.md_easy_n), "-u", "-L", "-F", "-P", "-G", str(_phase_number("mdtest-easy", timestamp))]
        else:
            per_dir = ini.get("mdtest-hard", "files-per-dir")
            a += ["-n", str(cfg.md_hard_n), *([f"-I={per_dir}"] if per_dir else []), "-t", "-w", str(HARD_FILE_SIZE),
                  "-e", str(HARD_FILE_SIZE), "-P", f"-G={_phase_number('mdtest-hard', timestamp)}"]
        a += ["-N", "1", *(["-F"] if kind == "hard" else []), "-d", f"{datadir}/mdtest-{kind}",
              "-x", f"{resultdir}/mdtest-{kind}.stonewall"]
        step = phase.split("-")[2]
        per_dir_off = kind == "hard" and ini.get("mdtest-hard", "files-per-dir")
        a += {"write": ["-C", "-Y", *([] if per_dir_off else ["-W", str(sw)])], "stat": ["-T"], "read": ["-E", "-X"],
              "delete": ["-r"]}[step]
        a += [f"--saveRankPerformanceDetails={resultdir}/{phase}.csv", *_api(cfg, phase, record.parent)]
    elif record.family == "find":
        newer = ["-newer", f"{resultdir}/timestampfile", "-size", f"{HARD_FILE_SIZE}c"]
        a = {"find": ["./pfind", datadir, *newer], "find-easy": ["./pfind", f"{datadir}/mdtest-easy/"],
             "find-hard": ["./pfind", f"{datadir}/mdtest-hard/", *newer]}[phase]
        a += ["-name", "*01*", "-C"]
        a += ["-N"] if ini.get(phase, "pfind-steal-next") else []
        a += ["-H", "1"] if ini.get(phase, "pfind-parallelize-single-dir-access-using-hashing") else []
        a += ["-q", str(ini.get(phase, "pfind-queue-length"))]
    else:
        return None
    return " ".join(a)


# what each md-workbench phase adds to the common arguments (src/phase_mdworkbench_*.c)
_MDW_STEP = {"mdworkbench-create": ["-1"], "mdworkbench-bench": ["-2", f"-R={MDW_ITERATIONS}", "-X"],
             "mdworkbench-delete": ["-3"]}


def mdworkbench_command(cfg: Io500Config, phase: str, datadir: str, resultdir: str, timestamp: str,
                        precreate: int, files: int) -> str:
    """The md-workbench command io500 02091cf runs for `phase` (src/phase_mdworkbench.c's
    mdworkbench_add_params and the phase's own flags) with `precreate` objects per set and
    `files` per iteration and set."""
    ini = cfg.ini
    a = ["./md-workbench", f"--dataPacketType={cfg.data_packet_type}",
         *["-v"] * (ini.get("mdworkbench", "verbosity") or 0),
         *(["--allocateBufferOnGPU"] if ini.get("global", "io-buffers-on-gpu") else []),
         "--process-reports", *_api(cfg, "mdworkbench", "mdworkbench"), f"-o={datadir}/mdworkbench",
         f"-t={cfg.mdw_waiting:f}", f"-O={MDW_OFFSET}", f"--run-info-file={resultdir}/mdworkbench.status",
         f"-D={MDW_SETS}",
         f"-G={_phase_number('md-workbench', timestamp)}", f"-P={precreate}", f"-I={files}"]
    return " ".join(a + _MDW_STEP[phase])
