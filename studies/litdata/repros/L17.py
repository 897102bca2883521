"""litdata 0.2.76, L17: a resumed CombinedStreamingDataset replays its draws as if no dataset had run out.

`_CombinedDatasetIterator` draws each sample's dataset with `random.Random(seed)` (litdata/streaming/combined.py:180).
When a drawn dataset has run out, `__next__` (212-233) drops it, rescales the weights left and draws again. A resumed
iterator puts its generator back (193-198) by drawing `sum(num_samples_yielded)` times over every dataset with the
first weights: once a dataset ran out before the checkpoint, the resumed generator is out of step with the run's.
Here: datasets of 3, 6 and 6, unweighted, no workers, batch 1, a checkpoint after batch 12 restored into a new loader.
Imports litdata and torch only. Exits 1 while the resumed epoch differs from the uninterrupted one, 0 once it matches.
"""

import sys
import tempfile

from litdata import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter

SIZES = (3, 6, 6)   # dataset k's samples have ids 1000 * k + i


def make(root: str) -> StreamingDataLoader:
    mixture = CombinedStreamingDataset([StreamingDataset(f"{root}/{k}") for k in range(len(SIZES))], seed=5)
    return StreamingDataLoader(mixture, batch_size=1)


def epoch(root: str, restore_after: int | None = None) -> list[int]:
    loader, ids = make(root), []
    it = iter(loader)
    while (batch := next(it, None)) is not None:
        ids.append(batch["id"].item())
        if len(ids) == restore_after:   # a restarted job: a fresh loader given the checkpoint
            state = loader.state_dict()
            loader = make(root)
            loader.load_state_dict(state)
            it = iter(loader)
    return ids


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as root:
        for k, size in enumerate(SIZES):
            writer = BinaryWriter(f"{root}/{k}", chunk_size=1)
            for i in range(size):
                writer.add_item(i, {"id": 1000 * k + i})
            writer.done()
            writer.merge()
        uninterrupted, resumed = epoch(root), epoch(root, restore_after=12)
        print(f"uninterrupted: {uninterrupted}\nresumed:       {resumed}")
        if resumed != uninterrupted:
            k = next((k for k, (a, b) in enumerate(zip(uninterrupted, resumed)) if a != b), None)
            k = min(len(uninterrupted), len(resumed)) if k is None else k
            print(f"first difference: batch {k}: uninterrupted {uninterrupted[k:k + 1]}, resumed {resumed[k:k + 1]}")
            sys.exit(1)
        sys.exit(0)
