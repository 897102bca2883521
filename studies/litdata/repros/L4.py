"""litdata 0.2.76, L4: a persistent worker keeps a CombinedStreamingDataset's restored counts for every later epoch.

`CombinedStreamingDataset.__iter__` (litdata/streaming/combined.py:130-147) starts every iteration of a worker from
the restored `_num_samples_yielded`, and its datasets keep their restored `_state_dict` until they raise
StopIteration themselves (dataset.py:1020, 1029). The loader's `reset_state_dict()` at the next epoch
(dataloader.py:856) reaches the main process's copy only: a persistent worker starts every later epoch from the
checkpoint's counts (here its draws of datasets replay them, and the epoch comes in another order). Here: two datasets of 4, unweighted, 1 persistent worker, batch 1, 2 epochs, restored after batch 2.
Imports litdata and torch only. Exits 1 while the resumed run differs from the uninterrupted one, 0 once it matches.
"""

import sys
import tempfile

from litdata import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter


def make(root: str) -> StreamingDataLoader:
    mixture = CombinedStreamingDataset([StreamingDataset(f"{root}/a"), StreamingDataset(f"{root}/b")], seed=0)
    return StreamingDataLoader(mixture, batch_size=1, num_workers=1, persistent_workers=True)


def run(root: str, restore_after: int | None) -> list[tuple[int, int]]:
    """Two epochs; after batch restore_after, a restarted job: a fresh loader given the checkpoint."""
    loader, batches = make(root), []
    for epoch in (1, 2):
        it = iter(loader)
        while (batch := next(it, None)) is not None:
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
        for name, ids in (("a", range(4)), ("b", range(100, 104))):
            writer = BinaryWriter(f"{root}/{name}", chunk_size=1)
            for i, sample in enumerate(ids):
                writer.add_item(i, {"id": sample})
            writer.done()
            writer.merge()
        uninterrupted, resumed = run(root, None), run(root, 2)
        print(f"uninterrupted: {uninterrupted}\nresumed:       {resumed}")
        if resumed != uninterrupted:
            k = next((k for k, (a, b) in enumerate(zip(uninterrupted, resumed)) if a != b), None)
            k = min(len(uninterrupted), len(resumed)) if k is None else k
            print(f"first difference: batch {k}: uninterrupted {uninterrupted[k:k + 1]}, resumed {resumed[k:k + 1]}")
            sys.exit(1)
        sys.exit(0)
