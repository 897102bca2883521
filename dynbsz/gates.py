"""Readiness gates: when may the packer cut the next micro-batch?

A gate is any object with two methods::

    ready(view) -> bool   # view: the packer's buffer statistics (BufferView)
    spec() -> dict        # JSON-serializable identity, stored in checkpoints

and, if it keeps state of its own, ``state_dict()`` / ``load_state_dict()``.

Every gate here is a *minimum*, never a capacity: it only ever says "not yet"
while the buffered tokens cannot fill one micro-batch, so the loader keeps
fetching past any sample-count threshold until the budget is covered. Gates
that say "ready" before the budget is covered (a count used as a capacity) are
exactly the bug the property suite looks for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, runtime_checkable

from .errors import ConfigError, check_choice, check_int
from .loader_config import MODALITIES, RUNTIMES, TOKEN_COUNTS


@runtime_checkable
class BufferView(Protocol):
    """What a gate may read. The packer itself implements it with plain attributes."""

    num_samples: int        # samples buffered
    tokens: int             # sum of their budgeted token lengths
    physical_tokens: int    # sum of their physical lengths
    budget: int             # configured micro-batch token budget (after warm-up: the full budget)
    current_budget: int     # budget of the next cut (smaller during batch-size warm-up)
    physical_cap: int | None
    step: int               # the optimizer step the next cut belongs to: where training is. A gate may
                            # read the buffer and the step, never a clock, so a resume stays exact


@runtime_checkable
class Gate(Protocol):
    def ready(self, view: BufferView) -> bool: ...

    def spec(self) -> dict[str, Any]: ...


def covers_budget(view: BufferView) -> bool:
    """True when the buffer holds at least one micro-batch's worth of tokens.

    The physical cap counts too, as in VeOmni: a buffer whose physical tokens
    fill the cap is as full as one whose budgeted tokens fill the budget.
    """
    if view.tokens >= view.budget:
        return True
    cap = view.physical_cap
    return cap is not None and view.physical_tokens >= cap


@dataclass(frozen=True)
class FixedGate:
    """VeOmni's default: at least ``buffer_size`` samples AND the budget is covered."""

    buffer_size: int = 200
    policy: str = "fixed"  # which policy produced this gate; informational, kept in checkpoints

    def __post_init__(self) -> None:
        check_int("buffer_size", self.buffer_size, minimum=1)

    def ready(self, view: BufferView) -> bool:
        return view.num_samples >= self.buffer_size and covers_budget(view)

    def spec(self) -> dict[str, Any]:
        return {"kind": "fixed", "buffer_size": self.buffer_size, "policy": self.policy}


@dataclass(frozen=True)
class TokenAwareGate:
    """A gate that works at any context length.

    ``pool_cap`` (the old buffer size) becomes a cap on the candidate pool
    rather than a minimum: the gate opens as soon as the buffer covers the
    budget *plus* a margin of ``margin`` budgets (so the greedy packer has some
    choice of what to co-pack), or as soon as ``pool_cap`` candidates are
    buffered, whichever comes first, but never before the budget itself is
    covered. With long samples the margin is reached after a handful of
    candidates; with short ones the pool cap keeps the old behaviour.

        ready  <=>  covers(budget) and (tokens >= ceil((1 + margin) * budget)
                                         or physical_tokens >= ceil((1 + margin) * cap)
                                         or num_samples >= pool_cap)
    """

    margin: float = 0.5
    pool_cap: int = 200

    def __post_init__(self) -> None:
        if isinstance(self.margin, bool) or not isinstance(self.margin, (int, float)) or not (
            0.0 <= self.margin <= 64.0 and math.isfinite(self.margin)
        ):
            raise ConfigError(f"margin must be a number between 0 and 64 (a multiple of the budget), got {self.margin!r}")
        check_int("pool_cap", self.pool_cap, minimum=1)

    def ready(self, view: BufferView) -> bool:
        if not covers_budget(view):
            return False
        if view.num_samples >= self.pool_cap:
            return True
        if view.tokens >= math.ceil((1.0 + self.margin) * view.budget):
            return True
        cap = view.physical_cap
        return cap is not None and view.physical_tokens >= math.ceil((1.0 + self.margin) * cap)

    def spec(self) -> dict[str, Any]:
        return {"kind": "token_aware", "margin": float(self.margin), "pool_cap": self.pool_cap}


@dataclass(frozen=True)
class WarmupRampGate:
    """The seed reviewer's proposal: the small buffer scoped to warm-up, so long-run behaviour is the full one.

    The sample minimum is ``start`` for the first ``hold_steps`` optimizer steps, then grows
    linearly to ``full`` over ``ramp_steps`` more, then stays at ``full``; like ``FixedGate`` it
    also waits for the budget to be covered (a minimum, never a capacity). Growing the pool a
    little per step spreads the refill from ``start`` to ``full`` candidates over many steps
    instead of one long wait (the seed author's "refilling to 200 costs about 80 minutes").

        minimum(step) = start                                          step <  hold_steps
                      = ceil(start + (full - start) * (step - hold_steps + 1) / (ramp_steps + 1))
                                                                       hold_steps <= step < hold_steps + ramp_steps
                      = full                                           afterwards
        ready  <=>  num_samples >= minimum(view.step) and covers(budget)
    """

    start: int = 24
    full: int = 200
    hold_steps: int = 0
    ramp_steps: int = 100
    policy: str = "warmup_ramp"   # which policy produced it ("auto": ``auto_gate``); informational

    def __post_init__(self) -> None:
        check_int("start", self.start, minimum=1)
        check_int("full", self.full, minimum=self.start)
        check_int("hold_steps", self.hold_steps, minimum=0)
        check_int("ramp_steps", self.ramp_steps, minimum=0)
        check_choice("policy", self.policy, ("warmup_ramp", "auto"))

    def minimum(self, step: int) -> int:
        if step < self.hold_steps:
            return self.start
        k = step - self.hold_steps
        if k >= self.ramp_steps:
            return self.full
        return math.ceil(self.start + (self.full - self.start) * (k + 1) / (self.ramp_steps + 1))

    def ready(self, view: BufferView) -> bool:
        return view.num_samples >= self.minimum(view.step) and covers_budget(view)

    def spec(self) -> dict[str, Any]:
        spec = {"kind": "warmup_ramp", "start": self.start, "full": self.full, "hold_steps": self.hold_steps,
                "ramp_steps": self.ramp_steps}
        # "policy" only when it is not the default, so checkpoints written before the field existed
        # (their spec is compared on restore) still load into a plain warmup_ramp gate
        if self.policy != "warmup_ramp":
            spec["policy"] = self.policy
        return spec


# --- the seed's context-aware policy -------------------------------------------------------

#: (token budget) -> minimum candidates, measured in the seed PR at micro-batch size 1.
CONTEXT_AWARE_TABLE: dict[int, int] = {512 * 1024: 24, 1024 * 1024: 24}


def context_aware(budget: int, *, micro_batch_size: int = 1, runtime: str = "main", count: str = "total",
                  modality: str = "text", dyn_bsz: bool = True) -> FixedGate:
    """The seed PR's opt-in policy: a minimum of 24 candidates at 512K and 1M.

    It was measured only for main-process dynamic batching, total-token
    counting, text data and micro-batch size 1; every other combination fails
    closed rather than extrapolating. The result is an ordinary ``FixedGate``,
    so resolving happens here, once, and never again downstream.
    """
    if not dyn_bsz:
        raise ConfigError("gate='context_aware' requires dynamic batching (dyn_bsz=True); "
                          "use gate='fixed' or enable dynamic batching")
    check_choice("runtime", runtime, RUNTIMES)
    check_choice("count", count, TOKEN_COUNTS)
    check_choice("modality", modality, MODALITIES)
    problems = []
    if runtime != "main":
        problems.append(f"runtime={runtime!r} (supported: 'main')")
    if count != "total":
        problems.append(f"count={count!r} (supported: 'total')")
    if modality != "text":
        problems.append(f"modality={modality!r} (supported: 'text')")
    if micro_batch_size != 1:
        problems.append(f"micro_batch_size={micro_batch_size!r} (supported: 1)")
    if budget not in CONTEXT_AWARE_TABLE:
        problems.append(f"budget={budget!r} (supported: {', '.join(map(str, CONTEXT_AWARE_TABLE))})")
    if problems:
        raise ConfigError("gate='context_aware' was only measured for main-process, total-token, text, "
                          "micro_batch_size=1 training at 512K/1M budgets; unsupported here: "
                          + "; ".join(problems) + ". Use gate='auto' (a warm-up schedule per budget, any context length), gate='token_aware' or gate='fixed'.")
    return FixedGate(CONTEXT_AWARE_TABLE[budget], policy="context_aware")


# --- auto: the general default the policy study found ---------------------------------------

#: ``gate='auto'``: per token budget, a warm-up-scoped minimum ``(start, full, hold_steps, ramp_steps)``.
#: A budget takes the row of the nearest budget here on a log scale (ties: the smaller; beyond the ends,
#: the end rows). How the rows were chosen: docs/simulator.md, "The auto gate" (over the policy study's
#: grid, on the advice streams, never the scored ones: ``python -m simulator derive-auto``).
AUTO_TABLE: dict[int, tuple[int, int, int, int]] = {
    128 * 1024: (4, 4, 0, 0),        # = fixed:4
    256 * 1024: (2, 16, 0, 100),
    512 * 1024: (8, 32, 0, 100),
    1024 * 1024: (8, 16, 0, 10),
    2048 * 1024: (16, 64, 0, 10),
}


def auto_row(budget: int) -> int:
    """The ``AUTO_TABLE`` budget whose row a token budget uses (nearest on a log scale, ties: the smaller)."""
    check_int("budget", budget, minimum=1)
    return min(AUTO_TABLE, key=lambda b: (abs(math.log(budget / b)), b))


def auto_gate(budget: int) -> WarmupRampGate:
    """``gate='auto'``: the ``AUTO_TABLE`` row for ``budget``, as a ``WarmupRampGate`` (policy ``auto``).

    Like every gate here it is a minimum, never a capacity, and it reads only the buffer and the
    optimizer step. It is resolved once, from the budget; a checkpoint stores the resolved schedule
    (``spec()``), so a resume rebuilds exactly that gate even if a later version changes the table.
    """
    start, full, hold, ramp = AUTO_TABLE[auto_row(budget)]
    return WarmupRampGate(start, full, hold, ramp, policy="auto")


RAMP_FIELDS = ("start", "full", "hold_steps", "ramp_steps")
GATE_NAMES = ("fixed", "context_aware", "token_aware", "warmup_ramp", "auto")


def resolve_gate(gate: Any = "fixed", *, budget: int | None = None, context: Mapping[str, Any] | None = None,
                 **options: Any) -> Gate:
    """Turn a gate name (or spec dict, or gate object) into a gate. The one place policies are resolved.

    A gate object is returned unchanged, so resolving an already-resolved gate is a no-op:
    callers further down never resolve again. ``context`` is where the gate will run, as
    ``context_aware()``'s keyword arguments (``runtime``, ``count``, ``modality``,
    ``micro_batch_size``, ``dyn_bsz``); given, a ``context_aware`` gate, named or already built,
    is checked against it and fails closed (``ConfigError``) outside what it was measured for.
    ``'auto'`` needs ``budget`` too (``auto_gate``); a spec with ``policy: 'auto'`` rebuilds the
    schedule it stores.
    """
    context = dict(context or {})
    if isinstance(gate, dict):
        options = {**{k: v for k, v in gate.items() if k not in ("kind", "policy")}, **options}
        if gate.get("policy") == "auto" and gate.get("kind") == "warmup_ramp":
            # a checkpointed auto gate: the schedule it resolved to, exactly (not today's table)
            return WarmupRampGate(**_only(options, RAMP_FIELDS, "auto"), policy="auto")
        kind = gate.get("policy") if gate.get("policy") == "context_aware" else gate.get("kind")
        gate = kind
    if not isinstance(gate, str):
        if not isinstance(gate, Gate):
            raise ConfigError(f"gate must be one of {GATE_NAMES} or an object with ready(view) and spec() methods, "
                              f"got {type(gate).__name__}")
        if context and gate.spec().get("policy") == "context_aware":
            if budget is None:
                raise ConfigError("a context_aware gate needs the token budget (budget=...) to be checked")
            context_aware(budget, **context)   # raises where the policy was not measured
        return gate
    check_choice("gate", gate, GATE_NAMES)
    if gate == "fixed":
        return FixedGate(**_only(options, "buffer_size", gate))
    if gate == "token_aware":
        return TokenAwareGate(**_only(options, ("margin", "pool_cap"), gate))
    if gate == "warmup_ramp":
        return WarmupRampGate(**_only(options, RAMP_FIELDS, gate))
    if gate == "auto":
        if budget is None:
            raise ConfigError("gate='auto' needs the token budget (budget=...) to resolve: its schedule depends on it")
        if options:
            raise ConfigError(f"gate='auto' takes no options (got {', '.join(sorted(options))}): its schedule is "
                              "AUTO_TABLE's row for the budget; to choose one, use gate='warmup_ramp' with start, full, "
                              "hold_steps, ramp_steps")
        return auto_gate(budget)
    if budget is None:
        raise ConfigError("gate='context_aware' needs the token budget (budget=...) to resolve")
    opts = _only(options, ("micro_batch_size", "runtime", "count", "modality", "dyn_bsz", "buffer_size"), gate)
    opts.pop("buffer_size", None)  # a checkpointed spec carries the resolved size; the table decides it
    return context_aware(budget, **{**context, **opts})


def _only(options: dict, allowed, gate: str) -> dict:
    allowed = (allowed,) if isinstance(allowed, str) else tuple(allowed)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(f"gate={gate!r} does not take {', '.join(unknown)}; it takes: {', '.join(allowed)}")
    return dict(options)
