"""VeOmni 0.1.12, V17: a main-runtime checkpoint written after an epoch's last step misses a sample it already read.

After the last step's yield, `batch_data_generator` reads one more sample into the packing buffer before its length
check ends the epoch (veomni/data/dynamic_batching.py:307-308, 320-321): the uninterrupted run opens the next epoch
with it. A checkpoint written after that last step was taken before the read; restored, then `set_epoch(1)` and
`iter()` (a plain loop; VeOmni's own trainer first drains the restored epoch with an eager `iter()`), the next
epoch starts a fresh pass and the sample is never trained. Imports VeOmni, torchdata and torch only.
Exits 1 while the bug is present, 0 once fixed.
"""

import sys

import torch
from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler
from veomni.data.data_loader import DistributedDataloader
from veomni.data.dataset import get_length_fn_by_count_mode
from veomni.data.dynamic_batching import DynamicBatchSizeDataLoader, TextBatchingStrategy

N, STEPS = 6, 3   # six samples of 64 tokens, one a step; an epoch is 3 steps (VeOmni's train_steps), half a pass
DATA = [{"input_ids": torch.full((64,), i), "attention_mask": torch.ones(64, dtype=torch.long)} for i in range(N)]


def unpack(batch):   # batch_size=1 and an unpacking collator, as VeOmni's main runtime builds its inner loader
    return batch[0]


def loader():
    strategy = TextBatchingStrategy(token_micro_bsz=64, buffer_size=1,
                                    get_length_fn=get_length_fn_by_count_mode("total"))
    sampler = StatefulDistributedSampler(DATA, num_replicas=1, rank=0, shuffle=True, seed=0)
    inner = DistributedDataloader(DATA, batch_size=1, sampler=sampler, collate_fn=unpack, num_workers=0)
    return DynamicBatchSizeDataLoader(inner, strategy, num_micro_batch=1, length=STEPS)


def epoch(dl, e, checkpoint_after=None):   # set_epoch(e), iter(), the epoch's steps; a checkpoint after a step
    dl.set_epoch(e)
    out, state = [], None
    for step in iter(dl):
        out.append(int(step[0][0]["input_ids"][0]))
        if len(out) == checkpoint_after:
            state = dl.state_dict()      # written inside the loop, after the step, as a trainer writes it
    return out, state


first = loader()
trained, state = epoch(first, 0, checkpoint_after=STEPS)   # the checkpoint after epoch 0's last step
uninterrupted, _ = epoch(first, 1)
resumed = loader()
resumed.load_state_dict(state)           # a fresh process restores it and goes on with epoch 1
restored, _ = epoch(resumed, 1)
print(f"epoch 0: {trained}\nepoch 1 uninterrupted: {uninterrupted}\nepoch 1 resumed:       {restored}")
if restored != uninterrupted:
    print(f"trained only uninterrupted: {sorted(set(uninterrupted) - set(restored))}, "
          f"only after the resume: {sorted(set(restored) - set(uninterrupted))}")
sys.exit(0 if restored == uninterrupted else 1)
