"""The option table: kept in step with the Rust job spec, values validated with one-line errors."""
import json

import pytest
from storlab import _core
from storlab.jobs import options
from storlab.jobs.job import resolve_job
from storlab.jobs.options import BY_NAME, NUMERIC_KINDS, OPTIONS, OptionError, parse_value, render_reference


def test_table_and_rust_spec_have_the_same_fields():
    core_options = {o.name for o in OPTIONS if o.core}
    rust_fields = set(_core.spec_field_names()) - {"name"}
    assert core_options == rust_fields


def test_engine_options_have_the_engines_default_bounds_unit_and_choices():
    rules = json.loads(_core.option_rules())
    for o in OPTIONS:
        if not o.core:
            continue
        rule = rules[o.name]
        default = tuple(rule["default"]) if isinstance(rule["default"], list) else rule["default"]
        assert (o.default, type(o.default)) == (default, type(default)), o.name
        assert (o.minimum, o.maximum) == (rule.get("min"), rule.get("max")), o.name
        if o.kind in NUMERIC_KINDS:
            assert "min" in rule and "max" in rule, f"{o.name}: a numeric engine option without the engine's bounds"
            assert o.unit == rule["unit"], o.name
        if o.kind == "choice":
            assert list(o.choices) == rule["choices"], o.name


def test_the_table_does_not_write_an_engine_rule_a_second_time():
    """A row of an engine option says how its value is written; default, bounds and unit are the engine's."""
    for row in options.ROWS:
        if row.core and row.name in options.ENGINE_RULES:
            assert (row.default, row.minimum, row.maximum, row.unit) == (None, None, None, ""), row.name


def test_meta_options_have_the_engines_default_bounds_and_choices():
    """The meta table still writes its rows in full: each numeric or choice option must say what
    the engine's meta spec says (crates/storlab-core/src/meta/spec.rs BOUNDS)."""
    from storlab.measure.meta import META_OPTIONS

    rules = json.loads(_core.meta_option_rules())
    checked = 0
    for o in META_OPTIONS:
        rule = rules.get(o.name)
        if rule is None or not ("min" in rule or "choices" in rule):
            continue
        checked += 1
        assert o.default == rule["default"], o.name
        if o.kind in NUMERIC_KINDS:
            assert (o.minimum, o.upper) == (rule["min"], rule["max"]), o.name
        else:
            assert set(o.choices) == set(rule["choices"]), o.name
    numeric_meta = {o.name for o in META_OPTIONS if o.kind in NUMERIC_KINDS and o.core and o.name in rules}
    assert numeric_meta <= {name for name, rule in rules.items() if "min" in rule}
    assert checked >= 8


def test_bs_above_1_gib_is_refused_by_the_table_as_by_the_engine():
    """bs had no maximum in the table while the engine refused more than 1 GiB."""
    assert BY_NAME["bs"].maximum == 1 << 30
    assert parse_value("bs", "1g") == 1 << 30
    with pytest.raises(OptionError, match=r"^bs: 2 GiB is out of range; allowed: >= 1 byte and <= 1 GiB$"):
        parse_value("bs", "2g")


@pytest.mark.parametrize("values, words", [
    ({"verify": "crc32c", "bs": "32"}, ["bs", "verify needs bs >= 64"]),
    ({"rbw": "lag", "rw": "read"}, ["rbw", "needs rw=write"]),
    ({"bs": "4k", "block": "6k"}, ["block", "whole number of transfers"]),
    ({"files": "per_thread", "thread_layout": "strided"}, ["thread_layout", "files=shared"]),
    ({"uring.batch": "4"}, ["uring.batch", "belongs to engine io_uring, but engine is psync"]),
    ({"rw": "read", "seq_hole": "6k"}, ["seq_hole", "allowed: 0 or a multiple of bs"]),
    ({"rw": "randread", "seq_hole": "4k"}, ["seq_hole", "a random pattern has none"]),
    ({"rw": "read", "seq_hole": "4k", "thread_layout": "strided"}, ["seq_hole", "thread_layout=region"]),
])
def test_combinations_the_engine_refuses_are_refused_when_the_job_is_read(values, words):
    """Rules combining options live in the engine's spec validation only; resolving a job runs it,
    so a bad combination is one line naming the option before anything is opened."""
    with pytest.raises(OptionError) as e:
        resolve_job(values)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("job file phase 1 group 1: ")
    for w in words:
        assert w in msg, msg


def test_groups_of_one_phase_with_different_ramps_are_refused_when_the_job_is_read():
    jobfile = {"phase": [{"group": [{"ramp": "1s"}, {"ramp": "2s"}]}]}
    with pytest.raises(OptionError, match="^job.toml phase 1: groups of one phase must share ramp and interval"):
        resolve_job({}, jobfile, jobfile_name="job.toml")


def test_every_option_has_help_and_a_known_kind():
    for o in OPTIONS:
        assert o.help and o.kind in {"size", "duration", "rate", "int", "float", "percent", "choice", "bool",
                                     "str", "text", "paths", "dir_rate", "dir_iops"}
        if o.kind == "choice":
            assert o.default in o.choices and all(o.choices.values())


def test_engine_scoped_options_are_namespaced():
    for o in OPTIONS:
        if o.engine == "io_uring":
            assert o.name.startswith("uring.")


@pytest.mark.parametrize("name,raw,expected", [
    ("bs", "4k", 4096), ("bs", "1MiB", 1 << 20), ("time", "500ms", 0.5), ("rw", "randrw", "randrw"),
    ("rwmix_read", "70%", 70), ("threads", "8", 8), ("direct", "yes", True), ("seed", "0x10", 16),
    ("target", "/a", ("/a",)), ("random_map", "off", False), ("random_distribution", "uniform", "random"),
    ("random_distribution", "zipf:1.20:0.5", "zipf:1.2:0.5"), ("random_distribution", "normal", "normal:0"),
    ("uring.fixed_buffers", "auto", "auto"), ("uring.fixed_buffers", "off", "off"), ("uring.fixed_buffers", "on", "on"),
    # the switch of earlier releases: true is on, false is off (never registered, as it did then)
    ("uring.fixed_buffers", True, "on"), ("uring.fixed_buffers", False, "off"), ("uring.fixed_buffers", "yes", "on"),
    ("uring.fixed_buffers", "0", "off"),
])
def test_parse_value(name, raw, expected):
    assert parse_value(name, raw) == expected


@pytest.mark.parametrize("name,raw,words", [
    ("rw", "sideways", ["rw", "read, write, randread"]),
    ("bs", "4x", ["bs", "unknown size unit"]),
    ("bs", "0", ["bs", ">= 1"]),
    ("rwmix_read", "101", ["rwmix_read", "<= 100"]),
    ("threads", "two", ["threads", "whole number"]),
    ("engine", "aio", ["engine", "psync, io_uring, null"]),
    ("time", "soon", ["time", "duration"]),
    ("bogus", "1", ["unknown option 'bogus'"]),
    ("random_distribution", "zipf:0", ["random_distribution", "theta", "must be > 0", "zoned:A/R"]),
    ("random_distribution", "zoned:50/50:40/50", ["random_distribution", "sum to 90 %", "both must be 100"]),
    ("random_distribution", "gamma:2", ["random_distribution", "unknown distribution", "pareto[:h[:center]]"]),
    ("uring.fixed_buffers", "sometimes", ["uring.fixed_buffers", "'sometimes'", "auto, on, off"]),
    ("uring.fixed_buffers", 2, ["uring.fixed_buffers", "auto, on, off"]),
])
def test_bad_values_give_one_line_naming_field_and_allowed(name, raw, words):
    with pytest.raises(OptionError) as e:
        parse_value(name, raw)
    msg = str(e.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg


def test_reference_page_lists_every_option():
    page = render_reference()
    for o in OPTIONS:     # by its job-file key, or its flag when it is a command-line flag only
        assert f"`{o.name if o.job_key else o.flag}`" in page


def test_docs_options_page_is_current():
    import pathlib

    docs = pathlib.Path(__file__).resolve().parent.parent / "docs" / "options.md"
    assert docs.read_text() == render_reference() + "\n", \
        "docs/options.md is stale: python -m storlab.jobs.options > docs/options.md"


def test_every_subcommand_help_renders():
    """Help texts go through argparse's %-formatting: a stray % must not break --help."""
    import contextlib
    import io

    from storlab.cli.main import SUBCOMMANDS, build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name in SUBCOMMANDS:
        if name in sub.choices:
            with contextlib.redirect_stdout(io.StringIO()) as out:
                sub.choices[name].print_help()
            assert name in out.getvalue()


def test_fixed_buffers_in_a_job_file_as_toml_writes_it(tmp_path):
    """`uring.fixed_buffers` written as the reference names it: TOML reads the unquoted key as a
    table `uring`, which is the option all the same; quoted, a `[uring]`-style table, or the old
    boolean; a bad value is one line naming the option and the allowed values."""
    from storlab.jobs.job import load_jobfile

    f = tmp_path / "job.toml"
    f.write_text('engine = "io_uring"\nuring.fixed_buffers = "off"\n'
                 '[[phase]]\nname = "a"\n[[phase.group]]\n"uring.fixed_buffers" = true\n'
                 '[[phase]]\nname = "b"\n[[phase.group]]\nuring = { fixed_buffers = "auto" }\n'
                 '[[phase]]\nname = "c"\n')
    job = resolve_job({}, load_jobfile(str(f)))
    assert [p.groups[0].values["uring.fixed_buffers"] for p in job.phases] == ["on", "auto", "off"]
    job = resolve_job({"uring.fixed_buffers": "auto"}, load_jobfile(str(f)))     # the flag over the file
    assert {p.groups[0].values["uring.fixed_buffers"] for p in job.phases} == {"auto"}
    f.write_text('engine = "io_uring"\nuring.fixed_buffers = "never"\n')
    with pytest.raises(OptionError) as e:
        resolve_job({}, load_jobfile(str(f)), jobfile_name=str(f))
    assert str(e.value) == f"{f}: uring.fixed_buffers: 'never' is not allowed; use one of: auto, on, off"
    f.write_text('engine = "io_uring"\nuring.fixed_bufers = "on"\n')
    with pytest.raises(OptionError, match=r"unknown option 'uring.fixed_bufers' \(did you mean 'uring.fixed_buffers'\?\)"):
        resolve_job({}, load_jobfile(str(f)), jobfile_name=str(f))


def test_fixed_buffers_on_or_off_belongs_to_io_uring():
    for mode in ("on", "off"):
        with pytest.raises(OptionError, match="uring.fixed_buffers: belongs to engine io_uring, but engine is psync"):
            resolve_job({"uring.fixed_buffers": mode}, None)
    assert resolve_job({"uring.fixed_buffers": "auto"}, None).phases[0].groups[0].values["engine"] == "psync"


def test_a_list_row_is_a_list_of_what_its_base_row_takes():
    """options.list_row: the base's name, flag and help with the list said; each value parsed by the
    base's parser within the list row's own tighter bounds; the docs name the form `list of KIND`."""
    bs = BY_NAME["bs"]
    row = options.list_row(bs, "the sizes to try", minimum=4096)
    assert (row.name, row.flag, row.kind, row.list_of) == ("bs", "--bs", "list", bs)
    assert row.help.startswith(bs.help) and row.help.endswith("the sizes to try") and not row.job_key
    assert options.value_form(row) == "list of size"
    assert options.parse_option(row, "4k, 64k,1m") == (4096, 65536, 1 << 20)
    assert options.parse_option(row, ["8k"]) == (8192,)
    for raw, words in [("512", "--bs: '512' is out of range; allowed: >= 4 KiB and <= 1 GiB"),
                       ("4k,2g", "--bs: '2g' is out of range; allowed: >= 4 KiB and <= 1 GiB"),
                       (",", "--bs: ',' has an empty item; give values separated by single commas"),
                       ("4k,,8k", "--bs: '4k,,8k' has an empty item; give values separated by single commas"),
                       ("4k,4096", "--bs: '4096' is given twice (as 4096); each value once"),
                       (",".join(["4k"] * 33), "--bs: give 1 to 32 comma-separated values, got 33")]:
        with pytest.raises(OptionError) as e:
            options.parse_option(row, raw)
        assert str(e.value) == words
    assert "| `--bs` | list of size (bytes) |" in "\n".join(options.render_rows([row], job_keys=False))
    assert "each >= 4 KiB and <= 1 GiB" in options.allowed_values(row)
