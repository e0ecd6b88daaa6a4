"""Resource limits of the task (values decided in plan.task_rlimits)."""

from __future__ import annotations

import resource


def apply(rlimits: tuple[tuple[int, int], ...]) -> None:
    for which, limit in rlimits:
        resource.setrlimit(which, (limit, limit))
