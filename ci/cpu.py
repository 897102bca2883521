"""CPU seconds for the benchmarks: this process and every child it waited for (worker pools, subprocesses)."""

from __future__ import annotations

import resource


def cpu_seconds() -> float:
    """User and system seconds of this process and its reaped children so far; a figure is a difference of two."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
