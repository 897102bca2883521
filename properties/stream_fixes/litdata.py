"""litdata 0.2.76's findings fixed (docs/litdata-0.2.76-conformance.md): the fixes are the diffs under
docs/patches/litdata-0.2.76/, applied to a copy of the installed package that a process of its own imports
(``properties.targets.patched.LITDATA``). In that process the released adapter runs the patched code:
there is no second copy of any fix here.
"""

from __future__ import annotations

from typing import Iterable

from ..targets import litdata_target
from ..targets.base import Target
from ..targets.patched import LITDATA
from ..targets.stream import StreamComponent
from .fixset import component_in_copy, fixed_target, summaries

#: fix id -> what it fixes (each diff's first line)
LITDATA_FIXES: dict[str, str] = summaries(LITDATA)
ALL_LITDATA = tuple(LITDATA_FIXES)


def litdata_component(fixes: Iterable[str] = ALL_LITDATA) -> StreamComponent:
    return component_in_copy(LITDATA, litdata_target, fixes)


def litdata_fixed() -> Target:
    return fixed_target(LITDATA, litdata_target, f"litdata {litdata_target.lib().version}")
