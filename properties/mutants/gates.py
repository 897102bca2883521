"""Broken gates: each stands in for the gate family it ``replaces`` (component ``gate:fixed`` etc.),
run inside dynbsz's ``GreedyPacker``."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dynbsz.gates import FixedGate, TokenAwareGate, WarmupRampGate, covers_budget

from ..registry import mutant


@mutant("gate-as-capacity", component="gate", replaces="fixed")
@dataclass(frozen=True)
class GateAsCapacity(FixedGate):
    """Opens as soon as buffer_size samples are buffered, covered or not: the seed's bug class."""

    def ready(self, view) -> bool:
        return view.num_samples >= self.buffer_size


@mutant("gate-stuck-after-restore", component="gate", replaces="fixed", aims_at="progress")
@dataclass(frozen=True)
class GateStuckAfterRestore(FixedGate):
    """Keeps a flag in its state and never opens again once restored: a resumed run only drains."""

    restored: bool = False

    def ready(self, view) -> bool:
        return not self.restored and super().ready(view)

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        object.__setattr__(self, "restored", True)


@mutant("gate-ignores-minimum", component="gate", replaces="fixed")
@dataclass(frozen=True)
class GateIgnoresMinimum(FixedGate):
    """Forgets the sample minimum and opens on tokens alone."""

    def ready(self, view) -> bool:
        return covers_budget(view)


@mutant("gate-strict-count", component="gate", replaces="fixed")
@dataclass(frozen=True)
class GateStrictCount(FixedGate):
    """Compares the sample count with ``>`` instead of ``>=``: opens one sample late."""

    def ready(self, view) -> bool:
        return view.num_samples > self.buffer_size and covers_budget(view)


@mutant("margin-on-pool-cap", component="gate", replaces="token_aware")
@dataclass(frozen=True)
class MarginOnPoolCap(TokenAwareGate):
    """token_aware's margin applied to the pool cap too: opens at ceil((1 + margin) * pool_cap) samples."""

    def ready(self, view) -> bool:
        if not covers_budget(view):
            return False
        if view.num_samples >= math.ceil((1.0 + self.margin) * self.pool_cap):
            return True
        return view.tokens >= math.ceil((1.0 + self.margin) * view.budget)


@mutant("pool-cap-as-capacity", component="gate", replaces="token_aware")
@dataclass(frozen=True)
class PoolCapAsCapacity(TokenAwareGate):
    """token_aware checks the pool cap before the budget: a full pool opens the gate uncovered."""

    def ready(self, view) -> bool:
        if view.num_samples >= self.pool_cap:
            return True
        return super().ready(view)


@mutant("ramp-starts-late", component="gate", replaces="warmup_ramp")
@dataclass(frozen=True)
class RampStartsLate(WarmupRampGate):
    """The warm-up-scoped gate's ramp counts its steps from 0 where the rule counts from 1: the minimum
    rises a step late, and the first step of the ramp still opens on the starting minimum."""

    def minimum(self, step: int) -> int:
        if step < self.hold_steps:
            return self.start
        k = step - self.hold_steps
        if k >= self.ramp_steps:
            return self.full
        return math.ceil(self.start + (self.full - self.start) * k / (self.ramp_steps + 1))


@mutant("auto-skips-warmup", component="gate", replaces="auto", aims_at="gate_rule")
@dataclass(frozen=True)
class AutoSkipsWarmup(WarmupRampGate):
    """gate='auto' with its warm-up scoped away: the full minimum from step 0, so the first steps wait
    for the long-run pool the schedule was chosen to avoid."""

    def minimum(self, step: int) -> int:
        return self.full


@mutant("ramp-as-capacity", component="gate", replaces="warmup_ramp", aims_at="minimum_gate")
@dataclass(frozen=True)
class RampAsCapacity(WarmupRampGate):
    """The warm-up-scoped gate's minimum taken as the pool size to cut at: it opens as soon as
    minimum(step) samples are buffered, without waiting for the budget to be covered, so a small
    warm-up minimum cuts short micro-batches (the seed's bug class, on the ramp)."""

    def ready(self, view) -> bool:
        return view.num_samples >= self.minimum(view.step)


class RampCountsOwnSteps(WarmupRampGate):
    """The warm-up-scoped gate keeps its own step count instead of reading ``view.step``: it counts the
    cuts it opened for (a repeated poll before the cut counts once) per micro_batches_per_step of the
    packer's config. Right in an uninterrupted run, but the count lives in the gate object and in no
    checkpoint (the gate has no state_dict): a packer restored mid-ramp rebuilds the gate from its
    spec and the ramp starts over from step 0."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "_cuts", 0)          # frozen dataclass: the bug is state it cannot hold
        object.__setattr__(self, "_opened_on", None)  # the buffer's head when it last opened

    def ready(self, view) -> bool:
        # A cut always takes the head (the oldest sample), and ids are unique: a new head since the gate
        # opened means the cut it opened for happened; the same head, that it is being polled again.
        head = view.buffered_ids()[0]
        if self._opened_on is not None and head != self._opened_on:
            object.__setattr__(self, "_cuts", self._cuts + 1)
        per_step = view.config.micro_batches_per_step
        ok = view.num_samples >= self.minimum(self._cuts // per_step) and covers_budget(view)
        object.__setattr__(self, "_opened_on", head if ok else None)
        return ok


# A plain subclass of the frozen dataclass (no @dataclass: its counters are not fields, so spec(),
# equality and the checkpoint's gate spec are the real gate's); registered like the others.
mutant("ramp-counts-own-steps", component="gate", replaces="warmup_ramp", aims_at="resume")(RampCountsOwnSteps)
