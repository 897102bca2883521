"""VeOmni 0.1.12, V7: with persistent workers the worker runtime replays epoch 0's order every epoch.

`_MapStyleSamplerWrapper.set_epoch` (veomni/data/dataset.py:1006-1009), like
`WeightedMultiSourceDataset.set_epoch` (543-553), sets a plain attribute in the main process. A persistent
DataLoader worker keeps the copy it was started with, so its epoch never moves: every epoch shuffles with
`seed + 0`. Here the worker runtime as `build_native_dataloader` assembles it (`DynamicBatchingSizeDataset` over
`_MapStyleSamplerWrapper` in VeOmni's `DistributedDataloader`), one sample a micro-batch, with and without
persistent workers. Imports VeOmni and torch only. Exits 1 while the bug is present, 0 once fixed.
"""

import sys

import torch
from veomni.data.data_loader import DistributedDataloader
from veomni.data.dataset import DynamicBatchingSizeDataset, _MapStyleSamplerWrapper

DATA = [{"id": i, "attention_mask": torch.ones(64, dtype=torch.long)} for i in range(8)]


def unpack(batch):
    return batch[0]


def epochs(persistent):   # as VeOmni's trainer: set_epoch(e), then a pass over the loader, for epochs 0, 1, 2
    dataset = DynamicBatchingSizeDataset(_MapStyleSamplerWrapper(DATA, shuffle=True, seed=0), micro_batch_seq_length=64,
                                         ready_for_micro_batch_threshold=1, dynamic_batching_collate_fn=lambda mb: mb,
                                         save_by_idx=False)
    loader = DistributedDataloader(dataset, batch_size=1, collate_fn=unpack, num_workers=1,
                                   persistent_workers=persistent)
    out = []
    for e in range(3):
        loader.set_epoch(e)
        out.append([s["id"] for micro_batch in loader for s in micro_batch])
    return out


fresh, persistent = epochs(persistent=False), epochs(persistent=True)
print(f"without persistent workers: {fresh}\nwith persistent workers:    {persistent}")
diff = next((e for e, (a, b) in enumerate(zip(fresh, persistent)) if a != b), None)
if diff is not None:
    print(f"first difference in epoch {diff}: {persistent[diff]} instead of {fresh[diff]}")
sys.exit(0 if persistent == fresh else 1)
