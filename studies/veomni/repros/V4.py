"""VeOmni 0.1.12 with torchdata 0.11.0, V4: a checkpoint written right after a resume says "start of epoch".

torchdata's `StatefulDistributedSampler.__iter__` (torchdata/stateful_dataloader/sampler.py:198-206), the sampler
of VeOmni's main runtime, is a generator function: a restored position moves into `yielded` only when the
iterator is first advanced. `DynamicBatchSizeDataLoader.load_state_dict` makes the inner iterator at once, so a
`state_dict()` taken before the next step (a job restarted twice without a step in between, or a checkpoint
written on resume) saves `yielded = 0`, and the second restore replays the epoch from its first sample.
The fix is torchdata's (V4.diff patches its sampler). Imports VeOmni, torchdata and torch only.
Exits 1 while the bug is present, 0 once fixed.
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
    inner = DistributedDataloader(DATA, batch_size=1, sampler=sampler, collate_fn=unpack)
    return DynamicBatchSizeDataLoader(inner, strategy, num_micro_batch=1, length=N)


def epoch(dl, e, steps=None):   # as VeOmni's trainer: set_epoch(e), iter(), then next() up to train_steps times
    dl.set_epoch(e)
    it, out = iter(dl), []
    while len(out) < (steps or N) and (step := next(it, None)) is not None:
        out.append(int(step[0][0]["input_ids"][0]))
    return out


uninterrupted = epoch(loader(), 0)
first = loader()
trained = epoch(first, 0, steps=2)
state = first.state_dict()               # the checkpoint after two steps
restarted = loader()
restarted.load_state_dict(state)
state = restarted.state_dict()           # written on resume, before any step
resumed = loader()
resumed.load_state_dict(state)           # the job restarted again
trained += epoch(resumed, 0)
print(f"saved on resume: {state['dataloader_state']['_sampler_iter_state']}")
print(f"epoch 0 uninterrupted: {uninterrupted}\nepoch 0 resumed twice: {trained}")
if trained != uninterrupted:
    i = next((i for i, (a, b) in enumerate(zip(uninterrupted, trained)) if a != b), min(len(uninterrupted), len(trained)))
    print(f"first difference at step {i}: {uninterrupted[i:i + 1]} uninterrupted, {trained[i:i + 1]} resumed")
sys.exit(0 if trained == uninterrupted else 1)
