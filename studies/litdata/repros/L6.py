"""litdata 0.2.76, L6: a checkpoint written right after a resume names the constructor's epoch.

`StreamingDataset.load_state_dict` (litdata/streaming/dataset.py:1140-1143) only stores the state; `__iter__` takes its
`current_epoch` (561). `state_dict` (1094-1138) writes `self.current_epoch`, still the constructor's 1, into that
state: a loader restored and saved again before its first batch (a job restarted twice at one step, or a checkpoint
at the resume step) saves epoch 1, and the next resume continues epoch 2 in epoch 1's shuffle.
Here: 5 samples, shuffled, batches of 2, no workers, 2 epochs, restored twice after batch 4 (epoch 2's first).
Imports litdata and torch only. Exits 1 while the resumed run differs from the uninterrupted one, 0 once it matches.
"""

import sys
import tempfile

from litdata import StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter


def make(root: str) -> StreamingDataLoader:
    return StreamingDataLoader(StreamingDataset(root, shuffle=True, seed=0), batch_size=2)


def run(root: str, restores: list[int]) -> list[tuple[int, list[int]]]:
    """Two epochs; after batch k (counted over the run), one restore into a fresh loader per k in restores."""
    loader, batches = make(root), []
    for epoch in (1, 2):   # litdata counts epochs from 1
        it = iter(loader)
        while (batch := next(it, None)) is not None:
            batches.append((epoch, batch["id"].tolist()))
            for _ in range(restores.count(len(batches))):   # a restarted job: a fresh loader given the checkpoint
                state = loader.state_dict()
                loader = make(root)
                loader.load_state_dict(state)
                it = iter(loader)
    return batches


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as root:
        writer = BinaryWriter(root, chunk_size=1)
        for i in range(5):
            writer.add_item(i, {"id": i})
        writer.done()
        writer.merge()
        uninterrupted, resumed = run(root, []), run(root, [4, 4])
        print(f"uninterrupted: {uninterrupted}\nresumed:       {resumed}")
        if resumed != uninterrupted:
            k = next((k for k, (a, b) in enumerate(zip(uninterrupted, resumed)) if a != b), None)
            k = min(len(uninterrupted), len(resumed)) if k is None else k
            print(f"first difference: batch {k}: uninterrupted {uninterrupted[k:k + 1]}, resumed {resumed[k:k + 1]}")
            sys.exit(1)
        sys.exit(0)
