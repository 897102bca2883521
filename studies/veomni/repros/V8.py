"""VeOmni 0.1.12, V8: a worker restored with a state of the previous epoch skips the epoch (worker runtime).

torchdata applies each worker's saved state (here, without workers, the dataset's) when the next iterator is made,
after the trainer's `set_epoch(e)`. A state saved in epoch e-1 is that epoch's finished end, and
`_MapStyleSamplerWrapper.load_state_dict` (veomni/data/dataset.py:984-1004) restores its `epoch` and `yielded`
unconditionally: the wrapper goes back to the end of epoch e-1 and yields nothing of epoch e. Here a job is
restored from the checkpoint written after epoch 0's last step (before its StopIteration) and trains epoch 1.
(With persistent workers the same happens to a worker that has delivered nothing of epoch e yet.)
Imports VeOmni and torch only. Exits 1 while the bug is present, 0 once fixed.
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
resumed.load_state_dict(state)         # then set_epoch(1) and iter(), as the trainer does
restored = epoch(resumed, 1)
print(f"epoch 0: {epoch0}\nepoch 1 uninterrupted: {uninterrupted}\nepoch 1 after the resume: {restored}")
if restored != uninterrupted:
    i = next((i for i, (a, b) in enumerate(zip(uninterrupted, restored)) if a != b), min(len(uninterrupted), len(restored)))
    print(f"first difference at step {i}: {uninterrupted[i:i + 1]} uninterrupted, {restored[i:i + 1]} resumed")
sys.exit(0 if restored == uninterrupted else 1)
