"""A run's `stats` object (DESIGN.md, "HTTP contract"): /run's answer has one, and so does each
/judge test and compile (kiln/judge/answer.py). Turned into JSON by kiln/http/answers.py."""

from __future__ import annotations

from dataclasses import dataclass

from kiln.wire.protocol import RunResult


@dataclass(frozen=True)
class Stats:
    outcome: str  # /run's outcomes only: a run killed for its output is `signaled` (its exit code and signal say so)
    wall_ms: float
    cpu_ms: float
    memory_peak_bytes: int
    signal: int | None

    @classmethod
    def of(cls, result: RunResult) -> Stats:
        return cls(result.outcome, result.wall_ms, result.cpu_ms, result.memory_peak_bytes, result.signal)
