"""litdata 0.2.76, L1: after a mid-epoch resume, a loop that takes len() batches an epoch (Lightning's) replays the
checkpoint's tail as its next epoch.

`StreamingDataLoader.__iter__` clears `restore` only once its generator runs to the end
(litdata/streaming/dataloader.py:913). A trainer that stops an epoch after `len(loader)` batches, as Lightning's fit
loop does, never asks for the StopIteration, so the next epoch's `iter()` resumes the loaded state again (849-857
skip the reset). Here: 4 samples, batch 1, no workers; a job preempted after batch 1 of epoch 0 and restarted from
its checkpoint finishes epoch 0, and its epoch 1 is samples 1-3 (the checkpoint's tail), not 0-3.
Imports litdata and torch only. Exits 1 while the restarted job trains other samples than the uninterrupted one.
"""

import sys
import tempfile

from litdata import StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter


def make(root: str) -> StreamingDataLoader:
    return StreamingDataLoader(StreamingDataset(root), batch_size=1)


def train(root: str, preempt_after: int | None = None) -> list[list[int]]:
    """Two epochs of len(loader) batches each; preempted after that many batches and restarted from the checkpoint."""
    loader, epochs, done, state = make(root), [[], []], 0, None
    for e in range(2):
        it = iter(loader)
        while len(epochs[e]) < len(loader) and (batch := next(it, None)) is not None:
            epochs[e].append(batch["id"].item())
            done += 1
            if done == preempt_after:   # a checkpoint here, then the job dies; the next one loads it and goes on
                state = loader.state_dict()
                loader = make(root)
                loader.load_state_dict(state)
                it = iter(loader)
    return epochs


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as root:
        writer = BinaryWriter(root, chunk_size=1)
        for i in range(4):
            writer.add_item(i, {"id": i})
        writer.done()
        writer.merge()
        uninterrupted, preempted = train(root), train(root, preempt_after=1)
        print(f"uninterrupted: {uninterrupted}\npreempted:     {preempted}")
        sys.exit(0 if preempted == uninterrupted else 1)
