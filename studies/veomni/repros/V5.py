"""VeOmni 0.1.12, V5: epoch_reshuffle fails: epochs: a fresh loader told set_epoch(1) delivered [1, 4, 6, 8, 11, 0, 5,
3, 2, 9], but epoch 1 reached by iterating delivered [11, 6, 1, 4, 6, 8, ...

Written by `python -m properties repro` from epoch_reshuffle-loader_main-veomni-9a43053d22.json (persistent and
non-persistent workers); exits 1 while the behaviour is present (not a bug: VeOmni's documented deviation D5, a
main-runtime epoch is train_steps steps, not a pass over the data), 0 if it changes.
"""

import sys

import torch
from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler
from veomni.data.data_collator import NoopDataCollator, UnpackDataCollator
from veomni.data.data_loader import DistributedDataloader
from veomni.data.dataset import get_length_by_attention_mask_fn
from veomni.data.dynamic_batching import DynamicBatchSizeDataLoader, TextBatchingStrategy

EPOCHS = 2
TOKENS = [5, 19, 10, 14, 61, 111, 15, 18, 27, 49, 74, 40]  # sample i's tokens (the harness's trace, data_seed=0)

class Samples(list):  # map-style over sample ids; item k: a one-sample list, as VeOmni's transforms return
    def __getitem__(self, k):
        i = super().__getitem__(k)
        return [{'input_ids': torch.full((TOKENS[i],), i), 'attention_mask': torch.ones(TOKENS[i]).long(), 'id': i}]

def make(persistent):
    ds = Samples(range(12))
    sampler = StatefulDistributedSampler(ds, num_replicas=1, rank=0)
    inner = DistributedDataloader(ds, sampler=sampler, collate_fn=UnpackDataCollator(), num_workers=1, drop_last=True,
                                  prefetch_factor=1, persistent_workers=persistent)
    strategy = TextBatchingStrategy(token_micro_bsz=128, buffer_size=1, get_length_fn=get_length_by_attention_mask_fn)
    return DynamicBatchSizeDataLoader(inner, strategy, collate_fn=NoopDataCollator(), length=4)  # length: train_steps

def run(persistent, first=0):
    """Epochs first.. as a trainer runs them: a fresh loader, told set_epoch before each epoch."""
    steps, loader = [], make(persistent)
    for epoch in range(first, EPOCHS):
        loader.set_epoch(epoch)
        for batch in loader:
            steps.append((epoch, tuple(tuple(int(s['id']) for s in mb) for mb in batch)))
    return steps

def epoch_ids(steps, e):
    return [sid for ee, batch in steps if ee == e for sid in batch]

persistent = run(True)
fresh, late = run(False), run(False, 1)
print(f'persistent:     {persistent}\nnon-persistent: {fresh}')
for e in range(EPOCHS):
    a, b = epoch_ids(persistent, e), epoch_ids(fresh, e)
    if a != b:  # an epoch's order is the same whether the workers persist or not
        print(f'first difference: epoch {e}: persistent {a} vs non-persistent {b}')
        sys.exit(1)
    if e and a == epoch_ids(persistent, e - 1):  # set_epoch reshuffles
        print(f'first difference: epoch {e} replays epoch {e - 1}: {a}')
        sys.exit(1)
if epoch_ids(late, 1) != epoch_ids(fresh, 1):  # the order is a function of (seed, epoch)
    print(f'first difference: a fresh loader told set_epoch(1) delivered {epoch_ids(late, 1)}')
    sys.exit(1)
sys.exit(0)
