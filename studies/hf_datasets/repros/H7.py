"""datasets 5.2.0, H7: stream_exactly_once fails: exactly-once: epoch 0 delivered [0] more than once (checkpoints after
batches [0, 4] and at every epoch end)

The fix proposed: studies/hf_datasets/patches/H7.diff. Written by `python -m properties repro` from
stream_exactly_once-stream_hf-iterable-hf-iterable-402b2fd341.json (the harness's adversarial schedule); exits 1
while the bug is present, 0 once it is fixed.
"""

import pickle
import sys

from datasets import Dataset
from torchdata.stateful_dataloader import StatefulDataLoader

EPOCHS = 2

def make():
    ds = Dataset.from_dict({'id': list(range(7))}).to_iterable_dataset(num_shards=7)  # ceil(size / 1) shards
    ds = ds.shuffle(seed=0, buffer_size=4)
    return StatefulDataLoader(ds, batch_size=1, num_workers=0, persistent_workers=False, drop_last=False)

def run(points, at_epoch_end=False):
    """Epochs as a trainer runs them; after each batch count in points: save, build a fresh loader, load."""
    loader, steps = make(), []
    def restore(loader):
        state = pickle.loads(pickle.dumps(loader.state_dict()))
        fresh = make()
        fresh.load_state_dict(state)
        return fresh
    for _ in range(points.count(0)):  # a checkpoint before the first batch
        loader = restore(loader)
    for epoch in range(EPOCHS):
        loader.dataset.set_epoch(epoch)
        it = iter(loader)
        while (batch := next(it, None)) is not None:
            steps.append((epoch, tuple(batch['id'].tolist())))
            for _ in range(points.count(len(steps))):
                loader = restore(loader)
                loader.dataset.set_epoch(epoch)
                it = iter(loader)
        if at_epoch_end and epoch < EPOCHS - 1:  # a checkpoint at epoch end, the finished iterator gone first
            it = None
            loader = restore(loader)
    return steps

uninterrupted = run([])
resumed = run([0, 4], at_epoch_end=True)
ALL = {1000 * k + i for k, n in enumerate([7]) for i in range(n)}  # each epoch, once each
LOSS = 12  # IterableDataset.state_dict: 'Resuming returns exactly where the checkpoint was saved except in two cases: 1. examples from shuffle buffers are lost when resuming and the buffers are refilled with new data'
print(f'uninterrupted: {uninterrupted}\nresumed:       {resumed}')
for e in range(EPOCHS):
    got = [sid for ee, batch in resumed if ee == e for sid in batch]
    twice, foreign, lost = {s for s in got if got.count(s) > 1}, set(got) - ALL, ALL - set(got)
    if twice or foreign or len(lost) > LOSS:
        print(f'epoch {e} delivered {sorted(twice)} twice, {sorted(foreign)} foreign, left out {sorted(lost)}')
        sys.exit(1)
