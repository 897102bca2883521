"""Synthetic datasets over a ``Trace``: every sample really spends its decode cost (a sleep).

Sleeping rather than spinning keeps tests honest on a 2-core machine: worker
processes overlap the way real decoders blocked on I/O or a C library do, and
``pytest -n auto`` next door does not distort them.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Iterator

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from .order import epoch_order
from .workload import Trace


def make_sample(trace: Trace, index: int, *, tensor: bool = False) -> dict[str, Any]:
    sid = int(trace.ids[index])
    tokens = int(trace.tokens[index])
    sample = {"id": sid, "tokens": tokens, "source": trace.source_names[int(trace.source[index])],
              "cost_s": float(trace.cost_s[index])}
    if tensor:
        # Deterministic content per id, so a resumed run can be compared token for token.
        g = torch.Generator().manual_seed(sid)
        sample["input_ids"] = torch.randint(1, 32000, (tokens,), generator=g, dtype=torch.long)
    return sample


class TraceMapDataset(Dataset):
    """Map-style: ``dataset[i]`` is row i of the trace, after sleeping ``cost_s * time_scale``."""

    def __init__(self, trace: Trace, *, time_scale: float = 1.0, tensor: bool = False):
        if time_scale < 0:
            raise ValueError(f"time_scale must be >= 0, got {time_scale}")
        self.trace = trace
        self.time_scale = time_scale
        self.tensor = tensor

    def __len__(self) -> int:
        return len(self.trace)

    def fingerprint(self) -> str:
        """What the samples are (ids, token counts, sources; not decode costs), as a short hash: loader
        checkpoints carry it, so one made over another trace of the same size is refused."""
        if getattr(self, "_fingerprint", None) is None:
            h = hashlib.sha256()
            for column in (self.trace.ids, self.trace.tokens, self.trace.source):
                h.update(np.ascontiguousarray(column, dtype=np.int64).tobytes())
                h.update(b"|")
            h.update("\0".join(self.trace.source_names).encode())
            self._fingerprint = f"trace:{len(self.trace)}:{h.hexdigest()[:16]}"
        return self._fingerprint

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not 0 <= index < len(self.trace):
            raise IndexError(f"index {index} out of range for a trace of {len(self.trace)} samples")
        cost = float(self.trace.cost_s[index]) * self.time_scale
        if cost > 0:
            time.sleep(cost)
        return make_sample(self.trace, index, tensor=self.tensor)


class TraceIterableDataset(IterableDataset):
    """Iterable over a trace: worker w of n yields positions w, w+n, ... of the epoch's order.

    The epoch lives in a one-element shared-memory tensor, so ``set_epoch`` in the main process
    reaches persistent workers (their replica shares the storage, under fork and spawn alike) and
    the order of epoch e is the same with persistent and non-persistent workers. Reading
    ``self.epoch`` as a plain attribute instead is the classic bug: a persistent worker's replica
    keeps the value it was started with and replays epoch 0 forever.
    """

    def __init__(self, trace: Trace, *, seed: int = 0, shuffle: bool = True, time_scale: float = 1.0,
                 tensor: bool = False):
        if time_scale < 0:
            raise ValueError(f"time_scale must be >= 0, got {time_scale}")
        self.trace, self.seed, self.shuffle, self.time_scale, self.tensor = trace, seed, shuffle, time_scale, tensor
        self._epoch = torch.zeros(1, dtype=torch.int64).share_memory_()

    def set_epoch(self, epoch: int) -> None:
        self._epoch[0] = epoch

    @property
    def epoch(self) -> int:
        return int(self._epoch[0])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        order = epoch_order(len(self.trace), self.seed, self.epoch, self.shuffle)[wid::nw]
        for index in order.tolist():
            cost = float(self.trace.cost_s[index]) * self.time_scale
            if cost > 0:
                time.sleep(cost)
            yield make_sample(self.trace, index, tensor=self.tensor)
