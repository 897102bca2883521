"""Ordered greedy first-fit selection: which buffered samples form the next micro-batch.

The rule is VeOmni's ``DynBszBuffer.get_samples(force=True)``: walk the buffer
in arrival order while the micro-batch is not yet full, and take every sample
that still fits the remaining token budget (and the remaining physical-token
cap, when there is one); the first sample is taken whatever its size, so the
head of the buffer can never starve.

Three observations make this fast without changing the result:

* the remaining budget only shrinks during a walk, so a sample skipped once is
  never taken later in the same walk;
* a run of consecutive samples that all fit is found by one cumulative sum and
  a binary search over a window (a "gallop"; the window grows while it fits);
* after a sample that does not fit, the next one taken is the first behind it
  whose length is at most the remaining budget: one vectorized compare and an
  argmax find it.

So a walk alternates gallops and jumps, each a few numpy calls over contiguous
memory, and the buffer is never walked element by element in Python. At 1M
budgets (hundreds of samples per micro-batch) gallops take almost everything;
at 32K most samples after the first few are scattered picks, each one compare
over the rest of the buffer in C. Small buffers (up to ``_PY_WALK`` samples) are
the exception: there a plain walk costs less than the fixed overhead of the
vectorized calls.
"""

from __future__ import annotations

import numpy as np

#: A length no budget admits. Small enough that a running sum over any realistic buffer
#: (up to 2**22 such entries) cannot overflow int64; far above any token budget.
NEVER_FITS = 1 << 40

# Below this many samples left a plain Python walk beats another compare-and-argmax.
_PY_TAIL = 64
# First window of a gallop (grows 4x while every sample in it fits). 32 covers the usual run
# at a 32K budget in one window; at 1M budgets runs are hundreds long and grow into it.
_GALLOP = 32
# A whole buffer this small is walked in Python from the start: each numpy call costs about a
# microsecond whatever its length, a Python step about 35 ns (measured on the benchmark's 32K
# buffers: 8.2 us against 11.3 us per cut at 206 samples, 39 against 13 at 1,018).
_PY_WALK = 256


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
    if cap is not None:
        rem_p = cap - int((tokens if physical is None else physical)[0])
        return _select_capped(tokens, tokens if physical is None else physical, rem, rem_p, taken)
    if n <= _PY_WALK:
        return _walk(range(1, n), tokens[1:].tolist(), rem, taken)
    pos = 1
    while True:
        # Gallop: the run of samples from pos that all fit is taken as is; a cumulative sum
        # over a growing window finds where it ends without touching the rest of the buffer.
        width = _GALLOP
        while True:
            window = tokens[pos:pos + width]
            csum = window.cumsum()
            k = int(csum.searchsorted(rem, side="right"))
            if k:
                taken.extend(range(pos, pos + k))
                rem -= int(csum[k - 1])
            pos += k
            if k < window.shape[0]:
                break
            if pos >= n:
                return taken
            width *= 4
        pos += 1  # tokens[pos] does not fit (too long, or a slot taken by an earlier cut)
        # Scattered picks: the next sample that fits is found by one compare and one argmax over
        # the rest of the buffer, in C; the last few samples are walked in Python instead.
        while True:
            if rem <= 0:
                return taken
            rest = tokens[pos:]
            if rest.shape[0] <= _PY_TAIL:
                return _walk(range(pos, n), rest.tolist(), rem, taken)
            i = int((rest <= rem).argmax())
            length = int(rest[i])
            if length > rem:
                return taken  # nothing behind pos fits any more
            taken.append(pos + i)
            rem -= length
            pos += i + 1
            if pos < n and tokens[pos] <= rem:
                break  # the next one fits as well: gallop again
            pos += 1


def _walk(positions, lengths, rem: int, taken: list[int]) -> list[int]:
    """The literal walk over (position, length) pairs, appending to ``taken``."""
    for i, length in zip(positions, lengths):
        if length <= rem:
            taken.append(i)
            rem -= length
            if rem <= 0:
                break
    return taken


def _select_capped(tokens, physical, rem, rem_p, taken):
    """Same walk with a second, physical-token budget: both running sums must fit."""
    pos = np.arange(1, tokens.shape[0])
    lens = tokens[1:]
    phys = physical[1:]
    while True:
        if lens.shape[0] <= _PY_TAIL:
            for i, length, p in zip(pos.tolist(), lens.tolist(), phys.tolist()):
                if length <= rem and p <= rem_p:
                    taken.append(i)
                    rem -= length
                    rem_p -= p
                    if rem <= 0:
                        break
            return taken
        keep = (lens <= rem) & (phys <= rem_p)
        pos, lens, phys = pos[keep], lens[keep], phys[keep]
        if lens.shape[0] == 0:
            return taken
        csum = np.cumsum(lens)
        psum = np.cumsum(phys)
        k = int(np.argmin((csum <= rem) & (psum <= rem_p))) if not ((csum[-1] <= rem) and (psum[-1] <= rem_p)) else lens.shape[0]
        if k:
            taken.extend(pos[:k].tolist())
            rem -= int(csum[k - 1])
            rem_p -= int(psum[k - 1])
        if k == lens.shape[0] or rem <= 0:
            return taken
        pos, lens, phys = pos[k + 1:], lens[k + 1:], phys[k + 1:]
