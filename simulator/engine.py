"""The simulation core: a clock and a time-ordered event queue, nothing else.

Why so small: in the processes we model, only the data-loader *workers* run
concurrently, and each is a FIFO single server with deterministic costs. The
moment a task is dispatched we therefore already know when it will finish
(``start = max(now, worker free)``, ``finish = start + cost``), so the only
future events are completions, pushed once at dispatch. Everything else (the
main process's hand-out loop, the packer, the training step) is sequential code
in the main process that advances the clock as it goes. A SimPy-style
generator-per-process core would give the same answers at several times the
cost per event; the million-sample benchmark is what decided it.

Events are plain tuples ``(time, key)`` on a ``heapq``; ``key`` is an integer
that both identifies the event for the caller and breaks ties deterministically
(equal times pop in ascending key order, which for tasks is send order).

The queue enforces causality: an event may never be scheduled before the
current time, and the clock never moves backwards.
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush


class CausalityError(RuntimeError):
    """An event was scheduled before the current simulated time (a modelling bug, never bad input)."""


class EventQueue:
    """A clock (``now``, seconds) and a min-heap of pending ``(time, key)`` events.

    Read ``now`` freely; it moves only through the methods below, each of which keeps it from
    going backwards. It is a plain attribute rather than a read-only property because the loader
    model reads it once per fetched item (a property call there cost about 1% of a large
    study); ``tests/test_simulator_model.py`` fails if any module but this one assigns it.
    """

    __slots__ = ("now", "_heap")

    def __init__(self, now: float = 0.0):
        self.now = float(now)
        self._heap: list[tuple[float, int]] = []

    def __len__(self) -> int:
        return len(self._heap)

    def advance(self, t: float) -> float:
        """Move the clock forward to ``t`` (no-op if ``t`` is in the past: the caller was already busy)."""
        if t > self.now:
            self.now = t
        return self.now

    def move_to(self, t: float, what: str = "the clock") -> None:
        """Set the clock to ``t``, which must not be in the past: a consumer's request time, the end
        of a fetch it waited for. ``what`` names the mover in the ``CausalityError`` otherwise."""
        if t < self.now:
            raise CausalityError(f"{what} at t={t!r}, before now={self.now!r}")
        self.now = t

    def push(self, t: float, key: int) -> None:
        if t < self.now:
            raise CausalityError(f"event {key} scheduled at t={t!r} before now={self.now!r}")
        heappush(self._heap, (t, key))

    def pop(self) -> tuple[float, int]:
        """Take the earliest event; the clock moves to its time unless that is already past.

        An event earlier than ``now`` is one that happened while the main process was
        busy elsewhere (a result waiting in the queue): taking it costs no time.
        """
        t, key = heappop(self._heap)
        if t > self.now:
            self.now = t
        return t, key

    def remove(self, key: int) -> float | None:
        """Take pending event ``key`` out of order and return its time (the clock moves to it
        unless that is already past); None, changing nothing, if no such event is pending.
        Linear in the queue's length: for replaying a recorded history, not for the hot path."""
        heap = self._heap
        for i, (t, k) in enumerate(heap):
            if k == key:
                last = heap.pop()
                if i < len(heap):
                    heap[i] = last
                    heapify(heap)
                if t > self.now:
                    self.now = t
                return t
        return None

    def pending(self) -> list[tuple[float, int]]:
        """The pending events, earliest first (a copy: the queue is not changed)."""
        return sorted(self._heap)
