"""Targets: what the property suite runs against. ``resolve(name)`` is the one entry point.

Names: ``dynbsz``, ``torchdata``, a studied library's (``veomni``, ``litdata``, ...: declared by the studies under
studies/, found through ``properties.targets.studies``), ``mutant:NAME`` (properties/mutants/) or
``MODULE:FACTORY`` (see ``properties.targets.user``). Bad names raise ``TargetError`` with a one-line message.
"""

from __future__ import annotations

from .. import mutants
from .base import KINDS, Component, LoaderComponent, PackerComponent, Target, TargetError
from .builtin import BUILTIN
from .mutant import PREFIX as MUTANT_PREFIX
from .mutant import mutant_target
from .plain import loader_target
from .studies import targets as study_targets
from .user import user_target

__all__ = ["KINDS", "Component", "LoaderComponent", "PackerComponent", "Target", "TargetError", "loader_target",
           "resolve", "names"]


def names() -> list[str]:
    return list(BUILTIN) + list(study_targets()) + [MUTANT_PREFIX + m.name for m in mutants.MUTANTS]


def resolve(name: str) -> Target:
    if not isinstance(name, str) or not name:
        raise TargetError(f"target must be a non-empty name, got {name!r}")
    if name.startswith(MUTANT_PREFIX):
        return mutant_target(name[len(MUTANT_PREFIX):])
    if name in BUILTIN:
        return BUILTIN[name]()
    if ":" in name:
        return user_target(name)
    studied = study_targets()
    if name in studied:
        return studied[name]()
    raise TargetError(f"unknown target {name!r}; allowed values: {', '.join([*BUILTIN, *studied])}, mutant:NAME "
                      "(python -m properties list), or MODULE:FACTORY")
