"""The property registry: every property the suite knows, with the component kinds it applies to.

A ``Property`` is data: a name, the kinds it applies to, a strategy factory that
draws examples for one component, a check that raises ``PropertyViolation``, and an
``encode`` / ``decode`` pair that turns an example into the small JSON dict that
regression files and ``--json`` output hold. Suites contribute tuples of them
(``packer_suite.PROPERTIES``; the loader suite adds its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from hypothesis import strategies as st

from .targets.base import KINDS, Component


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


def properties() -> tuple[Property, ...]:
    """All registered properties, in report order. Imported lazily so suites can import this module."""
    from . import packer_suite

    suites: list[tuple[Property, ...]] = [packer_suite.PROPERTIES]
    return tuple(p for suite in suites for p in suite)


def get(name: str) -> Property:
    found = next((p for p in properties() if p.name == name), None)
    if found is None:
        raise KeyError(f"unknown property {name!r}; allowed values: {', '.join(p.name for p in properties())}")
    return found
