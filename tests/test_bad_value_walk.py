"""Every row of every option table, and every numeric key of the io500 and DLIO translators, walked
with bad values (issue 39): the row's own bounds one step beyond, nan, inf, 1e999, '', a digit of
another script, a negative number. Each must be refused by the table's parser in one line that
names the flag or key (never another exception, never a value taken), and through the command
line with exit 2, one error line and no file written.
"""
from __future__ import annotations

import importlib
import math
import os
import pkgutil

import pytest
import storlab.jobs.tables as tables
from storlab.cli.main import ExitCode, main
from storlab.errors import UserError
from storlab.jobs.meta_options import META_OPTIONS
from storlab.jobs.options import NUMERIC_KINDS, OPTIONS, Option, parse_option
from storlab.units import UnitError

OTHER_SCRIPT_DIGIT = "\u0663"          # ARABIC-INDIC DIGIT THREE: int() reads it as 3
ALWAYS_BAD = ("nan", "inf", "-inf", "1e999", "", OTHER_SCRIPT_DIGIT, "1" + "0" * 30)   # 10^30: beyond every bound
# kinds with a parser of their own (jobs/model_values.py, jobs/tables/*): numbers too
CUSTOM_NUMERIC = {"period", "fraction", "probability"}


def every_row() -> list[tuple[str, Option]]:
    """(command, row) for the run and meta tables and every command's table module."""
    rows = [("run", o) for o in OPTIONS] + [("meta", o) for o in META_OPTIONS]
    for info in pkgutil.iter_modules(tables.__path__):
        module = importlib.import_module(f"storlab.jobs.tables.{info.name}")
        for table in getattr(module, "COMMANDS", ()):
            rows += [(table.command, o) for o in table.options]
    seen, out = set(), []
    for command, row in rows:
        if (command, row.name) not in seen:
            seen.add((command, row.name))
            out.append((command, row))
    return out


def numeric(row: Option) -> bool:
    base = row.list_of or row
    return base.kind in NUMERIC_KINDS or base.kind in CUSTOM_NUMERIC


def _written(value: float, kind: str) -> str:
    """A number as the row's kind reads it: bytes, seconds, bytes per second, a count."""
    if kind == "duration":
        return f"{value!r}s" if not float(value).is_integer() else f"{int(value)}s"
    return str(int(value)) if float(value).is_integer() else repr(value)


def bad_values(row: Option) -> list[str]:
    base = row.list_of or row
    # a period's range is the model's, checked where it is used with the words of the quantity
    # (`mtbf 1e+300 h is out of range`: tests/test_plan_absurd_inputs.py)
    out = [v for v in ALWAYS_BAD if not (base.kind == "period" and v.startswith("1000"))]
    lo = row.minimum if row.minimum is not None else base.minimum
    hi = row.maximum if row.maximum is not None else base.maximum
    integral = base.kind in ("int", "count", "percent", "size", "dir_iops")
    if lo is not None and math.isfinite(lo):
        out.append(_written(lo - 1 if integral or lo >= 1 else -abs(lo) - 1, base.kind))
    if hi is not None and math.isfinite(hi) and hi < 1e17:
        out.append(_written(hi + 1 if integral else hi * 2 + 1, base.kind))
    if lo is None or lo >= 0:
        out.append("-1" if base.kind != "duration" else "-1s")
    return out


CASES = [(c, r, v) for c, r in every_row() if numeric(r) for v in bad_values(r)]


def test_the_walk_covers_every_tables_numeric_rows():
    commands = {c for c, _ in every_row()}
    # every command with a table is walked, and the walk is not empty (a walk of nothing passes all)
    assert {"run", "meta", "sweep", "scale", "io500", "replay", "workload", "net", "diagnose",
            "plan perf", "plan reliability", "results list"} <= commands
    assert len(CASES) > 800


@pytest.mark.parametrize("command, row, value", CASES,
                         ids=[f"{c}:{r.name}={v!r}" for c, r, v in CASES])
def test_every_numeric_row_refuses_a_bad_value_in_one_line_naming_it(command, row, value):
    try:
        got = parse_option(row, value)
    except (UserError, UnitError) as e:
        message = str(e)
        assert "\n" not in message, message
        names = {row.label, row.name, row.flag, f"--{row.name.replace('_', '-')}"}
        assert any(n and n in message for n in names), f"storlab {command}: {message!r} names no flag of the row"
        return
    pytest.fail(f"storlab {command} {row.flag} {value!r}: taken as {got!r}")


# -- through the command line: exit 2, one line, nothing written -------------------------------------
def _cli_cases(tmp):
    """(argv, flag) per command: a bad value of one numeric flag after the command's smallest valid
    arguments, which alone would write (a run, a sweep, a meta run) into `tmp`."""
    base = {
        "run": ["run", "--engine", "null", "--target", f"{tmp}/t.dat", "--size", "64k", "--no-store", "-q"],
        "sweep": ["sweep", "--engine", "null", "--target", f"{tmp}/t.dat", "--size", "64k", "--bs", "4k,8k",
                  "--no-store", "-q"],
        "meta": ["meta", "--target", str(tmp), "--files", "10", "--no-store", "-q"],
        "plan perf": ["plan", "perf", "R5/4"],
        "plan reliability": ["plan", "reliability", "R6/8"],
        "net": ["net", "--servers", "srv", "--no-store"],
        "workload": ["workload", "unet3d_h100", "--emit", f"{tmp}/w.toml"],
    }
    picks = {"run": ["--qd", "--threads", "--time", "--bs", "--rate", "--rwmix-read"],
             "sweep": ["--passes", "--time"], "meta": ["--files", "--threads"],
             "plan perf": ["--qd", "--threads", "--request"], "plan reliability": ["--mtbf", "--ber"],
             "net": ["--time", "--streams"], "workload": ["--accelerators", "--epochs"]}
    rows = {(c, r.flag): r for c, r in every_row()}
    for command, flags in picks.items():
        for flag in flags:
            row = rows.get((command, flag)) or rows.get(("run", flag))
            assert row is not None, f"storlab {command} has no {flag}"
            for value in ("nan", "1e999", OTHER_SCRIPT_DIGIT, bad_values(row)[-1]):
                yield command, [*base[command], f"{flag}={value}"], flag


def test_bad_values_through_the_command_line_are_one_line_exit_2_and_write_nothing(tmp_path, capsys,
                                                                                 monkeypatch, private_store):
    monkeypatch.chdir(tmp_path)
    checked = 0
    for _command, argv, flag in _cli_cases(tmp_path):
        rc = main(argv)
        err = capsys.readouterr().err
        assert "Traceback" not in err and "panicked" not in err, (argv, err)
        lines = [ln for ln in err.splitlines() if ": error: " in ln]
        assert rc == ExitCode.USAGE and len(lines) == 1, (argv, rc, err)
        assert flag in lines[0] or flag.lstrip("-").replace("-", "_") in lines[0], (argv, lines[0])
        assert os.listdir(tmp_path) == [], (argv, os.listdir(tmp_path))
        checked += 1
    assert checked > 60


# -- the translators' keys ---------------------------------------------------------------------------
def _io500_numeric_keys():
    from storlab.jobs.io500.ini import SECTIONS

    return [(s, k.name, k.type) for s, keys in SECTIONS.items() for k in keys
            if k.type in ("int", "uint", "uint64", "float")] + [("ior-easy", "transferSize", "size"),
                                                                   ("ior-easy", "blockSize", "size")]


@pytest.mark.parametrize("section, key, kind", _io500_numeric_keys(), ids=lambda x: str(x))
def test_every_numeric_io500_key_refuses_bad_values_in_one_line(section, key, kind, tmp_path):
    from storlab.jobs.io500.translator import translate_text
    from storlab.jobs.translation import Refusal

    for value in ("nan", "inf", "1e999", OTHER_SCRIPT_DIGIT, "99999999999999999999", "-1"):
        if kind == "float" and value in ("-1", "99999999999999999999"):
            continue    # io500 reads waitingTime as any finite float
        if kind == "int" and value == "-1" and key != "stonewall-time":
            continue    # io500's int keys take negatives (verbosity, queue lengths)
        text = f"[global]\ndatadir = {tmp_path}/d\n[{section}]\n{key} = {value}\n"
        with pytest.raises(Refusal) as e:
            translate_text(text, "t.ini")
        assert "\n" not in str(e.value) and key in str(e.value), str(e.value)


def _dlio_numeric_keys() -> list[str]:
    """The DLIO keys that take a number (`_int`, `_float` converters), the ones translated."""
    from storlab.jobs.dlio.translator import KEYS

    return [key for key, (_target, convert, how, _note) in KEYS.items()
            if getattr(convert, "__name__", "") in ("_int", "_float") and not how.startswith("refuse")]


def _yaml(key: str, value: str) -> str:
    """A DLIO workload with `key` (dotted) set to `value`, nested as YAML."""
    parts = key.split(".")
    lines = [f"{'  ' * i}{p}:" for i, p in enumerate(parts[:-1])]
    return "\n".join([*lines, f"{'  ' * (len(parts) - 1)}{parts[-1]}: {value}"]) + "\n"


@pytest.mark.parametrize("key", _dlio_numeric_keys())
@pytest.mark.parametrize("value", [".nan", ".inf", "1e999", "'\u0663'", "[1, 2]"])
def test_every_numeric_dlio_key_refuses_a_bad_number_in_one_line(key, value):
    """(-1 is left out: DLIO's defaults give it a meaning for many keys, "not set".)"""
    from storlab.jobs.dlio.translator import translate_text

    with pytest.raises(UserError) as e:
        translate_text(_yaml(key, value), "w.yaml").resolve()
    assert "\n" not in str(e.value) and key.split(".")[-1] in str(e.value), str(e.value)


# -- the object and network targets ------------------------------------------------------------------
# Malformed URLs, unknown schemes, ports out of range and credentials missing: each refused in one
# line naming the target (or the endpoint), before anything connects. (Credentials a server turns
# down, and a bucket or export that is not there, need a server: tests/test_s3.py, test_nbd.py,
# test_nfs.py walk those.)
BAD_TARGETS = [
    ("nbd://127.0.0.1:99999/", (), "port '99999'"),
    ("nbd://127.0.0.1:0/", (), "port '0'"),
    ("nbd://[::1/", (), "without closing"),
    ("nbd+unix:///export", (), "names no socket"),
    ("nfs://127.0.0.1:70000/export/f", (), "port '70000'"),
    ("nfs:///export/f", (), "names no server"),
    ("nfs://127.0.0.1/export/f?version=7", (), "version='7'"),
    ("nfs://127.0.0.1/export/f?verison=3", (), "argument 'verison'"),
    ("nfs://127.0.0.1/export/f?mountport=65536", (), "mountport='65536'"),
    ("ftp://host/x", (), "scheme 'ftp'"),
    ("file:///tmp/x", (), "scheme 'file'"),
    ("s3://", (), "names bucket ''"),
    ("s3://No_Such/p", (), "names bucket 'No_Such'"),
    ("s3://bench/p?versionId=1", (), "query or fragment"),
    ("s3://bench/p", ("--endpoint", "http://127.0.0.1:99999"), "port '99999'"),
    ("s3://bench/p", ("--endpoint", "ftp://127.0.0.1"), "endpoint: 'ftp://127.0.0.1'"),
    ("s3://bench/p", ("--endpoint", "http://user:pw@127.0.0.1:9000/x"), "endpoint: 'http://127.0.0.1:9000/x'"),
    ("s3://bench/p", ("--endpoint", "http://127.0.0.1:1"), "no credentials"),
]


@pytest.mark.parametrize("target, extra, words", BAD_TARGETS, ids=[f"{t} {' '.join(e)}".strip() for t, e, _ in BAD_TARGETS])
def test_a_bad_network_target_is_one_line_exit_2_within_a_second(target, extra, words, tmp_path, capsys,
                                                                monkeypatch, private_store):
    import time

    monkeypatch.chdir(tmp_path)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))          # no ~/.aws/credentials to find
    started = time.monotonic()
    rc = main(["run", "--no-store", "--quiet", "--target", target, "--rw", "read", "--bs", "1m", "--size", "4m", *extra])
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert "Traceback" not in err and "panicked" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == ExitCode.USAGE and len(lines) == 1, (rc, err)
    assert words in lines[0] and "pw@" not in lines[0], lines[0]
    assert took < 1.0, f"{took:.2f} s to refuse {target}"
    assert os.listdir(tmp_path) == [], os.listdir(tmp_path)
