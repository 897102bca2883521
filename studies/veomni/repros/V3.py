"""VeOmni 0.1.12, V3: a main-runtime resume in epoch 1 continues in epoch 0's order.

`DynamicBatchSizeDataLoader.load_state_dict` ends with an eager `iter(self._dataloader)`
(veomni/data/dynamic_batching.py:398); with DataLoader workers that iterator at once draws the sampler's order
to prefetch, for the epoch the sampler has at that moment: 0 in a fresh process, since the trainer calls
`set_epoch(e)` only afterwards and the checkpoint holds no epoch. The restored position is then applied to
epoch 0's permutation: the rest of epoch 1 repeats some samples and never shows others.
Imports VeOmni, torchdata and torch only. Exits 1 while the bug is present, 0 once fixed.
"""

import sys

import torch
from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler
from veomni.data.data_loader import DistributedDataloader
from veomni.data.dataset import get_length_fn_by_count_mode
from veomni.data.dynamic_batching import DynamicBatchSizeDataLoader, TextBatchingStrategy

N = 6   # six samples of 64 tokens, one a step; sample i is i repeated
DATA = [{"input_ids": torch.full((64,), i), "attention_mask": torch.ones(64, dtype=torch.long)} for i in range(N)]


def unpack(batch):   # batch_size=1 and an unpacking collator, as VeOmni's main runtime builds its inner loader
    return batch[0]


def loader():
    strategy = TextBatchingStrategy(token_micro_bsz=64, buffer_size=1,
                                    get_length_fn=get_length_fn_by_count_mode("total"))
    sampler = StatefulDistributedSampler(DATA, num_replicas=1, rank=0, shuffle=True, seed=0)
    inner = DistributedDataloader(DATA, batch_size=1, sampler=sampler, collate_fn=unpack, num_workers=2)
    return DynamicBatchSizeDataLoader(inner, strategy, num_micro_batch=1, length=N)


def epoch(dl, e, steps=None):   # as VeOmni's trainer: set_epoch(e), iter(), then next() up to train_steps times
    dl.set_epoch(e)
    it, out = iter(dl), []
    while len(out) < (steps or N) and (step := next(it, None)) is not None:
        out.append(int(step[0][0]["input_ids"][0]))
    return out


first = loader()
epoch(first, 0)
uninterrupted = epoch(first, 1)
second = loader()
epoch(second, 0)
trained = epoch(second, 1, steps=2)
state = second.state_dict()              # the checkpoint after epoch 1's second step
resumed = loader()
resumed.load_state_dict(state)           # a fresh process: load, then set_epoch(1), as the trainer does
trained += epoch(resumed, 1)
print(f"epoch 1 uninterrupted: {uninterrupted}\nepoch 1 resumed:       {trained}")
repeated, unseen = sorted({i for i in trained if trained.count(i) > 1}), sorted(set(range(N)) - set(trained))
print(f"repeated {repeated}, never seen {unseen}")
if trained != uninterrupted:
    i = next((i for i, (a, b) in enumerate(zip(uninterrupted, trained)) if a != b), min(len(uninterrupted), len(trained)))
    print(f"first difference at step {i}: {uninterrupted[i:i + 1]} uninterrupted, {trained[i:i + 1]} resumed")
sys.exit(0 if trained == uninterrupted else 1)
