"""Deliberately broken variants of dynbsz, to prove the properties have teeth.

Each mutant is one small, realistic bug. A property suite that passes on a
mutant has a blind spot; the tests (and ``python -m properties mutants``) run
every property against every mutant and require each mutant to be killed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from dynbsz.gates import FixedGate, covers_budget
from dynbsz.packer import GreedyPacker
from dynbsz.selection import select


@dataclass(frozen=True)
class Mutant:
    name: str
    component: str          # packer | gate | loader
    description: str
    make: Callable[..., Any]  # same signature as the real thing it replaces


# ---- gates ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class GateAsCapacity(FixedGate):
    """Opens as soon as buffer_size samples are buffered, covered or not: the seed's bug class."""

    def ready(self, view) -> bool:
        return view.num_samples >= self.buffer_size


@dataclass(frozen=True)
class GateIgnoresMinimum(FixedGate):
    """Forgets the sample minimum and opens on tokens alone."""

    def ready(self, view) -> bool:
        return covers_budget(view)


# ---- packers -------------------------------------------------------------------------------

class BudgetOffByOne(GreedyPacker):
    """Selection admits a sample one token too long."""

    _select = staticmethod(lambda tok, budget, *a: select(tok, budget + 1, *a))


class NoForcedHead(GreedyPacker):
    """Skips a head that does not fit instead of forcing it out: an overlong head starves."""

    @staticmethod
    def _select(tok, budget, physical=None, cap=None, alone=None):
        fits = (tok <= budget).nonzero()[0]
        if fits.shape[0] == 0 or fits[0] == 0:
            return select(tok, budget, physical, cap, alone)
        first = int(fits[0])
        sub = select(tok[first:], budget, None if physical is None else physical[first:], cap,
                     None if alone is None else alone[first:])
        return [first + i for i in sub]


class NewestFirst(GreedyPacker):
    """Walks the buffer newest first (a stack where a queue was meant)."""

    @staticmethod
    def _select(tok, budget, physical=None, cap=None, alone=None):
        n = tok.shape[0]
        rev = select(tok[::-1].copy(), budget, None if physical is None else physical[::-1].copy(), cap,
                     None if alone is None else alone[::-1].copy())
        return sorted(n - 1 - i for i in rev)


class OverlongDroppedSilently(GreedyPacker):
    """Overlong samples vanish: put() reports success and nothing is counted."""

    def put(self, sample_id, tokens, physical_tokens=None, source=None, payload=None) -> bool:
        if isinstance(tokens, int) and tokens > self.budget:
            return True
        return super().put(sample_id, tokens, physical_tokens, source, payload)


class BufferNotCheckpointed(GreedyPacker):
    """state_dict() forgets the buffered samples (VeOmni's TODO, had it been taken literally)."""

    def state_dict(self):
        state = super().state_dict()
        state["buffer"] = {"ids": [], "tokens": [], "physical": [], "sources": []}
        return state


class StepNotRestored(GreedyPacker):
    """load_state_dict() restores the buffer but restarts the step counter (and so the warm-up)."""

    def load_state_dict(self, state):
        super().load_state_dict({**state, "cuts": 0})


class DoubleEmit(GreedyPacker):
    """A cut emits the head but leaves it in the buffer when the micro-batch has room to spare."""

    def cut(self):
        mb = super().cut()
        if len(mb.ids) == 1 and mb.tokens[0] < self.budget // 2 and mb.ids[0] not in self._extra:
            self.put(mb.ids[0], mb.tokens[0], mb.physical[0], mb.sources[0], mb.payloads[0])
        return mb


PACKER_MUTANTS: tuple[Mutant, ...] = (
    Mutant("gate-as-capacity", "gate", GateAsCapacity.__doc__, GateAsCapacity),
    Mutant("gate-ignores-minimum", "gate", GateIgnoresMinimum.__doc__, GateIgnoresMinimum),
    Mutant("budget-off-by-one", "packer", BudgetOffByOne.__doc__, BudgetOffByOne),
    Mutant("no-forced-head", "packer", NoForcedHead.__doc__, NoForcedHead),
    Mutant("newest-first", "packer", NewestFirst.__doc__, NewestFirst),
    Mutant("overlong-dropped-silently", "packer", OverlongDroppedSilently.__doc__, OverlongDroppedSilently),
    Mutant("buffer-not-checkpointed", "packer", BufferNotCheckpointed.__doc__, BufferNotCheckpointed),
    Mutant("step-not-restored", "packer", StepNotRestored.__doc__, StepNotRestored),
    Mutant("double-emit", "packer", DoubleEmit.__doc__, DoubleEmit),
)
