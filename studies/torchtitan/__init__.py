"""torchtitan 0.3.0 (report.md): its Hugging Face text datasets behind ``ParallelAwareDataloader``, run in an
overlay with the versions torchtitan declares (``adapter``), and its findings' fixes as diffs (``patches/``)."""

from __future__ import annotations

from . import adapter
from .fixes import FIXES, fixed

TARGETS = {"torchtitan": adapter.target}
PATCH_SETS = (FIXES,)

__all__ = ["FIXES", "PATCH_SETS", "TARGETS", "fixed"]
