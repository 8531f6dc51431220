"""The option table: kept in step with the Rust job spec, values validated with one-line errors."""
import pytest
from storlab import _core
from storlab.jobs.options import OPTIONS, OptionError, parse_value, render_reference


def test_table_and_rust_spec_have_the_same_fields():
    core_options = {o.name for o in OPTIONS if o.core}
    rust_fields = set(_core.spec_field_names()) - {"name"}
    assert core_options == rust_fields


def test_every_option_has_help_and_a_known_kind():
    for o in OPTIONS:
        assert o.help and o.kind in {"size", "duration", "rate", "int", "float", "percent", "choice", "bool",
                                     "str", "paths", "dir_rate", "dir_iops"}
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
    for o in OPTIONS:
        assert f"`{o.name}`" in page


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
