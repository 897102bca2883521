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
    """A clock (``now``, seconds, read-only) and a min-heap of pending ``(time, key)`` events.

    The clock moves only through the methods below, each of which keeps it from going backwards.
    """

    __slots__ = ("_now", "_heap")

    def __init__(self, now: float = 0.0):
        self._now = float(now)
        self._heap: list[tuple[float, int]] = []

    @property
    def now(self) -> float:
        return self._now

    def __len__(self) -> int:
        return len(self._heap)

    def advance(self, t: float) -> float:
        """Move the clock forward to ``t`` (no-op if ``t`` is in the past: the caller was already busy)."""
        if t > self._now:
            self._now = t
        return self._now

    def move_to(self, t: float, what: str = "the clock") -> None:
        """Set the clock to ``t``, which must not be in the past: a consumer's request time, the end
        of a fetch it waited for. ``what`` names the mover in the ``CausalityError`` otherwise."""
        if t < self._now:
            raise CausalityError(f"{what} at t={t!r}, before now={self._now!r}")
        self._now = t

    def push(self, t: float, key: int) -> None:
        if t < self._now:
            raise CausalityError(f"event {key} scheduled at t={t!r} before now={self._now!r}")
        heappush(self._heap, (t, key))

    def pop(self) -> tuple[float, int]:
        """Take the earliest event; the clock moves to its time unless that is already past.

        An event earlier than ``now`` is one that happened while the main process was
        busy elsewhere (a result waiting in the queue): taking it costs no time.
        """
        t, key = heappop(self._heap)
        if t > self._now:
            self._now = t
        return t, key

    def pending(self) -> list[tuple[float, int]]:
        """The pending events, earliest first (a copy: the queue is not changed)."""
        return sorted(self._heap)
