"""The whole suite: every property the packer and loader suites declare, in report order.

``properties()`` lists them (packer and gate properties first, then the loader ones, each in
the order its module defines them); ``get(name)`` finds one. The suites declare their
properties with ``properties.registry.prop``; this module only gathers them.
"""

from __future__ import annotations

from . import loader_suite, packer_suite, stream_suite
from .registry import Property, collect_properties

PROPERTIES: tuple[Property, ...] = collect_properties(packer_suite, loader_suite, stream_suite)


def properties() -> tuple[Property, ...]:
    """All properties, in report order."""
    return PROPERTIES


def get(name: str) -> Property:
    found = next((p for p in PROPERTIES if p.name == name), None)
    if found is None:
        raise KeyError(f"unknown property {name!r}; allowed values: {', '.join(p.name for p in PROPERTIES)}")
    return found
