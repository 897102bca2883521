"""VeOmni 0.1.12, V14: dp_step_counts fails: DP step counts: looping over at most 3 steps per epoch (the trainer's
loop), epoch 0 ends after 3 steps on rank 0, 2 steps on rank 1: the ranks sto...

Written by `python -m properties repro` from dp_step_counts-loader_worker-veomni-1ff2675553.json (each DP rank's
loader in one process); exits 1 while the bug is present, 0 once it is fixed.
"""

import sys

import torch
from veomni.data.data_collator import NoopDataCollator
from veomni.data.data_loader import DistributedDataloader
from veomni.data.dataset import DynamicBatchingSizeDataset, _MapStyleSamplerWrapper

RANKS, EPOCHS = 2, 2
TRAIN_STEPS = 3  # VeOmni's train_steps: the trainer's steps of an epoch
TOKENS = [28, 18, 45, 38, 19, 22, 54, 30, 16, 19, 30, 68, 18, 18, 39, 57]  # sample i's tokens (the harness's trace, data_seed=3)

class Samples(list):  # map-style over sample ids; item k: a one-sample list, as VeOmni's transforms return
    def __getitem__(self, k):
        i = super().__getitem__(k)
        return [{'input_ids': torch.full((TOKENS[i],), i), 'attention_mask': torch.ones(TOKENS[i]).long(), 'id': i}]

def make():
    ds = DynamicBatchingSizeDataset(_MapStyleSamplerWrapper(Samples(range(16)), num_replicas=2, rank=RANK),
                                    micro_batch_seq_length=128, ready_for_micro_batch_threshold=1,
                                    dynamic_batching_collate_fn=NoopDataCollator(), save_by_idx=False,
                                    get_physical_length_fn=None)
    return DistributedDataloader(ds, collate_fn=NoopDataCollator(), num_workers=0, drop_last=True)

def steps_per_epoch(rank):
    """Rank `rank`'s loader, each epoch: the steps it yields (at most TRAIN_STEPS, the trainer's loop)."""
    global RANK
    RANK = rank
    counts, loader = [], make()
    for epoch in range(EPOCHS):
        loader.set_epoch(epoch)
        it, n = iter(loader), 0
        while n < TRAIN_STEPS and next(it, None) is not None:
            n += 1
        counts.append(n)
    return counts

counts = [steps_per_epoch(r) for r in range(RANKS)]
print(f'steps per epoch, by rank: {counts}')
for e in range(EPOCHS):
    if len({c[e] for c in counts}) > 1:  # a rank that stops first leaves the others in a collective
        print(f'first difference: epoch {e} ends after {[c[e] for c in counts]} steps on ranks 0..{RANKS - 1}')
        sys.exit(1)
sys.exit(0)
