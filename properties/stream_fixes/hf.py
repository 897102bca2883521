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
from .fixset import component_in_copy, fixed_target, summaries

#: fix id -> what it fixes (each diff's first line)
HF_FIXES: dict[str, str] = summaries(HF)
ALL_HF = tuple(HF_FIXES)


def hf_component(fixes: Iterable[str] = ALL_HF) -> StreamComponent:
    return component_in_copy(HF, hf_iterable, fixes)


def hf_fixed() -> Target:
    return fixed_target(HF, hf_iterable, f"Hugging Face datasets {hf_iterable.version()} and torchdata")
