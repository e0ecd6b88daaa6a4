"""Resource limits of the task (values decided in plan.task_rlimits)."""

from __future__ import annotations

import resource


def apply(rlimits: tuple[tuple[int, int], ...]) -> None:
    """Soft = hard = the plan's value, or the current hard limit where that is lower: raising a
    hard limit takes CAP_SYS_RESOURCE, which a service's init system may have withheld."""
    for which, limit in rlimits:
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(which, (limit, limit))
