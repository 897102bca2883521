"""VeOmni 0.1.12, V6: exactly_once fails: exactly-once: epoch 0 lost [6, 11] (checkpoints after steps [1, 1])

Written by `python -m properties repro` from exactly_once-loader_worker-veomni-45af2abdca.json; exits 1 while the
behaviour is present (not a bug: VeOmni's documented deviation D6, drop_last=True drops each worker's last
incomplete step), 0 if it changes.
"""

import pickle
import sys

import torch
from veomni.data.data_collator import NoopDataCollator
from veomni.data.data_loader import DistributedDataloader
from veomni.data.dataset import DynamicBatchingSizeDataset, _MapStyleSamplerWrapper

EPOCHS = 2
TOKENS = [5, 19, 10, 14, 61, 111, 15, 18, 27, 49, 74, 40]  # sample i's tokens (the harness's trace, data_seed=0)

class Samples(list):  # map-style over sample ids; item k: a one-sample list, as VeOmni's transforms return
    def __getitem__(self, k):
        i = super().__getitem__(k)
        return [{'input_ids': torch.full((TOKENS[i],), i), 'attention_mask': torch.ones(TOKENS[i]).long(), 'id': i}]

def make():
    ds = DynamicBatchingSizeDataset(_MapStyleSamplerWrapper(Samples(range(12))), micro_batch_seq_length=128,
                                    ready_for_micro_batch_threshold=1, dynamic_batching_collate_fn=NoopDataCollator(),
                                    save_by_idx=False, get_physical_length_fn=None)
    return DistributedDataloader(ds, batch_size=2, collate_fn=NoopDataCollator(), num_workers=0, drop_last=True)

def run(points):
    """Epochs as a trainer runs them; after each step count in points: save, build a fresh loader, load."""
    loader, steps = make(), []
    def restore(loader):
        state = pickle.loads(pickle.dumps(loader.state_dict()))
        fresh = make()
        fresh.load_state_dict(state)
        return fresh
    for epoch in range(EPOCHS):
        loader.set_epoch(epoch)
        it = iter(loader)
        while (batch := next(it, None)) is not None:
            steps.append((epoch, tuple(tuple(int(s['id']) for s in mb) for mb in batch)))
            for _ in range(points.count(len(steps))):
                loader = restore(loader)
                loader.set_epoch(epoch)
                it = iter(loader)
    return steps

uninterrupted = run([])
resumed = run([1, 1])
ALL = set(range(12))  # each epoch: every sample, once
print(f'uninterrupted: {uninterrupted}\nresumed:       {resumed}')
for e in range(EPOCHS):
    got = [sid for ee, step in resumed if ee == e for mb in step for sid in mb]
    twice, foreign, lost = {s for s in got if got.count(s) > 1}, set(got) - ALL, ALL - set(got)
    if twice or foreign or lost:
        print(f'first difference: epoch {e}: {sorted(twice)} twice, {sorted(foreign)} foreign, {sorted(lost)} left out')
        sys.exit(1)
