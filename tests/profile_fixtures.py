"""Datasets for tests/test_profile.py, named as ``tests.profile_fixtures:FACTORY`` (importable from worker
processes: pytest puts the repository root on the path, and fork inherits it).

Every sample sleeps a known cost: text 2 ms flat, video 4 ms + 2 us per token.
"""

from __future__ import annotations

import os
import time

COSTS = {"text": (0.002, 0.0), "video": (0.004, 2e-6)}


def source_of(i: int) -> str:
    return "video" if i % 4 == 3 else "text"


def tokens_of(i: int) -> int:
    return 1000 + 250 * (i % 9) if source_of(i) == "video" else 100 + 7 * i


def cost_of(i: int) -> float:
    base, per_token = COSTS[source_of(i)]
    return base + per_token * tokens_of(i)


class SleepyDataset:
    """``n`` samples ``{"tokens", "source", "payload"}`` that sleep their cost; ``fail_at`` raises after
    sleeping, ``no_tokens_at`` returns a sample without a token length, ``field`` renames ``tokens``,
    ``interrupt_at`` raises KeyboardInterrupt (Ctrl-C, in-process only)."""

    def __init__(self, n: int = 40, fail_at: int | None = None, no_tokens_at: int | None = None,
                 field: str = "tokens", interrupt_at: int | None = None):
        self.n, self.fail_at, self.no_tokens_at, self.field = n, fail_at, no_tokens_at, field
        self.interrupt_at = interrupt_at

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        if not 0 <= i < self.n:
            raise IndexError(i)
        time.sleep(cost_of(i))
        if i == self.fail_at:
            raise ValueError(f"corrupt frame in sample {i}\n(second line of the message)")
        if i == self.interrupt_at:
            raise KeyboardInterrupt
        sample = {"source": source_of(i), "payload": b"x" * 100_000}
        if i != self.no_tokens_at:
            sample[self.field] = tokens_of(i)
        return sample


def make_dataset() -> SleepyDataset:
    return SleepyDataset(40)


def make_small() -> SleepyDataset:
    return SleepyDataset(12)


def make_failing() -> SleepyDataset:
    return SleepyDataset(20, fail_at=9)


def make_tokenless() -> SleepyDataset:
    return SleepyDataset(20, no_tokens_at=5)


def make_renamed() -> SleepyDataset:
    return SleepyDataset(12, field="n_tokens")


def make_interrupted() -> SleepyDataset:
    return SleepyDataset(12, interrupt_at=4)


class DyingDataset(SleepyDataset):
    """Sample 5 kills the worker process that reads it (a segfault, the OOM killer)."""

    def __getitem__(self, i: int) -> dict:
        if i == 5:
            os._exit(3)
        return super().__getitem__(i)


def make_dying() -> DyingDataset:
    return DyingDataset(12)


def make_broken() -> SleepyDataset:
    raise RuntimeError("bucket s3://nowhere is not reachable")


def make_not_a_dataset() -> int:
    return 42
