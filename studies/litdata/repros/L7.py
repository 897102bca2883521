"""litdata 0.2.76, L7: a CombinedStreamingDataset with workers resumes each dataset from a sum split as if by batches.

`StreamingDataLoader.state_dict` sums each dataset's per-worker counts into one number (litdata/streaming/
dataloader.py:947-953); on restore each dataset's `StreamingDataset._resume` (dataset.py:644-705) splits it back with
`_replay_sampling` (1318) as if every worker had delivered whole batches of that dataset in turn. Each worker draws its
datasets at random, so one worker re-delivers samples and another skips as many. Here: datasets of 4 and 7,
unweighted, 2 workers, batch 1, a checkpoint after batch 10 restored into a fresh loader: worker 1 had drawn the first
dataset 2 times, worker 0 once, and the split of the sum 3 gives 2 to worker 0.
Imports litdata and torch only. Exits 1 while the resumed epoch differs from the uninterrupted one, 0 once it matches.
"""

import sys
import tempfile

from litdata import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter


def make(root: str) -> StreamingDataLoader:
    mixture = CombinedStreamingDataset([StreamingDataset(f"{root}/a"), StreamingDataset(f"{root}/b")], seed=0)
    return StreamingDataLoader(mixture, batch_size=1, num_workers=2)


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
        for name, ids in (("a", range(4)), ("b", range(100, 107))):
            writer = BinaryWriter(f"{root}/{name}", chunk_size=1)
            for i, sample in enumerate(ids):
                writer.add_item(i, {"id": sample})
            writer.done()
            writer.merge()
        uninterrupted, resumed = epoch(root), epoch(root, restore_after=10)
        print(f"uninterrupted: {uninterrupted}\nresumed:       {resumed}")
        if resumed != uninterrupted:
            k = next((k for k, (a, b) in enumerate(zip(uninterrupted, resumed)) if a != b), None)
            k = min(len(uninterrupted), len(resumed)) if k is None else k
            print(f"first difference: batch {k}: uninterrupted {uninterrupted[k:k + 1]}, resumed {resumed[k:k + 1]}")
            sys.exit(1)
        sys.exit(0)
