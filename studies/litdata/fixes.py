"""litdata 0.2.76's findings fixed (studies/litdata/report.md): the fixes are the diffs under
studies/litdata/patches/, applied to a copy of the installed package that a process of its own imports
(``LITDATA``, this study's patch set). In that process the released adapter runs the patched code:
there is no second copy of any fix here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from properties.corpus import replay_with_fixes
from properties.runner import Result
from properties.targets.base import Target
from properties.targets.fixset import component_in_copy, fixed_target, summaries, with_fixes_target
from properties.targets.fixset import pinned as _pinned
from properties.targets.patched import PatchSet
from properties.targets.stream import StreamComponent

from . import adapter

HERE = Path(__file__).resolve().parent
#: the proposed fixes, run as the target ``studies.litdata:fixed``
LITDATA = PatchSet(target="studies.litdata:fixed", released="litdata", library="litdata 0.2.76", root=HERE / "patches")
PATCH_SET = LITDATA
#: every finding's minimal example, one corpus file each, named by its ``finding`` field (trainers/: under a trainer)
PINS = HERE / "pins"
#: fix id -> what it fixes (each diff's first paragraph)
FIXES: dict[str, str] = summaries(LITDATA)
ALL = tuple(FIXES)


def component(fixes: Iterable[str] | None = ALL) -> StreamComponent:
    return component_in_copy(LITDATA, adapter, fixes)


def fixed() -> Target:
    return fixed_target(LITDATA, adapter, f"litdata {adapter.lib().version}")


def with_fixes(fixes: Iterable[str]) -> Target:
    return with_fixes_target(LITDATA, adapter, fixes, "litdata")


def replay_with(fixes: Iterable[str], entry: dict[str, Any]) -> Result:
    """The corpus entry replayed with exactly ``fixes``, in a process of its own."""
    return replay_with_fixes(entry, LITDATA, fixes)


def pinned() -> dict[str, Path]:
    """Finding id -> its pin under ``PINS`` (not under ``PINS/trainers``)."""
    return _pinned(PINS, "L")
