"""A test's output against its expected answer (DESIGN.md, "Judge API": compare modes).

Both are bytes already held by the front (the output within the test's output limit); the modes
walk them with iterators, never building a list of every token or line of a large output.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Iterator
from itertools import zip_longest

# what a request may ask for; "checker" and "none" are not comparisons of bytes
MODES = ("tokens", "lines", "exact", "float", "checker", "none")

_TOKEN = re.compile(rb"[^ \t\n\r\v\f]+")  # ASCII whitespace separates tokens
_NUMBER = re.compile(rb"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
# exact for any token an output limit lets through; exponents far beyond a double's
_EXACT = decimal.Context(prec=200, Emax=10**9, Emin=-(10**9), traps=[decimal.InvalidOperation])


def same(mode: str, output: bytes, expected: bytes, epsilon: float = 1e-6) -> bool:
    """Whether `output` answers `expected` under `mode` (tokens, lines, exact, float)."""
    if mode == "exact":
        return output == expected
    if mode == "tokens":
        return all(a == b for a, b in zip_longest(_tokens(output), _tokens(expected)))
    if mode == "float":
        return all(a is not None and b is not None and _close(a, b, epsilon) for a, b in zip_longest(_tokens(output), _tokens(expected)))
    if mode == "lines":
        return all(a == b for a, b in zip_longest(_lines(output), _lines(expected)))
    raise ValueError(f"not a comparison: {mode}")


def _tokens(data: bytes) -> Iterator[bytes]:
    return (m.group() for m in _TOKEN.finditer(data))


def _lines(data: bytes) -> Iterator[bytes]:
    """Each line with its trailing spaces, tabs and carriage returns cut; trailing empty lines
    are not yielded (nor is the empty rest after a final newline)."""
    blanks = 0  # empty lines seen and not yet yielded: only yielded if a non-empty one follows
    start = 0
    while start <= len(data):
        end = data.find(b"\n", start)
        if end < 0:
            end = len(data)
        line = data[start:end].rstrip(b" \t\r")
        if line:
            yield from (b"" for _ in range(blanks))
            blanks = 0
            yield line
        else:
            blanks += 1
        start = end + 1


def _close(a: bytes, b: bytes, epsilon: float) -> bool:
    """Two tokens: equal as numbers within epsilon (absolute, or relative to the expected `b`)
    when both are numbers by DESIGN.md's pattern, else equal as text. In decimal arithmetic on
    the tokens as written, so that the bound is inclusive as written (1.1 against 1 within 0.1)
    and no exponent overflows."""
    if _NUMBER.fullmatch(a) and _NUMBER.fullmatch(b):
        with decimal.localcontext(_EXACT):
            x, y, eps = decimal.Decimal(a.decode()), decimal.Decimal(b.decode()), decimal.Decimal(epsilon)
            difference = abs(x - y)
            return difference <= eps or difference <= eps * abs(y)
    return a == b
