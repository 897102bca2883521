"""What the generated examples reached: the states a property exists to exercise.

A property that passes on examples which never reach its interesting state (a gate that never
opens, a micro-batch that never holds two samples, a checkpoint that never falls mid-epoch)
proves little. Checks call ``reached(label)`` when an example gets somewhere worth getting; the
label becomes a ``hypothesis.event`` (Hypothesis's own statistics) and is counted per example
by ``recording()``, which the runner wraps around every example. Each property names the one
label it is about (``Property.interesting``); ``check --json`` reports the share of examples
that reached it, next to every label's count.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator

_RECORDING: list[set[str]] = []


def reached(label: str) -> None:
    """The running example reached ``label``. Outside ``recording()`` and Hypothesis, a no-op."""
    if _RECORDING:
        _RECORDING[-1].add(label)
    try:
        from hypothesis import event
        from hypothesis.control import currently_in_test_context

        if currently_in_test_context():
            event(label)
    except ImportError:  # pragma: no cover - hypothesis is a dependency
        pass


def begin() -> set[str]:
    """Start collecting the labels of one example (``end`` stops); for examples that are not one
    call, such as a state machine's run (from its construction to its teardown)."""
    labels: set[str] = set()
    _RECORDING.append(labels)
    return labels


def end(labels: set[str]) -> None:
    if _RECORDING and _RECORDING[-1] is labels:
        _RECORDING.pop()


@contextlib.contextmanager
def recording() -> Iterator[set[str]]:
    """Collect the labels one example reaches (nested blocks collect their own)."""
    labels = begin()
    try:
        yield labels
    finally:
        end(labels)


@dataclass
class Tally:
    """Per label, how many examples reached it, out of ``examples``."""

    examples: int = 0
    counts: Counter = field(default_factory=Counter)

    def add(self, labels: set[str]) -> None:
        self.examples += 1
        self.counts.update(labels)

    def share(self, label: str) -> float | None:
        return self.counts[label] / self.examples if self.examples else None

    def to_json(self, interesting: str | None) -> dict:
        share = self.share(interesting) if interesting else None
        return {"interesting": interesting, "reached": self.counts[interesting] if interesting else None,
                "of": self.examples, "share": None if share is None else round(share, 3),
                "events": dict(sorted(self.counts.items()))}
