"""VeOmni 0.1.12, V2: resuming from an end-of-epoch checkpoint gives an empty next epoch (main runtime).

`DynamicBatchSizeDataLoader.load_state_dict` sets `_resume = True` and builds the generator
(veomni/data/dynamic_batching.py:379-400); the next `__iter__` (292-298) keeps it whatever `set_epoch` said in
between (`set_epoch`, 402-404, only forwards to the inner loader). Restored from the checkpoint written after an
epoch's last step, the loader's step has reached `length`: after `set_epoch(e + 1)` the next `iter()` reuses the
finished generator, which yields nothing. (VeOmni's own trainer calls an extra `iter()` on such a resume, which
hides it: a contract gap.) Needs V3's diff as well (the saved epoch). Imports VeOmni, torchdata and torch only.
Exits 1 while the bug is present, 0 once fixed.
"""

import sys

import torch
from torchdata.stateful_dataloader import StatefulDataLoader
from veomni.data.dataset import get_length_fn_by_count_mode
from veomni.data.dynamic_batching import DynamicBatchSizeDataLoader, TextBatchingStrategy

N = 4   # four samples of 64 tokens, one a step; sample i is i repeated
DATA = [{"input_ids": torch.full((64,), i), "attention_mask": torch.ones(64, dtype=torch.long)} for i in range(N)]


def loader():
    strategy = TextBatchingStrategy(token_micro_bsz=64, buffer_size=1,
                                    get_length_fn=get_length_fn_by_count_mode("total"))
    return DynamicBatchSizeDataLoader(StatefulDataLoader(DATA, batch_size=None), strategy, num_micro_batch=1, length=N)


def epoch(dl, e):   # set_epoch(e), iter(), then next() up to train_steps (= length) times
    dl.set_epoch(e)
    it, out = iter(dl), []
    while len(out) < N and (step := next(it, None)) is not None:
        out.append(int(step[0][0]["input_ids"][0]))
    return out


first = loader()
epoch0 = epoch(first, 0)
state = first.state_dict()               # the checkpoint written after epoch 0's last step
uninterrupted = epoch(first, 1)
resumed = loader()
resumed.load_state_dict(state)
restored = epoch(resumed, 1)
print(f"epoch 0: {epoch0}\nepoch 1 uninterrupted: {uninterrupted}\nepoch 1 after the resume: {restored}")
if restored != uninterrupted:
    i = next((i for i, (a, b) in enumerate(zip(uninterrupted, restored)) if a != b), min(len(uninterrupted), len(restored)))
    print(f"first difference at step {i}: {uninterrupted[i:i + 1]} uninterrupted, {restored[i:i + 1]} resumed")
sys.exit(0 if restored == uninterrupted else 1)
