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
from itertools import chain
from typing import Any, Hashable, Iterable, Iterator, Sized

_END = object()


class Sequencer:
    """Release items in ``expected`` order. ``held`` counts the units (samples) waiting, ``peak`` its maximum.

    ``expected`` is read lazily, only as far as the arrivals reach: an epoch's keys are never all in
    memory, and for a balanced order (itself computed as it is read) building the sequencer costs
    no stall before the first dispatch. Keys are checked distinct among those read and not yet
    released; an arrival that is not expected is found out by reading ``expected`` to its end."""

    __slots__ = ("_source", "_expected", "_known", "_held", "_left", "held", "peak")

    def __init__(self, expected: Iterable[Hashable]):
        self._left = len(expected) if isinstance(expected, Sized) else None
        self._source = iter(expected)
        self._expected: deque = deque()   # read from the source, not released yet, in order
        self._known: set = set()          # the same keys, for lookup
        self._held: dict[Hashable, tuple[Any, int]] = {}
        self.held = 0
        self.peak = 0

    def __len__(self) -> int:
        """Items still expected (released ones excluded); only for a sized ``expected``."""
        if self._left is None:
            raise TypeError("this Sequencer reads an iterable without a length; it has none either")
        return self._left

    def unreleased(self) -> Iterator[Hashable]:
        """The expected keys not released yet, in order (those read, then the rest of ``expected``): what a
        replacement sequencer takes over. Reads this one's source, so this one is not used after."""
        return chain(self._expected, self._source)

    def _reach(self, key: Hashable) -> bool:
        """Read ``expected`` until ``key`` is among the keys read; False if it ends first."""
        known, expected, source = self._known, self._expected, self._source
        while key not in known:
            nxt = next(source, _END)
            if nxt is _END:
                return False
            if nxt in known:
                raise ValueError(f"expected keys must be distinct: {nxt!r} twice")
            known.add(nxt)
            expected.append(nxt)
        return True

    def _release(self) -> None:
        self._known.discard(self._expected.popleft())
        if self._left is not None:
            self._left -= 1

    def arrive(self, key: Hashable, item: Any, size: int = 1) -> list:
        """Take one arrival; return what it releases (possibly nothing), in order."""
        if key in self._held:
            raise RuntimeError(f"item {key!r} arrived twice; this is a bug in the loader")
        expected = self._expected
        if not self._reach(key):
            raise RuntimeError(f"item {key!r} arrived but is not expected (next: "
                               f"{expected[0] if expected else 'nothing'!r}); this is a bug in the loader")
        if key != expected[0]:
            self._held[key] = (item, size)
            self.held += size
            self.peak = max(self.peak, self.held)
            return []
        self._release()
        out = [item]
        while expected and expected[0] in self._held:
            waiting, n = self._held.pop(expected[0])
            self._release()
            self.held -= n
            out.append(waiting)
        return out
