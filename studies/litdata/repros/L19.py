"""litdata 0.2.76, L19: a weighted mixture's state saved between epochs restores as the finished epoch.

`StreamingDataLoader.load_state_dict` sets `restore` for every weighted `CombinedStreamingDataset`
(litdata/streaming/dataloader.py:1063-1067, "TODO: handle the case with weights"): its length is unknown, so its
counts cannot tell a finished epoch from one under way. A state saved after the loop over the loader ended (a
checkpoint at every epoch end) therefore resumes the finished epoch: the next `iter()` delivers nothing, and the
next epoch's samples come one `iter()` later. An unweighted mixture's or a single dataset's state starts the next
epoch (its counts reach its length, 1055-1061).
Here: two sources of 4, weights 0.5 and 0.5, no workers, epoch 0 run to its end, its state loaded into a new loader.
Imports litdata and torch only. Exits 1 while epoch 1 after the restore differs from epoch 1 uninterrupted.
"""

import os
import sys
import tempfile

from litdata import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter


def make(root: str) -> StreamingDataLoader:
    parts = [StreamingDataset(os.path.join(root, str(k))) for k in range(2)]
    mixture = CombinedStreamingDataset(parts, seed=0, weights=[0.5, 0.5], iterate_over_all=False)
    return StreamingDataLoader(mixture, batch_size=1)


def epoch(loader: StreamingDataLoader) -> list[int]:
    return [batch["id"].item() for batch in loader]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as root:
        for k in range(2):
            writer = BinaryWriter(os.path.join(root, str(k)), chunk_size=1)
            for i in range(4):
                writer.add_item(i, {"id": 1000 * k + i})
            writer.done()
            writer.merge()
        plain = make(root)
        epoch(plain)
        uninterrupted = epoch(plain)
        saved = make(root)
        epoch(saved)   # epoch 0 to its end, then a checkpoint
        restored = make(root)
        restored.load_state_dict(saved.state_dict())
        resumed = epoch(restored)
        print(f"epoch 1 uninterrupted: {uninterrupted}\nepoch 1 after restore: {resumed}")
        sys.exit(int(resumed != uninterrupted))
