"""A test's output against its expected answer (DESIGN.md, "Judge API": compare modes).

The output is bytes the front holds (within the test's output limit); the expected answer is
bytes too, or a file of the store mapped (same_as_file), read only as far as the walk goes. The
modes walk them with iterators, never building a list of every token or line of a large output.
`pause` is called every PACE tokens or lines: the judge runs large comparisons in a worker
thread (kiln/judge/judge.py), where the pause lets the event loop's thread take the GIL, so one
large comparison never holds up the rest.
"""

from __future__ import annotations

import decimal
import math
import mmap
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from itertools import zip_longest

# what a request may ask for; "checker" and "none" are not comparisons of bytes
MODES = ("tokens", "line_tokens", "lines", "exact", "float", "checker", "none")
BYTE_MODES = ("tokens", "line_tokens", "lines", "exact", "float")  # those `ignore_case` applies to

_TOKEN = re.compile(rb"[^ \t\n\r\v\f]+")  # ASCII whitespace separates tokens
_LINE_BREAKS = (ord("\n"), ord("\r"))  # DMOJ's isline(): what ends a line
_BLANK_LINES = re.compile(rb"(?:[ \t\r]*\n)*")
_NUMBER = re.compile(rb"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
# exponents far beyond a double's; a token decimal cannot hold (an exponent past 10**18) raises,
# and the tokens are then unequal: a submission's output must never fail the comparison itself
PACE = 4096
_ULP = sys.float_info.epsilon
Fold = Callable[[bytes], bytes] | None  # bytes.lower with ignore_case: ASCII letters only, as strcasecmp
_EXACT = decimal.Context(prec=200, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[decimal.InvalidOperation, decimal.Overflow])


def same(mode: str, output: bytes, expected: bytes | mmap.mmap, epsilon: float = 1e-6, pause: Callable[[], object] | None = None, ignore_case: bool = False) -> bool:
    """Whether `output` answers `expected` under `mode` (tokens, line_tokens, lines, exact,
    float), with `ignore_case` ASCII letters compared folded (as C's strcasecmp does: Kattis).
    `expected` may be a store file mapped: it is read only as far as the comparison walks."""
    fold = bytes.lower if ignore_case else None
    if mode == "exact":
        return _equal(output, expected, fold)
    if mode == "tokens":
        return all(a == b for a, b in _paced(zip_longest(_tokens(output, fold), _tokens(expected, fold)), pause))
    if mode == "line_tokens":
        return all(a == b for a, b in _paced(zip_longest(_line_tokens(output, fold), _line_tokens(expected, fold)), pause))
    if mode == "float":
        pairs = zip_longest(_tokens(output, fold), _tokens(expected, fold))
        return all(a is not None and b is not None and _close(a, b, epsilon) for a, b in _paced(pairs, pause))
    if mode == "lines":
        return _equal(output, expected, fold) or all(a == b for a, b in _paced(zip_longest(_lines(output, fold), _lines(expected, fold)), pause))
    raise ValueError(f"not a comparison: {mode}")


def same_as_file(mode: str, output: bytes, fd: int, epsilon: float = 1e-6, pause: Callable[[], object] | None = None, ignore_case: bool = False) -> bool:
    """same() against a file's content (an expected answer of the store), mapped read-only and
    read only as far as the comparison walks; `fd` is closed here (whoever runs this owns it:
    a worker thread may finish after the request that asked for it has gone)."""
    try:
        if os.fstat(fd).st_size == 0:
            return same(mode, output, b"", epsilon, pause, ignore_case)
        mapped = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    finally:
        os.close(fd)  # a mapping holds the file without it
    try:
        return same(mode, output, mapped, epsilon, pause, ignore_case)
    finally:
        try:
            mapped.close()
        except BufferError:  # a walk cut short by an exception still holds it: freed with it
            pass


def _equal(output: bytes, expected: bytes | mmap.mmap, fold: Fold) -> bool:
    """Byte for byte (folded, with `fold`); a mapped answer is copied only when its size is the
    output's (bounded by the output limit)."""
    if len(output) != len(expected):
        return False
    return output == expected[:] if fold is None else fold(output) == fold(expected[:])


def _paced(pairs: Iterable[tuple], pause: Callable[[], object] | None) -> Iterator[tuple]:
    if pause is None:
        yield from pairs
        return
    for count, pair in enumerate(pairs, 1):
        if count % PACE == 0:
            pause()
        yield pair


def _tokens(data: bytes, fold: Fold = None) -> Iterator[bytes]:
    tokens = (m.group() for m in _TOKEN.finditer(data))
    return tokens if fold is None else map(fold, tokens)


def _line_tokens(data: bytes, fold: Fold) -> Iterator[tuple[bool, bytes]]:
    """Each token with whether a line break (\n or \r) comes between it and the token before
    (never for the first): two outputs whose sequences are equal have the same tokens on the
    same lines, blank lines, CRLF and leading or trailing whitespace aside. This is DMOJ's
    `standard` checker (dmoj/checkers/_checker.c), which tells "a space between" from "a line
    break between" and nothing more. The gap is looked at in place: one byte (the common case)
    by index, a longer one with find(), linear in the data whatever the runs of whitespace (on
    15 MiB of numbers about 1.4x tokens' time, where find() on every gap took 3x)."""
    previous = None
    for match in _TOKEN.finditer(data):
        start = match.start()
        if previous is None:
            broken = False
        elif start - previous == 1:
            broken = data[previous] in _LINE_BREAKS
        else:
            broken = data.find(b"\n", previous, start) >= 0 or data.find(b"\r", previous, start) >= 0
        previous = match.end()
        yield broken, match.group() if fold is None else fold(match.group())


def _lines(data: bytes, fold: Fold = None) -> Iterator[bytes]:
    """Each line with its trailing spaces, tabs and carriage returns cut; trailing empty lines
    are not yielded (nor is the empty rest after a final newline)."""
    blanks = 0  # empty lines seen and not yet yielded: only yielded if a non-empty one follows
    start = 0
    while start <= len(data):
        end = data.find(b"\n", start)
        if end < 0:
            end = len(data)
        line = data[start:end].rstrip(b" \t\r")
        line = line if fold is None else fold(line)
        if line:
            yield from (b"" for _ in range(blanks))
            blanks = 0
            yield line
            start = end + 1
        elif end == len(data):
            return  # a blank last line: trailing, not yielded
        else:  # this and the blank lines after it, counted at once (a run of them may be long)
            run = _BLANK_LINES.match(data, end + 1)
            blanks += 1 + run.group().count(b"\n")
            start = run.end()


def _close(a: bytes, b: bytes, epsilon: float) -> bool:
    """Two tokens: equal as numbers within epsilon (absolute, or relative to the expected `b`)
    when both are numbers by DESIGN.md's pattern, else equal as text. Exactly as _close_exactly
    decides; doubles settle every pair but those within a few units in the last place of the
    bound (~30 times faster than decimal, which would take ~2 s for a MiB of numbers)."""
    if a == b:  # the common case, and no number is unequal to its own text
        return True
    if not (_NUMBER.fullmatch(a) and _NUMBER.fullmatch(b)):
        return False
    x, y = float(a), float(b)
    if math.isfinite(x) and math.isfinite(y) and math.isfinite(epsilon):
        difference, bound = abs(x - y), max(epsilon, epsilon * abs(y))
        # each parse and the subtraction err by half an ulp of the larger magnitude, epsilon's
        # double by half of its own (and the product by one more); subnormals by their spacing
        slack = 4 * _ULP * max(abs(x), abs(y)) + 4 * _ULP * bound + 4 * sys.float_info.min * _ULP
        if difference + slack < bound:
            return True
        if difference - slack > bound:
            return False
    return _close_exactly(a, b, epsilon)


def _close_exactly(a: bytes, b: bytes, epsilon: float) -> bool:
    """In decimal arithmetic on the tokens as written and on epsilon's shortest decimal (1e-6,
    not the double just below it), so that the bound is inclusive as written (1.000001 against
    1 within 1e-6)."""
    with decimal.localcontext(_EXACT):
        try:
            x, y, eps = decimal.Decimal(a.decode()), decimal.Decimal(b.decode()), decimal.Decimal(repr(epsilon))
            difference = abs(x - y)
            return difference <= eps or difference <= eps * abs(y)
        except decimal.DecimalException:
            return False
