"""Sizes, durations and rates: accepted forms and one-line errors for bad ones."""
import pytest
from storlab.units import UnitError, format_rate, format_size, parse_duration, parse_rate, parse_size


@pytest.mark.parametrize("text,expected", [
    ("4k", 4096), ("4K", 4096), ("1m", 1 << 20), ("1g", 1 << 30), ("2t", 2 << 40),
    ("4KiB", 4096), ("1MiB", 1 << 20), ("1MB", 10**6), ("1GB", 10**9), ("1.5GiB", 3 << 29),
    ("512", 512), (" 64 k ", 65536), ("0", 0), (8192, 8192), ("1e3", 1000), ("10B", 10),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "4x", "k", "-1k", "1.3", "4 kbits", "1..2m", "4k4"])
def test_parse_size_rejects_with_one_line_naming_forms(text):
    with pytest.raises(UnitError) as e:
        parse_size(text, "bs")
    msg = str(e.value)
    assert msg.startswith("bs:") and "\n" not in msg


@pytest.mark.parametrize("text,expected", [
    ("500ms", 0.5), ("10s", 10.0), ("2m", 120.0), ("1h", 3600.0), ("1.5", 1.5), ("250us", 250e-6),
    ("100ns", 100e-9), (3, 3.0), ("1d", 86400.0),
])
def test_parse_duration(text, expected):
    assert parse_duration(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "10x", "ms", "-5s", "1:00"])
def test_parse_duration_rejects(text):
    with pytest.raises(UnitError) as e:
        parse_duration(text, "time")
    assert str(e.value).startswith("time:")


def test_rates_and_formatting():
    assert parse_rate("50MB/s") == 50e6
    assert parse_rate("1GiB/s") == float(1 << 30)
    assert format_size(4096) == "4 KiB"
    assert format_size(1536) == "1.5 KiB"
    assert format_rate(3 << 30) == "3.00 GiB/s"
