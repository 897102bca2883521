"""Deliberately broken variants of dynbsz, to prove the properties have teeth.

Each mutant is one small, realistic bug, declared with ``properties.registry.mutant`` on the
class that has it: ``gates`` (a gate family's rule broken), ``packers`` (``GreedyPacker``
subclasses), ``loaders`` (subclasses of dynbsz's loader classes). A property suite that
passes on a mutant has a blind spot; the tests (and ``python -m properties mutants``) run
every property against every mutant and require each mutant to be killed. Each is also a
target, ``mutant:NAME`` (``properties.targets.mutant``).
"""

from __future__ import annotations

from ..registry import Mutant, collect_mutants
from . import gates, loaders, packers

__all__ = ["MUTANTS", "Mutant", "by_name"]

#: Every mutant, all components: gates, packers, loaders, each in the order its module defines them.
MUTANTS: tuple[Mutant, ...] = collect_mutants(gates, packers, loaders)


def by_name(name: str) -> Mutant | None:
    return next((m for m in MUTANTS if m.name == name), None)
