"""Deliberately broken variants of dynbsz, to prove the properties have teeth.

Each mutant is one small, realistic bug. A property suite that passes on a
mutant has a blind spot; the tests (and ``python -m properties mutants``) run
every property against every mutant and require each mutant to be killed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from dynbsz.gates import FixedGate, TokenAwareGate, covers_budget
from dynbsz.packer import GreedyPacker
from dynbsz.selection import select


@dataclass(frozen=True)
class Mutant:
    """``make`` has the signature of what it replaces: a packer class ``(config, gate)``, a gate
    class taking its spec's fields, or a loader factory ``(LoaderScenario) -> loader``. ``replaces``
    names it: ``packer``, for a gate the gate family (``fixed``, ``token_aware``), for a loader
    the dynbsz loader component (``loader:main``, ``loader:worker``) it stands in for."""

    name: str
    component: str          # packer | gate | loader
    description: str
    make: Callable[..., Any]
    replaces: str = "packer"


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


@dataclass(frozen=True)
class GateStrictCount(FixedGate):
    """Compares the sample count with ``>`` instead of ``>=``: opens one sample late."""

    def ready(self, view) -> bool:
        return view.num_samples > self.buffer_size and covers_budget(view)


@dataclass(frozen=True)
class MarginOnPoolCap(TokenAwareGate):
    """token_aware's margin applied to the pool cap too: opens at ceil((1 + margin) * pool_cap) samples."""

    def ready(self, view) -> bool:
        if not covers_budget(view):
            return False
        if view.num_samples >= math.ceil((1.0 + self.margin) * self.pool_cap):
            return True
        return view.tokens >= math.ceil((1.0 + self.margin) * view.budget)


@dataclass(frozen=True)
class PoolCapAsCapacity(TokenAwareGate):
    """token_aware checks the pool cap before the budget: a full pool opens the gate uncovered."""

    def ready(self, view) -> bool:
        if view.num_samples >= self.pool_cap:
            return True
        return super().ready(view)


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


class WarmupOffByOne(GreedyPacker):
    """The warm-up budget is looked up one micro-batch ahead: each step's ramp arrives a step early."""

    def _budget_for(self, cut_index: int) -> int:
        return super()._budget_for(cut_index + 1)


class PhysicalCapIgnored(GreedyPacker):
    """Selection forgets the physical-token cap and packs by budgeted tokens alone."""

    _select = staticmethod(lambda tok, budget, physical=None, cap=None, alone=None: select(tok, budget, None, None, alone))


class DropNotCounted(GreedyPacker):
    """drop policy: the sample is dropped but never added to ``dropped`` (nor warned about)."""

    def _drop(self, reason, sample_id) -> None:
        return None


class DropsNotRestored(GreedyPacker):
    """State restored only in part: load_state_dict() forgets the drop counts."""

    def load_state_dict(self, state):
        super().load_state_dict({**state, "dropped": {k: [] for k in state["dropped"]}})


class GateStateNotRestored(GreedyPacker):
    """load_state_dict() restores the buffer and step but not the gate's own state."""

    def load_state_dict(self, state):
        super().load_state_dict({k: v for k, v in state.items() if k != "gate_state"})


class DrainStopsEarly(GreedyPacker):
    """drain() stops while one sample is still buffered (a `> 1` where `> 0` was meant)."""

    def drain(self):
        while self.num_samples > 1:
            yield self._cut(drained=True)


class EagerDrain(GreedyPacker):
    """drain() cuts everything up front: a checkpoint taken half-way through the drain has lost the rest."""

    def drain(self):
        out = []
        while self.num_samples:
            out.append(self._cut(drained=True))
        return out


PACKER_MUTANTS: tuple[Mutant, ...] = (
    Mutant("gate-as-capacity", "gate", GateAsCapacity.__doc__, GateAsCapacity, "fixed"),
    Mutant("gate-ignores-minimum", "gate", GateIgnoresMinimum.__doc__, GateIgnoresMinimum, "fixed"),
    Mutant("gate-strict-count", "gate", GateStrictCount.__doc__, GateStrictCount, "fixed"),
    Mutant("margin-on-pool-cap", "gate", MarginOnPoolCap.__doc__, MarginOnPoolCap, "token_aware"),
    Mutant("pool-cap-as-capacity", "gate", PoolCapAsCapacity.__doc__, PoolCapAsCapacity, "token_aware"),
    Mutant("budget-off-by-one", "packer", BudgetOffByOne.__doc__, BudgetOffByOne),
    Mutant("no-forced-head", "packer", NoForcedHead.__doc__, NoForcedHead),
    Mutant("newest-first", "packer", NewestFirst.__doc__, NewestFirst),
    Mutant("overlong-dropped-silently", "packer", OverlongDroppedSilently.__doc__, OverlongDroppedSilently),
    Mutant("buffer-not-checkpointed", "packer", BufferNotCheckpointed.__doc__, BufferNotCheckpointed),
    Mutant("step-not-restored", "packer", StepNotRestored.__doc__, StepNotRestored),
    Mutant("double-emit", "packer", DoubleEmit.__doc__, DoubleEmit),
    Mutant("warmup-off-by-one", "packer", WarmupOffByOne.__doc__, WarmupOffByOne),
    Mutant("physical-cap-ignored", "packer", PhysicalCapIgnored.__doc__, PhysicalCapIgnored),
    Mutant("drop-not-counted", "packer", DropNotCounted.__doc__, DropNotCounted),
    Mutant("drops-not-restored", "packer", DropsNotRestored.__doc__, DropsNotRestored),
    Mutant("gate-state-not-restored", "packer", GateStateNotRestored.__doc__, GateStateNotRestored),
    Mutant("drain-stops-early", "packer", DrainStopsEarly.__doc__, DrainStopsEarly),
    Mutant("eager-drain", "packer", EagerDrain.__doc__, EagerDrain),
)


def _loader_mutants() -> tuple[Mutant, ...]:
    # Loader mutants subclass dynbsz's loader classes (properties/loader_mutants.py); each is a
    # loader factory standing in for the dynbsz loader component named in ``replaces``.
    from .loader_mutants import factories

    return tuple(Mutant(name, "loader", doc, make, component) for name, doc, make, component in factories())


LOADER_MUTANTS: tuple[Mutant, ...] = _loader_mutants()

# Every mutant, all components.
MUTANTS: tuple[Mutant, ...] = PACKER_MUTANTS + LOADER_MUTANTS


def by_name(name: str) -> Mutant | None:
    return next((m for m in MUTANTS if m.name == name), None)
