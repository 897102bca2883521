"""Gate specifications on the command line: built-in policies and user-written ``MODULE:FACTORY`` gates.

Built-ins resolve through ``dynbsz.gates`` (never re-implemented here):

    fixed:N            FixedGate(N)
    context_aware      dynbsz.gates.context_aware(budget): fails closed (ConfigError) off 512K/1M
    token_aware        TokenAwareGate() (margin 0.5, pool cap 200)
    token_aware:M:P    TokenAwareGate(margin=M, pool_cap=P)
    warmup_ramp        WarmupRampGate() (start 24, full 200, hold 0, ramp 100 steps)
    warmup_ramp:S:F:H:R  WarmupRampGate(start=S, full=F, hold_steps=H, ramp_steps=R)
    auto               dynbsz's ``gate='auto'``: ``dynbsz.gates.auto_gate(budget)``, the documented per-budget
                       warm-up ramp (``AUTO_TABLE``; how it was chosen: docs/simulator.md, "The auto gate")
    auto:FILE.json     the gate ``python -m simulator advise --json`` recommended (its ``recommended.gate``)

Anything else of the form ``package.module:name`` is imported: ``name`` is a gate
object (``ready(view)`` and ``spec()``), or a factory called as ``name(budget=...)``
when it takes a ``budget`` argument and as ``name()`` otherwise.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from dynbsz.errors import ConfigError
from dynbsz.factory import load_object
from dynbsz.gates import FixedGate, Gate, TokenAwareGate, WarmupRampGate, context_aware, resolve_gate

BUILTIN_FORMS = ("fixed:N", "context_aware", "token_aware", "token_aware:MARGIN:POOL_CAP", "warmup_ramp",
                 "warmup_ramp:START:FULL:HOLD:RAMP", "auto", "auto:ADVICE.json")


def ramp_label(start: int, full: int, hold_steps: int, ramp_steps: int) -> str:
    return f"warmup_ramp:{start}:{full}:{hold_steps}:{ramp_steps}"


def ramp_row(label: str) -> tuple[int, int, int, int]:
    """``ramp_label``'s inverse: (start, full, hold_steps, ramp_steps) of ``warmup_ramp:S:F:H:R``."""
    kind, *fields = label.split(":")
    if kind != "warmup_ramp" or len(fields) != 4:
        raise ConfigError(f"gate {label!r}: expected warmup_ramp:START:FULL:HOLD:RAMP")
    start, full, hold, ramp = (int(x) for x in fields)
    return start, full, hold, ramp


def gate_label(spec: dict) -> str:
    """The command-line form of a built-in gate's ``spec()`` (fixed, warmup_ramp, token_aware)."""
    kind = spec.get("kind")
    if kind == "fixed":
        return f"fixed:{spec['buffer_size']}"
    if kind == "warmup_ramp":
        return ramp_label(spec["start"], spec["full"], spec["hold_steps"], spec["ramp_steps"])
    if kind == "token_aware":
        return f"token_aware:{spec['margin']:g}:{spec['pool_cap']}"
    raise ConfigError(f"gate spec {spec!r} has no command-line form")


@dataclass(frozen=True)
class GateSpec:
    """A named way to build the gate for a given budget."""

    label: str
    build: Callable[[int], Any]

    def gate_for(self, budget: int):
        gate = self.build(budget)
        if not isinstance(gate, Gate):
            raise ConfigError(f"gate {self.label!r} produced {type(gate).__name__}, which is not a gate: a gate needs "
                              "ready(view) and spec() methods")
        return gate


def parse_gate(text: str) -> GateSpec:
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"gate must be one of {', '.join(BUILTIN_FORMS)} or MODULE:FACTORY, got {text!r}")
    text = text.strip()
    head, _, rest = text.partition(":")
    if head == "fixed":
        try:
            n = int(rest)
        except ValueError:
            raise ConfigError(f"gate {text!r}: fixed:N needs an integer buffer size N >= 1, e.g. fixed:24") from None
        FixedGate(n)  # validates N now, not at the first budget
        return GateSpec(text, lambda budget, n=n: FixedGate(n))
    if head == "context_aware" and not rest:
        return GateSpec(text, lambda budget: context_aware(budget))
    if head == "token_aware":
        if not rest:
            return GateSpec(text, lambda budget: TokenAwareGate())
        parts = rest.split(":")
        try:
            margin, pool = float(parts[0]), int(parts[1])
            if len(parts) != 2:
                raise ValueError
        except (ValueError, IndexError):
            raise ConfigError(f"gate {text!r}: use token_aware or token_aware:MARGIN:POOL_CAP, "
                              "e.g. token_aware:0.5:200") from None
        TokenAwareGate(margin, pool)
        return GateSpec(text, lambda budget, m=margin, p=pool: TokenAwareGate(m, p))
    if head == "warmup_ramp":
        if not rest:
            return GateSpec(text, lambda budget: WarmupRampGate())
        try:
            values = [int(x) for x in rest.split(":")]
            if len(values) != 4:
                raise ValueError
        except ValueError:
            raise ConfigError(f"gate {text!r}: use warmup_ramp or warmup_ramp:START:FULL:HOLD:RAMP (integers: the "
                              "minimum at the start, the full minimum, steps held at START, steps to ramp), "
                              "e.g. warmup_ramp:24:200:0:100") from None
        WarmupRampGate(*values)   # validates now, not at the first budget
        return GateSpec(text, lambda budget, v=tuple(values): WarmupRampGate(*v))
    if head == "auto":
        if not rest:
            return GateSpec(text, lambda budget: resolve_gate("auto", budget=budget))
        if not rest.endswith(".json"):
            raise ConfigError(f"gate {text!r}: use auto (the documented defaults) or auto:ADVICE.json (the JSON "
                              "`python -m simulator advise --json` wrote)")
        spec = _advice_gate(rest)
        return GateSpec(text, lambda budget, g=spec: resolve_gate(g, budget=budget))
    if not rest or not head:
        raise ConfigError(f"gate {text!r} is not one of {', '.join(BUILTIN_FORMS)} and not of the form "
                          "MODULE:FACTORY (e.g. mypkg.gates:make_gate)")
    return GateSpec(text, _user_factory(text))


def _user_factory(text: str) -> Callable[[int], Any]:
    """``MODULE:NAME``: a gate object, or a factory called with ``budget=`` when it takes it."""
    obj = load_object(text, setting="gate", example="mypkg.gates:make_gate")
    attr = text.partition(":")[2]
    if isinstance(obj, Gate):
        return lambda budget: obj
    if not callable(obj):
        raise ConfigError(f"gate {text!r}: {attr!r} is neither a gate (ready/spec methods) nor a callable factory")
    try:
        takes_budget = "budget" in inspect.signature(obj).parameters
    except (TypeError, ValueError):
        takes_budget = False
    return (lambda budget: obj(budget=budget)) if takes_budget else (lambda budget: obj())


def _advice_gate(path: str) -> dict:
    import json

    try:
        with open(path) as f:
            advice = json.load(f)
        gate = advice["recommended"]["gate"]
    except FileNotFoundError:
        raise ConfigError(f"gate auto:{path}: no such file (write it with `python -m simulator advise ... --json "
                          f"> {path}`)") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"gate auto:{path}: not an advice file (expected JSON with recommended.gate): "
                          f"{type(e).__name__}: {e}") from None
    if not isinstance(gate, dict) or "kind" not in gate:
        raise ConfigError(f"gate auto:{path}: recommended.gate must be a gate spec with a 'kind', got {gate!r}")
    resolve_gate(gate, budget=1)   # validates now
    return gate
