"""datasets 5.2.0, H6: stream_mixture fails: mixture: epoch 0 of the uninterrupted run (no checkpoint): source 0 has 0
of the first 20 samples (before a source ran out), weight 0.500 expects 1...

The fix proposed: studies/hf_datasets/patches/H6.diff. Written by `python -m properties repro` from
stream_mixture-stream_hf-iterable-hf-iterable-2c85695dd1.json (the harness's adversarial schedule); exits 1 while
the bug is present, 0 once it is fixed.
"""

import math
import sys

from datasets import Dataset, interleave_datasets
from torchdata.stateful_dataloader import StatefulDataLoader

EPOCHS = 2
SOURCES = [20, 20]  # source k's sample i is {'id': 1000 * k + i}
SHARDS = [20, 20]  # ceil(size / 1) shards each

def make():
    parts = [Dataset.from_dict({'id': [1000 * k + i for i in range(n)]}).to_iterable_dataset(num_shards=s)
             for k, (n, s) in enumerate(zip(SOURCES, SHARDS))]
    ds = interleave_datasets(parts, probabilities=[0.5, 0.5], seed=1)
    ds = ds.shuffle(seed=1, buffer_size=1)
    return StatefulDataLoader(ds, batch_size=1, num_workers=0, persistent_workers=False, drop_last=False)

def run():
    """Epochs as a trainer runs them."""
    steps, loader = [], make()
    for epoch in range(EPOCHS):
        loader.dataset.set_epoch(epoch)
        for batch in loader:
            steps.append((epoch, tuple(batch['id'].tolist())))
    return steps

uninterrupted = run()
def epoch_ids(steps, e):
    return [sid for ee, batch in steps if ee == e for sid in batch]
SIZES, WEIGHTS = [20, 20], [0.5, 0.5]
print(f'uninterrupted: {uninterrupted}')
def deviation(ids):  # each source's share before one ran out, against its weight (4 standard deviations)
    counts, prefix = [0] * len(SIZES), 0
    for prefix, sid in enumerate(ids, 1):
        counts[sid // 1000] += 1
        if counts[sid // 1000] >= SIZES[sid // 1000]:
            break
    for k, p in enumerate(w / sum(WEIGHTS) for w in WEIGHTS):
        sd = math.sqrt(prefix * p * (1 - p)) or 1.0
        if prefix >= 12 and abs(counts[k] - prefix * p) > 4 * sd + 1:
            return f'source {k} has {counts[k]} of the first {prefix} samples, weight {p:.3f} expects {prefix * p:.1f}'
bad = [f'epoch {e} of the {name} run: {d}' for name, steps in (('uninterrupted', uninterrupted),)
       for e in range(0, EPOCHS) if (d := deviation(epoch_ids(steps, e)))]
print(bad[0] if bad else 'every epoch as weighted')
sys.exit(1 if bad else 0)
