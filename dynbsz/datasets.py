"""Synthetic datasets over a ``Trace``: every sample really spends its decode cost (a sleep).

Sleeping rather than spinning keeps tests honest on a 2-core machine: worker
processes overlap the way real decoders blocked on I/O or a C library do, and
``pytest -n auto`` next door does not distort them.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.utils.data import Dataset

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

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not 0 <= index < len(self.trace):
            raise IndexError(f"index {index} out of range for a trace of {len(self.trace)} samples")
        cost = float(self.trace.cost_s[index]) * self.time_scale
        if cost > 0:
            time.sleep(cost)
        return make_sample(self.trace, index, tensor=self.tensor)
