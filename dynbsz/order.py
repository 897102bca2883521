"""Which samples a rank reads in an epoch, in which order, and which of them were delivered.

The epoch order is a pure function of (dataset size, seed, epoch): it never
depends on a generator's history, so it is the same whether workers are
persistent or not, fresh or resumed. DP ranks take interleaved, disjoint
slices of it (no padding: a sample is never read twice to even out ranks).
"""

from __future__ import annotations

import numpy as np


def epoch_order(num_samples: int, seed: int, epoch: int, shuffle: bool = True) -> np.ndarray:
    """Dataset indices of one epoch, all ranks together."""
    if not shuffle:
        return np.arange(num_samples, dtype=np.int64)
    return np.random.default_rng([seed, epoch]).permutation(num_samples).astype(np.int64)


def rank_order(num_samples: int, seed: int, epoch: int, dp_rank: int, dp_size: int, shuffle: bool = True) -> np.ndarray:
    """The slice of the epoch order that DP rank ``dp_rank`` reads: positions rank, rank+dp, ..."""
    return epoch_order(num_samples, seed, epoch, shuffle)[dp_rank::dp_size]


class DeliveryLedger:
    """The positions of an epoch that were delivered, as a watermark plus the ones delivered ahead of it.

    With in_order=True deliveries come in position order and ``ahead`` stays
    empty; out of order, ``ahead`` holds at most about a prefetch window. The
    ledger is the checkpoint: resuming re-issues exactly the positions it does
    not hold, so nothing is lost and nothing is delivered twice.
    """

    __slots__ = ("watermark", "ahead")

    def __init__(self, watermark: int = 0, ahead: tuple | list = ()):
        self.watermark = watermark
        self.ahead: set[int] = set(ahead)

    def mark(self, position: int) -> None:
        if position < self.watermark or position in self.ahead:
            raise RuntimeError(f"position {position} delivered twice in one epoch (watermark {self.watermark}); "
                               "this is a bug in the loader")
        if position == self.watermark:
            w = position + 1
            ahead = self.ahead
            while w in ahead:
                ahead.discard(w)
                w += 1
            self.watermark = w
        else:
            self.ahead.add(position)

    def delivered(self, position: int) -> bool:
        return position < self.watermark or position in self.ahead

    def count(self) -> int:
        return self.watermark + len(self.ahead)

    def remaining(self, total: int):
        """Positions not yet delivered, ascending."""
        ahead = self.ahead
        return (p for p in range(self.watermark, total) if p not in ahead)

    def state_dict(self) -> dict:
        return {"watermark": self.watermark, "ahead": sorted(self.ahead)}

    def load_state_dict(self, state: dict) -> None:
        self.watermark = state["watermark"]
        self.ahead = set(state["ahead"])
