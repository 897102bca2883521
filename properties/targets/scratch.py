"""A process's scratch folder for the data an adapter writes (its sources, its datasets), made once per prefix
and removed when the process that made it exits: runs leave nothing in the system's temporary folder. A forked
DataLoader worker inherits the path and never removes it (the owner's pid is checked; multiprocessing also ends
its children with ``os._exit``, which runs no exit handler)."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile


@functools.lru_cache(maxsize=None)
def scratch_root(prefix: str) -> str:
    path = tempfile.mkdtemp(prefix=f"{prefix}-{os.getpid()}-")
    atexit.register(_remove, path, os.getpid())
    return path


def _remove(path: str, owner: int) -> None:
    if os.getpid() == owner:
        shutil.rmtree(path, ignore_errors=True)
