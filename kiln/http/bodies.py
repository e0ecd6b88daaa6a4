"""The memory the front holds for /judge bodies in flight, bounded (RUN_JUDGE_BODIES_MAX).

A judge request holds about twice its body until it ends: the bytes, then the parsed request
(bench/front.py: 24 bodies of 4 MiB at once took the front from 50 to 220 MiB). Without a bound,
RUN_CONNECTIONS_MAX clients sending RUN_JUDGE_INPUT_MAX each would take ~29 GiB. A request
reserves twice its declared length (or the largest allowed, without one) before its body is
read, and gives it back when its judging ends; one that does not fit is 503 with Retry-After,
its body unread. A request is let in when nothing is held, whatever its size, so a budget below
one body still serves one at a time.
"""

from __future__ import annotations

from kiln.http.responses import CLOSE
from kiln.http.validate import ApiError

HELD_PER_BYTE = 2
RETRY_AFTER_S = 1


class Held:
    """One request's reservation; release() is idempotent (the streamed answer's judging
    greenlet and the request's own end may both call it)."""

    def __init__(self, budget: BodyBudget, size: int):
        self.budget, self.size = budget, size

    def release(self) -> None:
        self.budget.held -= self.size
        self.size = 0


class BodyBudget:
    def __init__(self, limit: int):
        self.limit = limit
        self.held = 0

    def hold(self, environ, largest: int) -> Held:
        """Reserve for the request's body (its Content-Length, else `largest`), or raise 503."""
        length = environ.get("CONTENT_LENGTH") or ""
        size = HELD_PER_BYTE * (min(int(length), largest) if length.isdigit() else largest)
        if self.held and self.held + size > self.limit:
            raise ApiError(
                503,
                f"judge requests in flight hold {_mib(self.held)} of RUN_JUDGE_BODIES_MAX ({_mib(self.limit)}); "
                f"this one needs {_mib(size)}: retry later",
                headers={"Retry-After": str(RETRY_AFTER_S), **CLOSE},
            )
        self.held += size
        return Held(self, size)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"
