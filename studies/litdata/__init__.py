"""litdata 0.2.76 (report.md): ``StreamingDataset``, ``CombinedStreamingDataset``, ``ParallelStreamingDataset``
and ``StreamingDataLoader`` under the stream properties (``adapter``), and its findings' fixes as diffs
(``fixed``, ``patches/``)."""

from __future__ import annotations

from . import adapter
from .fixes import LITDATA, fixed

TARGETS = {"litdata": adapter.target}
PATCH_SETS = (LITDATA,)

__all__ = ["LITDATA", "PATCH_SETS", "TARGETS", "fixed"]
