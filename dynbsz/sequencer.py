"""Deliver in a fixed order whatever order things arrive in: the main-process half of
``LoaderConfig(reorder_buffer=N)``.

torch's in_order=True keeps the sampler's order by tying dispatch to hand-out: a worker gets its
next task only when the batch before it in order has been handed out, in strict round robin, so
one slow sample idles every other worker. With a reorder buffer, torch runs out of order
(capacity-aware dispatch, a new task on every arrival) and this class puts the sampler's order
back: an item that arrives early waits here until every item before it has been released. The
delivered sequence is the expected one, so resume stays exact; what it costs is the memory of the
items waiting, which the loader bounds (it dispatches pauses instead of new work while the buffer
is full).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Hashable, Iterable


class Sequencer:
    """Release items in ``expected`` order. ``held`` counts the units (samples) waiting, ``peak`` its maximum."""

    __slots__ = ("_expected", "_known", "_held", "held", "peak")

    def __init__(self, expected: Iterable[Hashable]):
        self._expected = deque(expected)
        self._known = set(self._expected)
        if len(self._known) != len(self._expected):
            raise ValueError("expected keys must be distinct")
        self._held: dict[Hashable, tuple[Any, int]] = {}
        self.held = 0
        self.peak = 0

    def __len__(self) -> int:
        """Items still expected (released ones excluded)."""
        return len(self._expected)

    def arrive(self, key: Hashable, item: Any, size: int = 1) -> list:
        """Take one arrival; return what it releases (possibly nothing), in order."""
        expected = self._expected
        if key not in self._known:
            raise RuntimeError(f"item {key!r} arrived but is not expected (next: "
                               f"{expected[0] if expected else 'nothing'!r}); this is a bug in the loader")
        if key in self._held:
            raise RuntimeError(f"item {key!r} arrived twice; this is a bug in the loader")
        if key != expected[0]:
            self._held[key] = (item, size)
            self.held += size
            self.peak = max(self.peak, self.held)
            return []
        self._known.discard(expected.popleft())
        out = [item]
        while expected and expected[0] in self._held:
            key = expected.popleft()
            self._known.discard(key)
            waiting, n = self._held.pop(key)
            self.held -= n
            out.append(waiting)
        return out
