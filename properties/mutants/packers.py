"""Broken packers: each subclasses dynbsz's ``GreedyPacker`` and is tested as dynbsz's ``packer``
component."""

from __future__ import annotations

from dynbsz.packer import GreedyPacker
from dynbsz.selection import select

from ..registry import mutant


@mutant("budget-off-by-one", component="packer")
class BudgetOffByOne(GreedyPacker):
    """Selection admits a sample one token too long."""

    _select = staticmethod(lambda tok, budget, *a: select(tok, budget + 1, *a))


@mutant("fit-strict", component="packer")
class FitStrict(GreedyPacker):
    """Selection admits a sample only if it fits with room to spare (``<`` where ``<=`` was meant), for
    the budget and the physical cap alike: exact fits are left behind. (dynbsz.selection's literal
    walk is a reference for its fast one; the same slip in both passes any oracle taken from it.)"""

    @staticmethod
    def _select(tok, budget, physical=None, cap=None, alone=None):
        # tokens < budget - sum  <=>  tokens <= (budget - 1) - sum; the walk's end (sum >= budget) differs
        # only by zero-token samples, which travel alone.
        return select(tok, max(budget - 1, 0), physical, None if cap is None else max(cap - 1, 0), alone)


@mutant("no-forced-head", component="packer")
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


@mutant("newest-first", component="packer")
class NewestFirst(GreedyPacker):
    """Walks the buffer newest first (a stack where a queue was meant)."""

    @staticmethod
    def _select(tok, budget, physical=None, cap=None, alone=None):
        n = tok.shape[0]
        rev = select(tok[::-1].copy(), budget, None if physical is None else physical[::-1].copy(), cap,
                     None if alone is None else alone[::-1].copy())
        return sorted(n - 1 - i for i in rev)


@mutant("overlong-dropped-silently", component="packer")
class OverlongDroppedSilently(GreedyPacker):
    """Overlong samples vanish: put() reports success and nothing is counted."""

    def put(self, sample_id, tokens, physical_tokens=None, source=None, payload=None) -> bool:
        if isinstance(tokens, int) and tokens > self.budget:
            return True
        return super().put(sample_id, tokens, physical_tokens, source, payload)


@mutant("buffer-not-checkpointed", component="packer")
class BufferNotCheckpointed(GreedyPacker):
    """state_dict() forgets the buffered samples (VeOmni's TODO, had it been taken literally)."""

    def state_dict(self):
        state = super().state_dict()
        state["buffer"] = {"ids": [], "tokens": [], "physical": [], "sources": []}
        return state


@mutant("step-not-restored", component="packer")
class StepNotRestored(GreedyPacker):
    """load_state_dict() restores the buffer but restarts the step counter (and so the warm-up)."""

    def load_state_dict(self, state):
        super().load_state_dict({**state, "cuts": 0})


@mutant("double-emit", component="packer")
class DoubleEmit(GreedyPacker):
    """A cut emits the head but leaves it in the buffer when the micro-batch has room to spare."""

    def cut(self):
        mb = super().cut()
        if len(mb.ids) == 1 and mb.tokens[0] < self.budget // 2 and mb.ids[0] not in self._extra:
            self.put(mb.ids[0], mb.tokens[0], mb.physical[0], mb.sources[0], mb.payloads[0])
        return mb


@mutant("warmup-off-by-one", component="packer")
class WarmupOffByOne(GreedyPacker):
    """The warm-up budget is looked up one micro-batch ahead: each step's ramp arrives a step early."""

    def _budget_for(self, cut_index: int) -> int:
        return super()._budget_for(cut_index + 1)


@mutant("physical-cap-ignored", component="packer")
class PhysicalCapIgnored(GreedyPacker):
    """Selection forgets the physical-token cap and packs by budgeted tokens alone."""

    _select = staticmethod(lambda tok, budget, physical=None, cap=None, alone=None: select(tok, budget, None, None, alone))


@mutant("drop-not-counted", component="packer")
class DropNotCounted(GreedyPacker):
    """drop policy: the sample is dropped but never added to ``dropped`` (nor warned about)."""

    def _drop(self, reason, sample_id) -> None:
        return None


@mutant("drops-not-restored", component="packer")
class DropsNotRestored(GreedyPacker):
    """State restored only in part: load_state_dict() forgets the drop counts."""

    def load_state_dict(self, state):
        super().load_state_dict({**state, "dropped": {k: [] for k in state["dropped"]}})


@mutant("gate-state-not-restored", component="packer")
class GateStateNotRestored(GreedyPacker):
    """load_state_dict() restores the buffer and step but not the gate's own state."""

    def load_state_dict(self, state):
        super().load_state_dict({k: v for k, v in state.items() if k != "gate_state"})


@mutant("drain-stops-early", component="packer")
class DrainStopsEarly(GreedyPacker):
    """drain() stops while one sample is still buffered (a `> 1` where `> 0` was meant)."""

    def drain(self):
        while self.num_samples > 1:
            yield self._cut(drained=True)


@mutant("eager-drain", component="packer")
class EagerDrain(GreedyPacker):
    """drain() cuts everything up front: a checkpoint taken half-way through the drain has lost the rest."""

    def drain(self):
        out = []
        while self.num_samples:
            out.append(self._cut(drained=True))
        return out


@mutant("physical-not-released", component="packer")
class PhysicalNotReleased(GreedyPacker):
    """A cut takes its samples' tokens off the buffer's running totals but not their physical tokens: with
    a physical-token cap the buffer looks fuller than it is, and the gate opens on samples already gone."""

    def _cut(self, drained: bool):
        mb = super()._cut(drained)
        self.physical_tokens += sum(mb.physical)
        return mb


@mutant("warmup-rounds-up", component="packer")
class WarmupRoundsUp(GreedyPacker):
    """The warm-up ramp rounds up (ceiling division) where VeOmni's get_cur_token_micro_bsz floors: every
    step of the ramp whose budget is not a whole number gets one token more (dynbsz/warmup.py's formula)."""

    def _budget_for(self, cut_index: int) -> int:
        c = self.config
        step = cut_index // c.micro_batches_per_step
        if c.warmup_steps > 0 and step <= c.warmup_steps:
            return -(-(c.budget - c.warmup_init_tokens) * step // c.warmup_steps) + c.warmup_init_tokens
        return c.budget


@mutant("releases-only-at-end", component="packer", aims_at="progress")
class ReleasesOnlyAtEnd(GreedyPacker):
    """Never ready: every sample waits for the end-of-stream drain, whose micro-batches are each a correct
    greedy walk, so every safety property passes while a trainer waits for its first step."""

    def ready(self) -> bool:
        return False


@mutant("large-samples-wait", component="packer", aims_at="bounded_wait")
class LargeSamplesWait(GreedyPacker):
    """Sets every sample longer than half the budget aside and lets it into the buffer only once a cut
    has left the buffer empty (a packer that waits for a quiet moment to place its big samples). Written
    against the public ``Packer`` protocol alone: under a steady stream the buffer is never empty, so a
    big sample waits behind every newer one until the end-of-stream drain. Nothing is lost or repeated,
    and every micro-batch is a correct greedy walk of what the buffer held."""

    def __init__(self, config, gate=None):
        super().__init__(config, gate)
        self._parked: list[tuple] = []   # (id, tokens, physical, source, payload), in arrival order

    def put(self, sample_id, tokens, physical_tokens=None, source=None, payload=None) -> bool:
        cap, physical = self.config.physical_cap, tokens if physical_tokens is None else physical_tokens
        if self.current_budget // 2 < tokens <= self.current_budget and (cap is None or physical <= cap):
            self._parked.append((sample_id, tokens, physical_tokens, source, payload))
            return True
        return super().put(sample_id, tokens, physical_tokens, source, payload)

    def _release(self) -> None:
        parked, self._parked = self._parked, []
        for args in parked:
            super().put(*args)

    def cut(self):
        mb = super().cut()
        if super().__len__() == 0:
            self._release()
        return mb

    def drain(self):
        self._release()
        return super().drain()

    def __len__(self) -> int:
        return super().__len__() + len(self._parked)

    def buffered_ids(self) -> list:
        return super().buffered_ids() + [p[0] for p in self._parked]

    def attach_payload(self, sample_id, payload) -> None:
        for k, p in enumerate(self._parked):
            if p[0] == sample_id:
                self._parked[k] = (*p[:4], payload)
                return
        super().attach_payload(sample_id, payload)

    def state_dict(self):
        return {**super().state_dict(), "parked": [list(p[:4]) for p in self._parked]}

    def load_state_dict(self, state) -> None:
        state = dict(state)
        parked = state.pop("parked", [])
        super().load_state_dict(state)
        self._parked = [(*p, None) for p in parked]
