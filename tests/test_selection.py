"""The vectorized greedy walk equals the literal one, in every regime."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from dynbsz import selection
from dynbsz.selection import NEVER_FITS, select, select_reference


@st.composite
def buffers(draw):
    # Small budgets make exact fits (a length equal to what remains) common: every '<=' is tested.
    budget = draw(st.one_of(st.integers(1, 24), st.integers(1, 400)))
    n = draw(st.integers(1, 300))
    hi = draw(st.sampled_from([max(1, budget // 8), budget, 2 * budget]))
    tokens = draw(st.lists(st.integers(1, hi), min_size=n, max_size=n))
    # Slots already taken by an earlier cut carry NEVER_FITS; the head never does.
    dead = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    tokens = [NEVER_FITS if d and i > 0 else t for i, (t, d) in enumerate(zip(tokens, dead))]
    return budget, tokens


TUNING = st.fixed_dictionaries({
    # 0: jumps and gallops run to the last sample; 10**9: the whole buffer is walked in Python.
    "_PY_TAIL": st.sampled_from([0, selection._PY_TAIL, 10**9]),
    "_WINDOW": st.sampled_from([1, 2, selection._WINDOW]),
    "_GALLOP": st.sampled_from([1, selection._GALLOP]),
})


@given(buffers(), TUNING)
# A jump (15 misses, 4 is picked) lands right before a sample that fits exactly: it must be taken.
@example(buf=(20, [10, 15, 4, 6]), tuning={"_PY_TAIL": 0, "_WINDOW": 1, "_GALLOP": 1})
def test_select_matches_reference(buf, tuning):
    # The tuning constants only choose between implementations of the same walk (Python walk,
    # jumps, short windows, gallops); every mix of them is held to the reference.
    budget, tokens = buf
    with patch.multiple(selection, **tuning):
        assert select(np.array(tokens, dtype=np.int64), budget) == select_reference(tokens, budget)


@given(buffers(), st.data(), TUNING)
def test_select_with_physical_cap_matches_reference(buf, data, tuning):
    budget, tokens = buf
    # Physical lengths above and below the token lengths: either budget can be the one that binds.
    physical = [max(1, t + data.draw(st.integers(-budget, budget))) if t != NEVER_FITS else t for t in tokens]
    cap = data.draw(st.integers(1, 3 * budget))
    with patch.multiple(selection, **tuning):
        got = select(np.array(tokens, dtype=np.int64), budget, np.array(physical, dtype=np.int64), cap)
    assert got == select_reference(tokens, budget, physical, cap)


def test_gallop_spends_the_physical_budget_too():
    # Windows of one sample turn into gallops at once; the gallops must charge both budgets, or
    # the last sample (50 tokens fit, 30 physical do not) slips past the cap.
    tokens, physical = [10, 10, 10, 10, 50], [10, 10, 40, 40, 30]
    want = select_reference(tokens, 100, physical, 100)
    assert want == [0, 1, 2, 3]
    with patch.multiple(selection, _PY_TAIL=0, _WINDOW=1, _GALLOP=1):
        assert select(np.array(tokens, dtype=np.int64), 100, np.array(physical, dtype=np.int64), 100) == want


@given(buffers(), st.data())
def test_select_with_lone_samples_matches_reference(buf, data):
    budget, tokens = buf
    alone = data.draw(st.lists(st.booleans(), min_size=len(tokens), max_size=len(tokens)))
    got = select(np.array(tokens, dtype=np.int64), budget, alone=np.array(alone))
    want = select_reference(tokens, budget, alone=alone)
    assert got == want
    if alone[0]:
        assert got == [0]
    else:
        assert not any(alone[i] for i in got)


def test_head_is_always_taken_even_when_overlong():
    assert select(np.array([500, 1, 1], dtype=np.int64), 100) == [0]
    assert select(np.array([60, 50, 40], dtype=np.int64), 100) == [0, 2]


def test_long_contiguous_prefix_spans_growing_windows():
    tokens = np.ones(5000, dtype=np.int64)
    assert select(tokens, 3000) == list(range(3000))
