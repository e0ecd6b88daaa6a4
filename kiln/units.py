"""Parsing and display of durations, sizes and booleans.

The same syntax is used by the environment (config.py) and by the HTTP request's `timeout`
field, so the parsers are strict and cheap: they accept exactly the documented forms and raise
ValueError with a short reason for anything else. They never strip whitespace or accept signs,
decimals or non-ASCII digits (Python's int() would take all of those).
"""

from __future__ import annotations

import re

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

# Sizes end up in rlimits and cgroup files, which hold signed 64-bit values.
SIZE_MAX = 2**63 - 1

# Capping the length first means hostile input (a 1 MB `timeout` string) costs nothing to refuse;
# leading zeros do not count against the digits (`007s` is 7 s), only against that cap.
_DURATION_DIGITS = 12
_SIZE_DIGITS = 19
_TEXT_MAX = 64

_DURATION = re.compile(r"([0-9]+)(ms|s|m)")
_SIZE = re.compile(r"([0-9]+)([kKmMgG]?)")

_MS_PER_UNIT = {"ms": 1, "s": 1000, "m": 60_000}
_BYTES_PER_SUFFIX = {"": 1, "k": KiB, "m": MiB, "g": GiB}

_TRUE = frozenset({"1", "true", "yes"})
_FALSE = frozenset({"0", "false", "no"})


def parse_duration_ms(text: str) -> int:
    """`<digits>ms`, `<digits>s` or `<digits>m` -> milliseconds. Zero is returned as 0."""
    if len(text) > _TEXT_MAX:
        raise ValueError(f"too long (at most {_TEXT_MAX} characters)")
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError("expected whole digits followed by ms, s or m (e.g. 500ms, 30s, 5m)")
    digits, unit = match.groups()
    if len(digits.lstrip("0")) > _DURATION_DIGITS:
        raise ValueError(f"too many digits (at most {_DURATION_DIGITS})")
    return int(digits) * _MS_PER_UNIT[unit]


def parse_size(text: str) -> int:
    """Plain bytes, or digits with a 1024-based k, m or g suffix (any case) -> bytes."""
    if len(text) > _TEXT_MAX:
        raise ValueError(f"too long (at most {_TEXT_MAX} characters)")
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError("expected whole digits, optionally followed by k, m or g (e.g. 1048576, 64m)")
    digits, suffix = match.groups()
    if len(digits.lstrip("0")) > _SIZE_DIGITS:
        raise ValueError(f"too many digits (at most {_SIZE_DIGITS})")
    size = int(digits) * _BYTES_PER_SUFFIX[suffix.lower()]
    if size > SIZE_MAX:
        raise ValueError("too large")
    return size


def parse_bool(text: str) -> bool:
    """1/true/yes -> True, 0/false/no -> False, in any case."""
    folded = text.lower()
    if folded in _TRUE:
        return True
    if folded in _FALSE:
        return False
    raise ValueError("expected 1, true, yes, 0, false or no")


def format_size(n: int) -> str:
    """The shortest exact form parse_size accepts: 1073741824 -> '1g', 1536 -> '1536'."""
    if n < 0:
        raise ValueError("a size cannot be negative")
    # Largest unit first, and only when it divides exactly, so the text parses back to n.
    for suffix, unit in (("g", GiB), ("m", MiB), ("k", KiB)):
        if n and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def format_duration_ms(ms: int) -> str:
    """The shortest exact form parse_duration_ms accepts: 300000 -> '5m', 1500 -> '1500ms'."""
    if ms < 0:
        raise ValueError("a duration cannot be negative")
    if ms == 0:
        return "0s"
    for unit in ("m", "s"):
        if ms % _MS_PER_UNIT[unit] == 0:
            return f"{ms // _MS_PER_UNIT[unit]}{unit}"
    return f"{ms}ms"
