"""datasets 5.2.0, H8: a persistent worker's state before its next iteration is where abandoned tasks left it.

Restored where epoch 0's loop breaks off, the new loader's iterator sends its workers their prefetch tasks and the
trainer at once abandons it and calls `set_epoch(1)`. The epoch is shared with persistent workers, so a worker that
runs those stale tasks after that reads epoch 1's first samples (discarded), and at the next iteration torchdata
takes `IterableDataset.state_dict()` as the worker's initial state (worker.py:215): epoch 1, samples in; a
checkpoint before that worker delivers resumes it further on. A worker slow to start (a tokenizer's load) loses this
race; the script makes the restored loader's workers lose it every time, by holding their iteration's start (where
datasets reads the epoch) until the trainer has moved on. Fix: patches/H8.diff with H5's. Exits 1 while the bug is
present, else 0.
"""

import pickle
import sys
import time

import datasets.iterable_dataset as hf
import torch
from datasets import Dataset
from torchdata.stateful_dataloader import StatefulDataLoader

START, RESTORED = hf.IterableDataset._prepare_ex_iterable_for_iteration, []

def late_start(self, *args, **kwargs):  # in a restored loader's workers: wait (at most 10 s) for the next epoch
    deadline = time.monotonic() + 10
    while RESTORED and torch.utils.data.get_worker_info() and self.epoch == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    return START(self, *args, **kwargs)

hf.IterableDataset._prepare_ex_iterable_for_iteration = late_start

def make():   # 6 samples in 6 shards, unshuffled, 2 persistent workers
    ds = Dataset.from_dict({'id': list(range(6))}).to_iterable_dataset(num_shards=6)
    return StatefulDataLoader(ds, batch_size=1, num_workers=2, persistent_workers=True)

def run(points):
    """Two epochs, epoch 0 breaking off after 2 batches; after each batch count in points: save, restart, load."""
    loader, steps = make(), []
    for epoch in range(2):
        loader.dataset.set_epoch(epoch)
        it, taken = iter(loader), 0
        while not (epoch == 0 and taken >= 2) and (batch := next(it, None)) is not None:
            steps.append((epoch, tuple(batch['id'].tolist())))
            taken += 1
            if len(steps) in points:   # the restarted job's loader: its old workers gone first
                state = pickle.loads(pickle.dumps(loader.state_dict()))
                loader._iterator._shutdown_workers()
                RESTORED.append(len(steps))   # before the new workers fork: they see it
                loader = make()
                loader.load_state_dict(state)
                loader.dataset.set_epoch(epoch)
                it = iter(loader)
    return steps

uninterrupted, resumed = run([]), run([2, 3])   # checkpoints at epoch 0's break and after epoch 1's first batch
print(f'uninterrupted: {uninterrupted}\nresumed:       {resumed}')
k = next((k for k, (a, b) in enumerate(zip(uninterrupted, resumed)) if a != b), min(map(len, (uninterrupted, resumed))))
if uninterrupted != resumed:  # batch for batch
    print(f'first difference: batch {k}: uninterrupted {uninterrupted[k:k + 1]} vs resumed {resumed[k:k + 1]}')
sys.exit(0 if uninterrupted == resumed else 1)
