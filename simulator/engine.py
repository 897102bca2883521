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

from heapq import heappop, heappush


class CausalityError(RuntimeError):
    """An event was scheduled before the current simulated time (a modelling bug, never bad input)."""


class EventQueue:
    """A clock (``now``, seconds) and a min-heap of pending ``(time, key)`` events."""

    __slots__ = ("now", "heap", "pushed", "popped")

    def __init__(self, now: float = 0.0):
        self.now = float(now)
        self.heap: list[tuple[float, int]] = []
        self.pushed = 0
        self.popped = 0

    def __len__(self) -> int:
        return len(self.heap)

    def advance(self, t: float) -> float:
        """Move the clock forward to ``t`` (no-op if ``t`` is in the past: the caller was already busy)."""
        if t > self.now:
            self.now = t
        return self.now

    def push(self, t: float, key: int) -> None:
        if t < self.now:
            raise CausalityError(f"event {key} scheduled at t={t!r} before now={self.now!r}")
        heappush(self.heap, (t, key))
        self.pushed += 1

    def pop(self) -> tuple[float, int]:
        """Take the earliest event; the clock moves to its time unless that is already past.

        An event earlier than ``now`` is one that happened while the main process was
        busy elsewhere (a result waiting in the queue): taking it costs no time.
        """
        t, key = heappop(self.heap)
        if t > self.now:
            self.now = t
        self.popped += 1
        return t, key

    def peek(self) -> tuple[float, int]:
        return self.heap[0]

    def remove(self, key: int) -> float:
        """Take a specific pending event out of order (used only by fidelity replay); returns its time."""
        for i, (t, k) in enumerate(self.heap):
            if k == key:
                last = self.heap.pop()
                if i < len(self.heap):
                    self.heap[i] = last
                    _reheap(self.heap)
                if t > self.now:
                    self.now = t
                self.popped += 1
                return t
        raise KeyError(f"no pending event {key}")


def _reheap(heap: list) -> None:
    import heapq

    heapq.heapify(heap)
