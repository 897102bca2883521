"""litdata 0.2.76, L10: a cycling ParallelStreamingDataset misplaces a restored worker in its part of the epoch.

A worker reads whole chunk intervals (here 8 and 6 of the first source's 14 samples), but
`ParallelStreamingDataset.__iter__` hands `_ParallelDatasetIterator` an even split of each source over the workers
(litdata/streaming/parallel.py:218-219: 7 and 7), from which the iterator infers its place in the epoch as
`(dset_lengths[i] * cycles + samples) % length` (348-351): the sources disagree and its assert fails, and the same
place is 0 before and after a worker's part. Here: sources of 14 and 12 samples in chunks of 4, `length=14`, 2
workers, batches of 3, a checkpoint after batch 2 restored into a fresh loader: a worker raises AssertionError, or
the workers deliver their parts again (it needs L2's diff too: as released a resume routes its first batch wrong).
Imports litdata and torch only. Exits 1 while the resumed epoch differs from the uninterrupted one, 0 once it matches.
"""

import sys
import tempfile

from litdata import ParallelStreamingDataset, StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter


def write(root: str, name: str, ids: range) -> None:
    writer = BinaryWriter(f"{root}/{name}", chunk_size=4)
    for i, sample in enumerate(ids):
        writer.add_item(i, {"id": sample})
    writer.done()
    writer.merge()


def make(root: str) -> StreamingDataLoader:
    mixture = ParallelStreamingDataset([StreamingDataset(f"{root}/a"), StreamingDataset(f"{root}/b")], length=14)
    return StreamingDataLoader(mixture, batch_size=3, num_workers=2)


def run(root: str, restore_after: int | None = None) -> list[list[int]]:
    """Two epochs (6 batches each); after batch restore_after, a restarted job: a fresh loader given the checkpoint."""
    loader, batches = make(root), []
    for _ in range(2):
        it = iter(loader)
        while (batch := next(it, None)) is not None:
            batches.append(batch[0]["id"].tolist() + batch[1]["id"].tolist())
            if len(batches) == restore_after:   # a restarted job: a fresh loader given the checkpoint
                state = loader.state_dict()
                loader = make(root)
                loader.load_state_dict(state)
                it = iter(loader)
    return batches


if __name__ == "__main__":   # the workers re-import this file under spawn
    with tempfile.TemporaryDirectory() as root:
        write(root, "a", range(14))
        write(root, "b", range(100, 112))
        uninterrupted = run(root)
        resumed = run(root, restore_after=2)   # an AssertionError in a worker ends the script here, exit 1
        print(f"uninterrupted: {uninterrupted}\nresumed:       {resumed}")
        sys.exit(0 if resumed == uninterrupted else 1)
