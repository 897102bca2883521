"""Hugging Face datasets 5.2.0 (report.md): ``IterableDataset`` (shuffled, interleaved, split by node) under
torchdata's ``StatefulDataLoader`` and the stream properties (``adapter``), and its findings' fixes as diffs
(``fixed``, ``patches/``; H4's and H9's are to torchdata 0.11.0)."""

from __future__ import annotations

from . import adapter
from .fixes import HF, fixed

TARGETS = {"hf-iterable": adapter.target}
PATCH_SETS = (HF,)

__all__ = ["HF", "PATCH_SETS", "TARGETS", "fixed"]
