"""The judge's comparisons (kiln/judge/compare.py) as DESIGN.md gives them: tokens split on ASCII
whitespace, lines with trailing blanks cut and trailing empty lines ignored, exact bytes, floats
within epsilon (absolute or relative to the expected), with DESIGN.md's number pattern."""

from __future__ import annotations

import decimal
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kiln.judge import compare, numbers
from kiln.judge.compare import same
from kiln.judge.numbers import Tolerance


@pytest.mark.parametrize(
    ("output", "expected", "equal"),
    [
        (b"1 2 3", b"1\t2\n3\r\n", True),
        (b"\x0b1\x0c2 ", b"1 2", True),  # \v and \f are ASCII whitespace
        (b"1 2", b"1 2 3", False),
        (b"", b"\n \n", True),
        (b"1\xa02", b"1 2", False),  # a no-break space is not ASCII whitespace
        (b"abc", b"ABC", False),
    ],
)
def test_tokens(output, expected, equal):
    assert same("tokens", output, expected) is equal


@pytest.mark.parametrize(
    ("output", "expected", "equal"),
    [
        (b"a b \t\r\nc", b"a b\nc\n\n\n", True),
        (b"a\n\nb", b"a\nb", False),  # an empty line inside counts
        (b"a  b", b"a b", False),  # spaces inside a line count
        (b" a", b"a", False),  # leading spaces count
        (b"", b"\n\n", True),
        (b"a\n\n", b"a", True),
        (b"a\nb\n", b"a\nb\nc", False),
    ],
)
def test_lines(output, expected, equal):
    assert same("lines", output, expected) is equal


@pytest.mark.parametrize(
    ("output", "expected", "epsilon", "equal"),
    [
        (b"1.0000001", b"1", 1e-6, True),
        (b"1.00001", b"1", 1e-6, False),
        (b"1000000.5", b"1000000", 1e-6, True),  # relative to the expected
        (b"1.1", b"1", 0.1, True),  # inclusive
        (b"1.000001", b"1", 1e-6, True),  # inclusive as written: the double 1e-6 is a hair below 1e-6
        (b"1.3", b"1", 0.3, True),
        (b"1.3000001", b"1", 0.3, False),
        (b"5", b"1", 1e400, True),  # a JSON epsilon beyond a double is infinite: every number equal
        (b"x 2.0", b"x 2", 1e-9, True),
        (b"nan", b"nan", 1e-6, True),  # not a number by the pattern: compared as text
        (b"inf", b"1e999", 1e-6, False),
        (b"1e999", b"1e999", 1e-6, True),  # both infinite: equal
        (b"0x10", b"16", 1, False),  # no hex
        (b"+.5", b"0.5", 0, True),
        (b"1", b"1 2", 1, False),
        (b"1e9999999999", b"2e9999999999", 1e-6, False),  # past decimal's old Emax: no overflow to infinity
        (b"1e99999999999999999999", b"1", 1e-6, False),  # past what decimal holds: unequal, never an error
        (b"1e99999999999999999999", b"1e99999999999999999999", 1e-6, True),
    ],
)
def test_float(output, expected, epsilon, equal):
    assert same("float", output, expected, Tolerance.both(epsilon)) is equal


# line_tokens is DMOJ's `standard` checker (dmoj/checkers/_checker.c): tokens equal, and a line
# break (\n or \r, any number of them, blank lines too) between two tokens wherever the other has one
@pytest.mark.parametrize(
    ("output", "expected", "equal"),
    [
        (b"1 2\n3\n", b"1 2\n3\n", True),
        (b"1 2\r\n3\r\n", b"1 2\n3\n", True),  # CRLF
        (b"1 2  \t\n3   \n", b"1 2\n3", True),  # trailing spaces, no final newline
        (b"1\t  2\n3", b"1 2\n3", True),  # spaces inside a line: any run of them
        (b"1 2\n\n\n3\n\n", b"1 2\n3\n", True),  # blank lines inside and after
        (b"\n\n  1 2\n3", b"1 2\n3", True),  # leading blank lines and spaces
        (b"1 2\n \t \n3", b"1 2\n3", True),  # a line of spaces is blank
        (b"1\n2\n3\n", b"1 2\n3\n", False),  # a line break where a space is expected
        (b"1 2 3\n", b"1 2\n3\n", False),  # a space where a line break is expected
        (b"1 2\r3", b"1 2\n3", True),  # a lone \r is a line break too
        (b"1 2\n3\n4", b"1 2\n3", False),
        (b"1 2", b"1 2\n3", False),
        (b"", b"\n \n", True),
        (b"abc\n", b"ABC\n", False),  # case counts
        (b"12\n", b"1 2\n", False),
        (b"1\x0b2", b"1 2", True),  # \v and \f are spaces within a line, as DMOJ's
    ],
)
def test_line_tokens(output, expected, equal):
    assert same("line_tokens", output, expected) is equal


@given(st.lists(st.text(alphabet="ab \t\r\n\x0b", max_size=5), max_size=6), st.lists(st.text(alphabet="ab \t\r\n", max_size=5), max_size=6))
def test_line_tokens_agree_with_a_plain_model(one, other):
    def model(data: bytes) -> list[list[bytes]]:  # the non-blank lines (\n or \r end one), each as its tokens
        return [line.split() for line in re.split(rb"[\r\n]", data) if line.split()]

    a, b = "\n".join(one).encode(), " ".join(other).encode()
    assert same("line_tokens", a, b) == (model(a) == model(b))
    assert same("line_tokens", a, a.replace(b"\n", b" \r\n\n"))


# ignore_case: ASCII letters folded, as C's strcasecmp (Kattis's default validator); every byte mode
@pytest.mark.parametrize(
    ("mode", "output", "expected", "equal"),
    [
        ("tokens", b"YES no", b"yes NO\n", True),
        ("tokens", b"yes", b"yes!", False),
        ("tokens", b"\xc3\x89t\xc3\xa9", b"\xc3\xa9t\xc3\xa9", False),  # only ASCII letters fold (UTF-8 É is not é)
        ("line_tokens", b"Yes\r\nNo", b"yes\nno\n", True),
        ("line_tokens", b"Yes No", b"yes\nno\n", False),
        ("lines", b"Hello World  \n", b"hello world\n", True),
        ("exact", b"Hello\n", b"hELLO\n", True),
        ("exact", b"Hello", b"hello\n", False),
        ("float", b"Pi 3.1416", b"pi 3.14159", True),
        ("float", b"1E5", b"100001", True),  # numbers stay numbers
    ],
)
def test_ignore_case(mode, output, expected, equal):
    assert same(mode, output, expected, Tolerance.both(1e-4), ignore_case=True) is equal
    if equal and output.lower() != output and mode != "float":  # and without it, case counts
        assert not same(mode, output, expected, Tolerance.both(1e-4))


def test_exact():
    assert same("exact", b"3\n", b"3\n") and not same("exact", b"3", b"3\n")


@given(st.lists(st.text(alphabet="ab1 \t\n", max_size=6), max_size=6))
def test_lines_agree_with_a_plain_model(parts):
    text = "\n".join(parts).encode()

    def model(data: bytes) -> list[bytes]:
        lines = [line.rstrip(b" \t\r") for line in data.split(b"\n")]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    other = b"ab\n1"
    assert same("lines", text, other) == (model(text) == model(other))
    assert same("lines", text, text.replace(b"\n", b" \n"))
    assert same("tokens", text, b" ".join(text.split()))


@given(
    st.integers(-(10**17), 10**17),
    st.integers(-40, 40),
    st.sampled_from([0.0, 1e-15, 1e-9, 1e-6, 0.001, 0.5, 1.0, 1e300]),
    st.sampled_from(["absolute", "relative"]),
    st.integers(-3, 3),
    st.integers(8, 22),
    st.booleans(),
)
def test_float_decides_as_decimal_arithmetic_does_at_the_bound(mantissa, exponent, epsilon, kind, nudge, digits, below):
    # x at the bound from y (absolute or relative), nudged by a few units in its `digits`-th place:
    # the doubles' fast path must give decimal's answer on every side of it
    y = decimal.Decimal(mantissa).scaleb(exponent)
    eps = decimal.Decimal(repr(epsilon))
    with decimal.localcontext(decimal.Context(prec=80)):
        bound = eps if kind == "absolute" else eps * abs(y)
        offset = bound * (1 + nudge * decimal.Decimal(10) ** -digits)
        x = y - offset if below else y + offset
    a, b = str(x).encode(), str(y).encode()
    assert numbers._decimal(a, b, epsilon, epsilon) is numbers._decimal_exactly(a, b, epsilon, epsilon), (a, b, epsilon)


@pytest.mark.parametrize("mode", ["tokens", "line_tokens", "float", "lines"])
def test_a_long_comparison_pauses_every_pace_items(mode):
    calls = []
    lines = b"".join(b"%d  \n" % i for i in range(3 * compare.PACE + 5))
    assert same(mode, lines, lines.replace(b"  \n", b"\n"), pause=lambda: calls.append(1))
    assert len(calls) == 3
