"""Where the project's CLIs write what nobody asked to keep in a checkout: one cache directory."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/dynbsz-harness``, else ``~/.cache/dynbsz-harness``. A relative ``XDG_CACHE_HOME`` is
    ignored, as the XDG spec says: it would put the cache inside whatever directory a command runs in, often a
    checkout. The property suite keeps its failures and example database there, the simulator its plots."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / "dynbsz-harness"
