"""VeOmni 0.1.12, V11: a run of zero-budget samples is packed past the physical-token cap.

`DynBszBuffer.get_samples` forces a sample while the micro-batch's budgeted token sum is still 0
(`first_forced_sample = force is True and cum_seq_len == 0`, veomni/data/dynamic_batching.py:102), not only the
first sample. With `dyn_bsz_count_mode="effective"` a sample whose labels are all masked counts 0, so a run of
them is forced into one micro-batch whatever `physical_token_cap` says, while the docstring promises that forcing
"can emit one sample that exceeds physical_token_cap by itself, but the cap still prevents adding more samples".
Imports VeOmni and torch only. Exits 1 while the bug is present, 0 once the cap holds after the first sample.
"""

import sys

import torch
from veomni.data.dynamic_batching import DynBszBuffer

# the budget counts label tokens (none here: prompt-only samples); the cap counts every token
buffer = DynBszBuffer(get_length_fn=lambda s: int((s["labels"] != -100).sum()),
                      get_physical_length_fn=lambda s: int(s["attention_mask"].sum()))
for i in range(4):
    buffer.append({"id": i, "attention_mask": torch.ones(300, dtype=torch.long),
                   "labels": torch.full((300,), -100)})
micro_batch = buffer.get_samples(n_token_per_iter=1024, force=True, physical_token_cap=512)
physical = sum(int(s["attention_mask"].sum()) for s in micro_batch)
print(f"micro-batch {[s['id'] for s in micro_batch]}: {physical} physical tokens, cap 512")
sys.exit(1 if len(micro_batch) > 1 and physical > 512 else 0)
