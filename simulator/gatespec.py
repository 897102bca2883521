"""Gate specifications on the command line: built-in policies and user-written ``MODULE:FACTORY`` gates.

Built-ins resolve through ``dynbsz.gates`` (never re-implemented here):

    fixed:N            FixedGate(N)
    context_aware      dynbsz.gates.context_aware(budget): fails closed (ConfigError) off 512K/1M
    token_aware        TokenAwareGate() (margin 0.5, pool cap 200)
    token_aware:M:P    TokenAwareGate(margin=M, pool_cap=P)

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
from dynbsz.gates import FixedGate, TokenAwareGate, context_aware

BUILTIN_FORMS = ("fixed:N", "context_aware", "token_aware", "token_aware:MARGIN:POOL_CAP")


@dataclass(frozen=True)
class GateSpec:
    """A named way to build the gate for a given budget."""

    label: str
    build: Callable[[int], Any]

    def gate_for(self, budget: int):
        gate = self.build(budget)
        if not (callable(getattr(gate, "ready", None)) and callable(getattr(gate, "spec", None))):
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
    if not rest or not head:
        raise ConfigError(f"gate {text!r} is not one of {', '.join(BUILTIN_FORMS)} and not of the form "
                          "MODULE:FACTORY (e.g. mypkg.gates:make_gate)")
    return GateSpec(text, _user_factory(text))


def _user_factory(text: str) -> Callable[[int], Any]:
    """``MODULE:NAME``: a gate object, or a factory called with ``budget=`` when it takes it."""
    obj = load_object(text, setting="gate", example="mypkg.gates:make_gate")
    attr = text.partition(":")[2]
    if callable(getattr(obj, "ready", None)) and callable(getattr(obj, "spec", None)):
        return lambda budget: obj
    if not callable(obj):
        raise ConfigError(f"gate {text!r}: {attr!r} is neither a gate (ready/spec methods) nor a callable factory")
    try:
        takes_budget = "budget" in inspect.signature(obj).parameters
    except (TypeError, ValueError):
        takes_budget = False
    return (lambda budget: obj(budget=budget)) if takes_budget else (lambda budget: obj())
