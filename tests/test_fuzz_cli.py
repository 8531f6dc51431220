"""Property-based fuzzing of every input storlab takes: flags of run, sweep, meta, plan, doctor and
results generated from the option tables, and TOML job files, with extreme numbers, NaN/inf, wrong types, odd units
and unknown keys. Each example must end in success or a one-line error with a documented exit
code: never a traceback, never a Rust panic, never the internal-error exit (70) of a bug.

Everything runs in-process against the null engine with tiny sizes, so an example takes
milliseconds; the whole file is bounded to about a minute (max_examples per test below).
"""
from __future__ import annotations

import io
import json
import math
import re
from contextlib import redirect_stderr, redirect_stdout

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from storlab import _core
from storlab.cli.main import ExitCode, main
from storlab.jobs.job import core_spec, resolve_job
from storlab.jobs.meta_options import META_OPTIONS
from storlab.jobs.options import OPTIONS
from storlab.measure.sweep import SWEEP_OPTIONS


def fuzz(examples: int) -> settings:
    """Bounded example counts (the file runs in about a minute); no deadline, since a run's time
    depends on the machine, but the plan test bounds its own."""
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large])
EXIT_CODES = {int(c) for c in ExitCode} - {int(ExitCode.BUG)}   # 70 is a bug, never an answer
# The one line a failed command ends with: `storlab run: error: ...`, or a run's own verdict such
# as `storlab run: verification failed in read: ...` (exit 1, as documented); not a warning.
ERROR_LINE = re.compile(r"^storlab( [a-z]+){0,2}: (?!warning:)\S")

# Numbers where parsers break: signs, zero, the edges of i64/u64/f64, NaN and the infinities.
EDGE_NUMBERS = ["0", "-1", "1", "-0", "0.5", "1e-9", "1e308", "1e309", "-1e309", "nan", "NaN", "inf", "-inf",
                "Infinity", str(2**31), str(2**32), str(2**53 + 1), str(2**63 - 1), str(2**63), str(2**64),
                "18446744073709551616", "9" * 40, "9" * 5000, "0x10", "1_000", "1e999999999"]
UNITS = ["", "k", "K", "m", "g", "t", "p", "e", "KiB", "MB", "GiB", "EiB", "b", "ns", "us", "ms", "s", "m",
         "h", "d", "y", "%", "/s", "MB/s", "GiB/s", "x", " s", "µs"]
ODD_TEXT = ["", " ", "-", "--", "=", ",", ",,", "a,b", "on", "off", "true", "yes", "2", "null", "\x00", "é",
            "/", "/dev/null", "../..", "{rank}", "%s", "{}", "[]", "R6/8", "random", "zipf:0", "zoned:50/50",
            "normal:-1", "pareto:1", "crc32c", "xxh3", "psync", "io_uring", "null", "lag", "lockstep"]


def number_text() -> st.SearchStrategy[str]:
    """A number as a user might type it: edge cases, random ints and floats, with or without a unit."""
    base = st.one_of(st.sampled_from(EDGE_NUMBERS), st.integers(-2**70, 2**70).map(str),
                     st.floats(allow_nan=True, allow_infinity=True).map(repr))
    return st.builds(lambda n, u: n + u, base, st.sampled_from(UNITS))


def value_text(choices=()) -> st.SearchStrategy[str]:
    options = [number_text(), st.sampled_from(ODD_TEXT), st.text(max_size=12)]
    if choices:
        options.append(st.sampled_from(list(choices)))
    return st.one_of(*options)


# Values each kind of option usually takes, so that a good share of examples get past the first
# check and run (a test that only ever sees refusals would not notice a crash in the run).
PLAUSIBLE = {"size": ["4k", "64k", "1m", "512", "8KiB"], "duration": ["0", "10ms", "0.02", "1s"],
             "rate": ["1GB/s", "100MB/s"], "int": ["0", "1", "2", "8"], "percent": ["0", "50", "100", "75%"],
             "float": ["0.5", "10", "50"], "str": ["random", "zipf:1.2", "x"], "paths": ["t.dat", "tag1"],
             "dir_rate": ["10m", "1m,2m", ",500k"], "dir_iops": ["100", "10,20", "0"]}


def option_value(o) -> st.SearchStrategy[str]:
    """Half plausible values of the option's kind, half wild ones."""
    plausible = list(o.choices) or PLAUSIBLE.get(o.kind, ["on", "off"] if o.kind == "bool" else ["1"])
    return st.one_of(st.sampled_from(plausible), value_text(o.choices))


def toml_value(depth: int = 0) -> st.SearchStrategy:
    """A TOML value of any type, NaN and infinities included."""
    scalars = st.one_of(st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=True, allow_infinity=True),
                        st.booleans(), value_text())
    if depth >= 2:
        return scalars
    return st.one_of(scalars, st.lists(scalars, max_size=3),
                     st.dictionaries(st.sampled_from(["rw", "bs", "x", "name", "qd", "time"]), scalars, max_size=2))


def _toml_scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_scalar(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_scalar(x)}" for k, x in v.items()) + "}"
    return json.dumps(v, ensure_ascii=False)   # a JSON string is a TOML basic string (\u escapes too)


def to_toml(top: dict, phases: list[dict] | dict | None) -> str:
    """Tiny TOML writer for generated job files (inline tables keep it to one construct)."""
    lines = [f"{json.dumps(k)} = {_toml_scalar(v)}" for k, v in top.items()]
    if isinstance(phases, dict):                          # `[phase]` as a table: a wrong shape
        lines.append("[phase]")
        lines += [f"{json.dumps(k)} = {_toml_scalar(v)}" for k, v in phases.items()]
    for p in phases or [] if isinstance(phases, list) else []:
        lines.append("[[phase]]")
        groups = p.pop("group", None)
        lines += [f"{json.dumps(k)} = {_toml_scalar(v)}" for k, v in p.items()]
        if isinstance(groups, list):
            for g in groups:
                lines.append("[[phase.group]]")
                lines += [f"{json.dumps(k)} = {_toml_scalar(v)}" for k, v in g.items()]
        elif groups is not None:
            lines.append("[phase.group]")                 # a table where a list of tables belongs
            lines += [f"{json.dumps(k)} = {_toml_scalar(v)}" for k, v in groups.items()]
    return "\n".join(lines) + "\n"


def run_main(argv: list[str]) -> tuple[int, str, str]:
    """main() in-process; returns (exit code, stdout, stderr). Any exception escaping main fails
    the test with its traceback, which is exactly what must never happen."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:             # argparse: usage line plus one error line, exit 2
            rc = e.code if isinstance(e.code, int) else 2
    return rc, out.getvalue(), err.getvalue()


def assert_clean(argv: list[str], rc: int, err: str) -> None:
    """Success, or a one-line error naming the command; no traceback, no panic."""
    shown = " ".join(argv)[:300]
    event(f"exit code {rc}")
    assert "Traceback" not in err and "panicked" not in err, f"{shown}\n{err}"
    assert rc in EXIT_CODES, f"{shown}: exit code {rc}\n{err}"
    if rc != ExitCode.OK:
        errors = [line for line in err.splitlines() if ERROR_LINE.match(line)]
        assert errors, f"{shown}: exit {rc} without a one-line error\n{err}"


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """Runs happen in a private folder: scratch files, stores and outputs all land there."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    return tmp_path


# Flags appended last (argparse keeps the last value) so every run is tiny and harmless whatever
# was generated: the null engine on a 64 KiB file for at most 20 ms, one pass, no waits.
def tiny_run(target: str) -> list[str]:
    return ["--engine", "null", "--target", target, "--size", "64k", "--time", "0.02", "--passes", "1",
            "--pass-delay", "0", "--ramp", "0", "--start-delay", "0", "--null-delay", "0", "--cache", "off",
            "--threads", "1", "--qd", "1", "--offset", "0", "--no-store", "-q"]


# Options the tiny workload pins (fuzzed by the validation-level test instead, which runs nothing).
# The exec hooks run their value as a shell command: a generated "yes" once wrote its endless
# output to read.prerun.txt until the disk was full (tests/test_exec_hooks.py runs real hooks).
PINNED = {"engine", "target", "size", "time", "passes", "pass_delay", "ramp", "start_delay", "null_delay",
          "cache", "threads", "qd", "offset", "no_store", "quiet", "store", "fio", "json", "io_size",
          "io_total", "segments", "block", "participants", "participant_base", "stack", "allow_destroy",
          "bs", "rank_timeout", "reorder", "stall_after", "interval", "exec_prerun", "exec_postrun"}
OUTPUTS = ["-", "out.json", "adir", "missing/out.json", "/proc/storlab-out.json", "/dev/null", "adir/x/y.json"]


def flag_args(table, skip=frozenset()) -> st.SearchStrategy[list[str]]:
    """Flags drawn from an option table with generated values (and now and then an unknown flag)."""
    fuzzable = [o for o in table if o.name not in skip]

    def render(o, value):
        if o.kind == "bool":
            return [o.flag] if value is None else [o.flag, value]
        return [o.flag, value]

    one = st.sampled_from(fuzzable).flatmap(
        lambda o: st.builds(lambda v: render(o, v),
                            st.one_of(st.none(), st.sampled_from(["on", "off", "maybe"])) if o.kind == "bool"
                            else option_value(o)))
    unknown = st.sampled_from([["--bogus", "1"], ["--iodepth", "4"], ["--time"], ["--json"]])
    flags = st.lists(one, max_size=4) | st.lists(st.one_of(one, unknown), max_size=3)
    return flags.map(lambda groups: [a for g in groups for a in g])


@fuzz(500)
@given(cli=st.dictionaries(st.sampled_from([o.name for o in OPTIONS] + ["bogus", "iodepth"]),
                           st.one_of(value_text(), toml_value()), max_size=6),
       top=st.dictionaries(st.sampled_from([o.name for o in OPTIONS] + ["phase", "group", "name", "x"]),
                           toml_value(), max_size=4))
def test_option_values_are_refused_in_one_line_or_accepted_by_the_engine(cli, top):
    """Every option at any value, without running: the Python table and the engine's spec
    validation either accept it or refuse it with a ValueError; nothing else escapes and Rust
    never panics on a value the table let through."""
    try:
        job = resolve_job(cli, top, jobfile_name="fuzz.toml")
    except ValueError as e:
        assert "\n" not in str(e).strip(), str(e)
        return
    for phase in job.phases:
        if phase.kind != "io":
            continue
        for g in phase.groups:
            g.values["target"] = g.values["target"] or ("/tmp/never-opened",)
        try:
            _core.validate_spec(json.dumps(core_spec(phase)))
        except _core.CoreError as e:        # (kind, message): the runner turns it into one line
            assert "\n" not in e.args[-1], e.args


@fuzz(150)
@given(args=flag_args(OPTIONS, skip=PINNED), json_to=st.one_of(st.none(), st.sampled_from(OUTPUTS)))
def test_run_flags_give_a_result_or_one_line_error(workdir, args, json_to):
    argv = ["run", *args, *tiny_run(str(workdir / "t.dat"))] + (["--json", json_to] if json_to else [])
    rc, _, err = run_main(argv)
    assert_clean(argv, rc, err)


@fuzz(120)
@given(top=st.lists(st.sampled_from([o for o in OPTIONS if o.name not in PINNED]).flatmap(
           lambda o: st.tuples(st.just(o.name), option_value(o) | toml_value())), max_size=4).map(dict) |
       st.dictionaries(st.sampled_from(["bogus", "name", "type", "options", "rw"]), toml_value(), max_size=2),
       phases=st.one_of(st.none(),
                        st.dictionaries(st.sampled_from(["rw", "name", "bs"]), toml_value(1), max_size=2),
                        st.lists(st.fixed_dictionaries(
                            {}, optional={"name": toml_value(2), "rw": toml_value(2), "type": toml_value(2),
                                          "verify": toml_value(2), "group": st.one_of(
                                              st.lists(st.dictionaries(st.sampled_from(["rw", "bs", "rwmix_read",
                                                                                        "name", "bogus"]),
                                                                       toml_value(2), max_size=2), max_size=2),
                                              st.dictionaries(st.sampled_from(["rw", "x"]), toml_value(2),
                                                              max_size=1))}), max_size=2)))
def test_job_files_give_a_result_or_one_line_error(workdir, top, phases):
    path = workdir / "job.toml"
    path.write_text(to_toml(top, phases), encoding="utf-8")
    argv = ["run", str(path), *tiny_run(str(workdir / "t.dat"))]
    rc, _, err = run_main(argv)
    assert_clean(argv, rc, err)


@fuzz(25)
@given(content=st.one_of(st.binary(max_size=64), st.text(max_size=64).map(lambda t: t.encode("utf-8", "replace"))))
def test_garbage_job_files_give_one_line_error(workdir, content):
    path = workdir / "job.toml"
    path.write_bytes(content)
    argv = ["run", str(path), *tiny_run(str(workdir / "t.dat"))]
    rc, _, err = run_main(argv)
    assert_clean(argv, rc, err)


@fuzz(50)
@given(args=flag_args(SWEEP_OPTIONS, skip={"phase"}), csv_to=st.one_of(st.none(), st.sampled_from(OUTPUTS)))
def test_sweep_flags_give_a_result_or_one_line_error(workdir, args, csv_to):
    argv = ["sweep", *args, "--rw", "read,write", *tiny_run(str(workdir / "t.dat"))] + \
        (["--csv", csv_to] if csv_to else [])
    rc, _, err = run_main(argv)
    assert_clean(argv, rc, err)


@fuzz(50)
@given(args=flag_args(META_OPTIONS, skip={"target", "files", "threads", "depth", "fanout", "file_size", "json",
                                          "store", "no_store", "quiet", "keep", "stonewall"}))
def test_meta_flags_give_a_result_or_one_line_error(workdir, args):
    argv = ["meta", *args, "--target", str(workdir / "adir"), "--files-per-thread", "3", "--threads", "1", "--depth", "0",
            "--file-size", "0", "--no-store", "-q"]
    rc, _, err = run_main(argv)
    assert_clean(argv, rc, err)


def _plan_flags() -> dict[str, list[str]]:
    """Every value-taking flag of each stack-taking plan subcommand, from its option table."""
    from storlab.cli.plan import COMMANDS

    flags = {}
    for table in COMMANDS:
        sub = table.command.split()[1]
        if sub != "recommend":
            flags[sub] = [("-o" if o.name == "output" else o.flag) for o in table.options
                          if not o.positional and o.kind != "bool" and o.name != "json"]
    return flags


PLAN_EXTRA = _plan_flags()


@fuzz(150)
@given(sub=st.sampled_from(sorted(PLAN_EXTRA)),
       level=st.sampled_from(["5", "6", "10", "60"]) | st.sampled_from(["0", "1", "50", "7", "99"]),
       span=st.sampled_from(["4", "6", "8", "12"]) | st.sampled_from(
           EDGE_NUMBERS[:12] + ["2", "3", "64", "65", "100000", "100001"]),
       total=st.one_of(st.none(), st.sampled_from(["24", "48"]), st.sampled_from(["x", "0", str(2**64), "9" * 30])),
       data=st.data())
def test_plan_inputs_give_an_answer_or_one_line_error_within_seconds(workdir, sub, level, span, total, data):
    import time

    flags = data.draw(st.lists(st.sampled_from(PLAN_EXTRA[sub]), max_size=3, unique=True))
    argv = ["plan", sub, f"R{level}/{span}" + (f"/{total}" if total else "")]
    for flag in flags:
        plausible = st.sampled_from(["512KiB", "64k", "24", "2", "24h", "50MB/s", "2TB", "1e-15", "1%", "1MiB",
                                     "random:4k", "aligned", "5y", "1GB/s", "sda,sdb", "md", "stripe",
                                     "ctl=2GB/s", "lockstep"])
        value = data.draw(st.sampled_from(OUTPUTS) if flag == "-o" else plausible | value_text())
        argv += [flag, value]
    started = time.monotonic()
    rc, _, err = run_main(argv)
    assert_clean(argv, rc, err)
    assert time.monotonic() - started < 10, f"{argv} took {time.monotonic() - started:.1f} s"


@fuzz(30)
@given(flags=st.lists(st.sampled_from(["--drives", "--bays", "--controllers", "--levels", "--chunks", "--capacity",
                                       "--read-iops", "--min-mttdl", "--max-annual-loss", "--request", "--mttr",
                                       "--rebuild-rate", "--afr", "--drive"]), max_size=3, unique=True),
       data=st.data())
def test_plan_recommend_inputs_give_an_answer_or_one_line_error(workdir, flags, data):
    argv = ["plan", "recommend"]
    if "--drives" not in flags:
        argv += ["--drives", "24"]
    plausible = st.sampled_from(["24", "12", "2", "5,6", "64k,1m", "10TB", "1000", "1000y", "1e-4", "1MiB", "24h",
                                 "50MB/s", "1%", "4TB"])
    for flag in flags:
        argv += [flag, data.draw(plausible | value_text())]
    rc, _, err = run_main(argv)
    assert_clean(argv, rc, err)


def stack_table(keys: list[str]) -> st.SearchStrategy[dict]:
    """One table of a stack file: its own keys (and an unknown one) with plausible or wild values."""
    plausible = st.sampled_from(["R6/8", "R60/6/12", "512KiB", "2TB", "600000h", "24h", "150MB/s", "1e-15", 2, 4, 80.0])
    return st.dictionaries(st.sampled_from(keys + ["bogus"]), plausible | toml_value(2), max_size=4)


@fuzz(100)
@given(drive=stack_table(["capacity", "mtbf", "afr", "ber", "sector", "seq_read", "random_iops", "rotational"]),
       raid=stack_table(["layout", "drives", "chunk", "span_chunk", "count", "engine", "mttr", "rebuild_rate"]),
       volume=stack_table(["aggregate", "inter_chunk"]),
       components=st.lists(stack_table(["name", "parent", "count", "bw", "iops", "groups", "raid_engine",
                                        "mirror_writes"]),
                           max_size=3),
       sub=st.sampled_from(["geometry", "reliability", "perf", "script"]))
def test_stack_files_give_an_answer_or_one_line_error(workdir, drive, raid, volume, components, sub):
    lines = []
    drive = {"capacity": "2TB", **drive}                      # the required keys, unless overridden
    raid = {"layout": "R6/8", "chunk": "512KiB", **raid}
    for name, table in (("drive", drive), ("raid", raid), ("volume", volume)):
        lines.append(f"[{name}]")
        lines += [f"{json.dumps(k)} = {_toml_scalar(v)}" for k, v in table.items()]
    for row in components:
        lines.append("[[component]]")
        lines += [f"{json.dumps(k)} = {_toml_scalar(v)}" for k, v in row.items()]
    path = workdir / "stack.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = ["plan", sub, str(path)] + (["--mttr", "24h"] if sub == "reliability" else [])
    rc, _, err = run_main(argv)
    assert_clean(argv, rc, err)


def _table_flags(module_name: str, command: str) -> list:
    import importlib

    (table,) = [t for t in importlib.import_module(module_name).COMMANDS if t.command == command]
    return [o for o in table.options if not o.positional and o.name not in ("json", "output", "store")]


@fuzz(60)
@given(data=st.data(), command=st.sampled_from(["results list", "results export"]))
def test_results_flags_give_an_answer_or_one_line_error(workdir, data, command):
    opts = _table_flags("storlab.cli.results", command)
    argv = command.split()
    for o in data.draw(st.lists(st.sampled_from(opts), max_size=3, unique_by=lambda o: o.name)):
        argv += [o.flag] if o.kind == "bool" else [o.flag, data.draw(option_value(o))]
    rc, _, err = run_main([*argv, "--store", str(workdir / "results.db")])
    assert_clean(argv, rc, err)


@fuzz(40)
@given(data=st.data())
def test_doctor_flags_give_an_answer_or_one_line_error(workdir, data):
    opts = [o for o in _table_flags("storlab.cli.doctor", "doctor") if not o.name.endswith("_root")]
    argv = ["doctor"]
    for o in data.draw(st.lists(st.sampled_from(opts), max_size=2, unique_by=lambda o: o.name)):
        argv += [o.flag, data.draw(option_value(o))]
    # an empty recorded tree: nothing of the host is read
    argv += ["--sysfs-root", str(workdir / "adir"), "--proc-root", str(workdir / "adir"),
             "--dev-root", str(workdir / "adir")]
    rc, _, err = run_main(argv)
    assert_clean(argv, rc, err)
