"""litdata 0.2.76, L14: with persistent workers a cycling ParallelStreamingDataset starts each later epoch at worker 0.

`_StreamingMultiProcessingDataLoaderIter.__init__` builds the first batches' routing, `_indexes` from the loader's
`_latest_worker_idx` (litdata/streaming/dataloader.py:554-560, read by `_try_put_index`, 601-616): a new iterator
sends a cycling mixture's epoch to the worker after the last one that delivered, where the dataset continues
(832-848). A persistent loader builds its iterator once and calls torch's `_reset` for every later epoch
(torch/utils/data/dataloader.py:498-502), which starts the routing at worker 0 (1258) with `_indexes` used up.
Here: sources of 4 and 4, `length=3`, 2 workers, batch 1, two epochs with and without persistent workers: epoch 0
ends on worker 0, and epoch 1 starts at worker 1 (its sample 3) with fresh workers, at worker 0 (sample 0) with
persistent ones. As released the runs differ for other reasons: L2 (dataloader.py:845-848) routes fresh workers'
epoch 1 from worker 0 too, and L11 restarts persistent workers' sources; with every diff but L14's, L14 alone.
Imports litdata and torch only. Exits 1 while the two runs differ, 0 once they match.
"""

import sys
import tempfile

from litdata import ParallelStreamingDataset, StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter


def write(root: str, name: str, ids: range) -> None:
    writer = BinaryWriter(f"{root}/{name}", chunk_size=1)
    for i, sample in enumerate(ids):
        writer.add_item(i, {"id": sample})
    writer.done()
    writer.merge()


def run(root: str, persistent: bool) -> list[list[tuple[int, int]]]:
    mixture = ParallelStreamingDataset([StreamingDataset(f"{root}/a"), StreamingDataset(f"{root}/b")], length=3)
    loader = StreamingDataLoader(mixture, batch_size=1, num_workers=2, persistent_workers=persistent)
    return [[(a["id"].item(), b["id"].item()) for a, b in loader] for _ in range(2)]


if __name__ == "__main__":   # the workers re-import this file under spawn
    with tempfile.TemporaryDirectory() as root:
        write(root, "a", range(4))
        write(root, "b", range(100, 104))
        fresh, persistent = run(root, False), run(root, True)
        print(f"fresh workers:      {fresh}\npersistent workers: {persistent}")
        if persistent != fresh:
            e = next(e for e, (f, p) in enumerate(zip(fresh, persistent)) if f != p)
            k = next((k for k, (a, b) in enumerate(zip(fresh[e], persistent[e])) if a != b), None)
            k = min(len(fresh[e]), len(persistent[e])) if k is None else k
            print(f"first difference: epoch {e} batch {k}: fresh workers {fresh[e][k:k + 1]}, "
                  f"persistent workers {persistent[e][k:k + 1]}")
            sys.exit(1)
        sys.exit(0)
