"""``mutant:NAME``: a deliberately broken variant of dynbsz (properties/mutants/) as a target.

A packer mutant is tested as dynbsz's ``packer`` component; a gate mutant stands in
for the gate family it replaces (component ``gate:fixed`` etc.); a loader mutant for the
loader component it replaces (``loader:main``, ``loader:worker``), with that component's
knobs and promises. Every example found on a mutant replays on dynbsz under the same
component name.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from dynbsz.config import PackerConfig
from dynbsz.packer import GreedyPacker

from .. import mutants
from ..registry import Mutant
from .base import Target, TargetError
from .builtin import (
    GATE_FAMILIES,
    LOADER_RUNTIMES,
    build_gate,
    dynbsz_loader_component,
    gate_component,
    packer_component,
)

PREFIX = "mutant:"


def _packer_target(m: Mutant) -> Target:
    def make(config: PackerConfig, spec: dict[str, Any]):
        return m.make(config, build_gate(spec, config.budget))

    return Target(name=PREFIX + m.name, description=m.description, components=(packer_component(make),))


def _gate_target(m: Mutant) -> Target:
    if m.replaces not in GATE_FAMILIES:
        raise TargetError(f"mutant {m.name!r} replaces gate family {m.replaces!r}; allowed values: "
                          f"{', '.join(GATE_FAMILIES)}")

    def make(config: PackerConfig, spec: dict[str, Any]):
        return GreedyPacker(config, m.make(**{k: v for k, v in spec.items() if k != "kind"}))

    return Target(name=PREFIX + m.name, description=m.description, components=(gate_component(m.replaces, make),))


def _loader_target(m: Mutant) -> Target:
    runtimes = {f"loader:{r}": r for r in LOADER_RUNTIMES}
    if m.replaces not in runtimes:
        raise TargetError(f"mutant {m.name!r} replaces loader component {m.replaces!r}; allowed values: "
                          f"{', '.join(runtimes)}")
    component = dynbsz_loader_component(runtimes[m.replaces], m.make)
    if m.in_order_only:
        component = replace(component, in_order=(True,),
                            knob_notes={**component.knob_notes, "in_order": IN_ORDER_ONLY})
    return Target(name=PREFIX + m.name, description=m.description, components=(component,))


IN_ORDER_ONLY = ("searched in order only: this mutant's kill depends on where a checkpoint falls in an epoch, which "
                 "out of order with workers is arrival timing (registry.Mutant.in_order_only)")


# One adapter per component kind (a Mutant's component is one of registry.KINDS).
ADAPTERS: dict[str, Callable[[Mutant], Target]] = {"packer": _packer_target, "gate": _gate_target,
                                                   "loader": _loader_target}


def mutant_target(name: str) -> Target:
    m = mutants.by_name(name)
    if m is None:
        raise TargetError(f"unknown mutant {name!r}; allowed values: {', '.join(x.name for x in mutants.MUTANTS)}")
    return ADAPTERS[m.component](m)
