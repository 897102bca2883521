"""The property registry: every property the suite knows, with the component kinds it applies to.

A ``Property`` is data: a name, the kinds it applies to, a strategy factory that
draws examples for one component, a check that raises ``PropertyViolation``, and an
``encode`` / ``decode`` pair that turns an example into the small JSON dict that
regression files and ``--json`` output hold. Suites contribute tuples of them
(``packer_suite.PROPERTIES``, ``loader_suite.PROPERTIES``). A name two suites share
(``resume``: for packers and gates, and for loaders) becomes one property over both kinds
that hands each component to its own suite's half.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from hypothesis import strategies as st

from .targets.base import KINDS, Component


class Unsupported(Exception):
    """Raised by a check for an example the component cannot run (e.g. a saved example replayed on
    another target whose loader lacks a knob). The runner reports it as a skip with this message,
    never as a failure."""


@dataclass(frozen=True)
class Property:
    name: str
    kinds: frozenset[str]
    doc: str
    examples: Callable[[Component], st.SearchStrategy]
    check: Callable[[Component, Any], None]
    encode: Callable[[Any], dict]
    decode: Callable[[dict], Any]
    # Why the property does not apply to a component of a matching kind (None: it applies).
    not_for: Callable[[Component], str | None] = lambda component: None
    # Examples cost this many packer examples (a loader example starts worker processes and
    # sleeps): a profile's example count is divided by it, unless a count is given explicitly.
    # A mapping gives the cost per component kind.
    cost: int | Mapping[str, int] = 1
    # What encode() takes (None: anything); tells the halves of a combined property apart.
    example_type: type | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.kinds) - set(KINDS))
        if unknown:
            raise ValueError(f"property {self.name!r} has kinds {unknown}; allowed values: {', '.join(KINDS)}")

    def skip_reason(self, component: Component) -> str | None:
        if component.kind not in self.kinds:
            return f"applies to {'/'.join(sorted(self.kinds))} components, not {component.kind}"
        declared = component.skip.get(self.name)
        if declared:
            return f"the target does not promise it: {declared}"
        return self.not_for(component)

    def examples_for(self, profile_examples: int, component: Component | None = None) -> int:
        """How many examples a profile's ``max_examples`` buys for this property (at least 3)."""
        cost = self.cost
        if isinstance(cost, Mapping):
            cost = cost.get(component.kind, 1) if component is not None else 1
        return max(min(3, profile_examples), profile_examples // cost)


def combine(parts: tuple[Property, ...]) -> Property:
    """One property over the kinds of several same-named ones: examples, checks and skips go to the
    part for the component's kind, an example is encoded by the part whose type it is and
    decoded by the part whose format it has."""
    if len(parts) == 1:
        return parts[0]
    by_kind: dict[str, Property] = {}
    for part in parts:
        for kind in part.kinds:
            if kind in by_kind:
                raise ValueError(f"property {part.name!r} is defined twice for {kind} components")
            by_kind[kind] = part

    def encode(ex: Any) -> dict:
        part = next((p for p in parts if p.example_type is None or isinstance(ex, p.example_type)), parts[0])
        return part.encode(ex)

    def decode(d: dict) -> Any:
        errors = []
        for part in parts:
            try:
                return part.decode(d)
            except (ValueError, KeyError, TypeError) as e:
                errors.append(f"{'/'.join(sorted(part.kinds))}: {e}")
        raise ValueError(f"property {parts[0].name!r} cannot read this example (" + "; ".join(errors) + ")")

    return Property(
        name=parts[0].name, kinds=frozenset(by_kind),
        doc=" | ".join(f"{'/'.join(sorted(p.kinds))}: {p.doc}" for p in parts),
        examples=lambda component: by_kind[component.kind].examples(component),
        check=lambda component, ex: by_kind[component.kind].check(component, ex),
        encode=encode, decode=decode, not_for=lambda component: by_kind[component.kind].not_for(component),
        cost={k: (p.cost if isinstance(p.cost, int) else p.cost.get(k, 1)) for k, p in by_kind.items()})


def properties() -> tuple[Property, ...]:
    """All registered properties, in report order (a shared name stays where it first appears).
    Imported lazily so suites can import this module."""
    from . import loader_suite, packer_suite

    suites: list[tuple[Property, ...]] = [packer_suite.PROPERTIES, loader_suite.PROPERTIES]
    grouped: dict[str, list[Property]] = {}
    for p in (p for suite in suites for p in suite):
        grouped.setdefault(p.name, []).append(p)
    return tuple(combine(tuple(parts)) for parts in grouped.values())


def get(name: str) -> Property:
    found = next((p for p in properties() if p.name == name), None)
    if found is None:
        raise KeyError(f"unknown property {name!r}; allowed values: {', '.join(p.name for p in properties())}")
    return found
