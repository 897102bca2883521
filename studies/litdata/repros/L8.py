"""litdata 0.2.76, L8: a persistent worker shuffles the epoch after a broken-off one as the previous epoch.

`StreamingDataLoader.__iter__` calls `self.dataset.set_epoch(self.current_epoch)` (litdata/streaming/dataloader.py:859)
in the main process. A persistent worker keeps its own copy of the dataset, which `set_epoch` never reaches; the copy
advances `current_epoch` only when it raises StopIteration (dataset.py:1020, 1029), which an epoch the training loop
broke off never does. Its next epoch repeats the last one's shuffle while the loader's state names the next epoch: a
restore (fresh workers, the state's epoch) continues in the other permutation. Here: 8 samples, shuffled, 1 persistent
worker, batch 1, epoch 1 broken off after 1 batch, a checkpoint after epoch 2's second batch restored into a new loader.
Imports litdata and torch only. Exits 1 while the resumed run differs from the uninterrupted one, 0 once it matches.
"""

import sys
import tempfile

from litdata import StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter


def make(root: str) -> StreamingDataLoader:
    return StreamingDataLoader(StreamingDataset(root, shuffle=True, seed=0), batch_size=1, num_workers=1,
                               persistent_workers=True)


def run(root: str, restore_after: int | None) -> list[tuple[int, int]]:
    """Epoch 1 broken off after 1 batch, epoch 2 whole; after batch restore_after, a fresh loader given the checkpoint."""
    loader, batches = make(root), []
    for epoch, limit in ((1, 1), (2, None)):
        it = iter(loader)
        while len(batches) != limit and (batch := next(it, None)) is not None:
            batches.append((epoch, batch["id"].item()))
            if len(batches) == restore_after:
                state = loader.state_dict()
                loader._iterator._shutdown_workers()   # the old job's workers are gone before the new job starts
                loader = make(root)
                loader.load_state_dict(state)
                it = iter(loader)
    loader._iterator._shutdown_workers()   # the job ends
    return batches


if __name__ == "__main__":   # the workers re-import this file under spawn
    with tempfile.TemporaryDirectory() as root:
        writer = BinaryWriter(root, chunk_size=1)
        for i in range(8):
            writer.add_item(i, {"id": i})
        writer.done()
        writer.merge()
        uninterrupted, resumed = run(root, None), run(root, 3)
        print(f"uninterrupted: {uninterrupted}\nresumed:       {resumed}")
        if resumed != uninterrupted:
            k = next((k for k, (a, b) in enumerate(zip(uninterrupted, resumed)) if a != b), None)
            k = min(len(uninterrupted), len(resumed)) if k is None else k
            print(f"first difference: batch {k}: uninterrupted {uninterrupted[k:k + 1]}, resumed {resumed[k:k + 1]}")
            sys.exit(1)
        sys.exit(0)
