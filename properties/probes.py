"""A stateful gate that exists only to test packers.

dynbsz's gate protocol lets a gate keep state of its own (``state_dict`` /
``load_state_dict``), and a packer promises to checkpoint it. None of the
built-in gates keeps state, so without this probe a packer that drops the gate's
state on restore would pass every property. The probe's state changes what it
answers, so forgetting it changes the micro-batches and the resume property sees it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dynbsz.gates import covers_budget

KIND = "probe_high_water"


@dataclass
class HighWaterGate:
    """A minimum gate with hysteresis: after a cut it waits for the buffer to refill to
    ``fraction`` of the largest buffer it has seen (its high-water mark), and for the budget
    to be covered. Taking a maximum keeps ``ready()`` idempotent: asking twice about the
    same buffer changes nothing. The mark is its state.
    """

    fraction: float = 0.75
    high_water: int = 0

    def ready(self, view: Any) -> bool:
        self.high_water = max(self.high_water, view.num_samples)
        return covers_budget(view) and view.num_samples >= math.ceil(self.fraction * self.high_water)

    def spec(self) -> dict[str, Any]:
        return {"kind": KIND, "fraction": self.fraction}

    def state_dict(self) -> dict[str, Any]:
        return {"high_water": self.high_water}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.high_water = int(state["high_water"])


def from_spec(spec: dict[str, Any]) -> HighWaterGate:
    return HighWaterGate(float(spec["fraction"]))
