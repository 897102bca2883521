"""VeOmni 0.1.12, V12: a restored main-runtime loader cuts a micro-batch before it reads the next sample.

`DynamicBatchSizeDataLoader.batch_data_generator` loops "if ready: cut, yield; then read one sample"
(veomni/data/dynamic_batching.py:310-321). A trainer checkpoints while the generator is suspended at the yield,
so the uninterrupted run goes on with the read; the generator `load_state_dict` builds (line 399) starts at the
readiness check instead and cuts one sample early. During batch-size warm-up the buffer left after a cut can be
ready at once, so the resumed run packs other micro-batches than the uninterrupted one (not bit-reproducible).
Imports VeOmni, torchdata and torch only. Exits 1 while the bug is present, 0 once fixed.
"""

import sys

import torch
from torchdata.stateful_dataloader import StatefulDataLoader
from veomni.data.dataset import get_length_fn_by_count_mode
from veomni.data.dynamic_batching import DynamicBatchSizeDataLoader, TextBatchingStrategy

LENGTHS = (30, 10, 60, 10)   # sample i is i repeated; budgets 32, 48, then 64 tokens (warm-up of 2 steps)


def sample(i):
    return {"input_ids": torch.full((LENGTHS[i],), i), "attention_mask": torch.ones(LENGTHS[i], dtype=torch.long)}


def loader():
    strategy = TextBatchingStrategy(token_micro_bsz=64, buffer_size=1, bsz_warmup_steps=2, bsz_warmup_init_mbtoken=32,
                                    get_length_fn=get_length_fn_by_count_mode("total"))
    inner = StatefulDataLoader([sample(i) for i in range(len(LENGTHS))], batch_size=None, shuffle=False)
    return DynamicBatchSizeDataLoader(inner, strategy, num_micro_batch=1, length=3)


def ids(step):
    return [[int(s["input_ids"][0]) for s in mb] for mb in step]


uninterrupted = [ids(step) for step in loader()]
first = loader()
it = iter(first)
trained = [ids(next(it))]
state = first.state_dict()                                   # the checkpoint after one trained step
resumed = loader()
resumed.load_state_dict(state)
trained += [ids(step) for step in resumed]
print(f"uninterrupted: {uninterrupted}\nresumed:       {trained}")
diff = next((i for i, (a, b) in enumerate(zip(uninterrupted, trained)) if a != b), None)
if diff is not None:
    print(f"first difference at step {diff}: {uninterrupted[diff]} uninterrupted, {trained[diff]} resumed")
sys.exit(0 if trained == uninterrupted else 1)
