"""VeOmni 0.1.12, V15 (torchdata's H9): a checkpoint written right after a resume loses the next epoch.

VeOmni's `DistributedDataloader` (veomni/data/data_loader.py) inherits torchdata 0.11.0's
`StatefulDataLoader.state_dict` (stateful_dataloader.py:415-419), which, called between `load_state_dict()` and
the next `iter()`, builds the iterator from the loaded state at once: the dataset restores its position with the
epoch of that moment, before the trainer's `set_epoch`, and `__iter__` (397-399) then reuses that iterator. A job
restored from an end-of-epoch checkpoint that writes a checkpoint on resume trains epoch 0's leftovers as epoch 1.
Needs V8's diff as well. Imports VeOmni and torch only. Exits 1 while the bug is present, 0 once fixed.
"""

import sys

import torch
from veomni.data.data_loader import DistributedDataloader
from veomni.data.dataset import DynamicBatchingSizeDataset, _MapStyleSamplerWrapper

DATA = [{"id": i, "attention_mask": torch.ones(64, dtype=torch.long)} for i in range(8)]   # one a micro-batch


def unpack(batch):
    return batch[0]


def loader():   # the worker runtime as build_native_dataloader assembles it, no workers
    dataset = DynamicBatchingSizeDataset(_MapStyleSamplerWrapper(DATA, shuffle=True, seed=0), micro_batch_seq_length=64,
                                         ready_for_micro_batch_threshold=1, dynamic_batching_collate_fn=lambda mb: mb,
                                         save_by_idx=False)
    return DistributedDataloader(dataset, batch_size=1, collate_fn=unpack)


def epoch(dl, e, steps=None):   # set_epoch(e), iter(), then up to `steps` steps (all by default)
    dl.set_epoch(e)
    it, out = iter(dl), []
    while (steps is None or len(out) < steps) and (step := next(it, None)) is not None:
        out.append([s["id"] for s in step])
    return out


first = loader()
epoch0 = epoch(first, 0)
uninterrupted = epoch(first, 1)
second = loader()
epoch(second, 0, steps=len(epoch0))
state = second.state_dict()            # the checkpoint after epoch 0's last step
resumed = loader()
resumed.load_state_dict(state)
resumed.state_dict()                   # a checkpoint written on resume, before set_epoch(1) and iter()
restored = epoch(resumed, 1)
print(f"epoch 0: {epoch0}\nepoch 1 uninterrupted: {uninterrupted}\nepoch 1 after the resume: {restored}")
if restored != uninterrupted:
    i = next((i for i, (a, b) in enumerate(zip(uninterrupted, restored)) if a != b), min(len(uninterrupted), len(restored)))
    print(f"first difference at step {i}: {uninterrupted[i:i + 1]} uninterrupted, {restored[i:i + 1]} resumed")
sys.exit(0 if restored == uninterrupted else 1)
