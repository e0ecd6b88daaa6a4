"""kiln.units: strict parsers for durations, sizes and booleans, and their display forms."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kiln.units import (
    GiB,
    KiB,
    MiB,
    SIZE_MAX,
    format_duration_ms,
    format_size,
    parse_bool,
    parse_duration_ms,
    parse_size,
)

# --- parse_duration_ms ---


@pytest.mark.parametrize(
    "text, ms",
    [
        ("0ms", 0),
        ("0s", 0),
        ("0m", 0),
        ("1ms", 1),
        ("1500ms", 1500),
        ("1s", 1000),
        ("30s", 30_000),
        ("1m", 60_000),
        ("5m", 300_000),
        ("007s", 7000),
        ("999999999999ms", 999_999_999_999),
        ("999999999999m", 999_999_999_999 * 60_000),
    ],
)
def test_parse_duration_accepts(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize(
    "text",
    [
        "",
        "10",  # no unit
        "1h",
        "1d",
        "1us",
        "1.5s",
        ".5s",
        "-1s",
        "+1s",
        " 1s",
        "1s ",
        "1 s",
        "1s\n",
        "1S",
        "1MS",
        "1Ms",
        "s",
        "ms",
        "1sm",
        "1ms1",
        "1e3ms",
        "0x10s",
        "1_000ms",
        "١s",  # Arabic-Indic digit one
        "１s",  # full-width digit one
        "1000000000000ms",  # 13 digits
        "9" * 5000 + "s",
    ],
)
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration_ms(text)


def test_parse_duration_error_says_what_is_accepted():
    with pytest.raises(ValueError, match="ms, s or m"):
        parse_duration_ms("1h")
    with pytest.raises(ValueError, match="too many digits"):
        parse_duration_ms("1" * 13 + "s")
    with pytest.raises(ValueError, match="too many digits"):
        parse_duration_ms("1" * 13 + "ms")
    with pytest.raises(ValueError, match="too long"):
        parse_duration_ms("0" * 70 + "1ms")


def test_leading_zeros_do_not_count_as_digits():
    assert parse_duration_ms("0000000000001s") == 1000  # 13 digits, one of them significant
    assert parse_duration_ms("0" * 40 + "5m") == 300_000
    assert parse_size("0" * 25 + "1k") == 1024


def test_parse_size_error_says_what_is_accepted():
    with pytest.raises(ValueError, match="k, m or g"):
        parse_size("1t")
    with pytest.raises(ValueError, match="too many digits"):
        parse_size("1" * 20)
    with pytest.raises(ValueError, match="too many digits"):
        parse_size("1" * 21)
    with pytest.raises(ValueError, match="too long"):
        parse_size("0" * 70 + "1")
    with pytest.raises(ValueError, match="too large"):
        parse_size("9223372036854775808")


# --- parse_size ---


@pytest.mark.parametrize(
    "text, size",
    [
        ("0", 0),
        ("1", 1),
        ("1048576", MiB),
        ("007", 7),
        ("0k", 0),
        ("1k", 1024),
        ("1K", 1024),
        ("3k", 3 * KiB),
        ("64m", 64 * MiB),
        ("64M", 64 * MiB),
        ("1g", GiB),
        ("1G", GiB),
        ("9223372036854775807", SIZE_MAX),
    ],
)
def test_parse_size_accepts(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize(
    "text",
    [
        "",
        "-1",
        "+1",
        "-1m",
        "1.5m",
        ".5g",
        "1 m",
        " 1m",
        "1m ",
        "1\n",
        "1t",
        "1T",
        "1kb",
        "1mb",
        "1KiB",
        "1b",
        "k",
        "m",
        "1_000",
        "1,000",
        "1e6",
        "0x10",
        "١",  # Arabic-Indic digit one
        "１k",  # full-width digit one
        "9223372036854775808",  # one above SIZE_MAX
        "9999999999g",  # too large once multiplied
        "1" * 20,  # too many digits
    ],
)
def test_parse_size_rejects(text):
    with pytest.raises(ValueError):
        parse_size(text)


# --- parse_bool ---


@pytest.mark.parametrize(
    "text, value",
    [
        ("1", True),
        ("true", True),
        ("TRUE", True),
        ("True", True),
        ("yes", True),
        ("YES", True),
        ("0", False),
        ("false", False),
        ("False", False),
        ("no", False),
        ("NO", False),
    ],
)
def test_parse_bool_accepts(text, value):
    assert parse_bool(text) is value


@pytest.mark.parametrize(
    "text", ["", " ", "2", "-1", "y", "n", "on", "off", "t", "f", " true", "true ", "yes\n", "ｙes"]
)
def test_parse_bool_rejects(text):
    with pytest.raises(ValueError, match="1, true, yes, 0, false or no"):
        parse_bool(text)


# --- format_size / format_duration_ms ---


@pytest.mark.parametrize(
    "size, text",
    [
        (0, "0"),
        (1, "1"),
        (1023, "1023"),
        (1024, "1k"),
        (1536, "1536"),
        (1025 * KiB, "1025k"),
        (MiB, "1m"),
        (256 * MiB, "256m"),
        (1536 * MiB, "1536m"),
        (GiB, "1g"),
        (64 * GiB, "64g"),
    ],
)
def test_format_size(size, text):
    assert format_size(size) == text


@pytest.mark.parametrize(
    "ms, text",
    [
        (0, "0s"),
        (1, "1ms"),
        (999, "999ms"),
        (1000, "1s"),
        (1500, "1500ms"),
        (30_000, "30s"),
        (60_000, "1m"),
        (90_000, "90s"),
        (300_000, "5m"),
    ],
)
def test_format_duration(ms, text):
    assert format_duration_ms(ms) == text


def test_formatters_refuse_negative_values():
    with pytest.raises(ValueError):
        format_size(-1)
    with pytest.raises(ValueError):
        format_duration_ms(-1)


# --- properties ---


@given(st.integers(min_value=0, max_value=10**12 - 1))
def test_duration_round_trip(ms):
    assert parse_duration_ms(format_duration_ms(ms)) == ms


@given(st.integers(min_value=0, max_value=SIZE_MAX))
def test_size_round_trip(size):
    assert parse_size(format_size(size)) == size


@given(st.integers(min_value=0, max_value=10**12 - 1), st.sampled_from([("ms", 1), ("s", 1000), ("m", 60_000)]))
def test_duration_of_well_formed_text(number, unit):
    suffix, factor = unit
    assert parse_duration_ms(f"{number}{suffix}") == number * factor


@given(st.integers(min_value=0, max_value=2**32), st.sampled_from(["", "k", "K", "m", "M", "g", "G"]))
def test_size_of_well_formed_text(number, suffix):
    factor = {"": 1, "k": KiB, "m": MiB, "g": GiB}[suffix.lower()]
    assert parse_size(f"{number}{suffix}") == number * factor


# Mostly near-misses: digits, units, signs, dots and spaces, plus arbitrary text.
_near_miss = st.one_of(st.text(alphabet="0123456789msgkKMGhS.-+ _\n١", max_size=16), st.text())


def _parses_or_value_error(parse, grammar, text):
    try:
        result = parse(text)
    except ValueError:
        return
    # Whatever is accepted must be the documented syntax, nothing looser.
    assert re.fullmatch(grammar, text, re.ASCII)
    assert isinstance(result, int) and result >= 0


@given(_near_miss)
def test_garbage_duration_raises_only_value_error(text):
    _parses_or_value_error(parse_duration_ms, r"[0-9]{1,12}(ms|s|m)", text)


@given(_near_miss)
def test_garbage_size_raises_only_value_error(text):
    _parses_or_value_error(parse_size, r"[0-9]{1,19}[kmgKMG]?", text)


@given(_near_miss)
def test_garbage_bool_raises_only_value_error(text):
    try:
        value = parse_bool(text)
    except ValueError:
        return
    assert value is (text.lower() in ("1", "true", "yes"))
    assert text.lower() in ("1", "true", "yes", "0", "false", "no")
