"""datasets 5.2.0, H5: stream_trainer_resume fails: under trainer 'torchdata', preempted after global steps [1]: step 1
differs: uninterrupted (0, ((1,),)) vs preempted (0, ((1001,),))

The fix proposed: studies/hf_datasets/patches/H5.diff. Written by `python -m properties repro` from
stream_trainer_resume-H5.json (trainer model 'torchdata', preempted after global steps [1]); exits 1 while the bug
is present, 0 once it is fixed. With 2+ workers the outcome can depend on timing: run it a few times.
"""

import pickle
import sys

from datasets import Dataset, interleave_datasets
from torchdata.stateful_dataloader import StatefulDataLoader

EPOCHS = 2
SOURCES = [4, 4]  # source k's sample i is {'id': 1000 * k + i}
SHARDS = [4, 4]  # ceil(size / 1) shards each

def make():
    parts = [Dataset.from_dict({'id': [1000 * k + i for i in range(n)]}).to_iterable_dataset(num_shards=s)
             for k, (n, s) in enumerate(zip(SOURCES, SHARDS))]
    ds = interleave_datasets(parts, probabilities=[0.5, 0.5], seed=0)
    return StatefulDataLoader(ds, batch_size=1, num_workers=2, persistent_workers=False, drop_last=False)

def close(loader):  # a restarted job's old workers are gone before the new loader starts its own
    getattr(loader._iterator, '_shutdown_workers', lambda: None)()
    loader._iterator = None

def run(kills):
    """torchdata's README loop ("Saving and loading state"): state_dict() after every step; a job killed
    after a step in kills restarts from its last checkpoint. Returns what was trained: (epoch, ids) per step."""
    trained, checkpoint, step, start, loader = [], None, 0, 0, make()
    while True:
        killed = False
        for epoch in range(start, EPOCHS):
            loader.dataset.set_epoch(epoch)
            for batch in loader:
                step += 1
                trained.append((step, epoch, tuple(batch['id'].tolist())))
                checkpoint = (step, epoch, pickle.loads(pickle.dumps(loader.state_dict())))
                if kills and step >= kills[0]:  # preempted right after this step
                    kills, killed = kills[1:], True
                    break
            if killed:
                break
        if not killed:
            return [(e, b) for _, e, b in trained]
        close(loader)
        step, start, state = checkpoint
        loader = make()
        loader.load_state_dict(state)
        trained = [t for t in trained if t[0] <= step]  # the steps after the checkpoint are redone

uninterrupted = run([])
preempted = run([1])
print(f'uninterrupted: {uninterrupted}\npreempted:     {preempted}')
k = next((k for k, (a, b) in enumerate(zip(uninterrupted, preempted)) if a != b), min(map(len, (uninterrupted, preempted))))
if uninterrupted != preempted:  # batch for batch
    print(f'first difference: batch {k}: uninterrupted {uninterrupted[k:k + 1]} vs preempted {preempted[k:k + 1]}')
sys.exit(0 if uninterrupted == preempted else 1)
