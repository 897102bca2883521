"""No hang: a bound on steps per pass and on wall time per call, around every loader a property drives.

A loader that never ends an epoch, a rank that waits forever for peers that stopped a step
earlier, or a worker that stops delivering would otherwise hang the suite (and, in training,
the job: the worst data-loader failure there is, and the one a safety property never sees).
Every driver (``loader_props.run_schedule`` and ``run_bounded``, the trainer models, the loader
state machine) takes its iterators from ``Watch.iter``, so each ``iter()`` and ``next()`` runs
under two bounds:

* **steps per pass**: one iterator (one pass over an epoch, or what is left of it after a
  restore) yields at most ``pass_bound(scenario)`` steps: two per sample the epoch can hold.
  Every step delivers a sample or more, except the empty steps some loaders pad a short rank
  with; as many padding steps again as samples is far beyond any padding rule (padding evens
  ranks out, at most one shard's worth).
* **wall time per call**: an ``iter()`` or ``next()`` returns within ``step_timeout_s`` seconds
  (default ``DEFAULT_STEP_TIMEOUT_S``; ``python -m properties check --step-timeout S``). The
  default is two orders of magnitude above the slowest step the suite's scenarios take (worker
  start-up under ``pytest -n auto`` on two cores: a few seconds), so a pass is never a timing
  accident; a hang found at that bound is a hang.

The wall bound is a ``SIGALRM`` timer, so it applies in the main thread only (where pytest,
pytest-xdist's workers and the CLI run the suite) and only when no outer timer is armed (a
``pytest-timeout`` in signal mode keeps its own); elsewhere only the step bound applies.

A hang is reported as ``LoaderHang``, a ``PropertyViolation`` naming the bound, the schedule and
where it stopped. It is not shrunk: each attempt would wait the bound out again, so the runner
stops the search at the first one (``StopSearch``) and reports the example as drawn.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from contextvars import ContextVar
from typing import Any, Callable, Iterator

from .errors import PropertyViolation

#: Seconds one ``iter()`` or ``next()`` may take before the run counts as hung (see the module docstring).
DEFAULT_STEP_TIMEOUT_S = 120.0

_timeout: ContextVar[float | None] = ContextVar("step_timeout_s", default=DEFAULT_STEP_TIMEOUT_S)


class LoaderHang(PropertyViolation):
    """A loader crossed the steps-per-pass or wall-time-per-call bound."""


class StopSearch(BaseException):
    """Raised inside a Hypothesis test in place of a ``LoaderHang`` (``hang``): not an ``Exception``,
    so Hypothesis neither shrinks it nor retries it; the runner reports the hang."""

    def __init__(self, hang: LoaderHang):
        super().__init__(str(hang))
        self.hang = hang


class _Expired(BaseException):
    # A BaseException: torch's iterator re-raises what it does not know, but it catches Exception
    # around its queue reads, and nothing between the alarm and the Watch may take this for the
    # loader's own error.
    pass


def check_timeout(seconds: float | None) -> float | None:
    if seconds is not None and not (isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
                                    and seconds > 0):
        raise ValueError(f"step_timeout_s must be a number of seconds > 0 (or None: no wall-time bound), "
                         f"got {seconds!r}")
    return seconds


@contextlib.contextmanager
def step_timeout(seconds: float | None):
    """Run the enclosed checks with this wall-time bound per call (None: the step bound only)."""
    token = _timeout.set(check_timeout(seconds))
    try:
        yield
    finally:
        _timeout.reset(token)


def current_timeout() -> float | None:
    return _timeout.get()


def pass_bound(scenario: Any) -> int:
    """Most steps one pass over an epoch may yield: two per sample the epoch can hold, plus two."""
    n = getattr(scenario, "num_samples", None)
    if n is None:   # a stream scenario: every id of every source, each source cycled at most once per other
        sources = tuple(getattr(scenario, "sources", ()))
        n = sum(sources) * max(1, len(sources)) + (getattr(scenario, "cycle_length", None) or 0) * len(sources)
    return 2 * int(n) + 2


#: How soon an alarm deferred out of a finalizer fires again (``_deadline``).
RETRY_AFTER_FINALIZER_S = 0.05
#: Functions Python calls where an exception is printed and dropped, seen under the alarm by ci.flips: object
#: finalizers, and the lock hooks logging registers with os.register_at_fork (run around every worker's fork).
SWALLOWING_CALLBACKS = frozenset({"__del__", "_acquireLock", "_releaseLock", "_after_at_fork_child_reinit_locks"})
#: ... and weakref callbacks the garbage collector runs (a WeakValueDictionary's ``remove``, a WeakSet's
#: ``_remove``, ``weakref.finalize``), by the module they live in: their names are too common to match alone.
#: Deferring an alarm that lands in other code of these modules only delays it by RETRY_AFTER_FINALIZER_S.
SWALLOWING_MODULES = ("weakref.py", "_weakrefset.py")


def _alarm_usable() -> bool:
    return (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
            and signal.getitimer(signal.ITIMER_REAL)[0] == 0.0)


@contextlib.contextmanager
def _deadline(seconds: float | None):
    """Raise ``_Expired`` in the main thread once ``seconds`` have passed inside the block."""
    if seconds is None or not _alarm_usable():
        yield
        return

    def expire(signum, frame):
        # An alarm that lands in a callback whose exceptions Python swallows as "Exception ignored" (a torch
        # iterator's __del__ run by the garbage collector inside the watched call, a weakref callback it runs,
        # logging's at-fork lock hooks run by os.fork() as a worker starts) would be lost there: try again just
        # after the callback returns.
        f = frame
        while f is not None:
            if f.f_code.co_name in SWALLOWING_CALLBACKS or f.f_code.co_filename.endswith(SWALLOWING_MODULES):
                signal.setitimer(signal.ITIMER_REAL, RETRY_AFTER_FINALIZER_S)
                return
            f = f.f_back
        raise _Expired()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)


class Watch:
    """The bounds for one run of one schedule; ``schedule`` names it (the checkpoints, the trainer,
    the rank) in every message, with how many steps all the run's passes had delivered. ``max_steps``
    replaces ``pass_bound(scenario)`` where the driver's own step count is the bound (a trainer that runs
    a fixed number of steps over a stream endless by design)."""

    def __init__(self, scenario: Any, schedule: str, *, max_steps: int | None = None):
        self.schedule = schedule
        self.max_steps = pass_bound(scenario) if max_steps is None else max_steps
        self.bound_reason = ("two steps per sample it can hold, plus two" if max_steps is None
                             else "the steps its trainer runs")
        self.timeout_s = current_timeout()
        self.delivered = 0

    def _hang(self, what: str) -> LoaderHang:
        return LoaderHang(f"no hang: {what}, after {self.delivered} steps in all ({self.schedule})")

    def call(self, fn: Callable[[], Any], what: str) -> Any:
        """``fn()`` under the wall-time bound; ``what`` says which call it is, for the message."""
        start = time.monotonic()
        try:
            with _deadline(self.timeout_s):
                return fn()
        except _Expired:
            raise self._hang(f"{what} did not return within {self.timeout_s:g} s (the wall-time bound per call, "
                             f"--step-timeout; it waited {time.monotonic() - start:.1f} s)") from None

    def iter(self, loader: Any, epoch: int) -> "Watched":
        """``iter(loader)`` under the bounds, as an iterator whose ``next()`` is bounded too."""
        return Watched(self, self.call(lambda: iter(loader), f"iter() for epoch {epoch}"), epoch)


class Watched:
    """One pass: ``next()`` under the wall-time bound, at most ``Watch.max_steps`` steps."""

    __slots__ = ("watch", "it", "epoch", "taken")

    def __init__(self, watch: Watch, it: Iterator, epoch: int):
        self.watch, self.it, self.epoch, self.taken = watch, it, epoch, 0

    def __iter__(self) -> "Watched":
        return self

    def __next__(self) -> Any:
        w = self.watch
        step = w.call(lambda: next(self.it), f"next() for step {self.taken} of epoch {self.epoch}'s pass")
        self.taken += 1
        if self.taken > w.max_steps:
            raise w._hang(f"one pass over epoch {self.epoch} yielded {self.taken} steps without ending; an epoch of "
                          f"this scenario ends within {w.max_steps} ({w.bound_reason})")
        w.delivered += 1
        return step

