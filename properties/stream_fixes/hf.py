"""Hugging Face datasets' findings fixed (docs/hf-datasets-5.2.0-conformance.md): the fixes are the diffs
under docs/patches/datasets-5.2.0/ (H1-H3, H5-H8) and docs/patches/torchdata-0.11.0/ (H4, H9: fixes to
torchdata's StatefulDataLoader), applied to a copy of the installed packages that a process of its own
imports (``properties.targets.patched.HF``). In that process the released adapter runs the patched
code: there is no second copy of any fix here.
"""

from __future__ import annotations

from typing import Iterable

from ..targets import hf_iterable
from ..targets.base import Target
from ..targets.patched import HF
from ..targets.stream import StreamComponent


def _fixes() -> dict[str, str]:
    return {fix.id: fix.summary for fix in HF.fixes().values()}


#: fix id -> what it fixes (each diff's first line)
HF_FIXES: dict[str, str] = _fixes()
ALL_HF = tuple(HF_FIXES)


def hf_component(fixes: Iterable[str] = ALL_HF) -> StreamComponent:
    """The released adapter's component, in a process whose datasets and torchdata carry exactly ``fixes``
    (``HF.call`` or ``HF.env_for_subprocess`` start one); elsewhere a ValueError says so."""
    fixes = HF.check(fixes)
    applied = HF.applied()
    if applied != fixes:
        raise ValueError(f"fixes={list(fixes)}: this process imports {'the release' if applied is None else list(applied)}"
                         f"; {HF.unavailable()}")
    return hf_iterable.component()


def hf_fixed() -> Target:
    name = HF.target
    if not hf_iterable.available():
        return Target(name=name, description="Hugging Face datasets with fixes", unavailable=hf_iterable.MISSING)
    applied = HF.applied()
    if applied != ALL_HF:
        reason = HF.unavailable() if applied is None else f"this process's copy carries {list(applied)}, not every fix"
        return Target(name=name, description="Hugging Face datasets with fixes", unavailable=reason)
    return Target(name=name, components=(hf_iterable.component(),),
                  description=f"Hugging Face datasets {hf_iterable.version()} and torchdata with the diffs "
                              f"{', '.join(ALL_HF)} of docs/patches/ applied (properties.targets.patched)")
