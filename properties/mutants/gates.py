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
