"""Hugging Face datasets' findings fixed (studies/hf_datasets/report.md): the fixes are the diffs under
studies/hf_datasets/patches/ (H4's and H9's are to torchdata's StatefulDataLoader), applied to a copy of the
installed packages that a process of its own imports (``HF``, this study's patch set). In that process the
released adapter runs the patched code: there is no second copy of any fix here.
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
#: the proposed fixes, run as the target ``studies.hf_datasets:fixed``
HF = PatchSet(target="studies.hf_datasets:fixed", released="hf-iterable", library="Hugging Face datasets 5.2.0 and torchdata 0.11.0", root=HERE / "patches")
PATCH_SET = HF
#: every finding's minimal example, one corpus file each, named by its ``finding`` field (trainers/: under a trainer)
PINS = HERE / "pins"
#: fix id -> what it fixes (each diff's first paragraph)
FIXES: dict[str, str] = summaries(HF)
ALL = tuple(FIXES)


def component(fixes: Iterable[str] | None = ALL) -> StreamComponent:
    return component_in_copy(HF, adapter, fixes)


def fixed() -> Target:
    return fixed_target(HF, adapter, f"Hugging Face datasets {adapter.version()} and torchdata")


def with_fixes(fixes: Iterable[str]) -> Target:
    return with_fixes_target(HF, adapter, fixes, "hf")


def replay_with(fixes: Iterable[str], entry: dict[str, Any]) -> Result:
    """The corpus entry replayed with exactly ``fixes``, in a process of its own."""
    return replay_with_fixes(entry, HF, fixes)


def pinned() -> dict[str, Path]:
    """Finding id -> its pin under ``PINS`` (not under ``PINS/trainers``)."""
    return _pinned(PINS, "H")
