"""VeOmni 0.1.12, B1: the main runtime's DynamicBatchSizeDataLoader crashes when a re-read pass is empty.

When a pass over the data ends before `length` steps, `batch_data_generator` makes a new iterator and calls
next() on it with no guard (veomni/data/dynamic_batching.py:323-327); if that pass is empty, the StopIteration
escapes the generator and PEP 479 turns it into RuntimeError out of the trainer's next(). On VeOmni's own path
an empty re-read pass is what a resumed mixture of HF streaming sources gives: datasets 2.21 re-applies a loaded
state at every __iter__, so every pass after a resume starts at the restored, already-read position.
Imports VeOmni and torch only. Exits 1 while the bug is present, 0 once an empty pass ends the epoch cleanly.
"""

import sys

import torch
from veomni.data.dataset import get_length_fn_by_count_mode
from veomni.data.dynamic_batching import DynamicBatchSizeDataLoader, TextBatchingStrategy


class FirstPassOnly(torch.utils.data.IterableDataset):
    """Three samples on the first pass, nothing after it (a stream restored to its end, on every later pass)."""

    def __init__(self):
        self.passes = 0

    def __iter__(self):
        self.passes += 1
        for i, n in enumerate((40, 50, 30) if self.passes == 1 else ()):
            yield {"input_ids": torch.full((n,), i), "attention_mask": torch.ones(n, dtype=torch.long)}


strategy = TextBatchingStrategy(token_micro_bsz=64, buffer_size=1, get_length_fn=get_length_fn_by_count_mode("total"))
loader = DynamicBatchSizeDataLoader(torch.utils.data.DataLoader(FirstPassOnly(), batch_size=None), strategy,
                                    num_micro_batch=1, length=4)   # the epoch asks for more steps than one pass makes
steps = []
try:
    for step in loader:
        steps.append([[int(s["input_ids"][0]) for s in mb] for mb in step])   # each sample is its id repeated
except RuntimeError as e:
    print(f"after {len(steps)} steps {steps}: {type(e).__name__}: {e}")
    sys.exit(1)
print(f"{len(steps)} steps {steps}: the epoch ended without a crash")
sys.exit(0)
