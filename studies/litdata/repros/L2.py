"""litdata 0.2.76, L2: a cycling ParallelStreamingDataset cannot resume with 2+ workers.

On a resume (and at every later epoch) `StreamingDataLoader.__iter__`'s branch for a cycling
`ParallelStreamingDataset` clears `restore` (litdata/streaming/dataloader.py:845-848) before the iterator is built,
and `_try_put_index` reads `restore` to send the first batches to the worker after the last one that delivered
(601-616): they go to worker 0, while the counters `load_state_dict` advanced (1038-1043) file each batch's counts
under the next worker in turn. The counts saved and restored then belong to other workers than the ones that made
them. Here: sources of 4 and 6 samples, `length=6`, 2 workers, batch 1, a checkpoint after batch 1 restored into
a fresh loader: the resumed epoch comes in another order (with chunks of 2 and a later restore, an AssertionError).
Imports litdata and torch only. Exits 1 while the resumed epoch differs from the uninterrupted one, 0 once it matches.
"""

import sys
import tempfile

from litdata import ParallelStreamingDataset, StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter


def write(root: str, name: str, ids: range) -> None:
    writer = BinaryWriter(f"{root}/{name}", chunk_size=2)
    for i, sample in enumerate(ids):
        writer.add_item(i, {"id": sample})
    writer.done()
    writer.merge()


def make(root: str) -> StreamingDataLoader:
    mixture = ParallelStreamingDataset([StreamingDataset(f"{root}/a"), StreamingDataset(f"{root}/b")], length=6)
    return StreamingDataLoader(mixture, batch_size=1, num_workers=2)


def epoch(root: str, restore_after: int | None = None) -> list[tuple[int, int]]:
    loader, batches = make(root), []
    it = iter(loader)
    while (batch := next(it, None)) is not None:
        batches.append((batch[0]["id"].item(), batch[1]["id"].item()))
        if len(batches) == restore_after:   # a restarted job: a fresh loader given the checkpoint
            state = loader.state_dict()
            loader = make(root)
            loader.load_state_dict(state)
            it = iter(loader)
    return batches


if __name__ == "__main__":   # the workers re-import this file under spawn
    with tempfile.TemporaryDirectory() as root:
        write(root, "a", range(4))
        write(root, "b", range(100, 106))
        uninterrupted = epoch(root)
        resumed = epoch(root, restore_after=1)   # an AssertionError in a worker ends the script here, exit 1
        print(f"uninterrupted: {uninterrupted}\nresumed:       {resumed}")
        if resumed != uninterrupted:
            k = next((k for k, (a, b) in enumerate(zip(uninterrupted, resumed)) if a != b), None)
            k = min(len(uninterrupted), len(resumed)) if k is None else k
            print(f"first difference: batch {k}: uninterrupted {uninterrupted[k:k + 1]}, resumed {resumed[k:k + 1]}")
            sys.exit(1)
        sys.exit(0)
