"""io500 .ini files: the sections and keys io500 knows, and a reader that accepts exactly what
io500's own parser accepts (src/ini-parse.c of io500 02091cf).

The rules, as io500 has them: `[section]` and `key = value` lines; `#` or `;` after whitespace
starts a comment; names compare case-insensitively; an empty value leaves the key unset (its
default applies); integers, unsigned integers, booleans (true/false/1/0, any case) and floats are
checked by type. An unknown section or key is an error naming the line. The table below is the
list `io500 --list` prints, in io500's phase order, with each key's type and default.

Three sections of io500's proposed concurrent phase are read too (`PROPOSAL_SECTIONS`: the
branch phase-concurrent of github.com/IO500/io500, which io500 02091cf does not have): storlab
runs that proposal in extended mode, reported apart from the score (docs/io500.md). They are left
out of `effective`, so the config hash stays io500 02091cf's.

`config_hash` is io500's configuration hash (rotate-left-2-and-add over key and value, XORed over
every key that has a value), which `io500 --verify` compares with a result file's `config-hash`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["IniKey", "SECTIONS", "PROPOSAL_SECTIONS", "keys_of", "IniFile", "IniError", "parse_ini", "config_hash", "io500_hash",
           "hash_key_value"]


@dataclass(frozen=True)
class IniKey:
    name: str
    type: str                 # "str", "int", "uint", "uint64", "bool", "float"
    default: str | None       # io500's default as text; None: unset
    help: str = ""


def _api() -> IniKey:
    return IniKey("API", "str", None, "the I/O interface (IOR/mdtest -a)")


def _run() -> IniKey:
    return IniKey("run", "bool", "TRUE", "run this phase")


_FIND = (
    IniKey("external-script", "str", None, "an external program doing the find"),
    IniKey("external-mpi-args", "str", "", "launcher arguments of the external script"),
    IniKey("external-extra-args", "str", "", "extra arguments of the external script"),
    IniKey("nproc", "uint", None, "processes doing the find"),
    _run(),
    IniKey("pfind-queue-length", "int", "10000", "pfind's work queue length"),
    IniKey("pfind-steal-next", "bool", "FALSE", "pfind steals work from the next rank"),
    IniKey("pfind-parallelize-single-dir-access-using-hashing", "bool", "FALSE",
           "pfind splits one directory's readdir over ranks by hashing"),
)

# Every section io500 02091cf knows, in its phase order, with its keys.
SECTIONS: dict[str, tuple[IniKey, ...]] = {
    "global": (
        IniKey("datadir", "str", "./datafiles", "the folder the benchmark writes in"),
        IniKey("timestamp-datadir", "bool", "TRUE", "suffix datadir with the run's timestamp"),
        IniKey("resultdir", "str", "./results", "the folder of the result files"),
        IniKey("timestamp-resultdir", "bool", "TRUE", "suffix resultdir with the run's timestamp"),
        IniKey("api", "str", "POSIX", "the I/O interface of every phase"),
        IniKey("drop-caches", "bool", "FALSE", "drop the page cache before each phase"),
        IniKey("drop-caches-cmd", "str", 'sudo -n bash -c "echo 3 > /proc/sys/vm/drop_caches"',
               "the command that drops the caches"),
        IniKey("io-buffers-on-gpu", "bool", "FALSE", "allocate the I/O buffers on the GPU"),
        IniKey("verbosity", "uint", "1", "verbosity 1-10"),
        IniKey("scc", "bool", "FALSE", "Student Cluster Competition rules (30 s stonewall)"),
        IniKey("dataPacketType", "str", "timestamp", "the data written: timestamp|offset|incompressible|random"),
    ),
    "debug": (
        IniKey("stonewall-time", "int", "300", "seconds each write phase runs; below the rules' value the run is invalid"),
        IniKey("pause-dir", "str", None, "pause between phases while a file named as the phase is in this folder"),
    ),
    "ior-easy": (
        _api(),
        IniKey("transferSize", "str", "2m", "transfer size (IOR -t)"),
        IniKey("blockSize", "str", "9920000m", "block size per process (IOR -b)"),
        IniKey("filePerProc", "bool", "TRUE", "one file per process (IOR -F)"),
        IniKey("uniqueDir", "bool", "FALSE", "a folder per file (IOR -u)"),
        _run(),
        IniKey("verbosity", "int", None, "IOR verbosity"),
    ),
    "ior-easy-write": (_api(), _run()),
    "mdtest-easy": (_api(), IniKey("n", "uint64", "1000000", "files per process (mdtest -n)"), _run()),
    "mdtest-easy-write": (_api(), _run()),
    "mdworkbench": (
        _api(),
        IniKey("waitingTime", "float", "0.0", "waiting time of an operation relative to runtime"),
        IniKey("precreatePerSet", "uint64", None, "files to precreate per set"),
        IniKey("filesPerProc", "uint64", None, "files per iteration and set"),
        _run(),
        IniKey("verbosity", "int", None, "md-workbench verbosity"),
    ),
    "mdworkbench-create": (_run(),),
    "timestamp": (),
    "find-easy": _FIND,
    "ior-hard": (
        _api(),
        IniKey("segmentCount", "int", "10000000", "segments (IOR -s)"),
        IniKey("collective", "bool", None, "collective I/O (MPI-IO)"),
        _run(),
        IniKey("verbosity", "int", None, "IOR verbosity"),
    ),
    "ior-hard-write": (_api(), IniKey("collective", "bool", None, "collective I/O (MPI-IO)"), _run()),
    "mdtest-hard": (
        _api(),
        IniKey("n", "uint64", "1000000", "files per process (mdtest -n)"),
        IniKey("files-per-dir", "uint64", None, "files per directory (mdtest -I); invalidates the run"),
        _run(),
    ),
    "mdtest-hard-write": (_api(), _run()),
    "find": _FIND,
    "find-hard": _FIND,
    "mdworkbench-bench": (_run(),),
    "ior-easy-read": (_api(), _run()),
    "mdtest-easy-stat": (_api(), _run()),
    "ior-hard-read": (_api(), IniKey("collective", "bool", None, "collective I/O (MPI-IO)"), _run()),
    "mdtest-hard-stat": (_api(), _run()),
    "mdworkbench-delete": (_run(),),
    "mdtest-easy-delete": (_api(), _run()),
    "mdtest-hard-read": (_api(), _run()),
    "mdtest-hard-delete": (_api(), _run()),
    "ior-rnd4K-easy-read": (_api(), _run()),
}

# The sections of io500's proposed concurrent phase (branch phase-concurrent, commit 2cd466f, 2025-07-05:
# src/phase_concurrent.c, src/phase_ior_rnd1MB.c, src/phase_ior_rnd_write1MB.c), with their keys and
# defaults there. Not io500 02091cf's: not in its config hash, not in `io500 --list`.
PROPOSAL_SECTIONS: dict[str, tuple[IniKey, ...]] = {
    "ior-rnd1MB": (
        _api(),
        IniKey("blockSize", "uint64", "1073741824", "size of a random block (IOR -b)"),
        _run(),
        IniKey("verbosity", "int", "0", "IOR verbosity"),
        IniKey("randomPrefill", "int", "0", "prefill the file with this block size in bytes"),
        IniKey("segmentCount", "int", "10000000", "segments (IOR -s)"),
    ),
    "ior-rnd1MB-write": (_api(), _run()),
    "concurrent": (
        _run(),
        IniKey("ratio-write", "float", "0.2", "share of the processes doing ior-easy writes (taken first)"),
        IniKey("ratio-read", "float", "0.4", "share doing 1 MiB random reads; the rest run md-workbench"),
    ),
}


def keys_of(section: str) -> tuple[IniKey, ...]:
    """The keys of an io500 section or of a proposal's."""
    return SECTIONS[section] if section in SECTIONS else PROPOSAL_SECTIONS[section]


_SECTION = re.compile(r"^\s*\[\s*([0-9a-zA-Z_-]+)\s*\]\s*(\s[#;].*)?$")
_KEY = re.compile(r"^\s*([0-9a-zA-Z_.-]+)\s*=\s*([^#;]*)\s*(\s[#;].*)?$")
_EMPTY = re.compile(r"^\s*([#;].*)?$")
_INT = re.compile(r"^-?[0-9]+$")
_UINT = re.compile(r"^[0-9]+$")
_FLOAT = re.compile(r"^[0-9e.+-]+$")


class IniError(ValueError):
    """A line io500 itself would reject: `line` is its number, `key`/`value` what it held."""

    def __init__(self, line: int, key: str, value: str, reason: str) -> None:
        self.line, self.key, self.value, self.reason = line, key, value, reason
        super().__init__(f"line {line}: {key} = {value}: {reason}" if value else f"line {line}: {key}: {reason}")


@dataclass
class IniFile:
    """The keys an .ini sets: (section, key) -> (value as io500 stores it, line number)."""
    text: str
    values: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)
    sections: dict[str, int] = field(default_factory=dict)   # section -> line of its header
    # a key set more than once in its section: io500 keeps the value written last (ini-parse.c
    # assigns each line's value over the one before); (section, key, lines that set it)
    repeated: list[tuple[str, str, list[int]]] = field(default_factory=list)

    def get(self, section: str, key: str) -> Any:
        """The key's typed value: set in the file, else io500's default; None when unset."""
        spec = _key(section, key)
        raw = self.values.get((section, spec.name), (spec.default, 0))[0]
        if raw is None:
            return None
        if spec.type in ("int", "uint", "uint64"):
            return int(raw) if raw != "" else None
        if spec.type == "bool":
            return raw == "TRUE"
        if spec.type == "float":
            return float(raw)
        return raw

    def note_repeat(self, section: str, key: str, earlier: int, line: int) -> None:
        for sec, k, lines in self.repeated:
            if (sec, k) == (section, key):
                lines.append(line)
                return
        self.repeated.append((section, key, [earlier, line]))

    def repeat_notes(self) -> list[str]:
        """One line per key set more than once: which lines set it and which value io500 keeps."""
        return [f"[{sec}] {k} is set on lines {', '.join(map(str, lines))}: io500 keeps the last, "
                f"{self.values[(sec, k)][0]!r} (line {lines[-1]})" for sec, k, lines in self.repeated]

    def line(self, section: str, key: str) -> int | None:
        hit = self.values.get((section, _key(section, key).name))
        return hit[1] if hit else None

    def is_set(self, section: str, key: str) -> bool:
        return (section, _key(section, key).name) in self.values

    def effective(self) -> dict[str, dict[str, str]]:
        """Every section with every key that has a value (set or default), as io500 hashes them."""
        out: dict[str, dict[str, str]] = {}
        for sec, keys in SECTIONS.items():
            out[sec] = {}
            for k in keys:
                raw = self.values.get((sec, k.name), (k.default, 0))[0]
                if raw is not None:
                    out[sec][k.name] = raw
        return out


def _key(section: str, key: str) -> IniKey:
    for k in keys_of(section):
        if k.name.lower() == key.lower():
            return k
    raise KeyError(f"[{section}] {key}")


def parse_ini(text: str) -> IniFile:
    """Read an io500 .ini as io500 does; IniError on the first line io500 rejects."""
    ini = IniFile(text)
    section: str | None = None
    for number, line in enumerate(text.split("\n"), start=1):
        if line == "":
            continue
        m = _SECTION.match(line)
        if m:
            name = m.group(1)
            found = next((s for s in (*SECTIONS, *PROPOSAL_SECTIONS) if s.lower() == name.lower()), None)
            if found is None:
                raise IniError(number, f"[{name}]", "", "unknown section; io500 has "
                               + ", ".join(SECTIONS))
            section = found
            ini.sections.setdefault(found, number)
            continue
        m = _KEY.match(line)
        if m:
            name, value = m.group(1), m.group(2).rstrip(" \t\r")
            if value == "":
                continue                      # io500: no value, the default stays
            if section is None:
                raise IniError(number, name, value, "key outside any [section]")
            spec = next((k for k in keys_of(section) if k.name.lower() == name.lower()), None)
            if spec is None:
                allowed = ", ".join(k.name for k in keys_of(section)) or "no keys"
                raise IniError(number, f"{section}.{name}", value, f"unknown key; [{section}] has {allowed}")
            value = _check_type(number, section, spec, value)
            if (section, spec.name) in ini.values:
                ini.note_repeat(section, spec.name, ini.values[(section, spec.name)][1], number)
            ini.values[(section, spec.name)] = (value, number)
            continue
        if not _EMPTY.match(line):
            raise IniError(number, line.strip()[:40], "", "neither [section], key = value nor a comment")
    return ini


def _check_type(number: int, section: str, spec: IniKey, value: str) -> str:
    where = f"{section}.{spec.name}"
    if spec.type == "int" and not _INT.match(value):
        raise IniError(number, where, value, "expects an integer")
    if spec.type in ("uint", "uint64") and not _UINT.match(value):
        raise IniError(number, where, value, "expects an integer >= 0")
    if spec.type == "float" and not _FLOAT.match(value):
        raise IniError(number, where, value, "expects a number")
    if spec.type == "bool":
        if value.lower() == "true" or value == "1":
            return "TRUE"
        if value.lower() == "false" or value == "0":
            return "FALSE"
        raise IniError(number, where, value, "expects true or false")
    return value


# -- io500's hashes -------------------------------------------------------------------------------
def io500_hash(text: str, start: int = 0) -> int:
    """io500's string hash: for each byte, rotate left by 2 and add it (as a signed char), 32 bits."""
    h = start & 0xFFFFFFFF
    for b in text.encode():
        c = b - 256 if b >= 128 else b
        h = ((((h << 2) | (h >> 30)) & 0xFFFFFFFF) + c) & 0xFFFFFFFF
    return h


def hash_key_value(acc: int, key: str, value: str) -> int:
    """io500's u_hash_update_key_val: XOR in the hash of key then value."""
    return acc ^ io500_hash(value, io500_hash(key))


def config_hash(ini: IniFile) -> str:
    """io500's config-hash of this configuration, as `%X` prints it."""
    acc = 0
    for keys in ini.effective().values():
        for name, value in keys.items():
            acc = hash_key_value(acc, name, value)
    return f"{acc:X}"
