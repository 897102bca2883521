"""litdata 0.2.76, L9: StreamingDataLoader files a batch's per-worker counts under a round-robin guess of its worker.

`StreamingDataLoader.__iter__` attributes each batch to `next(self._worker_idx_iter)` (litdata/streaming/
dataloader.py:873, 885), a cycle over the workers, and files the counts the batch carries under that worker. Batches
come in turn only while every worker has data: torch sends no more indexes to a worker whose iterator ended. Here:
a weighted mixture of two datasets of 3, 2 workers, batch 1: worker 1 holds one sample of each and stops (at its
first exhausted dataset) after one batch; the rest come from worker 0, every second one filed under worker 1, so the
checkpoint after batch 4 sums worker 0's counts twice and the loader given it raises ValueError (4 of a dataset of 3).
Imports litdata and torch only. Exits 1 while the resumed epoch differs from the uninterrupted one, 0 once it matches.
"""

import sys
import tempfile

from litdata import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter


def make(root: str) -> StreamingDataLoader:
    parts = [StreamingDataset(f"{root}/a"), StreamingDataset(f"{root}/b")]
    mixture = CombinedStreamingDataset(parts, seed=0, weights=[0.5, 0.5], iterate_over_all=False)
    return StreamingDataLoader(mixture, batch_size=1, num_workers=2)


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


if __name__ == "__main__":   # the workers re-import this file under spawn
    with tempfile.TemporaryDirectory() as root:
        for name, ids in (("a", range(3)), ("b", range(100, 103))):
            writer = BinaryWriter(f"{root}/{name}", chunk_size=1)
            for i, sample in enumerate(ids):
                writer.add_item(i, {"id": sample})
            writer.done()
            writer.merge()
        uninterrupted = epoch(root)
        try:
            resumed = epoch(root, restore_after=4)
        except ValueError as e:   # raised in a worker of the restored loader
            resumed = f"the restored loader raised {str(e).strip().splitlines()[-1]}"
        print(f"uninterrupted: {uninterrupted}\nresumed:       {resumed}")
        if resumed != uninterrupted:
            if isinstance(resumed, list):
                k = next((k for k, (a, b) in enumerate(zip(uninterrupted, resumed)) if a != b), None)
                k = min(len(uninterrupted), len(resumed)) if k is None else k
                print(f"first difference: batch {k}: uninterrupted {uninterrupted[k:k + 1]}, resumed {resumed[k:k + 1]}")
            sys.exit(1)
        sys.exit(0)
