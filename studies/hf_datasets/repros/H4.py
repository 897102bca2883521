"""datasets 5.2.0, H4: stream_resume fails: resume: batch 1 differs (checkpoints after batches [1, 2] and at every
epoch end, epoch 0's loop breaking after 1 batches): uninterrupted (1, (0,))...

The fix proposed: studies/hf_datasets/patches/H4.diff. Written by `python -m properties repro` from
stream_resume-stream_hf-iterable-hf-iterable-36faa691de.json (the harness's adversarial schedule); exits 1 while the
bug is present, 0 once it is fixed. With 2+ workers the outcome can depend on timing: run it a few times.
"""

import pickle
import sys

from datasets import Dataset
from torchdata.stateful_dataloader import StatefulDataLoader

EPOCHS = 2

def make():
    ds = Dataset.from_dict({'id': list(range(4))}).to_iterable_dataset(num_shards=4)  # ceil(size / 1) shards
    return StatefulDataLoader(ds, batch_size=1, num_workers=2, persistent_workers=False, drop_last=False)

def close(loader):  # a restarted job's old workers are gone before the new loader starts its own
    getattr(loader._iterator, '_shutdown_workers', lambda: None)()
    loader._iterator = None

def run(points, at_epoch_end=False):
    """Epochs as a trainer runs them; after each batch count in points: save, build a fresh loader, load."""
    loader, steps = make(), []
    def restore(loader):
        state = pickle.loads(pickle.dumps(loader.state_dict()))
        close(loader)
        fresh = make()
        fresh.load_state_dict(state)
        return fresh
    for epoch in range(EPOCHS):
        loader.dataset.set_epoch(epoch)
        it, taken = iter(loader), 0
        while not (epoch == 0 and taken >= 1) and (batch := next(it, None)) is not None:  # epoch 0 breaks early
            steps.append((epoch, tuple(batch['id'].tolist())))
            taken += 1
            for _ in range(points.count(len(steps))):
                loader = restore(loader)
                loader.dataset.set_epoch(epoch)
                it = iter(loader)
        if at_epoch_end and epoch < EPOCHS - 1:  # a checkpoint at epoch end, the finished iterator gone first
            it = None
            loader = restore(loader)
    return steps

uninterrupted = run([])
# checkpoints as drawn, and exactly at every epoch end and on the next epoch's first batch
ends = [sum(1 for e, _ in uninterrupted if e <= k) for k in sorted({e for e, _ in uninterrupted})[:-1]]
resumed = run(sorted(set([]) | {n + d for n in ends for d in (0, 1)}), at_epoch_end=True)
print(f'uninterrupted: {uninterrupted}\nresumed:       {resumed}')
k = next((k for k, (a, b) in enumerate(zip(uninterrupted, resumed)) if a != b), min(map(len, (uninterrupted, resumed))))
if uninterrupted != resumed:  # batch for batch
    print(f'first difference: batch {k}: uninterrupted {uninterrupted[k:k + 1]} vs resumed {resumed[k:k + 1]}')
sys.exit(0 if uninterrupted == resumed else 1)
