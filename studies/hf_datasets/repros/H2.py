"""datasets 5.2.0, H2: stream_epochs fails: epochs: epoch 1 replays epoch 0's order with shuffle=True for every one of
7 seeds 0-6 (e.g. [0, 9, 3, 6, 1, 10, 4, 7, 2, 11, 5, 8]; with 24 orders...

The fix proposed: studies/hf_datasets/patches/H2.diff. Written by `python -m properties repro` from
stream_epochs-stream_hf-iterable-hf-iterable-97ddb1d6e4.json (uninterrupted, two epochs for each of 7 seeds); exits
1 while the bug is present, 0 once it is fixed.
"""

import sys

from datasets import Dataset
from torchdata.stateful_dataloader import StatefulDataLoader

EPOCHS = 2
SEED = None  # the loop at the end sets it: make() reads it

def make():
    ds = Dataset.from_dict({'id': list(range(12))}).to_iterable_dataset(num_shards=4)  # ceil(size / 3) shards
    ds = ds.shuffle(seed=SEED, buffer_size=1)
    return StatefulDataLoader(ds, batch_size=1, num_workers=1, persistent_workers=False, drop_last=False)

def run():
    """Epochs as a trainer runs them."""
    steps, loader = [], make()
    for epoch in range(EPOCHS):
        loader.dataset.set_epoch(epoch)
        for batch in loader:
            steps.append((epoch, tuple(batch['id'].tolist())))
    return steps

# an epoch can take 24 orders: a reshuffle drawn from the seed replays epoch 0 for all 7 seeds with probability 2e-10
for SEED in range(0, 7):
    steps = run()
    first, second = ([sid for e, batch in steps if e == k for sid in batch] for k in (0, 1))
    print(f'seed {SEED}: epoch 0 {first}, epoch 1 {second}')
    if first != second:
        sys.exit(0)
print('first difference: none: epoch 1 replays epoch 0 for every seed')
sys.exit(1)
