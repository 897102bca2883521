"""VeOmni 0.1.12, V10: a mixture restored from a state saved before its first draw interleaves differently.

`WeightedMultiSourceDataset.__iter__` seeds the epoch's stream from `SeedSequence([seed, epoch, dp_rank,
worker_id])` only when it was not restored (veomni/data/dataset.py:565-572). A DataLoader worker that had not
drawn yet when the checkpoint was written saved the constructor's `RandomState(seed)` (line 448); restored, the
mixture keeps that stream instead of the epoch's, so it picks its sources in another order than the
uninterrupted run: other micro-batches and proportions for the rest of the epoch.
Imports VeOmni and torch only. Exits 1 while the bug is present, 0 once fixed.
"""

import sys

import torch
from veomni.data.dataset import WeightedMultiSourceDataset


class Source(torch.utils.data.IterableDataset):
    def __init__(self, ids):
        self.ids = ids

    def __iter__(self):
        yield from ({"input_ids": torch.tensor([i, i])} for i in self.ids)


def mixture():   # two sources of 8 samples each: 0-7 and 100-107, drawn 50:50 until one is exhausted
    return WeightedMultiSourceDataset([Source(range(8)), Source(range(100, 108))], [0.5, 0.5], seed=42,
                                      stopping_strategy="first_exhausted")


def ids(dataset):
    return [int(s["input_ids"][0]) for s in dataset]


uninterrupted = ids(mixture())
state = mixture().state_dict()           # the checkpoint of a worker that has not drawn yet
resumed = mixture()
resumed.load_state_dict(state)
restored = ids(resumed)
print(f"uninterrupted: {uninterrupted}\nresumed:       {restored}")
diff = next((i for i, (a, b) in enumerate(zip(uninterrupted, restored)) if a != b), None)
if diff is not None:
    print(f"first difference at sample {diff}: {uninterrupted[diff]} uninterrupted, {restored[diff]} resumed")
sys.exit(0 if restored == uninterrupted else 1)
