"""VeOmni 0.1.12, V1: the main runtime's checkpoint holds one step too few.

`DynamicBatchSizeDataLoader.batch_data_generator` yields a step and counts it only when the trainer asks for the
next one (`yield batch; self.step += 1`, veomni/data/dynamic_batching.py:316-317). A checkpoint written after a
step is trained therefore saves the step before it: the resumed job re-counts that step, so its epoch (bounded by
`length` steps) runs one step longer than the uninterrupted one, re-reading data, and a batch-size warm-up resumes
one step behind. Imports VeOmni, torchdata and torch only. Exits 1 while the bug is present, 0 once fixed.
"""

import sys

import torch
from torchdata.stateful_dataloader import StatefulDataLoader
from veomni.data.dataset import get_length_fn_by_count_mode
from veomni.data.dynamic_batching import DynamicBatchSizeDataLoader, TextBatchingStrategy

LENGTHS = (40, 50, 30, 60, 20, 45, 35, 55)   # sample i is i repeated; a micro-batch closes at 64 tokens


def sample(i):
    return {"input_ids": torch.full((LENGTHS[i],), i), "attention_mask": torch.ones(LENGTHS[i], dtype=torch.long)}


def loader():
    strategy = TextBatchingStrategy(token_micro_bsz=64, buffer_size=1, get_length_fn=get_length_fn_by_count_mode("total"))
    inner = StatefulDataLoader([sample(i) for i in range(len(LENGTHS))], batch_size=None, shuffle=False)
    return DynamicBatchSizeDataLoader(inner, strategy, num_micro_batch=1, length=4)


def ids(step):
    return [[int(s["input_ids"][0]) for s in mb] for mb in step]


uninterrupted = [ids(step) for step in loader()]
first = loader()
it = iter(first)
trained = [ids(next(it)), ids(next(it))]
state = first.state_dict()                                   # the checkpoint after two trained steps
resumed = loader()
resumed.load_state_dict(state)
trained += [ids(step) for step in resumed]
print(f"checkpoint after 2 steps saved step={state['step']}")
print(f"uninterrupted: {uninterrupted}\nresumed:       {trained}")
sys.exit(0 if trained == uninterrupted and state["step"] == 2 else 1)
