"""Whether two tokens are close as numbers (DESIGN.md, "Judge API": the float modes), under a
Tolerance: an absolute and a relative error allowed (either suffices), decided by one of RULES.

- "decimal" (kiln's own, the default): exactly, on the tokens as written and on the tolerances'
  shortest decimals, so that a bound is inclusive as written (1.000001 against 1 within 1e-6).
- "kattis": as Kattis's default output validator does it (problemtools
  support/default_validator): each token parsed to the nearest double, then
  |p - e| <= A or |p - e| <= R x |e| evaluated in doubles; a token beyond a double's range is
  not a number there (it is compared as text). The same double operations in Python give the
  same bits as its C++ does (IEEE 754, no fused operation in that expression).
- "dmoj": as DMOJ's `floats` checker does it (dmoj/checkers/floats.py, in Python floats): its
  error_mode is read from the tolerances, `default` when A == R (|p - e| <= A, or |e| >= A and
  |1 - p/e| <= A), `relative` when A is 0 (p between e(1 - R) and e(1 + R)), `absolute` when R
  is 0; A and R both given and different have no DMOJ equivalent (the request is refused).

The rules differ only within a few units in the last place of a bound (0.300001 against 0.3
within 1e-6: 1.0000000000287557e-06 apart in doubles, so WA on Kattis and DMOJ, AC as written),
which is where an answer printed to exactly the tolerance's digits lands.

Tokens are numbers by DESIGN.md's pattern for every rule (no inf, nan, hex or digit separators:
Kattis's strtod also reads hex, DMOJ's float() also inf, nan and 1_000; no problem's answer has
them). When the expected token is a number and the output's is not, the two are unequal, as on
both judges (their texts cannot be equal).
"""

from __future__ import annotations

import decimal
import math
import re
import sys
from dataclasses import dataclass

RULES = ("decimal", "kattis", "dmoj")
DEFAULT_EPSILON = 1e-6  # absolute and relative, when a request gives no tolerance
NUMBER = re.compile(rb"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_ULP = sys.float_info.epsilon
# exponents far beyond a double's; a token decimal cannot hold (an exponent past 10**18) raises,
# and the tokens are then unequal: a submission's output must never fail the comparison itself
_EXACT = decimal.Context(prec=200, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[decimal.InvalidOperation, decimal.Overflow])


@dataclass(frozen=True)
class Tolerance:
    absolute: float = DEFAULT_EPSILON
    relative: float = DEFAULT_EPSILON
    rule: str = "decimal"

    @classmethod
    def both(cls, epsilon: float, rule: str = "decimal") -> Tolerance:
        return cls(epsilon, epsilon, rule)

    def dmoj_mode(self) -> str | None:
        """DMOJ floats' error_mode for these tolerances, or None where it has none."""
        if self.absolute == self.relative:
            return "default"
        return "relative" if self.absolute == 0 else "absolute" if self.relative == 0 else None


def close(a: bytes, b: bytes, tolerance: Tolerance) -> bool:
    """The output's token `a` against the expected `b`: equal as numbers within the tolerance
    when both are numbers, else equal as text."""
    if a == b and tolerance.rule != "dmoj":  # the common case (DMOJ's doubles reject 1e999 against itself)
        return True
    if not (NUMBER.fullmatch(a) and NUMBER.fullmatch(b)):
        return a == b
    if tolerance.rule == "kattis":
        return _kattis(float(a), float(b), tolerance.absolute, tolerance.relative, a, b)
    if tolerance.rule == "dmoj":
        return _dmoj(float(a), float(b), tolerance)
    return _decimal(a, b, tolerance.absolute, tolerance.relative)


def _kattis(p: float, e: float, absolute: float, relative: float, a: bytes, b: bytes) -> bool:
    if not math.isfinite(e):  # its isfloat() refuses an infinite value: the token is text
        return a == b
    if not math.isfinite(p):
        return False
    return abs(e - p) <= absolute or abs(e - p) <= relative * abs(e)


def _dmoj(p: float, e: float, tolerance: Tolerance) -> bool:
    mode, absolute, relative = tolerance.dmoj_mode(), tolerance.absolute, tolerance.relative
    if mode == "relative":
        low, high = e * (1 - relative), e * (1 + relative)
        return min(low, high) <= p <= max(low, high)
    if mode == "absolute":
        return abs(p - e) <= absolute
    if abs(p - e) <= absolute:
        return True
    if not abs(e) >= absolute:
        return False
    try:
        return abs(1.0 - p / e) <= absolute
    except ZeroDivisionError:  # e == 0 with a zero tolerance: DMOJ's check fails on it (WA)
        return False


def _decimal(a: bytes, b: bytes, absolute: float, relative: float) -> bool:
    """Exactly as _decimal_exactly decides; doubles settle every pair but those within a few
    units in the last place of the bound (~30 times faster than decimal, which would take ~2 s
    for a MiB of numbers)."""
    x, y = float(a), float(b)
    if math.isfinite(x) and math.isfinite(y) and math.isfinite(absolute) and math.isfinite(relative):
        difference, bound = abs(x - y), max(absolute, relative * abs(y))
        # each parse and the subtraction err by half an ulp of the larger magnitude, a
        # tolerance's double by half of its own (and the product by one more); subnormals by their spacing
        slack = 4 * _ULP * max(abs(x), abs(y)) + 4 * _ULP * bound + 4 * sys.float_info.min * _ULP
        if difference + slack < bound:
            return True
        if difference - slack > bound:
            return False
    return _decimal_exactly(a, b, absolute, relative)


def _decimal_exactly(a: bytes, b: bytes, absolute: float, relative: float) -> bool:
    """In decimal arithmetic on the tokens as written and on each tolerance's shortest decimal
    (1e-6, not the double just below it)."""
    with decimal.localcontext(_EXACT):
        try:
            x, y = decimal.Decimal(a.decode()), decimal.Decimal(b.decode())
            difference = abs(x - y)
            return difference <= decimal.Decimal(repr(absolute)) or difference <= decimal.Decimal(repr(relative)) * abs(y)
        except decimal.DecimalException:
            return False
