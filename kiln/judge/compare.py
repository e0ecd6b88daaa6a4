"""A test's output against its expected answer (DESIGN.md, "Judge API": compare modes; two
numbers within a tolerance: kiln/judge/numbers.py).

The output is bytes the front holds (within the test's output limit); the expected answer is
bytes too, or a file of the store mapped (same_as_file), read only as far as the walk goes. The
modes walk them with iterators, never building a list of every token or line of a large output.
`pause` is called every PACE tokens or lines: the judge runs large comparisons in a worker
thread (kiln/judge/judge.py), where the pause lets the event loop's thread take the GIL, so one
large comparison never holds up the rest.
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Callable, Iterable, Iterator
from itertools import zip_longest

from kiln.judge.numbers import Tolerance, close

# what a request may ask for; "checker" and "none" are not comparisons of bytes
MODES = ("tokens", "line_tokens", "lines", "exact", "float", "line_floats", "exact_floats", "checker", "none")
FLOAT_MODES = ("float", "line_floats", "exact_floats")  # those the tolerances apply to
BYTE_MODES = ("tokens", "line_tokens", "lines", "exact", *FLOAT_MODES)  # those `ignore_case` applies to

_TOKEN = re.compile(rb"[^ \t\n\r\v\f]+")  # ASCII whitespace separates tokens
_LINE_BREAKS = (ord("\n"), ord("\r"))  # DMOJ's isline(): what ends a line
_BLANK_LINES = re.compile(rb"(?:[ \t\r]*\n)*")
_NONBLANK_LINE = re.compile(rb"[^\r\n]+")  # DMOJ floats' line: between \r or \n bytes, never empty
_SPACE_OR_TOKEN = re.compile(rb"[ \t\n\r\v\f]+|[^ \t\n\r\v\f]+")
_SPACES = b" \t\n\r\v\f"
_LINE = object()  # line_floats' mark where a line begins
PACE = 4096
DEFAULT_TOLERANCE = Tolerance()
Fold = Callable[[bytes], bytes] | None  # bytes.lower with ignore_case: ASCII letters only, as strcasecmp


def same(mode: str, output: bytes, expected: bytes | mmap.mmap, tolerance: Tolerance = DEFAULT_TOLERANCE, pause: Callable[[], object] | None = None, ignore_case: bool = False) -> bool:
    """Whether `output` answers `expected` under `mode` (tokens, line_tokens, lines, exact,
    float, line_floats, exact_floats; the float modes' numbers within `tolerance`), with
    `ignore_case` ASCII letters compared folded (as C's strcasecmp does: Kattis). `expected` may
    be a store file mapped: it is read only as far as the comparison walks."""
    fold = bytes.lower if ignore_case else None
    if mode == "exact":
        return _equal(output, expected, fold)
    if mode == "tokens":
        return all(a == b for a, b in _paced(zip_longest(_tokens(output, fold), _tokens(expected, fold)), pause))
    if mode == "line_tokens":
        return all(a == b for a, b in _paced(zip_longest(_line_tokens(output, fold), _line_tokens(expected, fold)), pause))
    if mode == "float":
        pairs = zip_longest(_tokens(output, fold), _tokens(expected, fold))
        return all(a is not None and b is not None and close(a, b, tolerance) for a, b in _paced(pairs, pause))
    if mode == "line_floats":
        pairs = zip_longest(_marked_lines(output, fold), _marked_lines(expected, fold))
        return all(a is b if a is _LINE or b is _LINE else a is not None and b is not None and close(a, b, tolerance) for a, b in _paced(pairs, pause))
    if mode == "exact_floats":
        pairs = zip_longest(_spaces_and_tokens(output, fold), _spaces_and_tokens(expected, fold))
        return all(_spaced_equal(a, b, tolerance) for a, b in _paced(pairs, pause))
    if mode == "lines":
        return _equal(output, expected, fold) or all(a == b for a, b in _paced(zip_longest(_lines(output, fold), _lines(expected, fold)), pause))
    raise ValueError(f"not a comparison: {mode}")


def same_as_file(mode: str, output: bytes, fd: int, tolerance: Tolerance = DEFAULT_TOLERANCE, pause: Callable[[], object] | None = None, ignore_case: bool = False) -> bool:
    """same() against a file's content (an expected answer of the store), mapped read-only and
    read only as far as the comparison walks; `fd` is closed here (whoever runs this owns it:
    a worker thread may finish after the request that asked for it has gone)."""
    try:
        if os.fstat(fd).st_size == 0:
            return same(mode, output, b"", tolerance, pause, ignore_case)
        mapped = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    finally:
        os.close(fd)  # a mapping holds the file without it
    try:
        return same(mode, output, mapped, tolerance, pause, ignore_case)
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


def _marked_lines(data: bytes, fold: Fold) -> Iterator[object]:
    """line_floats' walk, DMOJ's `floats` (dmoj/checkers/floats.py): each line (what lies between
    \r or \n bytes; an empty one is dropped, a line of only spaces is not) as _LINE and then its
    tokens, so that two walks pair up when they have as many lines, with as many tokens on each."""
    for line in _NONBLANK_LINE.finditer(data):
        yield _LINE
        for match in _TOKEN.finditer(data, line.start(), line.end()):
            yield match.group() if fold is None else fold(match.group())


def _spaces_and_tokens(data: bytes, fold: Fold) -> Iterator[bytes]:
    """exact_floats' walk, Kattis's default validator with space_change_sensitive: the runs of
    whitespace and the tokens in turn, the runs compared byte for byte (leading and trailing too)."""
    for match in _SPACE_OR_TOKEN.finditer(data):
        yield match.group() if fold is None else fold(match.group())


def _spaced_equal(a: bytes | None, b: bytes | None, tolerance: Tolerance) -> bool:
    if a is None or b is None:
        return False
    if a[0] in _SPACES or b[0] in _SPACES:  # a run of whitespace only equals the same run
        return a == b
    return close(a, b, tolerance)
