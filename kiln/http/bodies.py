"""A request body's preamble, and the memory the front holds for /judge bodies in flight,
bounded (RUN_JUDGE_BODIES_MAX).

`declared_length` is every body's one check before it is read (/run, /judge, /files): an
encoding kiln does not take is 415, a Content-Length that is not a number 400, one past the
endpoint's limit 413 (the rest unread: the connection closes).

A judge request holds about twice its body until it ends: the bytes, then the parsed request
(bench/front.py: 24 bodies of 4 MiB at once took the front from 50 to 220 MiB). Without a bound,
RUN_CONNECTIONS_MAX clients sending RUN_JUDGE_INPUT_MAX each would take ~29 GiB. A request
reserves twice its declared length (or the largest allowed, without one) before its body is
read, and gives it back when its judging ends; one that does not fit is 503 with Retry-After,
its body unread. A request is let in when nothing is held, whatever its size, so a budget below
one body still serves one at a time.
"""

from __future__ import annotations

from kiln.http.responses import CLOSE, ApiError

HELD_PER_BYTE = 2
RETRY_AFTER_S = 1


def declared_length(environ, limit: int) -> int | None:
    """The body's Content-Length (None: not given, chunked), checked against `limit`."""
    encoding = environ.get("HTTP_CONTENT_ENCODING", "").strip().lower()
    if encoding not in ("", "identity"):
        raise ApiError(415, "content-encoding not supported")
    length = environ.get("CONTENT_LENGTH") or None
    if length is None:
        return None
    if not (length.isascii() and length.isdigit()):  # "²" is a digit to str.isdigit, not to int()
        raise ApiError(400, "Content-Length is not a number")
    if int(length) > limit:
        raise ApiError(413, "payload too large", headers=CLOSE)
    return int(length)


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
        """Reserve for the request's body (its Content-Length, checked, else `largest`), or raise
        503."""
        length = declared_length(environ, largest)
        size = HELD_PER_BYTE * (largest if length is None else length)
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
