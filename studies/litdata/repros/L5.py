"""litdata 0.2.76, L5: a CombinedStreamingDataset resumed with batch size > 1 continues in other batches.

`CombinedStreamingDataset.__len__` is `self.get_len(1, 1)` (litdata/streaming/combined.py:113-114), which sets one
worker and batch size 1 on every dataset. `StreamingDataLoader.load_state_dict` calls `len(self.dataset)`
(dataloader.py:1059) before the workers start, so each dataset compares the checkpoint's batch size 2 with 1, decides
the topology changed and takes the elastic resume, whose chunk plan is not the one the epoch started with.
Here: two datasets of 4, 2 workers, batches of 2, a checkpoint after batch 1 restored into a fresh loader.
Imports litdata and torch only. Exits 1 while the resumed epoch differs from the uninterrupted one, 0 once it matches.
"""

import sys
import tempfile

from litdata import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter


def write(root: str, name: str, ids: range) -> None:
    writer = BinaryWriter(f"{root}/{name}", chunk_size=1)
    for i, sample in enumerate(ids):
        writer.add_item(i, {"id": sample})
    writer.done()
    writer.merge()


def make(root: str) -> StreamingDataLoader:
    mixture = CombinedStreamingDataset([StreamingDataset(f"{root}/a"), StreamingDataset(f"{root}/b")])
    return StreamingDataLoader(mixture, batch_size=2, num_workers=2)


def epoch(root: str, restore_after: int | None = None) -> list[list[int]]:
    loader, batches = make(root), []
    it = iter(loader)
    while (batch := next(it, None)) is not None:
        batches.append(batch["id"].tolist())
        if len(batches) == restore_after:   # a restarted job: a fresh loader given the checkpoint
            state = loader.state_dict()
            loader = make(root)
            loader.load_state_dict(state)
            it = iter(loader)
    return batches


if __name__ == "__main__":   # the workers re-import this file under spawn
    with tempfile.TemporaryDirectory() as root:
        write(root, "a", range(4))
        write(root, "b", range(100, 104))
        uninterrupted, resumed = epoch(root), epoch(root, restore_after=1)
        print(f"uninterrupted: {uninterrupted}\nresumed:       {resumed}")
        if resumed != uninterrupted:
            k = next((k for k, (a, b) in enumerate(zip(uninterrupted, resumed)) if a != b), None)
            k = min(len(uninterrupted), len(resumed)) if k is None else k
            print(f"first difference: batch {k}: uninterrupted {uninterrupted[k:k + 1]}, resumed {resumed[k:k + 1]}")
            sys.exit(1)
        sys.exit(0)
