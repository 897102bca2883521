"""litdata 0.2.76, L12: a persistent worker whose resumed epoch was broken off resumes the same position again.

A worker resumes from `_state_dict` in `StreamingDataset.__iter__` (litdata/streaming/dataset.py:558-561, 629-631)
and drops it only when it raises StopIteration itself (`reset_state_dict()`, 1021, 1030). The loader's
`reset_state_dict()` at the next epoch (dataloader.py:856) reaches the main process's copy only: a persistent worker
whose resumed epoch a trainer broke off (a step-bounded epoch) starts its next epoch at the checkpoint again.
Here: 4 samples, 1 persistent worker, batch 1, each epoch broken off after 2 batches, restored after batch 1.
Imports litdata and torch only. Exits 1 while the resumed run differs from the uninterrupted one, 0 once it matches.
"""

import sys
import tempfile

from litdata import StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter


def make(root: str) -> StreamingDataLoader:
    return StreamingDataLoader(StreamingDataset(root), batch_size=1, num_workers=1, persistent_workers=True)


def run(root: str, restore_after: int | None) -> list[tuple[int, list[int]]]:
    """Two epochs of 2 batches each; after batch restore_after, a restarted job: a fresh loader given the checkpoint."""
    loader, batches = make(root), []
    for epoch in (1, 2):
        it = iter(loader)
        for _ in range(2):
            batches.append((epoch, next(it)["id"].tolist()))
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
        for i in range(4):
            writer.add_item(i, {"id": i})
        writer.done()
        writer.merge()
        uninterrupted, resumed = run(root, None), run(root, 1)
        print(f"uninterrupted: {uninterrupted}\nresumed:       {resumed}")
        if resumed != uninterrupted:
            k = next((k for k, (a, b) in enumerate(zip(uninterrupted, resumed)) if a != b), None)
            k = min(len(uninterrupted), len(resumed)) if k is None else k
            print(f"first difference: batch {k}: uninterrupted {uninterrupted[k:k + 1]}, resumed {resumed[k:k + 1]}")
            sys.exit(1)
        sys.exit(0)
