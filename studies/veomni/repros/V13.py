"""VeOmni 0.1.12, V13: a persistent worker's state before its first batch is the previous iteration's.

`DynamicBatchingSizeDataset.__iter__` (veomni/data/dataset.py:1146-1166) resets its own buffer at once but
iterates its upstream only when the first batch is asked for (`_iter`, 1168-1169), and torchdata takes a worker's
state right after `iter()`. A job restarted from an end-of-epoch checkpoint holds a finished iterator: torchdata
primes the prefetch (the persistent workers start epoch 1 and advance their upstream), then resets the iterator,
and the state it takes then still shows that discarded iteration's upstream position. A checkpoint before a
worker's first batch of the epoch restores that position: samples of the epoch are never trained.
Needs V7's and V8's diffs as well. Imports VeOmni and torch only. Exits 1 while the bug is present, 0 once fixed.
"""

import sys

import torch
from veomni.data.data_loader import DistributedDataloader
from veomni.data.dataset import DynamicBatchingSizeDataset, _MapStyleSamplerWrapper

DATA = [{"id": i, "attention_mask": torch.ones(64, dtype=torch.long)} for i in range(8)]   # one a micro-batch


def unpack(batch):
    return batch[0]


def loader():   # the worker runtime as build_native_dataloader assembles it, 2 persistent workers
    dataset = DynamicBatchingSizeDataset(_MapStyleSamplerWrapper(DATA, shuffle=True, seed=0), micro_batch_seq_length=64,
                                         ready_for_micro_batch_threshold=1, dynamic_batching_collate_fn=lambda mb: mb,
                                         save_by_idx=False)
    return DistributedDataloader(dataset, batch_size=1, collate_fn=unpack, num_workers=2, prefetch_factor=1,
                                 persistent_workers=True, snapshot_every_n_steps=1)


def epoch(dl, e, steps=None):   # set_epoch(e), iter(), then up to `steps` steps (all by default)
    dl.set_epoch(e)
    it, out = iter(dl), []
    while (steps is None or len(out) < steps) and (step := next(it, None)) is not None:
        out.append([s["id"] for s in step])
    return out


first = loader()
epoch(first, 0)
end_of_epoch = first.state_dict()      # the checkpoint at epoch 0's end
uninterrupted = epoch(first, 1)
second = loader()
second.load_state_dict(end_of_epoch)   # a job restarted from it
trained = epoch(second, 1, steps=1)
state = second.state_dict()            # the checkpoint after epoch 1's first step: worker 1 has delivered nothing yet
resumed = loader()
resumed.load_state_dict(state)
trained += epoch(resumed, 1)
print(f"epoch 1 uninterrupted: {uninterrupted}\nepoch 1 resumed:       {trained}")
lost = sorted({i for mb in uninterrupted for i in mb} - {i for mb in trained for i in mb})
print(f"lost: {lost}")
if trained != uninterrupted:
    i = next((i for i, (a, b) in enumerate(zip(uninterrupted, trained)) if a != b), min(len(uninterrupted), len(trained)))
    print(f"first difference at step {i}: {uninterrupted[i:i + 1]} uninterrupted, {trained[i:i + 1]} resumed")
sys.exit(0 if trained == uninterrupted else 1)
