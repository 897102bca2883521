"""datasets 5.2.0, H8: a persistent worker's state before its next iteration is where abandoned tasks left it.

Restored where epoch 0's loop breaks off, the new loader's iterator sends its workers their prefetch tasks and the
trainer at once abandons it and calls `set_epoch(1)`. The epoch is shared with persistent workers, so a worker that
runs those stale tasks after that reads epoch 1's first samples (discarded), and at the next iteration torchdata
takes `IterableDataset.state_dict()` as the worker's initial state (worker.py:215): epoch 1, samples in. A
checkpoint before that worker delivers resumes it further on. Workers that start late (here 0.3 s each, a
tokenizer's load) lose the race every time. The fix: studies/hf_datasets/patches/H8.diff (with H5's). From
stream_resume-stream_hf-iterable-hf-iterable-0d2591fe3b.json; exits 1 while the bug is present, else 0.
"""

import pickle
import sys
import time

from datasets import Dataset
from torchdata.stateful_dataloader import StatefulDataLoader

EPOCHS = 2

def make():
    ds = Dataset.from_dict({'id': list(range(6))}).to_iterable_dataset(num_shards=6)  # ceil(size / 1) shards
    return StatefulDataLoader(ds, batch_size=1, num_workers=2, persistent_workers=True, drop_last=False,
                              worker_init_fn=lambda _: time.sleep(0.3))  # a worker starts late

def close(loader):  # a restarted job's old workers are gone before the new loader starts its own
    getattr(loader._iterator, '_shutdown_workers', lambda: None)()
    loader._iterator = None

def run(points):
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
        while not (epoch == 0 and taken >= 2) and (batch := next(it, None)) is not None:  # epoch 0 breaks early
            steps.append((epoch, tuple(batch['id'].tolist())))
            taken += 1
            for _ in range(points.count(len(steps))):
                loader = restore(loader)
                loader.dataset.set_epoch(epoch)
                it = iter(loader)
    return steps

uninterrupted = run([])
# checkpoints as drawn, and exactly at every epoch end and on the next epoch's first batch
ends = [sum(1 for e, _ in uninterrupted if e <= k) for k in sorted({e for e, _ in uninterrupted})[:-1]]
resumed = run(sorted(set([]) | {n + d for n in ends for d in (0, 1)}))
print(f'uninterrupted: {uninterrupted}\nresumed:       {resumed}')
k = next((k for k, (a, b) in enumerate(zip(uninterrupted, resumed)) if a != b), min(map(len, (uninterrupted, resumed))))
if uninterrupted != resumed:  # batch for batch
    print(f'first difference: batch {k}: uninterrupted {uninterrupted[k:k + 1]} vs resumed {resumed[k:k + 1]}')
sys.exit(0 if uninterrupted == resumed else 1)
