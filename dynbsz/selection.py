"""Ordered greedy first-fit selection: which buffered samples form the next micro-batch.

The rule is VeOmni's ``DynBszBuffer.get_samples(force=True)``: walk the buffer
in arrival order while the micro-batch is not yet full, and take every sample
that still fits the remaining token budget (and the remaining physical-token
cap, when there is one); the first sample is taken whatever its size, so the
head of the buffer can never starve.

Three observations make this fast without changing the result:

* the remaining budget only shrinks during a walk, so a sample skipped once is
  never taken later in the same walk;
* once a sample does not fit, the next one taken is the first behind it whose
  length is at most the remaining budget: one vectorized compare and an argmax
  over the rest of the buffer find it (a "jump");
* a run of consecutive samples that all fit is found by one cumulative sum and
  a binary search over a window (a "gallop"; the window grows while it fits).

So a walk alternates jumps, short Python walks over the few samples behind each
jump (they catch what fits close by for less than another numpy call), and
gallops when everything fits. The buffer is never walked end to end in Python:
a cut costs a few numpy calls per scattered pick, each O(B) in C, and one
cumulative sum per run. At 1M budgets (hundreds of samples per micro-batch)
gallops take almost everything; at 32K most samples are scattered picks. With
``_PY_TAIL`` samples or fewer left, the rest is walked in Python.
"""

from __future__ import annotations

from itertools import count, repeat

import numpy as np

#: A length no budget admits. Small enough that a running sum over any realistic buffer
#: (up to 2**22 such entries) cannot overflow int64; far above any token budget.
NEVER_FITS = 1 << 40

# With this many samples or fewer left, a plain Python walk beats another compare-and-argmax
# (each numpy call costs about a microsecond whatever its length, a Python step about 35 ns).
_PY_TAIL = 64
# Samples walked in Python after each jump. Measured on the benchmark's buffers of 1,000 at 32K:
# 4 -> 12.2 us a cut, 16 -> 8.2, 24 -> 7.8, 64 -> 9.2.
_WINDOW = 24
# First window of a gallop (grows 4x while every sample in it fits); at 1M budgets runs are
# hundreds of samples long.
_GALLOP = 64


def select_reference(tokens, budget: int, physical=None, cap: int | None = None, alone=None) -> list[int]:
    """The literal sample-by-sample walk. Oracle for tests; O(B) Python per call."""
    n = len(tokens)
    if n == 0:
        return []
    if alone is not None and alone[0]:
        return [0]
    physical = tokens if physical is None else physical
    cum = cum_p = 0
    taken: list[int] = []
    i = 0
    while i < n and cum < budget:
        lone = alone is not None and alone[i]
        fits = tokens[i] <= budget - cum and (cap is None or physical[i] <= cap - cum_p)
        if not lone and (not taken or fits):
            taken.append(i)
            cum += int(tokens[i])
            cum_p += int(physical[i])
        i += 1
    return taken


def select(tokens: np.ndarray, budget: int, physical: np.ndarray | None = None, cap: int | None = None,
           alone: np.ndarray | None = None) -> list[int]:
    """Indices (ascending) of the samples the greedy walk takes from ``tokens``.

    ``tokens`` and ``physical`` are int64 arrays in arrival order; ``alone`` marks
    samples that may only ever travel alone (they are taken only at the head).
    """
    n = tokens.shape[0]
    if n == 0:
        return []
    if alone is not None:
        if alone[0]:
            return [0]
        if alone.any():
            # A lone sample is never a candidate behind the head: give it a length nothing fits.
            tokens = np.where(alone, NEVER_FITS, tokens)
    rem = budget - int(tokens[0])
    taken = [0]
    if rem <= 0 or n == 1:
        return taken
    if cap is None:
        physical, rem_p = None, NEVER_FITS
    else:
        physical = tokens if physical is None else physical
        rem_p = cap - int(physical[0])
    pos, jump = 1, False
    while True:
        if n - pos <= _PY_TAIL:
            end = n  # the last few samples: walked in Python, no more jumps
        else:
            if jump:
                # The next sample that fits: one compare and one argmax over the rest, in C.
                fits = tokens[pos:] <= rem
                if physical is not None:
                    fits &= physical[pos:] <= rem_p
                i = int(fits.argmax())
                if not fits[i]:
                    return taken  # nothing behind pos fits any more
                pos += i
            # A short window from pos is walked in Python: it takes the sample just found and any
            # others close behind it for less than another vectorized call would cost.
            end = pos + _WINDOW
        rem, rem_p, full = _walk(pos, tokens[pos:end].tolist(), None if physical is None else physical[pos:end].tolist(),
                                 rem, rem_p, taken)
        if rem <= 0 or end >= n:
            return taken
        pos, jump = end, not full
        if full:
            # Everything in the window fitted: a long run (large budgets).
            pos, rem, rem_p = _gallop(tokens, physical, pos, rem, rem_p, taken)
            if rem <= 0 or pos >= n:
                return taken
            pos += 1  # tokens[pos] does not fit; what follows a run usually does: walk it


def _walk(start: int, lengths: list[int], physical: list[int] | None, rem: int, rem_p: int,
          taken: list[int]) -> tuple[int, int, bool]:
    """The literal walk over ``lengths`` (positions from ``start``), appending to ``taken``.

    Returns what is left of both budgets and whether every sample fitted. Without a physical
    cap the physical lengths are zeros against an unreachable cap.
    """
    full = True
    for i, length, p in zip(count(start), lengths, repeat(0) if physical is None else physical):
        if length <= rem and p <= rem_p:
            taken.append(i)
            rem -= length
            rem_p -= p
            if rem <= 0:
                break
        else:
            full = False
    return rem, rem_p, full


def _gallop(tokens, physical, pos: int, rem: int, rem_p: int, taken: list[int]) -> tuple[int, int, int]:
    """Take the run of samples from ``pos`` that all fit; return (where it stopped, rem, rem_p).

    A cumulative sum over a window that grows 4x while everything in it fits finds where the
    run ends without touching the rest of the buffer. It stops at the first sample that does
    not fit, or at the end of the buffer.
    """
    n = tokens.shape[0]
    width = _GALLOP
    while True:
        csum = tokens[pos:pos + width].cumsum()
        k = int(csum.searchsorted(rem, side="right"))
        if physical is not None:
            psum = physical[pos:pos + width].cumsum()
            k = min(k, int(psum.searchsorted(rem_p, side="right")))
        if k:
            taken.extend(range(pos, pos + k))
            rem -= int(csum[k - 1])
            if physical is not None:
                rem_p -= int(psum[k - 1])
        pos += k
        if k < csum.shape[0] or pos >= n:
            return pos, rem, rem_p
        width *= 4

