"""A pause that doubles with every failure in a row: slots of an index, and language templates,
are started again after one."""

from __future__ import annotations

import time
from dataclasses import dataclass

MAX_BACKOFF_S = 5.0


@dataclass
class Backoff:
    failures: int = 0
    not_before: float = 0.0

    def failed(self) -> float:
        """One more failure: the next try waits twice as long as the last (at most
        MAX_BACKOFF_S). Returns that wait in seconds."""
        self.failures += 1
        delay = min(MAX_BACKOFF_S, 0.05 * 2**self.failures)
        self.not_before = time.monotonic() + delay
        return delay

    def reset(self) -> None:
        self.failures, self.not_before = 0, 0.0
