"""Metrics: pure functions of arrays (no simulator state, no I/O), so they apply to real runs too.

Conventions: times in seconds; "steps" are consumer steps (delivered batches, or
micro-batches for dynamic batching); fills are fractions (1.0 = the whole budget).
"""

from __future__ import annotations

import numpy as np


def time_to_first(handout_s: np.ndarray) -> float:
    """Cold start: when the first batch (or micro-batch) reached the consumer."""
    return float(handout_s[0]) if len(handout_s) else float("nan")


def steady_throughput(handout_s: np.ndarray, sizes: np.ndarray, skip: int | None = None) -> float:
    """Items per second after the cold start.

    Counts the items delivered after hand-out ``skip`` (default: the first 10% of
    hand-outs, at least 1) over the time from that hand-out to the last one, so the
    start-up transient is excluded.
    """
    n = len(handout_s)
    if n < 2:
        return float("nan")
    skip = max(1, n // 10) if skip is None else skip
    skip = min(skip, n - 1)
    span = float(handout_s[-1] - handout_s[skip - 1])
    items = float(np.sum(sizes[skip:]))
    return items / span if span > 0 else float("inf")


def stall_fraction(request_s: np.ndarray, handout_s: np.ndarray) -> float:
    """Fraction of the consumer's time after its first batch spent waiting for data.

    The wait for the first batch is the cold start, reported on its own.
    """
    if len(handout_s) < 2:
        return 0.0
    waits = np.maximum(handout_s[1:] - request_s[1:], 0.0)
    span = float(handout_s[-1] - handout_s[0])
    return float(waits.sum() / span) if span > 0 else 0.0


def fill(tokens: np.ndarray, budget: int) -> np.ndarray:
    """Fill of each micro-batch: its tokens over the budget."""
    return np.asarray(tokens, dtype=np.float64) / float(budget)


def global_fill(tokens_by_rank: np.ndarray, budget: int) -> np.ndarray:
    """Per step, sum over ranks of the step's tokens / (dp_size * budget) (the seed's definition).

    ``tokens_by_rank`` is (dp_size, steps).
    """
    t = np.asarray(tokens_by_rank, dtype=np.float64)
    if t.ndim != 2:
        raise ValueError("tokens_by_rank must be a 2-d array (dp_size, steps)")
    return t.sum(axis=0) / (t.shape[0] * float(budget))


def source_shares(sources: np.ndarray, steps: np.ndarray, window: int, n_sources: int) -> np.ndarray:
    """Per window of ``window`` consecutive steps, the share of samples from each source.

    ``sources[i]`` and ``steps[i]`` are sample i's source index and the step that
    delivered it. Returns (n_windows, n_sources); a last partial window is kept.
    """
    if window < 1:
        raise ValueError("window must be >= 1")
    sources = np.asarray(sources, dtype=np.int64)
    win = np.asarray(steps, dtype=np.int64) // window
    n_windows = int(win.max()) + 1 if len(win) else 0
    counts = np.zeros((n_windows, n_sources), dtype=np.float64)
    np.add.at(counts, (win, sources), 1.0)
    totals = counts.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, counts / np.where(totals > 0, totals, 1.0), np.nan)


def share_skew(shares: np.ndarray, overall: np.ndarray) -> float:
    """Largest absolute deviation of any window's source share from the overall share."""
    if not len(shares):
        return 0.0
    return float(np.nanmax(np.abs(shares - np.asarray(overall)[None, :])))


def share_shift(shares: np.ndarray, reference: np.ndarray) -> float:
    """Largest absolute difference between two share tables window by window.

    With ``reference`` = the shares of the same windows in sampler order, this is the
    skew the *loader* introduced, free of the sampling noise already in the data.
    """
    if not len(shares):
        return 0.0
    n = min(len(shares), len(reference))
    return float(np.nanmax(np.abs(shares[:n] - reference[:n])))


def displacement(sampler_pos: np.ndarray) -> np.ndarray:
    """For the i-th sample delivered, how many places it moved: ``i - its position in sampler order``.

    Positive: delivered later than the sampler put it; negative: earlier (it overtook).
    """
    pos = np.asarray(sampler_pos, dtype=np.int64)
    return np.arange(len(pos), dtype=np.int64) - pos


def summary(values: np.ndarray) -> dict:
    """mean / p50 / p99 / max of ``|values|``: a compact, JSON-ready description."""
    a = np.abs(np.asarray(values, dtype=np.float64))
    if not len(a):
        return {"mean": 0.0, "p50": 0.0, "p99": 0.0, "max": 0.0}
    return {"mean": float(a.mean()), "p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)),
            "max": float(a.max())}
