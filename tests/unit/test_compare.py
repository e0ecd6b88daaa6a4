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


# line_floats is DMOJ's `floats` checker (dmoj/checkers/floats.py): lines split at \r or \n, empty
# ones dropped (a line of only spaces is not empty), as many lines and as many tokens on each
@pytest.mark.parametrize(
    ("output", "expected", "equal"),
    [
        (b"1 2\n3\n", b"1 2.0000001\n3", True),
        (b"1 2\r\n\r\n\n3\n\n", b"1 2\n3", True),  # CRLF and empty lines, inside and after
        (b"1 2  \n3", b"1 2\n3", True),  # trailing spaces inside a line
        (b"1\n2 3", b"1 2\n3", False),  # the same tokens on other lines (float and tokens: equal)
        (b"1 2\n \n3", b"1 2\n3", False),  # a line of spaces is a line with no tokens (line_tokens: equal)
        (b"1 2\n3\n\t", b"1 2\n3\n", False),  # and after the last one too
        (b"abc 0.68 def", b"abc 0.680001 def", True),  # mixed lines: words as text, numbers within epsilon
        (b"ABC", b"abc", False),
        (b"1 2", b"1 2 3", False),
        (b"", b"\n\r\n", True),
    ],
)
def test_line_floats(output, expected, equal):
    assert same("line_floats", output, expected) is equal


@given(st.lists(st.text(alphabet="1x \t\r\n", max_size=5), max_size=6), st.lists(st.text(alphabet="1x \r\n", max_size=5), max_size=6))
def test_line_floats_agree_with_a_plain_model(one, other):
    def model(data: bytes) -> list[list[bytes]]:  # DMOJ floats' lines, each as its tokens
        return [line.split() for line in re.split(rb"[\r\n]", data) if line]

    a, b = "\n".join(one).encode(), " ".join(other).encode()
    assert same("line_floats", a, b) == (model(a) == model(b))


# exact_floats is Kattis's default validator with space_change_sensitive and a tolerance: every run
# of whitespace as the answer's, byte for byte (problemtools' test_combined_flags and test_space_sensitive)
@pytest.mark.parametrize(
    ("output", "expected", "equal"),
    [
        (b"PI is 3.14\n", b"PI is 3.14\n", True),
        (b"PI is 3.4\n", b"PI is 3.14\n", True),  # within 0.5
        (b"PI is 2.0", b"PI is 1.0", False),
        (b"PI  is 3.14\n", b"PI is 3.14\n", False),
        (b"PI is 3.14", b"PI is 3.14\n", False),  # the final newline counts
        (b"PI is 3.14\n\n", b"PI is 3.14\n", False),
        (b"hello\nworld\n", b"hello\n world\n", False),
        (b" 1", b"1", False),
        (b"1\r\n", b"1\n", False),
        (b"", b"", True),
    ],
)
def test_exact_floats(output, expected, equal):
    assert same("exact_floats", output, expected, Tolerance.both(0.5, "kattis")) is equal


# absolute and relative tolerances apart (either suffices; 0 accepts only equal numbers), under each
# rule; problemtools' default_validator_tests give the first six
@pytest.mark.parametrize(
    ("output", "expected", "tolerance", "equal"),
    [
        (b"1.4", b"1", Tolerance(0.5, 0, "kattis"), True),
        (b"1.4", b"1", Tolerance(0.1, 0, "kattis"), False),
        (b"105", b"100", Tolerance(0, 0.1, "kattis"), True),
        (b"105", b"100", Tolerance(0, 0.01, "kattis"), False),
        (b"1", b"0", Tolerance(0, 0.01, "kattis"), False),
        (b"1.50001", b"1", Tolerance(0.5, 0.5, "kattis"), False),
        (b"105", b"100", Tolerance(0, 0.05), True),  # decimal: inclusive as written
        (b"105", b"100", Tolerance(0.049, 0.049), False),
        # at the bound, in doubles: |0.3 - 0.300001| is 1.0000000000287557e-06 > 1e-6
        (b"0.300001", b"0.3", Tolerance.both(1e-6), True),
        (b"0.300001", b"0.3", Tolerance.both(1e-6, "kattis"), False),
        (b"0.300001", b"0.3", Tolerance.both(1e-6, "dmoj"), False),
        # |7 - 7.000007| = 7.000000000090267e-06 > 1e-6 x 7 (Kattis), |1 - 7.000007/7| = 9.99999999918e-07 <= 1e-6 (DMOJ default)
        (b"7.000007", b"7", Tolerance.both(1e-6, "kattis"), False),
        (b"7.000007", b"7", Tolerance.both(1e-6, "dmoj"), True),
        # DMOJ relative: 3.000003 above 3 x (1 + 1e-6) = 3.0000029999999995; Kattis: within 1e-6 x 3
        (b"3.000003", b"3", Tolerance(0, 1e-6, "dmoj"), False),
        (b"3.000003", b"3", Tolerance(0, 1e-6, "kattis"), True),
        (b"0", b"0", Tolerance(0, 1e-6, "dmoj"), True),
        (b"1e-300", b"0", Tolerance(0, 1e-6, "dmoj"), False),
        (b"1", b"0", Tolerance(0, 0, "dmoj"), False),  # DMOJ divides by the 0 expected: its check fails
        # beyond a double: Kattis compares such a token as text, DMOJ's inf is never within anything
        (b"1e999", b"1e999", Tolerance.both(1e-6, "kattis"), True),
        (b"1e999", b"2e999", Tolerance.both(1e-6, "kattis"), False),
        (b"1e999", b"1e999", Tolerance.both(1e-6, "dmoj"), False),
        (b"nan", b"nan", Tolerance.both(1e-6, "dmoj"), True),  # not a number by the pattern: text
    ],
)
def test_tolerances_and_rules(output, expected, tolerance, equal):
    assert same("float", output, expected, tolerance) is equal


@pytest.mark.parametrize("mode", ["line_floats", "exact_floats"])
def test_the_line_and_space_aware_float_modes_pause_too(mode):
    calls = []
    lines = b"".join(b"%d\n" % i for i in range(3 * compare.PACE + 5))  # two items a line: its mark or newline, its number
    assert same(mode, lines, lines, pause=lambda: calls.append(1))
    assert len(calls) == 6
