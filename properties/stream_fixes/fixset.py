"""What the litdata and Hugging Face fix sets share: checking a requested subset, and the target
that runs a library with every fix."""

from __future__ import annotations

from types import ModuleType
from typing import Callable, Iterable

from ..targets.base import Target
from ..targets.stream import StreamComponent


def check_fixes(fixes: Iterable[str], known: dict[str, str]) -> tuple[str, ...]:
    fixes = tuple(fixes)
    bad = [f for f in fixes if f not in known]
    if bad:
        raise ValueError(f"fixes={bad!r}: allowed values: {', '.join(known) or 'none'}")
    return fixes


def fixed_target(factory: str, adapter: ModuleType, library: str, released: Callable[[], str],
                 fixes: dict[str, str], component: Callable[[], StreamComponent]) -> Target:
    """``properties.stream_fixes:FACTORY``: the library (``adapter``'s) with every fix in ``fixes``;
    unavailable, with the adapter's reason, where the extra is not installed. ``released()`` names
    the library as installed (called only when it is)."""
    name = f"properties.stream_fixes:{factory}"
    if not adapter.available():
        return Target(name=name, description=f"{library} with fixes", unavailable=adapter.MISSING)
    return Target(name=name, components=(component(),),
                  description=f"{released()} with the report's proposed fixes {', '.join(fixes)} patched in "
                              "(properties.stream_fixes)")
